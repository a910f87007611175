/*
 * Communicators with processes from another MPI_COMM_WORLD: the program spawns one
 * more copy of itself, and parents and child reduce over the spawn intercommunicator
 * and over the intracommunicator merged from it. fold's context knows one world
 * only, so the shim must hand all of these to the MPI library (reason foreign).
 * Results are checked. Each world prints its own "digest:" and "expect:".
 */
#include "shim_test.h"

#include <stdio.h>

#define N 1000   /* doubles: above the default thresholds */

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm parent, inter, merged;
    MPI_Comm_get_parent(&parent);
    int is_child = parent != MPI_COMM_NULL;
    if (is_child) {
        inter = parent;
    } else {
        /* A library that cannot spawn here (Debian 12's MPICH 4.0.2, ch4:ucx, fails
         * every MPI_Comm_spawn) skips the test rather than failing it. */
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        int rc = MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD,
                                &inter, MPI_ERRCODES_IGNORE);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
        if (rc != MPI_SUCCESS) {
            char text[MPI_MAX_ERROR_STRING];
            int len = 0;
            MPI_Error_string(rc, text, &len);
            printf("skipped: MPI_Comm_spawn failed: %s\n", text);
            MPI_Finalize();
            return 77;
        }
    }
    MPI_Intercomm_merge(inter, is_child, &merged);   /* parents first */
    int rank, size, remote;
    MPI_Comm_rank(merged, &rank);
    MPI_Comm_size(merged, &size);
    MPI_Comm_remote_size(inter, &remote);

    double in[N], out[N];
    int failures = 0;
    for (int i = 0; i < N; i++) {
        in[i] = rank + i % 7;
    }
    MPI_Allreduce(in, out, N, MPI_DOUBLE, MPI_SUM, merged);
    test_expect(COLL_ALLREDUCE, ROUTE_FOREIGN);
    for (int i = 0; i < N; i++) {
        failures += out[i] != size * (size - 1) / 2.0 + size * (i % 7);
    }
    test_digest(out, sizeof(out));
    MPI_Reduce(in, out, N, MPI_DOUBLE, MPI_MAX, size - 1, merged);
    test_expect(COLL_REDUCE, ROUTE_FOREIGN);
    for (int i = 0; rank == size - 1 && i < N; i++) {
        failures += out[i] != size - 1 + i % 7;
    }
    /* Over the intercommunicator each side gets the other side's sum. */
    int local_rank, local_size;
    MPI_Comm_rank(MPI_COMM_WORLD, &local_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &local_size);
    MPI_Allreduce(in, out, N, MPI_DOUBLE, MPI_SUM, inter);
    test_expect(COLL_ALLREDUCE, ROUTE_FOREIGN);
    for (int i = 0; i < N; i++) {
        /* Parents hold merged ranks 0..p-1, the child the ranks after them. */
        double first = is_child ? 0 : local_size;
        failures += out[i] != remote * first + remote * (remote - 1) / 2.0 + remote * (i % 7);
    }
    test_digest(out, sizeof(out));
    if (failures > 0) {
        fprintf(stderr, "%s %d: %d wrong elements\n", is_child ? "child" : "parent", local_rank,
                failures);
    }
    MPI_Comm_free(&merged);
    MPI_Comm_free(&inter);
    failures = test_finish(failures);
    MPI_Finalize();
    return failures;
}
