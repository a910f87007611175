/*
 * The one clock of fold's runtime, MPI shim and tools: monotonic seconds, for
 * timeouts and timings (never wall-clock time, which can jump).
 */
#ifndef FOLD_UTIL_CLOCK_H
#define FOLD_UTIL_CLOCK_H

/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC). */
double fold_util_time_now(void);

#endif
