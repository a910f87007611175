/*
 * Algorithm selection: the rule language (select_rules.c), the tuning file
 * (tune_file.c) and the decision (select.c).
 *
 * A rule (UCC style) is coll:size-range[:term]...:alg[,alg...], rules joined by '#'.
 * Terms, in any order, each a range "lo-hi" (hi may be "inf"):
 *   pA-B     ranks of the communicator
 *   nA-B     nodes it spans
 *   ppnA-B   ranks on its most populated node
 * One algorithm fixes the choice; a list lets the cost model pick among them.
 * An algorithm may carry its pipeline segment size, alg@SIZE; without one a
 * node-aware algorithm's segment is the model's pick (FOLD_SEGMENT_SIZE auto).
 *   allreduce:0-4k:recursive_doubling
 *   allreduce:64k-inf:n1-1:ppn2-inf:dpml
 *   reduce:0-inf:ppn2-inf:shm_flat,dpml,dpml_pipelined
 *   reduce:64k-256k:n1-1:ppn2-2:shm_flat@32k
 */
#ifndef FOLD_SELECT_H
#define FOLD_SELECT_H

#include <fold/fold.h>

#include "alg.h"
#include "model.h"
#include "node/topo.h"

#include <stddef.h>
#include <stdint.h>

#define FOLD_RULE_MAX_ALGS 8

/* What selection knows about a communicator without talking to anyone. */
typedef struct fold_shape {
    int size;       /* ranks */
    int nnodes;
    int min_ppn;    /* ranks on the least and the most populated node */
    int max_ppn;
} fold_shape_t;

typedef struct fold_range {
    long lo, hi;    /* [lo, hi], hi = LONG_MAX for "inf" */
} fold_range_t;

typedef struct fold_tune_rule {
    fold_coll_t       coll;
    size_t            min_bytes, max_bytes;   /* [min, max); max SIZE_MAX = inf */
    fold_range_t      ranks, nodes, ppn;
    const fold_alg_t *algs[FOLD_RULE_MAX_ALGS];
    size_t            segs[FOLD_RULE_MAX_ALGS];   /* alg@SIZE's bytes; 0: none given */
    int               nalgs;
} fold_tune_rule_t;

typedef struct fold_tune {
    fold_tune_rule_t *rules;
    int               nrules;
} fold_tune_t;

/* Parses '#'-joined rules; logs what is wrong and returns FOLD_ERR_INVALID_ARG or
 * FOLD_ERR_NOT_FOUND (unknown algorithm) on a bad rule, leaving *tune unchanged. */
int  fold_tune_parse(const char *text, fold_tune_t *tune);
/* A rule whose last field is not algorithms (the tuning file's serve lines): parses
 * the rest and points *last at that field. Modifies text. */
int  fold_tune_parse_where(char *text, fold_tune_rule_t *rule, char **last);
/* Appends the rules of src to dst (a copy). */
int  fold_tune_append(fold_tune_t *dst, const fold_tune_t *src);
void fold_tune_release(fold_tune_t *tune);
/* Writes one rule back in the rule language. */
void fold_tune_rule_format(const fold_tune_rule_t *r, char *buf, size_t len);

int fold_tune_rule_matches(const fold_tune_rule_t *r, fold_coll_t coll, size_t bytes,
                           const fold_shape_t *shape);
/* The first rule for coll that matches bytes and shape and has an algorithm
 * without any of skip_flags; NULL if none. */
const fold_tune_rule_t *fold_tune_match(const fold_tune_t *tune, fold_coll_t coll,
                                        size_t bytes, const fold_shape_t *shape,
                                        unsigned skip_flags);

/* The built-in rules: which family of algorithms serves which shape (the cost model
 * picks within it). */
extern const char fold_default_tune[];
const fold_tune_t *fold_default_rules(void);

/* What a call runs: the algorithm and, for a node-aware one, its leaders per node
 * and the flat algorithm between nodes (0 / NULL: not chosen, fold_coll_plan
 * falls back on its own), its pipeline segment, and whether a blocking call may
 * take the node's tiny-message path instead of the schedule. */
typedef struct fold_choice {
    const fold_alg_t *alg;
    int               leaders;
    const fold_alg_t *inter;
    int               root_weight;   /* fold_coll_args_t's, chosen by the model */
    int               fast;          /* shm_flat up to the tiny limit: a blocking call
                                        takes the node's tiny-message path */
    size_t            seg_bytes;     /* 0: FOLD_SEGMENT_SIZE, or the default */
    int               memory;        /* 1: chosen for buffers in fold memory on every
                                        rank, where that changed the algorithm
                                        (fold_select_placed); else 0 */
} fold_choice_t;

/* The cost model's decisions of one communicator, per collective and power-of-two
 * size class, with the candidates they were made among. */
#define FOLD_SELECT_CLASSES          48
#define FOLD_SELECT_MAX_LEADER_TRIES 12
typedef struct fold_select_entry {
    int               valid;
    int               nalgs;
    const fold_alg_t *algs[FOLD_RULE_MAX_ALGS];
    size_t            segs[FOLD_RULE_MAX_ALGS];   /* the rule's alg@SIZE, 0: free */
    fold_choice_t     choice;
    double            us;        /* its predicted time */
    int               adopt_passes;   /* fold_select_adopt_passes', -1 never; 0: not
                                         asked yet */
} fold_select_entry_t;

/* The last call's decision per collective: a loop of identical calls selects once. */
typedef struct fold_select_memo {
    int           valid;
    size_t        count;
    int           dtype;
    int           op;
    fold_choice_t choice;
} fold_select_memo_t;

typedef struct fold_select_memo_table fold_select_memo_table_t;   /* select.c */

typedef struct fold_select_cache {
    fold_topo_t        *topo;        /* the communicator's nodes, for the model */
    fold_topo_t        *inter_topo;  /* one rank per node: the leaders' exchange */
    struct fold_select_fewer *fewer; /* the ranks of the first nodes of topo or
                                        inter_topo: the shapes a schedule too long to
                                        replay on them is replayed on (select.c) */
    uint64_t            shape_hash;  /* of topo's node placement, for shared decisions */
    fold_select_entry_t entry[2][FOLD_SELECT_CLASSES];   /* allreduce, reduce */
    int8_t              advice[2][FOLD_SELECT_CLASSES];  /* fold_serve_advice: 0 or 1,
                                                            -1 not known yet */
    fold_select_memo_t  last[2];                         /* allreduce, reduce */
    /* The same for buffers in fold memory, allocated at the first such call. */
    fold_select_entry_t (*mapped_entry)[FOLD_SELECT_CLASSES];
    fold_select_memo_t  last_mapped[2];
    fold_select_memo_table_t *memo;                      /* the model's answers */
    fold_model_space_t *space;       /* the model's memory during one decision */
    int                 space_users;
} fold_select_cache_t;

/*
 * The tuning file (FOLD_TUNE_FILE, written by fold_tune): one item per line,
 *   rule  <rule>              selection rules, tried after FOLD_TUNE
 *   param <name> <value>      cost-model parameters (model.h)
 *   serve <coll>:<size-range>[:terms]:fold|mpi
 *                             where fold beat the MPI library (the MPI shim serves
 *                             those calls, hands the others to MPI)
 * '#' starts a comment. "auto" reads FOLD_TUNE_DEFAULT_FILE when it exists;
 * "none" or "" reads nothing.
 */
typedef struct fold_serve_rule {
    fold_tune_rule_t where;      /* coll, sizes and shape terms; no algorithms */
    int              fold;       /* 1: fold serves, 0: the MPI library does */
} fold_serve_rule_t;

typedef struct fold_tune_file {
    char              *path;     /* the file read, or NULL */
    char              *source;   /* "tuning file <path>", for fold_serve_advice */
    fold_tune_t        rules;
    fold_serve_rule_t *serve;
    int                nserve;
    char              *params;   /* its param lines as "name=value,..." */
} fold_tune_file_t;

int  fold_tune_file_load(const char *setting, fold_tune_file_t *file);
/* The text of a tuning file, len bytes (need not end in '\0'); a bad line is logged
 * as origin:line and fails the whole text, leaving *file unchanged. path and source
 * stay NULL. */
int  fold_tune_file_parse(const char *text, size_t len, const char *origin,
                          fold_tune_file_t *file);
void fold_tune_file_release(fold_tune_file_t *file);
/* The file's serve rule for this call, or NULL. */
const fold_serve_rule_t *fold_tune_file_serve(const fold_tune_file_t *file, fold_coll_t coll,
                                              size_t bytes, const fold_shape_t *shape);

/* Model parameters: the defaults, then what fold_init measured, then the file's,
 * then FOLD_MODEL (each "name=value,..." or NULL). */
int fold_model_configure(const char *measured, const char *file_params, const char *env,
                         fold_model_params_t *p);

/* Shape of `size` ranks placed on nodes by node_of[r] (any non-negative keys). */
void fold_shape_of(int size, const int *node_of, int max_node, fold_shape_t *shape);

/* ---- select.c ---------------------------------------------------------------- */

typedef struct fold_context fold_context_t;
typedef struct fold_comm    fold_comm_t;

/* Chooses the algorithm of a call and, for node-aware ones, the leaders per node and
 * the flat algorithm between nodes; the same on every rank of comm. */
int fold_select(fold_comm_t *comm, fold_coll_t coll, size_t count, fold_dtype_t dtype,
                fold_op_t op, fold_choice_t *choice);
/*
 * fold_select for a call on this rank's buffers in and out (out NULL: it gets no
 * result): on one node that maps fold memory (single copy), buffers every rank has
 * there let single copy go at memcpy's speed, which the model prices
 * (fold_model_mapped) and may choose. Where that choice's algorithm differs from the
 * ordinary one's, this rank takes it if its buffers are in fold memory, and
 * choice->memory = 1: the calls' fingerprints then carry it, so ranks whose buffers
 * lie apart fail with FOLD_ERR_MISMATCH instead of running different schedules.
 * Ranks whose buffers are not in fold memory pay one atomic load for it.
 */
int fold_select_placed(fold_comm_t *comm, fold_coll_t coll, size_t count, fold_dtype_t dtype,
                       fold_op_t op, const void *in, const void *out, fold_choice_t *choice);
/* fold_select (*heap) and, where the buffers' placement changes the algorithm
 * (*differ 1), the choice for buffers in fold memory on every rank (*mapped, memory
 * 1): the same on every rank, so that the ranks of a blocking call can agree on one
 * (coll_api.c) instead of failing apart. */
int fold_select_both(fold_comm_t *comm, fold_coll_t coll, size_t count, fold_dtype_t dtype,
                     fold_op_t op, fold_choice_t *heap, fold_choice_t *mapped, int *differ);
/* Whether this rank's buffers of a call lie in fold memory, or will once single copy
 * passes them (adopted buffers, mem.h: at the pass adopt_passes, over adopt_steps
 * calls), on a node that maps them. */
int fold_select_mappable(const fold_comm_t *comm, const void *in, const void *out,
                         size_t bytes, int adopt_passes, int adopt_steps);
/* The pass of a call's buffers at which adopting them has paid for itself (ski
 * rental): ceil(cost / gain) + 1, at least 2, where the cost is moving IN and OUT into
 * fold memory (2 x bytes at adopt_gbs) and the gain what a call in fold memory saves by
 * the model's predictions of its choices on the heap and in fold memory, for the
 * call's size class; 0 (never) where that saves nothing or the node cannot map
 * buffers. The same on every rank. */
int fold_select_adopt_passes(fold_comm_t *comm, fold_coll_t coll, size_t count,
                             fold_dtype_t dtype, fold_op_t op);
/* Ski rental's break-even: the pass at which calls that each lose gain_us on the heap
 * have lost cost_us, the price of moving into fold memory (the first pass is only
 * counted): ceil(cost / gain) + 1, at least 2; 0 (never) where nothing is gained or
 * the pass would be FOLD_SELECT_ADOPT_MAX_PASSES or later. */
#define FOLD_SELECT_ADOPT_MAX_PASSES 1000000
int fold_select_break_even_passes(double gain_us, double cost_us);
/* The calls an adoption of a call's buffers is spread over, so that none spends on it
 * more than the model predicts the call itself takes on the heap: one stall of many
 * calls' length is every rank's stall on a large job, and a solver's or a benchmark's
 * loop sees it as a spike. The same on every rank (the heap choice's prediction and
 * the calibration's adopt_gbs); 1 where the model did not decide. */
int fold_select_adopt_steps(fold_comm_t *comm, fold_coll_t coll, size_t count,
                            fold_dtype_t dtype);
/* ... for a call predicted at call_us and an adoption costing cost_us: ceil(cost /
 * call), 1 to FOLD_SELECT_ADOPT_MAX_STEPS. */
#define FOLD_SELECT_ADOPT_MAX_STEPS 64
int fold_select_adopt_steps_for(double call_us, double cost_us);
/* Whether a blocking call asks what the last call of its collective asked (count,
 * datatype, op: the memo of fold_select) and that went to the node's tiny-message
 * path, which neither the buffers' placement nor online trials change: the call needs
 * no selection (fold_coll_tiny_ready, fold_exec_tiny). The selection, the online
 * check and the plan would otherwise be a third of a loop of 8 B reduces' time. */
struct fold_call;
int fold_select_repeats_tiny(const fold_comm_t *comm, const struct fold_call *call);
/* The choice for buffers in fold memory on every rank, were the node able to map them
 * (tools: a virtual communicator has no node). */
int fold_select_in_fold_memory(fold_comm_t *comm, fold_coll_t coll, size_t count,
                               fold_dtype_t dtype, fold_op_t op, fold_choice_t *choice);
/* Re-reads FOLD_TUNE, FOLD_TUNE_FILE, FOLD_MODEL and FOLD_*_ALG from ctx->config. */
int  fold_select_configure(fold_context_t *ctx);
void fold_select_cache_clear(fold_comm_t *comm);
/* Internals shared with select_advice.c: */
const fold_tune_rule_t *fold_select_find_rule(const fold_context_t *ctx, fold_coll_t coll,
                                              size_t bytes, const fold_shape_t *shape,
                                              unsigned skip_flags);
int    fold_select_class(size_t bytes);              /* power-of-two size class */
/* Blocking shm_flat calls of fewer bytes take the node's tiny-message path on this
 * communicator (one node, node/fast.c), 0 where none; a power of two, so a size class
 * lies wholly below it or not at all. */
size_t fold_select_tiny_limit(const struct fold_comm *comm);
int    fold_select_topos(fold_comm_t *comm);         /* the model's view of comm */
/* The predicted time of `bytes` with choice's algorithm, leaders, flat algorithm between
 * nodes and root weight. */
double fold_select_predict(fold_comm_t *comm, const fold_topo_t *topo, fold_coll_t coll,
                           const fold_choice_t *choice, size_t bytes);
/* The best flat algorithm's predicted time on comm: what an MPI library would run
 * (select_advice.c). */
double fold_select_flat_us(fold_comm_t *comm, fold_coll_t coll, size_t bytes);
/* alg's predicted time on comm, with its best leaders and segment size for a
 * node-aware one. */
double fold_select_evaluate(fold_comm_t *comm, fold_coll_t coll, const fold_alg_t *alg,
                            size_t bytes, fold_choice_t *choice);
/* The same for buffers in fold memory on every rank (fold_model_mapped). */
double fold_select_evaluate_mapped(fold_comm_t *comm, fold_coll_t coll, const fold_alg_t *alg,
                                   size_t bytes, fold_choice_t *choice);
/* Blocking calls of at least this many bytes agree on their buffers' placement
 * (coll_api.c): a call of 1 MiB moves at least 2 MiB through each rank's memory, tens
 * of microseconds anywhere, and the agreement takes one tiny allreduce, a few percent
 * of that. */
#define FOLD_SELECT_AGREE_MIN_BYTES ((size_t)1 << 20)
/* The same where it is below bound; otherwise any value >= bound, found sooner
 * (the replays stop once they reach it), with *choice one of alg's configurations.
 * seg_bytes nonzero fixes the segment (a rule's alg@SIZE). */
double fold_select_evaluate_below(fold_comm_t *comm, fold_coll_t coll, const fold_alg_t *alg,
                                  size_t seg_bytes, size_t bytes, double bound,
                                  fold_choice_t *choice);
/* The model's pick for a call (picked) first, then up to max - 1 other algorithms the
 * rules offer it whose best configuration the model predicts below spread times the
 * pick's, and a single-copy pick's own algorithm in smaller chunks, fastest first,
 * with their predictions in alt_us; returns how many (0 where the model has no say).
 * The same on every rank (select_online.h). */
/* The model's prediction for its pick of this collective's size class (heap buffers),
 * in us, where it has decided that class; else -1. No model evaluation. */
double fold_select_class_us(const fold_comm_t *comm, fold_coll_t coll, size_t bytes);
int  fold_select_alternatives(fold_comm_t *comm, fold_coll_t coll, size_t count,
                              fold_dtype_t dtype, fold_op_t op, const fold_choice_t *picked,
                              double spread, fold_choice_t *alts, double *alt_us, int max);
void fold_select_cache_free(fold_comm_t *comm);
/* Tests only: nonzero makes selection ask the model as it did before its fast
 * paths (every candidate replayed to the end with fold_model_predict, nothing
 * remembered, no decision shared between communicators), the reference the fast
 * paths must agree with bit for bit. */
extern int fold_select_reference;
/* Communicators of more ranks than this, on nodes of equal size with ranks in blocks,
 * are priced by the model's closed forms (model_closed.h) instead of its replay;
 * FOLD_SELECT_CLOSED_RANKS by default, which tests move to price a shape either way. */
#define FOLD_SELECT_CLOSED_RANKS 32
extern int fold_select_closed_ranks;
/* Around a series of predictions: the model keeps its working memory from the
 * first enter to the matching last leave (nested pairs are fine). */
void fold_select_space_enter(fold_comm_t *comm);
void fold_select_space_leave(fold_comm_t *comm);
/* A decision another rank made for comm (select_warm.c): into comm's cache and the
 * process's shared one; mapped: the one for buffers in fold memory. */
void fold_select_entry_install(fold_comm_t *comm, fold_coll_t coll, int k,
                               const fold_select_entry_t *entry, int mapped);
/* fold_serve_advice's model answer for size class k (select_advice.c): 0 or 1, cached
 * in comm. */
int  fold_select_advice_class(fold_comm_t *comm, fold_coll_t coll, int k);
/* Every decision of comm for the size classes up to FOLD_SELECT_WARM_BYTES, made
 * before the first call: each rank computes a share and `allgather` (collective over
 * comm, fold_node_allgather_fn's signature) gives everyone all of them (select_warm.c). */
#define FOLD_SELECT_WARM_CLASSES 27   /* 1 B to 64 MiB */
int  fold_select_warm(fold_comm_t *comm,
                      int (*allgather)(void *arg, const void *mine, void *all, size_t bytes),
                      void *arg);
/* Elements per pipeline segment for a call of `bytes`: seg_bytes (a choice's), else
 * FOLD_SEGMENT_SIZE, else the default; never so small that the message is cut into
 * more than FOLD_SELECT_MAX_SEGMENTS. */
#define FOLD_SELECT_MAX_SEGMENTS 1024
size_t fold_select_seg_count(const fold_context_t *ctx, size_t seg_bytes, size_t bytes,
                             size_t esize);
/* The segment sizes the model tries for a node-aware algorithm when neither
 * FOLD_SEGMENT_SIZE nor the rule fixes one, the default first. */
#define FOLD_SELECT_SEG_TRIES 3
extern const size_t fold_select_seg_tries[FOLD_SELECT_SEG_TRIES];
/* "shm_flat" or "shm_flat@32k": an algorithm name with an optional segment size;
 * *seg_bytes 0 without one. Returns FOLD_OK, FOLD_ERR_NOT_FOUND (no such
 * algorithm) or FOLD_ERR_INVALID_ARG (a bad size). */
int  fold_select_parse_alg(const char *text, const fold_alg_t **alg, size_t *seg_bytes);
/* "shm_flat" or "shm_flat@32k". */
void fold_select_format_alg(const fold_alg_t *alg, size_t seg_bytes, char *buf, size_t len);

#endif
