/* perf_mpi.h for a build without MPI: fold_perf then bootstraps through PMIx only. */
#include "perf_mpi.h"

#include <stdio.h>
#include <stdlib.h>

int perf_mpi_built(void)
{
    return 0;
}

int perf_mpi_init(int *argc, char ***argv, int *rank, int *size)
{
    fprintf(stderr, "fold_perf: this fold_perf was built without MPI\n");
    return -1;
}

int perf_mpi_initialized(void)
{
    return 0;
}

void perf_mpi_finalize(void)
{
}

void perf_mpi_abort(int code)
{
    exit(code);
}

int perf_mpi_oob_allgather(const void *sendbuf, void *recvbuf, size_t len, void *arg)
{
    return -1;
}

int perf_mpi_supports(fold_dtype_t dtype, fold_op_t op, size_t count, const char **why)
{
    *why = "fold_perf was built without MPI";
    return 0;
}

int perf_mpi_collective(perf_coll_t coll, const void *sendbuf, void *recvbuf, size_t count,
                        fold_dtype_t dtype, fold_op_t op, int root, int inplace)
{
    return -1;
}

int perf_mpi_barrier(void)
{
    return -1;
}

const char *perf_mpi_library_version(void)
{
    return "";
}
