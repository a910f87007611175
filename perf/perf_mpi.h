/*
 * The MPI library beside fold: its start-up, the out-of-band allgather handed to
 * fold_init, and MPI_Allreduce / MPI_Reduce for --compare mpi. Built from
 * perf_mpi.c when CMake found an MPI, else from perf_mpi_absent.c.
 */
#ifndef FOLD_PERF_MPI_H
#define FOLD_PERF_MPI_H

#include "perf_options.h"

#include <fold/fold.h>

#include <stddef.h>

/* 1 when this fold_perf was built with MPI. */
int perf_mpi_built(void);

/* MPI_Init; rank and size of MPI_COMM_WORLD. Returns 0, or -1 after printing why. */
int perf_mpi_init(int *argc, char ***argv, int *rank, int *size);
int perf_mpi_initialized(void);
void perf_mpi_finalize(void);
/* Ends every rank of the job (after a runtime error on one of them). */
void perf_mpi_abort(int code);

/* fold_oob_allgather_fn over MPI_Allgather on MPI_COMM_WORLD. */
int perf_mpi_oob_allgather(const void *sendbuf, void *recvbuf, size_t len, void *arg);

/* Whether MPI can run this datatype and op; if not, why (for a note to the user). */
int perf_mpi_supports(fold_dtype_t dtype, fold_op_t op, size_t count, const char **why);

/* One MPI_Allreduce or MPI_Reduce with fold_perf's buffer conventions: in place
 * means recvbuf holds the input (at every rank, as for fold). Returns 0 or -1. */
int perf_mpi_collective(perf_coll_t coll, const void *sendbuf, void *recvbuf, size_t count,
                        fold_dtype_t dtype, fold_op_t op, int root, int inplace);

/* MPI_Barrier on MPI_COMM_WORLD: what MPI still has under way between the ranks
 * (its messages share the connections) is through once it returns. 0 or -1. */
int perf_mpi_barrier(void);

/* The MPI library's name and version, for the run header ("" without MPI). */
const char *perf_mpi_library_version(void);

#endif
