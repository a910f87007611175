#include "config.h"
#include "log.h"
#include "codec/codec.h"
#include "group/rankmap.h"

#include <fold/fold_status.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FOLD_CONFIG_FIELD(member) FOLD_UTIL_CONFIG_FIELD(fold_config_t, member)

/* FOLD_CODEC: fold_codec_parse's lists. */
static int read_codec(const char *text, void *field, const void *arg, char *why, size_t whylen)
{
    (void)arg;
    if (fold_codec_parse(text, field) != FOLD_OK) {
        snprintf(why, whylen, "expected auto, none, or a comma-separated list of bits, idx, rle");
        return -1;
    }
    return 0;
}

/* FOLD_SINGLE_COPY, FOLD_HUGE_PAGES: the field holds the index, so "off" is 0 and
 * means off. */
static const char *const off_auto_names[] = {"off", "auto", NULL};

/* FOLD_STREAM: the index is a fold_stream_t. */
static const char *const stream_names[] = {"off", "auto", "on", NULL};

/* FOLD_WORLD_SETUP: the index is a fold_world_setup_t. */
static const char *const world_setup_names[] = {"lazy", "init", NULL};

/* FOLD_UCX_ERR_MODE: the index is the mode, so "none" is 0. */
static const char *const ucx_err_mode_names[] = {"none", "peer", NULL};

static const fold_util_config_field_t config_fields[] = {
    {"TRANSPORT", "ucp",
     "Transport backend: ucp (UCX tagged messages), ofi (libfabric tagged messages); "
     "loopback is for in-process tests. Read at fold_init",
     FOLD_CONFIG_FIELD(transport), FOLD_UTIL_CONFIG_STRING},
    {"LOG_LEVEL", "warn",
     "Log level: error, warn, info, debug, trace",
     FOLD_CONFIG_FIELD(log_level), FOLD_UTIL_CONFIG_ENUM(fold_log_level_names)},
    {"TIMEOUT", "120",
     "Seconds a collective may go without progress before it fails, naming the peer "
     "and step it waits for",
     FOLD_CONFIG_FIELD(timeout_sec), FOLD_UTIL_CONFIG_SECONDS},
    {"CHECK", "0",
     "1: before each allreduce and reduce the ranks compare their arguments (collective, "
     "count, datatype, op, root, in place, call number) with one small allreduce; a "
     "mismatch fails every rank with FOLD_ERR_MISMATCH and names the ranks and the field",
     FOLD_CONFIG_FIELD(check), FOLD_UTIL_CONFIG_INT(0, 1)},
    {"SPIN_COUNT", "auto",
     "Idle progress polls before a waiting rank yields the core (sched_yield). auto: "
     "200 when the machine has more ranks than cores, counting those of every node "
     "that shares its kernel (so oversubscribed runs still move), else 100000, since a yield on a busy core can cost a whole time slice",
     FOLD_CONFIG_FIELD(spin_count), FOLD_UTIL_CONFIG_LONG_OR("auto", -1, 0, LONG_MAX)},
    {"ALLREDUCE_ALG", "auto",
     "Force an allreduce algorithm by name (see fold_info -a), NAME@SIZE with its pipeline "
     "segment (ring@64k), or auto",
     FOLD_CONFIG_FIELD(allreduce_alg), FOLD_UTIL_CONFIG_STRING},
    {"REDUCE_ALG", "auto",
     "Force a reduce algorithm by name (see fold_info -a), NAME@SIZE with its pipeline "
     "segment (shm_flat@32k), or auto",
     FOLD_CONFIG_FIELD(reduce_alg), FOLD_UTIL_CONFIG_STRING},
    {"TUNE", "",
     "Selection rules tried before the tuning file's and the defaults, '#'-separated, "
     "each coll:size-range[:pA-B][:nA-B][:ppnA-B]:alg[@SEGMENT][,alg...] (ranks, nodes, "
     "ranks on the fullest node; several algorithms: the cost model picks; @SEGMENT fixes "
     "the pipeline segment), e.g. "
     "allreduce:0-4k:recursive_doubling#allreduce:64k-inf:n1-1:ppn2-inf:dpml@32k",
     FOLD_CONFIG_FIELD(tune), FOLD_UTIL_CONFIG_STRING},
    {"SEGMENT_SIZE", "auto",
     "Pipeline segment size in bytes (k/M/G suffixes) for every call, or auto (128k, and "
     "for node-aware algorithms the cost model's pick of 128k, 32k and 512k; a rule's or "
     "forced name's @SIZE comes first)",
     FOLD_CONFIG_FIELD(segment_size), FOLD_UTIL_CONFIG_SIZE_OR("auto", 0, 1, SIZE_MAX)},
    {"PIPELINE_DEPTH", "4",
     "Segments in flight per stream (scratch slots) in pipelined algorithms",
     FOLD_CONFIG_FIELD(pipeline_depth), FOLD_UTIL_CONFIG_LONG(1, LONG_MAX)},
    {"NUM_THREADS", "0",
     "OpenMP threads for the local reduction; 0 = cores of the node / ranks on it",
     FOLD_CONFIG_FIELD(num_threads), FOLD_UTIL_CONFIG_LONG(0, LONG_MAX)},
    {"STREAM", "auto",
     "Large calls write their results to the output buffer with non-temporal stores "
     "(whole cache lines, not read first, not kept in the caches) where the op has such "
     "a kernel (sum and prod, bitwise ops on integers; AVX2). auto: where fold_init "
     "measured a reduction from memory, or a loop of them beyond the L2, faster that way; "
     "on; off",
     FOLD_CONFIG_FIELD(stream), FOLD_UTIL_CONFIG_ENUM(stream_names)},
    {"STREAM_MIN", "auto",
     "Message size in bytes from which a call streams its results (FOLD_STREAM). auto: a "
     "core's L2 where fold_init found a loop of reductions over more than the L2 faster "
     "streamed, else the node's last-level cache (the cost model's cache_bytes) over the "
     "ranks on the node",
     FOLD_CONFIG_FIELD(stream_min), FOLD_UTIL_CONFIG_SIZE_OR("auto", 0, 1, SIZE_MAX)},
    {"THREAD_THRESHOLD", "256k",
     "Smallest local reduction (bytes) split across threads",
     FOLD_CONFIG_FIELD(thread_threshold), FOLD_UTIL_CONFIG_SIZE(0, SIZE_MAX)},
    {"OFI_PROVIDER", "",
     "libfabric provider of the ofi transport, e.g. 'tcp;ofi_rxm' or 'shm' (fold_info -t "
     "lists those found); empty = the first that offers reliable datagrams with tagged "
     "messages. The transport opens with it at fold_init; it cannot change later",
     FOLD_CONFIG_FIELD(ofi_provider), FOLD_UTIL_CONFIG_STRING},
    {"UCX_ERR_MODE", "peer",
     "Error handling of the ucp transport's endpoints: peer (a dead or unreachable peer "
     "fails the operations towards it at once with FOLD_ERR_PEER_FAILED; UCX then leaves "
     "out the transports that cannot tell, cross-memory attach among them) or none (UCX "
     "may use every transport, cma included; a dead peer is noticed by FOLD_TIMEOUT at best: "
     "UCX aborts the process when a cma transfer finds the peer gone). "
     "Read at fold_init",
     FOLD_CONFIG_FIELD(ucx_err_mode), FOLD_UTIL_CONFIG_ENUM(ucx_err_mode_names)},
    {"DPML_LEADERS", "auto",
     "Leaders per node of the dpml algorithms (at most the fewest ranks on a node); "
     "auto: the cost model's choice for the message size and shape",
     FOLD_CONFIG_FIELD(dpml_leaders), FOLD_UTIL_CONFIG_LONG_OR("auto", 0, 1, LONG_MAX)},
    {"SINGLE_COPY", "auto",
     "Single copy between the ranks of a node (cma: cross-memory attach, "
     "process_vm_readv): auto (where the kernel allows it, probed per communicator; the "
     "cost model weighs it against the segment with the rate fold_init measured) or off",
     FOLD_CONFIG_FIELD(single_copy), FOLD_UTIL_CONFIG_ENUM(off_auto_names)},
    {"HUGE_PAGES", "auto",
     "auto: before a call whose buffers the ranks of a node copy through the kernel "
     "(single copy, buffers outside fold memory), each rank backs the whole 2 MiB pages "
     "inside its buffers with huge pages (madvise MADV_COLLAPSE; the bytes stay) when a "
     "buffer is passed the second time: the kernel's copy of large buffers then runs up "
     "to 1.5x as fast. It stops after four buffers backed and not passed again. off: "
     "buffers are left as they are",
     FOLD_CONFIG_FIELD(huge_pages), FOLD_UTIL_CONFIG_ENUM(off_auto_names)},
    {"ADOPT", "auto",
     "auto: a buffer single copy moves between the ranks of a node moves its whole "
     "pages (heap or mmap; at least 256 KiB unless it starts and ends on pages) into "
     "fold memory at the same address the second time it is passed (its bytes copied into shared "
     "memory mapped over it), so that peers copy it at memcpy's speed, not the kernel's; "
     "where UCX's memory events (bistro hooks) report every release of memory, which "
     "makes those pages private again first, and a forked child gets private copies. "
     "off: buffers stay where they are",
     FOLD_CONFIG_FIELD(adopt), FOLD_UTIL_CONFIG_ENUM(off_auto_names)},
    {"WORLD_SETUP", "init",
     "When the world communicator prepares what its collectives need: its node state "
     "(topology, shared-memory segment, the probe of what two cores cost each other) and "
     "the cost model's decision for every size class up to 64 MiB, each rank deciding a "
     "share. init: in fold_init, so that the first call of each size costs what later ones "
     "do; lazy: at the first call that needs each. Other communicators are lazy. Read at "
     "fold_init",
     FOLD_CONFIG_FIELD(world_setup), FOLD_UTIL_CONFIG_ENUM(world_setup_names)},
    {"SHM_SIZE", "4M",
     "Data bytes of the node shared-memory segment of each communicator (dpml), at most: "
     "a segment gets less where /dev/shm has less to give (FOLD_SHM_RESERVE); larger "
     "messages pass through it in chunks",
     FOLD_CONFIG_FIELD(shm_size), FOLD_UTIL_CONFIG_SIZE(4096, (size_t)1 << 40)},
    {"SHM_RESERVE", "auto",
     "Bytes of /dev/shm that node segments leave free for others (UCX's and the MPI "
     "library's shared memory, other jobs); auto: an eighth of the tmpfs. A communicator "
     "whose segment does not fit beyond it runs the node-unaware algorithms",
     FOLD_CONFIG_FIELD(shm_reserve),
     FOLD_UTIL_CONFIG_SIZE_OR("auto", SIZE_MAX, 0, (size_t)1 << 50)},
    {"CODEC", "auto",
     "Sparse codecs for allreduce/reduce messages (sum; bor/bxor/lor on integers): auto "
     "(each send picks bits, idx, rle or dense by size), none, bits, idx, rle",
     FOLD_CONFIG_FIELD(codec_mask), {read_codec, NULL, sizeof(int)}},
    {"TUNE_FILE", "auto",
     "Tuning file written by fold_tune (rules, cost-model parameters, where fold beat "
     "the MPI library); auto: " FOLD_TUNE_DEFAULT_FILE " when it exists; none",
     FOLD_CONFIG_FIELD(tune_file), FOLD_UTIL_CONFIG_STRING},
    {"MODEL", "",
     "Cost-model parameters over the tuning file's, name=value,... (fold_info -m lists "
     "them with their values); beginning with the word generic (generic,name=value,...) "
     "over the generic defaults alone, so that the same setting decides alike on every "
     "machine",
     FOLD_CONFIG_FIELD(model), FOLD_UTIL_CONFIG_STRING},
    {"MEASURED", "",
     "Cost-model parameters taken as fold_init's measurement of the node, over what it "
     "measured, name=value,... as FOLD_MODEL (the tuning file's and FOLD_MODEL's still "
     "come after): the decisions another machine's calibration would make (a Zen 5 "
     "node: l2_bytes=1M,cache_bytes=32M)",
     FOLD_CONFIG_FIELD(measured), FOLD_UTIL_CONFIG_STRING},
    {"RANK_MAP", "auto",
     "How communicators store their ranks (Kumar et al.): auto (arithmetic progressions "
     "always, sub-rectangles of the 2/3/4-D world grids and unions of a few strided "
     "pieces from 1024 ranks, else a table), compressed (every pattern found, at any "
     "size) or table (one int per rank, the dense reference). Read when a communicator "
     "is created",
     FOLD_CONFIG_FIELD(rank_map), FOLD_UTIL_CONFIG_ENUM(fold_rankmap_mode_names)},
    {"RANK_CACHE", "auto",
     "Translation cache in front of a compressed rank map's mapping function: auto "
     "(assoc where the function divides, none for a progression), none, linear (the "
     "last 16 translations) or assoc (128 sets x 8 ways), in front of every compressed "
     "map. Hits and misses are logged at debug level when a communicator is freed",
     FOLD_CONFIG_FIELD(rank_cache), FOLD_UTIL_CONFIG_ENUM(fold_rankcache_names)},
    {"ONLINE", "8",
     "N: where the cost model's pick for a blocking allreduce or reduce above 2 KiB has "
     "rivals it predicts within 2x (at most 3; trials predicted at 20 ms beyond the pick's "
     "time and 64 ms to run at most, in 6 calls each where N would take longer), the "
     "calls with the same arguments try each for N calls once they have paid for it "
     "(FOLD_ONLINE_SHARE), the ranks agree on "
     "the fastest (the slowest rank's median, the first call of each left out) and it "
     "serves those calls from then on: the model cannot see whether inputs are still in "
     "another core's cache. 0: the model's pick always",
     FOLD_CONFIG_FIELD(online), FOLD_UTIL_CONFIG_LONG(0, 16)},
    {"ONLINE_SHARE", "5",
     "P: online trials begin once the calls with the same arguments have taken (by the "
     "model's prediction of its pick) enough that the trials' predicted cost is at most "
     "P% of it: their calls' excess over the pick's, and a fixed cost per candidate for "
     "its first use, the rivals' evaluation and the agreement. A loop too short to pay "
     "for its trials runs the model's pick alone. 0: trials from the first call",
     FOLD_CONFIG_FIELD(online_share), FOLD_UTIL_CONFIG_LONG(0, 100)},
    {"TRACE", "0",
     "N: log the step timeline of the N-th allreduce or reduce this process runs "
     "through a schedule (not the tiny-message path) when it finishes, whatever the "
     "log level: each step's start and end in us beside the cost model's predicted "
     "end; 0: none",
     FOLD_CONFIG_FIELD(trace), FOLD_UTIL_CONFIG_LONG(0, LONG_MAX)},
};

const fold_util_config_table_t fold_config_table = {
    "fold runtime", "FOLD_", config_fields, sizeof(config_fields) / sizeof(config_fields[0])
};

int fold_config_index(const char *name)
{
    return fold_util_config_find(&fold_config_table, name);
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
    char why[512];
    int status = fold_util_config_set(&fold_config_table, cfg, cfg->values, idx, value, why,
                                      sizeof(why));
    if (status != FOLD_OK) {
        fold_error("%s", why);
    }
    return status;
}

/* The defaults; *why says what failed. */
static int config_init(fold_config_t *cfg, char *why, size_t whylen)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->values = calloc(fold_config_table.count, sizeof(char *));
    if (cfg->values == NULL) {
        snprintf(why, whylen, "out of memory for the configuration");
        return FOLD_ERR_NO_MEMORY;
    }
    return fold_util_config_init(&fold_config_table, cfg, cfg->values, why, whylen);
}

int fold_config_defaults(fold_config_t *cfg)
{
    char why[512];
    int status = config_init(cfg, why, sizeof(why));
    if (status != FOLD_OK) {
        fold_error("%s", why);
        fold_config_release(cfg);
    }
    return status;
}

int fold_config_load(fold_config_t *cfg)
{
    char why[512];
    int status = config_init(cfg, why, sizeof(why));
    for (size_t i = 0; status == FOLD_OK && i < fold_config_table.count; i++) {
        const char *env = fold_util_config_getenv(&fold_config_table, (int)i);
        if (env != NULL) {
            status = fold_util_config_set(&fold_config_table, cfg, cfg->values, (int)i, env,
                                          why, sizeof(why));
        }
    }
    if (status != FOLD_OK) {
        fold_error("%s", why);
        fold_config_release(cfg);
    }
    return status;
}

void fold_config_release(fold_config_t *cfg)
{
    if (cfg->values != NULL) {
        fold_util_config_release(&fold_config_table, cfg->values);
        free(cfg->values);
        cfg->values = NULL;
    }
}
