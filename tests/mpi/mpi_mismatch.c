/*
 * Mismatched reductions through the shim with FOLD_CHECK=1: each mistake (count,
 * datatype, op, root, one rank passing count 0) must fail on every rank with
 * MPI_ERR_ARG (the communicator has MPI_ERRORS_RETURN), and a correct call right
 * after must give the right result. Only meaningful with the shim preloaded and
 * FOLD_CHECK=1: Open MPI alone hangs or returns wrong results on several of these,
 * so the program refuses to run (exit 77, "skip") without FOLD_CHECK=1.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 4096

static int rank, size, failures;

static void expect_mismatch(int rc, const char *what)
{
    int cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) {
        MPI_Error_class(rc, &cls);
    }
    if (cls != MPI_ERR_ARG) {
        fprintf(stderr, "rank %d: %s: error class %d, expected MPI_ERR_ARG (%d)\n", rank, what,
                cls, MPI_ERR_ARG);
        failures++;
    }
}

static void expect_correct_call(const char *after)
{
    static float in[N], out[N];
    for (int i = 0; i < N; i++) {
        in[i] = (float)(rank + i);
    }
    int rc = MPI_Allreduce(in, out, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; rc == MPI_SUCCESS && i < N; i++) {
        if (out[i] != (float)(size * i + size * (size - 1) / 2)) {
            rc = MPI_ERR_OTHER;
        }
    }
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "rank %d: the correct call after %s failed\n", rank, after);
        failures++;
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *check = getenv("FOLD_CHECK");
    if (check == NULL || strcmp(check, "1") != 0) {
        if (rank == 0) {
            printf("skip: needs the shim with FOLD_CHECK=1\n");
        }
        MPI_Finalize();
        return 77;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    static float in[N], out[N];
    int last = rank == size - 1;

    expect_mismatch(MPI_Allreduce(in, out, last ? N / 2 : N, MPI_FLOAT, MPI_SUM,
                                  MPI_COMM_WORLD), "count N vs N/2");
    expect_correct_call("a count mismatch");
    expect_mismatch(MPI_Allreduce(in, out, N, last ? MPI_INT : MPI_FLOAT, MPI_SUM,
                                  MPI_COMM_WORLD), "float vs int");
    expect_correct_call("a datatype mismatch");
    expect_mismatch(MPI_Allreduce(in, out, N, MPI_FLOAT, last ? MPI_MAX : MPI_SUM,
                                  MPI_COMM_WORLD), "sum vs max");
    expect_correct_call("an op mismatch");
    int root = last ? 1 : 0;
    expect_mismatch(MPI_Reduce(in, rank == root ? out : NULL, N, MPI_FLOAT, MPI_SUM, root,
                               MPI_COMM_WORLD), "root 0 vs root 1");
    expect_correct_call("a root mismatch");
    expect_mismatch(MPI_Allreduce(in, out, last ? 0 : N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
                    "count 0 on one rank");
    expect_correct_call("a count 0 mismatch");

    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("%s: %d failures\n", total ? "FAILED" : "passed", total);
    }
    MPI_Finalize();
    return total != 0;
}
