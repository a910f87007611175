/*
 * The FOLD_MPI_* variables (shim_config.h): the table, read once at MPI_Init.
 */
#include "shim_config.h"

#include <fold/fold_status.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define SHIM_FIELD(member) FOLD_UTIL_CONFIG_FIELD(shim_config_t, member)
/* A byte bound: util's size syntax ("inf" included), or auto. */
#define SHIM_BOUND FOLD_UTIL_CONFIG_SIZE_OR("auto", SHIM_SIZE_AUTO, 0, SIZE_MAX)

/* The size ranges default to "auto": fold serves where it expects to be faster
 * (fold_serve_advice: the tuning file fold_tune wrote, else its cost model). */
static const fold_util_config_field_t shim_fields[] = {
    {"ENABLE", "1",
     "0: start no fold context and hand every call to the MPI library",
     SHIM_FIELD(enable), FOLD_UTIL_CONFIG_INT(0, 1)},
    {"VERBOSE", "0",
     "1: a banner at MPI_Init with the served ranges and where they come from, and call "
     "totals per route at MPI_Finalize (rank 0); 2: also these variables and each "
     "rank's totals",
     SHIM_FIELD(verbose), FOLD_UTIL_CONFIG_INT(0, 2)},
    {"ALLOC_MEM", "0",
     "1: MPI_Alloc_mem gives fold memory (fold_mem_alloc), which the other ranks of the "
     "node map, so that single copy moves MPI_Allreduce/MPI_Reduce data in it with "
     "memcpy rather than through the kernel; MPI_Free_mem frees either kind. Where that "
     "changes fold's algorithm, every rank of a node must pass such buffers alike, or "
     "the call fails (MPI_ERR_ARG)",
     SHIM_FIELD(alloc_mem), FOLD_UTIL_CONFIG_INT(0, 1)},
    {"ALLREDUCE_MIN", "auto",
     "smallest MPI_Allreduce (bytes per rank) fold serves; auto: where fold expects to be "
     "faster (tuning file, else cost model), as long as MAX is auto too",
     SHIM_FIELD(min_bytes[SHIM_ALLREDUCE]), SHIM_BOUND},
    {"ALLREDUCE_MAX", "auto",
     "largest MPI_Allreduce fold serves (inf: no limit); auto as for MIN",
     SHIM_FIELD(max_bytes[SHIM_ALLREDUCE]), SHIM_BOUND},
    {"REDUCE_MIN", "auto",
     "smallest MPI_Reduce fold serves; auto as for MPI_Allreduce",
     SHIM_FIELD(min_bytes[SHIM_REDUCE]), SHIM_BOUND},
    {"REDUCE_MAX", "auto",
     "largest MPI_Reduce fold serves; auto as for MPI_Allreduce",
     SHIM_FIELD(max_bytes[SHIM_REDUCE]), SHIM_BOUND},
};

#define SHIM_NFIELDS (sizeof(shim_fields) / sizeof(shim_fields[0]))

const fold_util_config_table_t shim_config_table = {
    "MPI shim, libfold-mpi", "FOLD_MPI_", shim_fields, SHIM_NFIELDS
};

/* The text of each variable as this process loaded it (for shim_config_print). */
static char *shim_values[SHIM_NFIELDS];

int shim_config_load(shim_config_t *config, int rank, char *refused, size_t len)
{
    char why[512];
    int nrefused = 0;
    if (refused != NULL && len > 0) {
        refused[0] = '\0';
    }
    memset(config, 0, sizeof(*config));
    fold_util_config_release(&shim_config_table, shim_values);
    if (fold_util_config_init(&shim_config_table, config, shim_values, why, sizeof(why)) !=
        FOLD_OK) {
        /* Out of memory (the defaults parse: tests/api/test_config.c): leave fold off. */
        fprintf(stderr, "fold-mpi: %s; fold stays off\n", why);
        config->enable = 0;
        return 0;
    }
    for (size_t i = 0; i < SHIM_NFIELDS; i++) {
        const char *text = fold_util_config_getenv(&shim_config_table, (int)i);
        if (text == NULL || fold_util_config_set(&shim_config_table, config, shim_values,
                                                 (int)i, text, why, sizeof(why)) == FOLD_OK) {
            continue;
        }
        if (rank == 0) {
            fprintf(stderr, "fold-mpi: ignoring %s; using the default, %s\n", why,
                    shim_fields[i].default_value);
        }
        if (refused != NULL && nrefused == 0) {
            snprintf(refused, len, "%s%s='%s'", shim_config_table.prefix, shim_fields[i].name,
                     text);
        }
        nrefused++;
    }
    return nrefused;
}

void shim_config_print(void)
{
    for (size_t i = 0; i < SHIM_NFIELDS; i++) {
        const fold_util_config_field_t *f = &shim_fields[i];
        fprintf(stderr, "fold-mpi: %s%s=%s (default %s): %s\n", shim_config_table.prefix,
                f->name, shim_values[i] ? shim_values[i] : f->default_value, f->default_value,
                f->doc);
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
