/*
 * An OSU-style latency loop over plain MPI: MPI_Allreduce (or MPI_Reduce) of floats,
 * MPI_SUM, out of place, for sizes from -b to -e bytes doubling. It knows nothing of
 * fold: run it with and without LD_PRELOAD=libfold-mpi.so to compare.
 *
 *   mpi_allreduce_bench [-c allreduce|reduce] [-b BYTES] [-e BYTES] [-n ITERS] [-w WARMUP]
 *                       [-k] [-a] [-p] [-l]
 *
 * Per size: warm-up, a barrier, ITERS calls each timed on its own. Printed: over ranks
 * the average of each rank's mean time per call (as osu_allreduce prints), and the
 * largest of each rank's median, which shrugs off the moments a busy machine takes
 * the core away. Iterations shrink for large sizes (at most 64 MiB moved per rank per
 * size, at least 10). -w sets the warm-up calls per size (default a tenth of the
 * iterations, at least 2): `-b 8192 -e 8192 -n 100 -w 0` in a fresh process times an
 * application's first 100 calls. -k checks one call's result per size (integer-valued
 * floats). -a takes the buffers from MPI_Alloc_mem (freed with MPI_Free_mem) instead
 * of malloc: with the fold shim and FOLD_MPI_ALLOC_MEM=1 that is fold memory. -p takes
 * them page-aligned (posix_memalign), as the OSU benchmarks do. -l
 * times back-to-back calls in LOOP_ROUNDS loops of ITERS / LOOP_ROUNDS calls, two clock
 * reads a loop, instead of each call on its own (the reads cost ~0.04 us a call, as
 * much as a tenth of an 8-byte allreduce): avg_us is then all loops' time per call, and
 * median_us the median loop's time per call.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct bench_options {
    int    reduce;
    size_t begin, end;
    int    iters;
    int    warmup;   /* -1: a tenth of the iterations, at least 2 */
    int    check;
    int    alloc_mem;   /* -a: MPI_Alloc_mem */
    int    loop;        /* -l: time loops of calls, not each call */
    int    page_aligned;   /* -p: posix_memalign to the page */
} bench_options_t;

#define LOOP_ROUNDS 5

static int parse_options(int argc, char **argv, bench_options_t *o)
{
    *o = (bench_options_t){0, 8, 16u << 20, 1000, -1, 0, 0, 0, 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-k") == 0) {
            o->check = 1;
        } else if (strcmp(a, "-a") == 0) {
            o->alloc_mem = 1;
        } else if (strcmp(a, "-p") == 0) {
            o->page_aligned = 1;
        } else if (strcmp(a, "-l") == 0) {
            o->loop = 1;
        } else if (v != NULL && strcmp(a, "-c") == 0) {
            o->reduce = strcmp(v, "reduce") == 0;
            i++;
        } else if (v != NULL && strcmp(a, "-b") == 0) {
            o->begin = strtoull(v, NULL, 0);
            i++;
        } else if (v != NULL && strcmp(a, "-e") == 0) {
            o->end = strtoull(v, NULL, 0);
            i++;
        } else if (v != NULL && strcmp(a, "-n") == 0) {
            o->iters = atoi(v);
            i++;
        } else if (v != NULL && strcmp(a, "-w") == 0) {
            o->warmup = atoi(v);
            i++;
        } else {
            return -1;
        }
    }
    return o->begin >= sizeof(float) && o->end >= o->begin && o->iters > 0 && o->warmup >= -1
               ? 0 : -1;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), by_value);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int call(const bench_options_t *o, const float *in, float *out, int count)
{
    if (o->reduce) {
        return MPI_Reduce(in, out, count, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
    }
    return MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

/* Element i of rank r is (r + i) % 8; the sum over p ranks is exact. */
static int check_result(const float *out, int count, int rank, int size, int reduce)
{
    if (reduce && rank != 0) {
        return 0;
    }
    for (int i = 0; i < count; i++) {
        float want = 0;
        for (int r = 0; r < size; r++) {
            want += (float)((r + i) % 8);
        }
        if (out[i] != want) {
            fprintf(stderr, "rank %d: element %d is %g, want %g\n", rank, i, out[i], want);
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    bench_options_t o;
    if (parse_options(argc, argv, &o) != 0) {
        if (rank == 0) {
            fprintf(stderr, "usage: %s [-c allreduce|reduce] [-b BYTES] [-e BYTES] [-n ITERS] "
                    "[-w WARMUP] [-k] [-a] [-p] [-l]\n", argv[0]);
        }
        MPI_Finalize();
        return 2;
    }
    size_t max_count = o.end / sizeof(float);
    float *in = NULL, *out = NULL;
    if (o.alloc_mem) {
        MPI_Alloc_mem((MPI_Aint)(max_count * sizeof(float)), MPI_INFO_NULL, &in);
        MPI_Alloc_mem((MPI_Aint)(max_count * sizeof(float)), MPI_INFO_NULL, &out);
    } else if (o.page_aligned) {
        const size_t page = (size_t)sysconf(_SC_PAGESIZE);
        if (posix_memalign((void **)&in, page, max_count * sizeof(float)) != 0 ||
            posix_memalign((void **)&out, page, max_count * sizeof(float)) != 0) {
            in = out = NULL;
        }
    } else {
        in  = malloc(max_count * sizeof(float));
        out = malloc(max_count * sizeof(float));
    }
    if (in == NULL || out == NULL) {
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    for (size_t i = 0; i < max_count; i++) {
        in[i] = (float)((rank + (int)(i % 8)) % 8);
    }
    memset(out, 0, max_count * sizeof(float));
    if (rank == 0) {
        printf("# %s, %d ranks, MPI_FLOAT MPI_SUM, buffers from %s\n# %10s %12s %12s %8s\n",
               o.reduce ? "MPI_Reduce" : "MPI_Allreduce", size,
               o.alloc_mem ? "MPI_Alloc_mem" : "malloc", "bytes", "avg_us", "median_us",
               "iters");
    }
    int failed = 0;
    for (size_t bytes = o.begin; bytes <= o.end; bytes *= 2) {
        int count = (int)(bytes / sizeof(float));
        size_t budget = (64u << 20) / bytes;
        int iters = budget < 10 ? 10 : budget < (size_t)o.iters ? (int)budget : o.iters;
        int warmup = o.warmup >= 0 ? o.warmup : iters / 10 < 2 ? 2 : iters / 10;
        for (int i = 0; i < warmup; i++) {
            call(&o, in, out, count);
        }
        double *times = malloc((size_t)iters * sizeof(double));
        MPI_Barrier(MPI_COMM_WORLD);
        /* Each call timed on its own, or LOOP_ROUNDS loops of about iters / LOOP_ROUNDS. */
        const int ntimes = o.loop && iters >= LOOP_ROUNDS ? LOOP_ROUNDS : iters;
        double total_us = 0;
        for (int t = 0; t < ntimes; t++) {
            const int calls = (t + 1) * iters / ntimes - t * iters / ntimes;
            double t0 = MPI_Wtime();
            for (int i = 0; i < calls; i++) {
                call(&o, in, out, count);
            }
            double us = (MPI_Wtime() - t0) * 1e6;
            total_us += us;
            times[t] = us / calls;
        }
        if (o.check) {
            failed |= check_result(out, count, rank, size, o.reduce);   /* the last call's */
        }
        double mine[2] = {0, 0}, *all = malloc(2 * (size_t)size * sizeof(double));
        mine[0] = total_us / iters;
        mine[1] = median(times, ntimes);
        MPI_Gather(mine, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            double avg = 0, med = 0;
            for (int r = 0; r < size; r++) {
                avg += all[2 * r] / size;
                med = all[2 * r + 1] > med ? all[2 * r + 1] : med;
            }
            printf("  %10zu %12.2f %12.2f %8d\n", bytes, avg, med, iters);
            fflush(stdout);
        }
        free(all);
        free(times);
    }
    int any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (o.alloc_mem) {
        MPI_Free_mem(in);
        MPI_Free_mem(out);
    } else {
        free(in);
        free(out);
    }
    MPI_Finalize();
    return any_failed ? 1 : 0;
}
