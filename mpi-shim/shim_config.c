/*
 * The FOLD_MPI_* variables: one table of name, default and description, read once
 * at MPI_Init (rank 0's values are then broadcast, see shim_start).
 */
#include "shim.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum shim_var_kind { SHIM_VAR_FLAG, SHIM_VAR_LEVEL, SHIM_VAR_SIZE } shim_var_kind_t;

typedef struct shim_var {
    const char     *name;
    const char     *default_value;
    shim_var_kind_t kind;
    size_t          offset;      /* of the field in shim_config_t */
    const char     *description;
} shim_var_t;

#define SIZE_VAR(field, coll) (offsetof(shim_config_t, field) + (coll) * sizeof(size_t))

/* The size ranges default to "auto": fold serves where it expects to be faster
 * (fold_serve_advice: the tuning file fold_tune wrote, else its cost model). */
static const shim_var_t shim_vars[] = {
    {"FOLD_MPI_ENABLE", "1", SHIM_VAR_FLAG, offsetof(shim_config_t, enable),
     "0: start no fold context and hand every call to the MPI library"},
    {"FOLD_MPI_VERBOSE", "0", SHIM_VAR_LEVEL, offsetof(shim_config_t, verbose),
     "1: a banner at MPI_Init with the served ranges and where they come from, and call "
     "totals per route at MPI_Finalize (rank 0); 2: also these variables and each "
     "rank's totals"},
    {"FOLD_MPI_ALLREDUCE_MIN", "auto", SHIM_VAR_SIZE, SIZE_VAR(min_bytes, SHIM_ALLREDUCE),
     "smallest MPI_Allreduce (bytes per rank) fold serves; auto: where fold expects to be "
     "faster (tuning file, else cost model), as long as MAX is auto too"},
    {"FOLD_MPI_ALLREDUCE_MAX", "auto", SHIM_VAR_SIZE, SIZE_VAR(max_bytes, SHIM_ALLREDUCE),
     "largest MPI_Allreduce fold serves (inf: no limit); auto as for MIN"},
    {"FOLD_MPI_REDUCE_MIN", "auto", SHIM_VAR_SIZE, SIZE_VAR(min_bytes, SHIM_REDUCE),
     "smallest MPI_Reduce fold serves; auto as for MPI_Allreduce"},
    {"FOLD_MPI_REDUCE_MAX", "auto", SHIM_VAR_SIZE, SIZE_VAR(max_bytes, SHIM_REDUCE),
     "largest MPI_Reduce fold serves; auto as for MPI_Allreduce"},
};

#define SHIM_NVARS (sizeof(shim_vars) / sizeof(shim_vars[0]))

/* "4096", "64k", "1M", "1G" (powers of 2^10), "inf", "auto"; returns 0 on success. */
static int parse_size(const char *text, size_t *value)
{
    if (strcmp(text, "auto") == 0) {
        *value = SHIM_SIZE_AUTO;
        return 0;
    }
    if (strcmp(text, "inf") == 0) {
        *value = SIZE_MAX;
        return 0;
    }
    char *end;
    errno = 0;
    unsigned long long n = strtoull(text, &end, 10);
    if (end == text || errno != 0 || text[0] == '-') {
        return -1;
    }
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    if (*end != '\0' || (shift && n > (~0ull >> shift))) {
        return -1;
    }
    *value = (size_t)(n << shift);
    return 0;
}

static int parse_int(const char *text, int lo, int hi, int *value)
{
    char *end;
    errno = 0;
    long n = strtol(text, &end, 10);
    if (end == text || *end != '\0' || errno != 0 || n < lo || n > hi) {
        return -1;
    }
    *value = (int)n;
    return 0;
}

static int parse_var(const shim_var_t *var, const char *text, shim_config_t *config)
{
    char *field = (char *)config + var->offset;
    switch (var->kind) {
    case SHIM_VAR_FLAG:  return parse_int(text, 0, 1, (int *)field);
    case SHIM_VAR_LEVEL: return parse_int(text, 0, 2, (int *)field);
    case SHIM_VAR_SIZE:  return parse_size(text, (size_t *)field);
    }
    return -1;
}

void shim_config_load(shim_config_t *config, int rank)
{
    memset(config, 0, sizeof(*config));
    for (size_t i = 0; i < SHIM_NVARS; i++) {
        const shim_var_t *var = &shim_vars[i];
        parse_var(var, var->default_value, config);
        const char *text = getenv(var->name);
        if (text != NULL && parse_var(var, text, config) != 0) {
            parse_var(var, var->default_value, config);
            if (rank == 0) {
                fprintf(stderr, "fold-mpi: ignoring %s=%s (not a valid value); using %s\n",
                        var->name, text, var->default_value);
            }
        }
    }
}

void shim_config_print(const shim_config_t *config)
{
    for (size_t i = 0; i < SHIM_NVARS; i++) {
        const shim_var_t *var = &shim_vars[i];
        const char *field = (const char *)config + var->offset;
        char value[32];
        if (var->kind == SHIM_VAR_SIZE && *(const size_t *)field == SIZE_MAX) {
            snprintf(value, sizeof(value), "inf");
        } else if (var->kind == SHIM_VAR_SIZE && *(const size_t *)field == SHIM_SIZE_AUTO) {
            snprintf(value, sizeof(value), "auto");
        } else if (var->kind == SHIM_VAR_SIZE) {
            snprintf(value, sizeof(value), "%zu", *(const size_t *)field);
        } else {
            snprintf(value, sizeof(value), "%d", *(const int *)field);
        }
        fprintf(stderr, "fold-mpi: %s=%s (default %s): %s\n", var->name, value,
                var->default_value, var->description);
    }
}

int shim_config_range(const shim_config_t *config, shim_coll_t coll, size_t *lo, size_t *hi)
{
    size_t min = config->min_bytes[coll], max = config->max_bytes[coll];
    if (min == SHIM_SIZE_AUTO && max == SHIM_SIZE_AUTO) {
        return 0;
    }
    *lo = min == SHIM_SIZE_AUTO ? 0 : min;
    *hi = max == SHIM_SIZE_AUTO ? SIZE_MAX : max;
    return 1;
}
