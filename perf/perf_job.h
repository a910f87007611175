/*
 * What fold's tools (fold_perf, fold_tune) do alike as processes of a launched job:
 * find their rank before anything is up, start fold (through the MPI beside it or
 * PMIx), and end the whole job after a runtime error.
 */
#ifndef FOLD_PERF_JOB_H
#define FOLD_PERF_JOB_H

#include <fold/fold.h>

/* The launcher's rank before anything is initialised (Open MPI, PMIx, PMI, Slurm
 * variables; 0 if none), so that one process prints usage errors and help. */
int perf_launcher_rank(void);

/* fold_init over the MPI library's allgather when use_mpi (MPI_Init first), else
 * through PMIx; transport NULL or "" is fold's default. */
int perf_init_fold(int use_mpi, const char *transport, fold_context_h *ctx);

/* After a runtime error on one rank the others may wait forever: end them all. */
void perf_fail_job(int code) __attribute__((noreturn));

#endif
