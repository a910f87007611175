/*
 * Many communicators, as an application makes them: MPI_COMM_WORLD is duplicated
 * HOLD times, every duplicate kept, and each reduces 1 MiB (MPI_Allreduce, then
 * MPI_Reduce to a rotating root); then they are freed, and CHURN times a duplicate
 * is made, reduces a few ints and is freed again. Through the shim every one of
 * them is a fold communicator with its own node segment while /dev/shm can give
 * one, so this is the program of issue 24's first row: on a small /dev/shm the
 * later duplicates must run without node shared memory, never die of SIGBUS, and
 * MPI_Comm_free must give the memory back. Results are checked.
 *
 * Usage: mpi_comm_churn [HOLD [CHURN]]   (defaults 40 and 2000)
 */
#include "shim_test.h"

#include <stdio.h>
#include <stdlib.h>

#define BIG   (256 * 1024)   /* floats: 1 MiB */
#define SMALL 64

/* Element i of rank r's input on duplicate k: small integers, exact in float. */
static float input(int k, int r, size_t i)
{
    return (float)((k + r + (int)(i % 13)) % 17);
}

static int check_sum(int k, int size, const float *got, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        float want = 0;
        for (int r = 0; r < size; r++) {
            want += input(k, r, i);
        }
        if (got[i] != want) {
            fprintf(stderr, "%s on duplicate %d: element %zu is %g, expected %g\n", what, k,
                    i, (double)got[i], (double)want);
            return 1;
        }
    }
    return 0;
}

/* One allreduce and one reduce of n floats on comm, checked. */
static int reduce_on(MPI_Comm comm, int k, size_t n, float *in, float *out)
{
    int rank, size, failures = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    for (size_t i = 0; i < n; i++) {
        in[i] = input(k, rank, i);
    }
    MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, comm);
    test_expect(COLL_ALLREDUCE, ROUTE_FOLD);
    failures += check_sum(k, size, out, n, "MPI_Allreduce");
    test_digest(out, n * sizeof(float));
    int root = k % size;
    MPI_Reduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, root, comm);
    test_expect(COLL_REDUCE, ROUTE_FOLD);
    if (rank == root) {
        failures += check_sum(k, size, out, n, "MPI_Reduce");
    }
    return failures;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int hold = argc > 1 ? atoi(argv[1]) : 40, churn = argc > 2 ? atoi(argv[2]) : 2000;
    float *in = malloc(BIG * sizeof(float)), *out = malloc(BIG * sizeof(float));
    MPI_Comm *dups = malloc((size_t)(hold > 0 ? hold : 1) * sizeof(MPI_Comm));
    int failures = 0;
    if (in == NULL || out == NULL || dups == NULL) {
        fprintf(stderr, "mpi_comm_churn: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* Every rank makes every call whatever it found, so that none is left waiting. */
    for (int k = 0; k < hold; k++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &dups[k]);
        failures += reduce_on(dups[k], k, BIG, in, out);
    }
    for (int k = 0; k < hold; k++) {
        MPI_Comm_free(&dups[k]);
    }
    for (int k = 0; k < churn; k++) {
        MPI_Comm dup;
        MPI_Comm_dup(MPI_COMM_WORLD, &dup);
        failures += reduce_on(dup, k, SMALL, in, out);
        MPI_Comm_free(&dup);
    }
    free(dups);
    free(in);
    free(out);
    failures = test_finish(failures);
    MPI_Finalize();
    return failures;
}
