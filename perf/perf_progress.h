/*
 * A one-line progress indicator on stderr, for sweeps that take more than a few
 * seconds, and only when stderr reaches a terminal (never in logs or pipes).
 */
#ifndef FOLD_PERF_PROGRESS_H
#define FOLD_PERF_PROGRESS_H

#include <stddef.h>

typedef struct perf_progress {
    int    enabled;
    int    visible;
    double start_us;
    size_t total;
} perf_progress_t;

void perf_progress_init(perf_progress_t *p, int is_reporting_rank, size_t total_steps);
/* Redraws the line (once the sweep has run for a few seconds). */
void perf_progress_update(perf_progress_t *p, size_t done, const char *what);
/* Erases the line, before something else is printed or at the end. */
void perf_progress_clear(perf_progress_t *p);

#endif
