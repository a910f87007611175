/*
 * Configuration: the FOLD_* variables, one row each in fold_config_table (config.c),
 * parsed into the typed fields of fold_config_t. A context reads the environment once
 * at init; fold_config_set changes that context's copy. fold_info -c prints the table.
 *
 * Adding a variable: one field below and one row in fold_config_table (name, default,
 * description, FOLD_CONFIG_FIELD(field), parser from util/config_table.h).
 */
#ifndef FOLD_CONFIG_H
#define FOLD_CONFIG_H

#include "util/config_table.h"

#include <stddef.h>

/* Where FOLD_TUNE_FILE=auto looks (<prefix>/etc/fold/tune, set by CMake). */
#ifndef FOLD_TUNE_DEFAULT_FILE
#define FOLD_TUNE_DEFAULT_FILE "/usr/local/etc/fold/tune"
#endif

/* FOLD_WORLD_SETUP: when the world communicator prepares its node state and its
 * selection's decisions. */
typedef enum fold_stream {
    FOLD_STREAM_OFF, FOLD_STREAM_AUTO, FOLD_STREAM_ON
} fold_stream_t;

typedef enum fold_world_setup {
    FOLD_WORLD_SETUP_LAZY = 0,   /* at the first call that needs each */
    FOLD_WORLD_SETUP_INIT = 1    /* in fold_init */
} fold_world_setup_t;

typedef struct fold_config {
    char       **values;            /* the text of each row, as set; owned */
    const char  *transport;
    int          log_level;         /* fold_log_level_t */
    double       timeout_sec;
    int          check;             /* FOLD_CHECK: compare every call's arguments */
    long         spin_count;        /* -1 = auto */
    const char  *allreduce_alg;
    const char  *reduce_alg;
    const char  *tune;
    size_t       segment_size;      /* bytes; 0 = per-algorithm default */
    long         pipeline_depth;
    long         num_threads;       /* 0 = auto */
    size_t       thread_threshold;
    int          stream;            /* FOLD_STREAM: fold_stream_t */
    size_t       stream_min;        /* FOLD_STREAM_MIN; 0: auto */
    const char  *ofi_provider;
    int          ucx_err_mode;      /* FOLD_UCX_ERR_MODE: 0 none, 1 peer */
    long         dpml_leaders;      /* 0 = auto */
    int          single_copy;       /* 0 off, 1 auto (FOLD_SINGLE_COPY) */
    int          huge_pages;        /* 0 off, 1 auto (FOLD_HUGE_PAGES) */
    int          adopt;             /* 0 off, 1 auto (FOLD_ADOPT) */
    int          world_setup;       /* FOLD_WORLD_SETUP: fold_world_setup_t */
    size_t       shm_size;          /* node segment data bytes per communicator */
    size_t       shm_reserve;       /* /dev/shm bytes segments leave free; SIZE_MAX: auto */
    int          codec_mask;        /* sparse codecs sends may use (1 << codec id) */
    const char  *tune_file;
    const char  *model;
    const char  *measured;          /* FOLD_MEASURED: taken as fold_init's measurement */
    int          rank_map;          /* fold_rankmap_mode_t (FOLD_RANK_MAP) */
    int          rank_cache;        /* fold_rankcache_kind_t (FOLD_RANK_CACHE) */
    long         online;            /* FOLD_ONLINE: trial calls per rival; 0 off */
    long         online_share;      /* FOLD_ONLINE_SHARE: the trials' cost, at most this
                                       percent of the calls' before them */
    long         trace;             /* FOLD_TRACE: the call whose timeline is logged; 0 none */
} fold_config_t;

extern const fold_util_config_table_t fold_config_table;

/* Fills cfg from the environment (FOLD_<NAME>), falling back to the defaults; a bad
 * value fails, logged with the variable's name. */
int  fold_config_load(fold_config_t *cfg);
/* Fills cfg with the defaults only: what a rank whose environment was refused runs
 * on while it tells the other ranks so (fold_context_create). */
int  fold_config_defaults(fold_config_t *cfg);
/* Sets one variable by name (with or without "FOLD_", any case). FOLD_ERR_NOT_FOUND
 * for an unknown name, FOLD_ERR_INVALID_ARG for a bad value (logged; cfg unchanged). */
int  fold_config_update(fold_config_t *cfg, const char *name, const char *value);
/* The row of fold_config_table called name (as above), or -1. */
int  fold_config_index(const char *name);
void fold_config_release(fold_config_t *cfg);

#endif
