/*
 * The MPI shim's FOLD_MPI_* variables: one row each in shim_config_table, rows of the
 * same kind as the runtime's FOLD_* table (util/config_table.h), read once at MPI_Init.
 * Rank 0's values are then broadcast as bytes (shim_start), so shim_config_t holds
 * plain values only. Free of MPI, so that fold_info prints this table too.
 *
 * Adding a variable: one field below and one row in shim_config_table (shim_config.c).
 */
#ifndef FOLD_MPI_SHIM_CONFIG_H
#define FOLD_MPI_SHIM_CONFIG_H

#include "util/config_table.h"

#include <stddef.h>

typedef enum shim_coll {
    SHIM_ALLREDUCE,
    SHIM_REDUCE,
    SHIM_COLL_COUNT
} shim_coll_t;

typedef struct shim_config {
    int    enable;          /* FOLD_MPI_ENABLE */
    int    verbose;         /* FOLD_MPI_VERBOSE */
    int    alloc_mem;       /* FOLD_MPI_ALLOC_MEM */
    /* fold serves messages of min..max bytes per rank: FOLD_MPI_ALLREDUCE_MIN, ...;
     * SHIM_SIZE_AUTO where unset. A collective with neither bound set asks
     * fold_serve_advice (the tuning file, else fold's cost model) call by call; one
     * with a bound set serves exactly its range (an unset bound: 0 or inf). */
    size_t min_bytes[SHIM_COLL_COUNT];
    size_t max_bytes[SHIM_COLL_COUNT];
} shim_config_t;

#define SHIM_SIZE_AUTO ((size_t)-2)

extern const fold_util_config_table_t shim_config_table;

/* The range fold serves when coll has a bound set; 0 when it follows the advice. */
int shim_config_range(const shim_config_t *config, shim_coll_t coll, size_t *lo, size_t *hi);

/* Reads the FOLD_MPI_* variables; a malformed value keeps the default and rank 0 warns.
 * Returns how many were refused; the first as NAME='value' in refused (may be NULL). */
int  shim_config_load(shim_config_t *config, int rank, char *refused, size_t len);
/* Prints every variable with the value this process loaded, its default and
 * description (FOLD_MPI_VERBOSE=2, rank 0: the values every rank uses). */
void shim_config_print(void);

#endif
