/*
 * The FOLD_PERF_* variables (perf_config.h).
 */
#include "perf_config.h"

#include <fold/fold_status.h>
#include <stdio.h>

#define PERF_FIELD(member) FOLD_UTIL_CONFIG_FIELD(perf_config_t, member)

static const fold_util_config_field_t perf_fields[] = {
    {"GNUPLOT", "",
     "gnuplot program fold_perf --plot runs; empty: gnuplot on PATH",
     PERF_FIELD(gnuplot), FOLD_UTIL_CONFIG_STRING},
};

#define PERF_NFIELDS (sizeof(perf_fields) / sizeof(perf_fields[0]))

const fold_util_config_table_t perf_config_table = {
    "tools: fold_perf, fold_tune", "FOLD_PERF_", perf_fields, PERF_NFIELDS
};

const perf_config_t *perf_config(void)
{
    static perf_config_t config;
    static char *values[PERF_NFIELDS];
    static int loaded;
    if (loaded) {
        return &config;
    }
    char why[512];
    if (fold_util_config_init(&perf_config_table, &config, values, why, sizeof(why)) != FOLD_OK) {
        fprintf(stderr, "fold tools: %s\n", why);
    }
    for (size_t i = 0; i < PERF_NFIELDS; i++) {
        const char *text = fold_util_config_getenv(&perf_config_table, (int)i);
        if (text != NULL && fold_util_config_set(&perf_config_table, &config, values, (int)i,
                                                 text, why, sizeof(why)) != FOLD_OK) {
            fprintf(stderr, "fold tools: ignoring %s; using the default\n", why);
        }
    }
    loaded = 1;
    return &config;
}
