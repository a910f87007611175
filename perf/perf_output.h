/*
 * Output formats: the table on stdout (printed row by row as the sweep goes), and the
 * machine-readable CSV and JSON files written at the end.
 */
#ifndef FOLD_PERF_OUTPUT_H
#define FOLD_PERF_OUTPUT_H

#include "perf_results.h"

#include <stdio.h>

void perf_table_print_header(FILE *out, const perf_run_info_t *info);
void perf_table_print_row(FILE *out, const perf_run_info_t *info, const perf_row_t *row);

/* Return 0, or -1 after printing why to stderr. */
int perf_csv_write(const char *path, const perf_results_t *results);
int perf_json_write(const char *path, const perf_results_t *results);

#endif
