/*
 * Configuration: one table of FOLD_* variables (name, default, type, description).
 * A context reads the environment once at init into a fold_config_t; fold_config_set
 * changes that context's copy. fold_info prints the table.
 */
#ifndef FOLD_CONFIG_H
#define FOLD_CONFIG_H

#include <stddef.h>

/* Where FOLD_TUNE_FILE=auto looks (<prefix>/etc/fold/tune, set by CMake). */
#ifndef FOLD_TUNE_DEFAULT_FILE
#define FOLD_TUNE_DEFAULT_FILE "/usr/local/etc/fold/tune"
#endif

typedef enum fold_config_type {
    FOLD_CONFIG_STRING, FOLD_CONFIG_INT, FOLD_CONFIG_SIZE, FOLD_CONFIG_SECONDS
} fold_config_type_t;

typedef struct fold_config_var {
    const char        *name;         /* without the FOLD_ prefix */
    const char        *default_value;
    fold_config_type_t type;
    const char        *description;
} fold_config_var_t;

enum {
    FOLD_CFG_TRANSPORT, FOLD_CFG_LOG_LEVEL, FOLD_CFG_TIMEOUT, FOLD_CFG_SPIN_COUNT,
    FOLD_CFG_ALLREDUCE_ALG, FOLD_CFG_REDUCE_ALG, FOLD_CFG_TUNE, FOLD_CFG_SEGMENT_SIZE,
    FOLD_CFG_PIPELINE_DEPTH, FOLD_CFG_NUM_THREADS, FOLD_CFG_THREAD_THRESHOLD,
    FOLD_CFG_OFI_PROVIDER, FOLD_CFG_DPML_LEADERS, FOLD_CFG_SHM_SIZE, FOLD_CFG_CODEC,
    FOLD_CFG_TUNE_FILE, FOLD_CFG_MODEL,
    FOLD_CFG_COUNT
};

extern const fold_config_var_t fold_config_vars[FOLD_CFG_COUNT];

typedef struct fold_config {
    char  *values[FOLD_CFG_COUNT];  /* the strings, owned */
    /* parsed forms of the numeric ones */
    double timeout_sec;
    long   spin_count;              /* -1 = auto */
    size_t segment_size;            /* bytes; 0 = per-algorithm default */
    long   pipeline_depth;
    long   num_threads;             /* 0 = auto */
    size_t thread_threshold;
    long   dpml_leaders;            /* 0 = auto */
    size_t shm_size;                /* node segment data bytes per communicator */
    int    codec_mask;              /* sparse codecs sends may use (1 << codec id) */
    int    log_level;
} fold_config_t;

/* Fills cfg from the environment (FOLD_<NAME>), falling back to the defaults. */
int  fold_config_load(fold_config_t *cfg);
/* Sets one variable by name (with or without "FOLD_"); validates numeric values. */
int  fold_config_update(fold_config_t *cfg, const char *name, const char *value);
int  fold_config_index(const char *name);
void fold_config_release(fold_config_t *cfg);

#endif
