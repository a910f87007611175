/*
 * What an application's first calls of each size cost, over plain MPI: MPI_Allreduce
 * (or MPI_Reduce to rank 0) of floats, MPI_SUM, sizes ascending from -b to -e bytes
 * doubling, N calls a size (-n, at least 11), each timed on its own after a barrier,
 * K buffer pairs used in turn (-k; call i on pair i mod K) with the input rewritten
 * before every call, outside the timing. It knows nothing of fold: run it with and
 * without LD_PRELOAD=libfold-mpi.so to compare.
 *
 *   mpi_first_calls [-c allreduce|reduce] [-b BYTES] [-e BYTES] [-n CALLS] [-k PAIRS] [-v]
 *                   [-a]
 *
 * Per size, from the slowest rank's time of each call: the first call, the worst of
 * calls 2-10, the median of calls 11-N and the first ten together, in us; with -v also
 * every call's, in call order, on a line of its own. With -a (ranks of one machine) a
 * call's time runs from the moment the last rank left the barrier to the last rank's
 * return instead: a barrier's ranks leave it up to ~100 us apart (an MPI library's
 * first barriers after MPI_Init), and a reduce's root, timing from its own exit, counts
 * the wait for a late peer as its call's.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* One clock for every process of the machine. */
static double monotonic_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int reduce = 0, pairs = 1, calls = 30, every = 0, aligned = 0, c;
    size_t lo = 8, hi = (size_t)64 << 20;
    while ((c = getopt(argc, argv, "c:k:n:b:e:va")) != -1) {
        switch (c) {
        case 'a': aligned = 1; break;
        case 'v': every = 1; break;
        case 'c': reduce = strcmp(optarg, "reduce") == 0; break;
        case 'k': pairs = atoi(optarg); break;
        case 'n': calls = atoi(optarg); break;
        case 'b': lo = strtoull(optarg, NULL, 0); break;
        case 'e': hi = strtoull(optarg, NULL, 0); break;
        default:
            if (rank == 0) {
                fprintf(stderr, "usage: %s [-c allreduce|reduce] [-b BYTES] [-e BYTES] "
                        "[-n CALLS] [-k PAIRS] [-v] [-a]\n", argv[0]);
            }
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (calls < 11 || pairs < 1 || lo < 4 || hi < lo) {
        if (rank == 0) {
            fprintf(stderr, "mpi_first_calls: -n at least 11, -k at least 1, "
                            "4 <= -b <= -e\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    float **in = malloc((size_t)pairs * sizeof(*in));
    float **out = malloc((size_t)pairs * sizeof(*out));
    double *mine = malloc((size_t)calls * sizeof(double));
    double *slowest = malloc((size_t)calls * sizeof(double));
    double *started = malloc((size_t)calls * sizeof(double));   /* monotonic us */
    double *ended = malloc((size_t)calls * sizeof(double));
    double *last = malloc((size_t)calls * sizeof(double));      /* -a: the last start */
    for (int k = 0; k < pairs; k++) {
        in[k] = malloc(hi);
        out[k] = malloc(hi);
        if (in[k] == NULL || out[k] == NULL) {
            fprintf(stderr, "mpi_first_calls: out of memory\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        memset(in[k], 0, hi);
        memset(out[k], 0, hi);
    }
    if (rank == 0) {
        printf("%10s %12s %12s %12s %12s\n", "bytes", "first_us", "worst2-10_us", "median_us",
               "first10_us");
    }
    for (size_t bytes = lo; bytes <= hi; bytes *= 2) {
        const int n = (int)(bytes / sizeof(float));
        for (int i = 0; i < calls; i++) {
            float *x = in[i % pairs];
            for (int j = 0; j < n; j++) {
                x[j] = (float)(i + j % 7);
            }
            MPI_Barrier(MPI_COMM_WORLD);
            started[i] = monotonic_us();
            if (reduce) {
                MPI_Reduce(x, out[i % pairs], n, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
            } else {
                MPI_Allreduce(x, out[i % pairs], n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            }
            ended[i] = monotonic_us();
            mine[i] = ended[i] - started[i];
        }
        if (aligned) {
            MPI_Allreduce(started, last, calls, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            MPI_Allreduce(ended, slowest, calls, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            for (int i = 0; i < calls; i++) {
                slowest[i] -= last[i];
            }
        } else {
            MPI_Allreduce(mine, slowest, calls, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        }
        if (rank == 0 && every) {
            printf("%10zu calls_us", bytes);
            for (int i = 0; i < calls; i++) {
                printf(" %.2f", slowest[i]);
            }
            printf("\n");
        }
        if (rank == 0) {
            double worst = 0, first10 = 0;
            for (int i = 0; i < 10; i++) {
                worst = i > 0 && slowest[i] > worst ? slowest[i] : worst;
                first10 += slowest[i];
            }
            qsort(slowest + 10, (size_t)(calls - 10), sizeof(double), by_value);
            printf("%10zu %12.2f %12.2f %12.2f %12.2f\n", bytes, slowest[0], worst,
                   slowest[10 + (calls - 10) / 2], first10);
        }
    }
    MPI_Finalize();
    return 0;
}
