/*
 * The tools' FOLD_PERF_* variables: one row each in perf_config_table, rows of the same
 * kind as the runtime's FOLD_* table (util/config_table.h). fold_info prints the table.
 *
 * Adding a variable: one field below and one row in perf_config_table (perf_config.c).
 */
#ifndef FOLD_PERF_CONFIG_H
#define FOLD_PERF_CONFIG_H

#include "util/config_table.h"

typedef struct perf_config {
    const char *gnuplot;   /* FOLD_PERF_GNUPLOT; "" = gnuplot on PATH */
} perf_config_t;

extern const fold_util_config_table_t perf_config_table;

/* The variables, read from the environment on first use. A bad value keeps the
 * default, with a warning on stderr. */
const perf_config_t *perf_config(void);

#endif
