/*
 * FOLD_TRACE=N: the timeline of the N-th allreduce or reduce a context runs through
 * the schedule executor, logged when it finishes: for every step when it started and
 * ended, beside when the cost model predicts it ends. It shows where a call waits
 * and which steps the model gets wrong (the tiny-message path is not traced).
 */
#ifndef FOLD_EXEC_TRACE_H
#define FOLD_EXEC_TRACE_H

#include <stddef.h>

struct fold_request;

/* Counts this call and, when it is the one FOLD_TRACE names, starts recording. */
void fold_exec_trace_begin(struct fold_request *req);
/* Step i was started / is done (nothing unless the request is traced). */
void fold_exec_trace_step(struct fold_request *req, size_t i, int done);
/* Logs the timeline of a traced request that finished with `status`, and frees it. */
void fold_exec_trace_end(struct fold_request *req, int status);
/* Frees what a traced request recorded, unlogged (a request released unfinished). */
void fold_exec_trace_free(struct fold_request *req);

#endif
