/*
 * Mismatched reductions through the shim (the communicator has MPI_ERRORS_RETURN):
 *
 *   FOLD_CHECK=1   each mistake (count, datatype, op, root, one rank passing count
 *                  0) must fail on every rank: a count with MPI_ERR_TRUNCATE, the
 *                  others with MPI_ERR_ARG;
 *   default        (no FOLD_CHECK, the checks where ranks meet) each mistake --
 *                  a count on the tiny-message path (64 vs 32), across its border
 *                  (N vs 256: one rank there, the others on a node schedule), a
 *                  large one (N vs N/2), a datatype, an op, a root -- must fail on
 *                  every rank that gets a result (a reduce's other ranks may return
 *                  success) with MPI_ERR_ARG or MPI_ERR_TRUNCATE (a rank that compared
 *                  the counts itself says MPI_ERR_TRUNCATE for them).
 *
 * Either way a correct call right after, on the tiny path and on a node schedule,
 * must give the right result: the node segment is back in step (node/resync.c).
 * Only meaningful with the shim preloaded: Open MPI alone hangs or returns wrong
 * results on several of these, so the program refuses to run (exit 77, "skip")
 * without FOLD_CHECK=1 or, for the default mode, the shim in LD_PRELOAD.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 16384   /* 64 KiB of floats: above the tiny-message path */

static int rank, size, failures, checked;

/* A mismatch, `count` if only the counts differ: under FOLD_CHECK=1 every rank
 * compares every rank's arguments, so a count gives MPI_ERR_TRUNCATE and anything else
 * MPI_ERR_ARG everywhere; by default a rank that learns of the mismatch from another
 * (or from a message too long for its call) knows less, so either class where it gets
 * a result, and success too where it gets none. */
static void expect_mismatch_on(int rc, const char *what, int count, int has_result)
{
    int cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) {
        MPI_Error_class(rc, &cls);
    }
    int want = count ? MPI_ERR_TRUNCATE : MPI_ERR_ARG;
    int ok = checked ? cls == want
                     : cls == MPI_ERR_ARG || cls == MPI_ERR_TRUNCATE ||
                           (cls == MPI_SUCCESS && !has_result);
    if (!ok) {
        fprintf(stderr, "rank %d: %s: error class %d, expected %s (%d)\n", rank, what, cls,
                count ? "MPI_ERR_TRUNCATE" : "MPI_ERR_ARG", want);
        failures++;
    }
}

static void expect_mismatch(int rc, const char *what)
{
    expect_mismatch_on(rc, what, strncmp(what, "count", 5) == 0, 1);
}

static void expect_correct_call(const char *after)
{
    static float in[N], out[N];
    for (int i = 0; i < N; i++) {
        in[i] = (float)(rank + i);
    }
    for (int k = 0; k < 2; k++) {
        int n = k == 0 ? 16 : N;   /* the tiny-message path, then a node schedule */
        int rc = MPI_Allreduce(in, out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        for (int i = 0; rc == MPI_SUCCESS && i < n; i++) {
            if (out[i] != (float)(size * i + size * (size - 1) / 2)) {
                rc = MPI_ERR_OTHER;
            }
        }
        if (rc != MPI_SUCCESS) {
            fprintf(stderr, "rank %d: the correct call of %d after %s failed\n", rank, n,
                    after);
            failures++;
        }
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *check = getenv("FOLD_CHECK"), *preload = getenv("LD_PRELOAD");
    checked = check != NULL && strcmp(check, "1") == 0;
    if (!checked && (preload == NULL || strstr(preload, "fold") == NULL)) {
        if (rank == 0) {
            printf("skip: needs the shim, and FOLD_CHECK=1 or the shim in LD_PRELOAD\n");
        }
        MPI_Finalize();
        return 77;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    static float in[N], out[N];
    int last = rank == size - 1;

    if (!checked) {
        expect_mismatch(MPI_Allreduce(in, out, last ? 32 : 64, MPI_FLOAT, MPI_SUM,
                                      MPI_COMM_WORLD), "count 64 vs 32");
        expect_correct_call("a tiny count mismatch");
        expect_mismatch(MPI_Allreduce(in, out, last ? 256 : N, MPI_FLOAT, MPI_SUM,
                                      MPI_COMM_WORLD), "count N vs 256");
        expect_correct_call("a count mismatch across the tiny-message path's border");
        expect_mismatch(MPI_Allreduce(in, out, last ? N : 256, MPI_FLOAT, MPI_SUM,
                                      MPI_COMM_WORLD), "count 256 vs N");
        expect_correct_call("a count mismatch across the border, the other way");
    }
    expect_mismatch(MPI_Allreduce(in, out, last ? N / 2 : N, MPI_FLOAT, MPI_SUM,
                                  MPI_COMM_WORLD), "count N vs N/2");
    expect_correct_call("a count mismatch");
    expect_mismatch(MPI_Allreduce(in, out, N, last ? MPI_INT : MPI_FLOAT, MPI_SUM,
                                  MPI_COMM_WORLD), "float vs int");
    expect_correct_call("a datatype mismatch");
    expect_mismatch(MPI_Allreduce(in, out, N, MPI_FLOAT, last ? MPI_MAX : MPI_SUM,
                                  MPI_COMM_WORLD), "sum vs max");
    expect_correct_call("an op mismatch");
    int root = last ? size - 1 : 0;
    expect_mismatch_on(MPI_Reduce(in, rank == root ? out : NULL, N, MPI_FLOAT, MPI_SUM, root,
                                  MPI_COMM_WORLD), "root 0 vs the last rank", 0, rank == root);
    expect_correct_call("a root mismatch");
    if (checked) {
        /* By default the others wait for the rank that returned at once, and time out:
         * a node segment is not brought back into step after a timeout. */
        expect_mismatch(MPI_Allreduce(in, out, last ? 0 : N, MPI_FLOAT, MPI_SUM,
                                      MPI_COMM_WORLD), "count 0 on one rank");
        expect_correct_call("a count 0 mismatch");
    }

    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("%s: %d failures\n", total ? "FAILED" : "passed", total);
    }
    MPI_Finalize();
    return total != 0;
}
