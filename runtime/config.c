#include "config.h"
#include "log.h"
#include "codec/codec.h"
#include "util/size.h"

#include <fold/fold_status.h>
#include <errno.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const fold_config_var_t fold_config_vars[FOLD_CFG_COUNT] = {
    [FOLD_CFG_TRANSPORT] = {"TRANSPORT", "ucp", FOLD_CONFIG_STRING,
        "Transport backend: ucp (UCX tag + RMA), ofi (libfabric tagged + RMA); loopback is "
        "for in-process tests"},
    [FOLD_CFG_LOG_LEVEL] = {"LOG_LEVEL", "warn", FOLD_CONFIG_STRING,
        "Log level: error, warn, info, debug, trace"},
    [FOLD_CFG_TIMEOUT] = {"TIMEOUT", "120", FOLD_CONFIG_SECONDS,
        "Seconds a collective may go without progress before it fails, naming the peer "
        "and step it waits for"},
    [FOLD_CFG_SPIN_COUNT] = {"SPIN_COUNT", "auto", FOLD_CONFIG_INT,
        "Idle progress polls before a waiting rank yields the core (sched_yield). auto: "
        "200 when the node has more ranks than cores (so oversubscribed runs still "
        "move), else 100000, since a yield on a busy core can cost a whole time slice"},
    [FOLD_CFG_ALLREDUCE_ALG] = {"ALLREDUCE_ALG", "auto", FOLD_CONFIG_STRING,
        "Force an allreduce algorithm by name (see fold_info -a), or auto"},
    [FOLD_CFG_REDUCE_ALG] = {"REDUCE_ALG", "auto", FOLD_CONFIG_STRING,
        "Force a reduce algorithm by name (see fold_info -a), or auto"},
    [FOLD_CFG_TUNE] = {"TUNE", "", FOLD_CONFIG_STRING,
        "Selection rules tried before the tuning file's and the defaults, '#'-separated, "
        "each coll:size-range[:pA-B][:nA-B][:ppnA-B]:alg[,alg...] (ranks, nodes, ranks on "
        "the fullest node; several algorithms: the cost model picks), e.g. "
        "allreduce:0-4k:recursive_doubling#allreduce:64k-inf:n1-1:ppn2-inf:dpml"},
    [FOLD_CFG_SEGMENT_SIZE] = {"SEGMENT_SIZE", "auto", FOLD_CONFIG_SIZE,
        "Pipeline segment size in bytes (k/M/G suffixes), or auto"},
    [FOLD_CFG_PIPELINE_DEPTH] = {"PIPELINE_DEPTH", "4", FOLD_CONFIG_INT,
        "Segments in flight per stream (scratch slots) in pipelined algorithms"},
    [FOLD_CFG_NUM_THREADS] = {"NUM_THREADS", "0", FOLD_CONFIG_INT,
        "OpenMP threads for the local reduction; 0 = cores of the node / ranks on it"},
    [FOLD_CFG_THREAD_THRESHOLD] = {"THREAD_THRESHOLD", "256k", FOLD_CONFIG_SIZE,
        "Smallest local reduction (bytes) split across threads"},
    [FOLD_CFG_OFI_PROVIDER] = {"OFI_PROVIDER", "", FOLD_CONFIG_STRING,
        "libfabric provider of the ofi transport, e.g. 'tcp;ofi_rxm' or 'shm' (fold_info -t "
        "lists those found); empty = the first that offers reliable datagrams with tagged "
        "messages and RMA. Read from the environment when the transport opens (fold_init)"},
    [FOLD_CFG_DPML_LEADERS] = {"DPML_LEADERS", "auto", FOLD_CONFIG_INT,
        "Leaders per node of the dpml algorithms (at most the fewest ranks on a node); "
        "auto: the cost model's choice for the message size and shape"},
    [FOLD_CFG_SHM_SIZE] = {"SHM_SIZE", "4M", FOLD_CONFIG_SIZE,
        "Data bytes of the node shared-memory segment of each communicator (dpml); "
        "larger messages pass through it in chunks"},
    [FOLD_CFG_CODEC] = {"CODEC", "auto", FOLD_CONFIG_STRING,
        "Sparse codecs for allreduce/reduce messages (sum; bor/bxor/lor on integers): auto "
        "(each send picks bits, idx, rle or dense by size), none, bits, idx, rle"},
    [FOLD_CFG_TUNE_FILE] = {"TUNE_FILE", "auto", FOLD_CONFIG_STRING,
        "Tuning file written by fold_tune (rules, cost-model parameters, where fold beat "
        "the MPI library); auto: " FOLD_TUNE_DEFAULT_FILE " when it exists; none"},
    [FOLD_CFG_MODEL] = {"MODEL", "", FOLD_CONFIG_STRING,
        "Cost-model parameters over the tuning file's, name=value,... (fold_info -m lists "
        "them with their values)"},
};

int fold_config_index(const char *name)
{
    if (name == NULL) {
        return -1;
    }
    if (strncasecmp(name, "FOLD_", 5) == 0) {
        name += 5;
    }
    for (int i = 0; i < FOLD_CFG_COUNT; i++) {
        if (strcasecmp(name, fold_config_vars[i].name) == 0) {
            return i;
        }
    }
    return -1;
}

static int parse_long(const char *text, long min, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end != '\0' || errno != 0 || v < min) {
        return -1;
    }
    *out = v;
    return 0;
}

/* Parses values[idx] into its typed field; returns 0 or -1 for a bad value. */
static int config_parse(fold_config_t *cfg, int idx)
{
    const char *v = cfg->values[idx];
    switch (idx) {
    case FOLD_CFG_TIMEOUT: {
        char *end;
        double t = strtod(v, &end);
        if (end == v || *end != '\0' || !(t > 0)) {
            return -1;
        }
        cfg->timeout_sec = t;
        return 0;
    }
    case FOLD_CFG_SPIN_COUNT:
        if (strcasecmp(v, "auto") == 0) {
            cfg->spin_count = -1;
            return 0;
        }
        return parse_long(v, 0, &cfg->spin_count);
    case FOLD_CFG_PIPELINE_DEPTH:
        return parse_long(v, 1, &cfg->pipeline_depth);
    case FOLD_CFG_NUM_THREADS:
        return parse_long(v, 0, &cfg->num_threads);
    case FOLD_CFG_SEGMENT_SIZE:
        if (strcasecmp(v, "auto") == 0) {
            cfg->segment_size = 0;
            return 0;
        }
        return (fold_util_parse_size(v, &cfg->segment_size) == 0 && cfg->segment_size > 0) ? 0 : -1;
    case FOLD_CFG_THREAD_THRESHOLD:
        return fold_util_parse_size(v, &cfg->thread_threshold);
    case FOLD_CFG_DPML_LEADERS:
        if (strcasecmp(v, "auto") == 0) {
            cfg->dpml_leaders = 0;
            return 0;
        }
        return parse_long(v, 1, &cfg->dpml_leaders);
    case FOLD_CFG_SHM_SIZE:
        return (fold_util_parse_size(v, &cfg->shm_size) == 0 && cfg->shm_size >= 4096 &&
                cfg->shm_size <= ((size_t)1 << 40)) ? 0 : -1;
    case FOLD_CFG_CODEC:
        return fold_codec_parse(v, &cfg->codec_mask) == FOLD_OK ? 0 : -1;
    case FOLD_CFG_LOG_LEVEL:
        return fold_log_level_from_name(v, &cfg->log_level);
    default:
        return 0;
    }
}

int fold_config_update(fold_config_t *cfg, const char *name, const char *value)
{
    int idx = fold_config_index(name);
    if (idx < 0) {
        fold_error("unknown configuration variable '%s' (fold_info -c lists them)",
                   name ? name : "(null)");
        return FOLD_ERR_NOT_FOUND;
    }
    if (value == NULL) {
        return FOLD_ERR_INVALID_ARG;
    }
    char *copy = strdup(value);
    if (copy == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    char *old = cfg->values[idx];
    cfg->values[idx] = copy;
    if (config_parse(cfg, idx) != 0) {
        fold_error("invalid value '%s' for FOLD_%s", value, fold_config_vars[idx].name);
        cfg->values[idx] = old;
        free(copy);
        config_parse(cfg, idx);
        return FOLD_ERR_INVALID_ARG;
    }
    free(old);
    return FOLD_OK;
}

int fold_config_load(fold_config_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    for (int i = 0; i < FOLD_CFG_COUNT; i++) {
        cfg->values[i] = strdup(fold_config_vars[i].default_value);
        if (cfg->values[i] == NULL || config_parse(cfg, i) != 0) {
            fold_config_release(cfg);
            return FOLD_ERR_NO_MEMORY;
        }
    }
    for (int i = 0; i < FOLD_CFG_COUNT; i++) {
        char env[64];
        snprintf(env, sizeof(env), "FOLD_%s", fold_config_vars[i].name);
        const char *v = getenv(env);
        if (v != NULL) {
            int status = fold_config_update(cfg, fold_config_vars[i].name, v);
            if (status != FOLD_OK) {
                fold_config_release(cfg);
                return status;
            }
        }
    }
    return FOLD_OK;
}

void fold_config_release(fold_config_t *cfg)
{
    for (int i = 0; i < FOLD_CFG_COUNT; i++) {
        free(cfg->values[i]);
        cfg->values[i] = NULL;
    }
}
