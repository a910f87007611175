/*
 * --plot: latency and bus bandwidth against size, one line per collective and
 * algorithm (and for MPI and the memory bound when measured), drawn by gnuplot.
 */
#ifndef FOLD_PERF_PLOT_H
#define FOLD_PERF_PLOT_H

#include "perf_results.h"

#include <stdio.h>

/* Whether gnuplot is there (so a run can fail before it starts, not after): the
 * program FOLD_PERF_GNUPLOT names, else gnuplot on PATH. */
int perf_plot_available(void);
void perf_plot_explain_missing(FILE *out);

/* Writes a PNG; returns 0, or -1 after printing why to stderr. */
int perf_plot_write(const char *path, const perf_results_t *results);

#endif
