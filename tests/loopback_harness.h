/*
 * Runs ranks as threads of the test process, each with its own fold context on a
 * shared loopback fabric and in-memory bootstrap.
 */
#ifndef FOLD_LOOPBACK_HARNESS_H
#define FOLD_LOOPBACK_HARNESS_H

#include "comm.h"

typedef int (*lh_rank_fn)(fold_context_t *ctx, int rank, int size, void *arg);

/* Starts nranks threads, runs fn on each; returns 0 when every fn returned 0. */
int lh_run(int nranks, lh_rank_fn fn, void *arg);

/* The same with the ranks spread round-robin over nnodes virtual nodes: each rank's
 * bootstrap names its node, so fold sees them as talking over a link (and gives
 * each node its own segment). */
int lh_run_nodes(int nranks, int nnodes, lh_rank_fn fn, void *arg);

/* lh_run with stderr captured (stderr_capture.h): returns what fold logged
 * (malloc'd), lh_run's result in *result. */
char *lh_run_logged(int nranks, lh_rank_fn fn, void *arg, int *result);

/* A barrier across the ranks of the current lh_run (through the bootstrap). */
void lh_barrier(fold_context_t *ctx);

#endif
