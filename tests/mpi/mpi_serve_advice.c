/*
 * The shim's served ranges from a tuning file: run with FOLD_TUNE_FILE naming
 * serve_split.tune (fold serves MPI_Allreduce from 1 KiB and MPI_Reduce up to 1 KiB,
 * the MPI library the rest) and no FOLD_MPI_* range set. Each call's route is
 * expected from those lines; the results are checked against the plain run's digest.
 */
#include "shim_test.h"

#include <stdio.h>
#include <stdlib.h>

#define SPLIT 1024   /* bytes: the split serve_split.tune sets */

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    static int in[4096], out[4096];
    for (int count = 1; count <= 4096; count *= 4) {
        size_t bytes = (size_t)count * sizeof(int);
        for (int i = 0; i < count; i++) {
            in[i] = rank * 7 + i;
        }
        MPI_Allreduce(in, out, count, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        test_expect(COLL_ALLREDUCE, bytes >= SPLIT ? ROUTE_FOLD : ROUTE_MPI_FASTER);
        int ok = 1;
        for (int i = 0; i < count; i++) {
            ok &= out[i] == 7 * size * (size - 1) / 2 + size * i;
        }
        if (!ok) {
            fprintf(stderr, "rank %d: wrong allreduce result at %d ints\n", rank, count);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        test_digest(out, bytes);
        MPI_Reduce(in, out, count, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
        test_expect(COLL_REDUCE, bytes < SPLIT ? ROUTE_FOLD : ROUTE_MPI_FASTER);
        if (rank == 0) {
            test_digest(out, bytes);
        }
    }
    int failed = test_finish(0);
    MPI_Finalize();
    return failed;
}
