/*
 * Algorithm selection (select.h). In order:
 *   1. an algorithm forced by FOLD_ALLREDUCE_ALG / FOLD_REDUCE_ALG;
 *   2. the first matching rule of FOLD_TUNE, then of the tuning file, then of the
 *      built-in rules below;
 *   3. a rule with one algorithm decides; a rule with several lets the cost model
 *      (model.h) replay each candidate's schedules on the communicator's shape, or
 *      price them in closed form where it is large (model_closed.h), and take the
 *      fastest, with its leaders per node and, across nodes, the flat algorithm
 *      between leaders.
 * Non-commutative ops then go to an algorithm that keeps the rank order.
 *
 * Model decisions are made per power-of-two size class, once per communicator,
 * collective and class, from facts every rank shares (the shape from the launcher's
 * locality, the same parameters), so every rank decides the same.
 */
#include "comm.h"
#include "hash.h"
#include "log.h"
#include "mem.h"
#include "model_closed.h"
#include "select_online.h"
#include "codec/reduce_kernel.h"
#include "util/size.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/*
 * The families: node-aware algorithms wherever a node holds several ranks of the
 * communicator (shm_flat only within one node: across nodes it would be dpml), the
 * flat ones where every rank has a node to itself. Across nodes the flat ones are
 * candidates too, as in an MPI library (fold_select_flat_us): selection never runs
 * what its model predicts slower than an algorithm fold has. Nothing here depends on
 * a rank count or on a machine; the model picks within each family.
 */
const char fold_default_tune[] =
    "allreduce:0-inf:n1-1:ppn2-inf:shm_flat,dpml,dpml_pipelined,cma"
    "#allreduce:0-inf:n2-inf:ppn2-inf:dpml,dpml_pipelined,recursive_doubling,rabenseifner,ring"
    "#allreduce:0-inf:recursive_doubling,rabenseifner,ring"
    "#reduce:0-inf:n1-1:ppn2-inf:shm_flat,dpml,dpml_pipelined,cma"
    "#reduce:0-inf:n2-inf:ppn2-inf:dpml,dpml_pipelined,binomial,rabenseifner,ring,chain,"
    "bintree,greedy"
    "#reduce:0-inf:binomial,rabenseifner,ring,chain,bintree,greedy";

const fold_tune_t *fold_default_rules(void)
{
    static fold_tune_t rules;
    static int parsed;
    if (!__atomic_load_n(&parsed, __ATOMIC_ACQUIRE)) {
        static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
        pthread_mutex_lock(&lock);
        if (!parsed) {
            fold_tune_parse(fold_default_tune, &rules);
            __atomic_store_n(&parsed, 1, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&lock);
    }
    return &rules;
}

static int resolve_forced(const char *name, fold_coll_t coll, const fold_alg_t **alg,
                          size_t *seg_bytes)
{
    *alg       = NULL;
    *seg_bytes = 0;
    if (name == NULL || strcmp(name, "auto") == 0 || name[0] == '\0') {
        return FOLD_OK;
    }
    const fold_alg_t *a;
    int status = fold_select_parse_alg(name, &a, seg_bytes);
    if (status == FOLD_ERR_INVALID_ARG) {
        fold_error("'%s': the segment after '@' must be at least 16 bytes, %s", name,
                   FOLD_UTIL_SIZE_SYNTAX);
        return status;
    }
    if (status != FOLD_OK || fold_alg_builder(a, coll) == NULL) {
        fold_error("'%s' is not a%s %s algorithm (fold_info -a lists them)", name,
                   coll == FOLD_COLL_ALLREDUCE ? "n" : "", fold_coll_name(coll));
        return FOLD_ERR_NOT_FOUND;
    }
    *alg = a;
    return FOLD_OK;
}

int fold_select_configure(fold_context_t *ctx)
{
    const fold_alg_t *ar, *r;
    size_t ar_seg, r_seg;
    fold_tune_t tune = {NULL, 0};
    int status = resolve_forced(ctx->config.allreduce_alg, FOLD_COLL_ALLREDUCE, &ar, &ar_seg);
    if (status == FOLD_OK) {
        status = resolve_forced(ctx->config.reduce_alg, FOLD_COLL_REDUCE, &r, &r_seg);
    }
    if (status == FOLD_OK) {
        status = fold_tune_parse(ctx->config.tune, &tune);
    }
    if (status == FOLD_OK) {
        fold_tune_file_release(&ctx->file);
        status = fold_tune_file_load(ctx->config.tune_file, &ctx->file);
    }
    if (status == FOLD_OK) {
        status = fold_model_configure(ctx->measured, ctx->file.params, ctx->config.model,
                                      &ctx->model);
    }
    if (status != FOLD_OK) {
        fold_tune_release(&tune);
        return status;
    }
    fold_tune_release(&ctx->tune);
    ctx->tune                        = tune;
    ctx->forced[FOLD_COLL_ALLREDUCE]     = ar;
    ctx->forced[FOLD_COLL_REDUCE]        = r;
    ctx->forced_seg[FOLD_COLL_ALLREDUCE] = ar_seg;
    ctx->forced_seg[FOLD_COLL_REDUCE]    = r_seg;
    for (int i = 0; i < ctx->ncomms; i++) {
        fold_select_cache_clear(ctx->comms[i]);
    }
    return FOLD_OK;
}

/* The first rule of FOLD_TUNE, the tuning file or the defaults that matches. */
const fold_tune_rule_t *fold_select_find_rule(const fold_context_t *ctx, fold_coll_t coll,
                                         size_t bytes, const fold_shape_t *shape,
                                         unsigned skip_flags)
{
    const fold_tune_rule_t *r = fold_tune_match(&ctx->tune, coll, bytes, shape, skip_flags);
    if (r == NULL) {
        r = fold_tune_match(&ctx->file.rules, coll, bytes, shape, skip_flags);
    }
    if (r == NULL) {
        r = fold_tune_match(fold_default_rules(), coll, bytes, shape, skip_flags);
    }
    return r;
}

/* ---- segments --------------------------------------------------------------- */

/* The segment of a call whose choice, FOLD_SEGMENT_SIZE and rule leave it open. */
#define DEFAULT_SEGMENT_BYTES (128 * 1024)

/* What the model tries for a node-aware algorithm, the default first so that it
 * keeps ties. Small segments overlap a reduce's copy in with its root's fold and
 * pipeline the leaders' exchange across nodes; large ones pay fewer flag hops and
 * sends, which the model finds faster for multi-megabyte allreduces on many ranks a
 * node. */
const size_t fold_select_seg_tries[FOLD_SELECT_SEG_TRIES] = {DEFAULT_SEGMENT_BYTES,
                                                             32 * 1024, 512 * 1024};

/* Schedules grow with the number of segments (and their dependencies with its
 * square), so a message is cut into at most FOLD_SELECT_MAX_SEGMENTS however small
 * the segment. */
size_t fold_select_seg_count(const fold_context_t *ctx, size_t seg_bytes, size_t bytes,
                             size_t esize)
{
    size_t seg = seg_bytes               ? seg_bytes
               : ctx->config.segment_size ? ctx->config.segment_size
                                          : DEFAULT_SEGMENT_BYTES;
    seg /= esize;
    size_t count = bytes / esize;
    size_t floor = (count + FOLD_SELECT_MAX_SEGMENTS - 1) / FOLD_SELECT_MAX_SEGMENTS;
    seg = seg > floor ? seg : floor;
    return seg ? seg : 1;
}

/* ---- the model's choice ----------------------------------------------------- */

/* Size classes: [2^k, 2^(k+1)), decided at 2^k bytes of float32. */
#define MODEL_ESIZE 4

int fold_select_class(size_t bytes)
{
    int k = 0;
    while (k < FOLD_SELECT_CLASSES - 1 && (bytes >> (k + 1)) != 0) {
        k++;
    }
    return k;
}

int fold_select_topos(fold_comm_t *comm)
{
    fold_select_cache_t *c = &comm->select;
    if (c->topo != NULL) {
        return FOLD_OK;
    }
    const fold_context_t *ctx = comm->ctx;
    int n = comm->size, nn = comm->shape.nnodes;
    int *key = malloc((size_t)n * sizeof(int)), *pkg = malloc((size_t)n * sizeof(int));
    int status = FOLD_ERR_NO_MEMORY;
    if (key != NULL && pkg != NULL) {
        for (int r = 0; r < n; r++) {
            key[r] = fold_context_node_of(ctx, fold_comm_ctx_rank(comm, r));
            pkg[r] = -1;
        }
        status = fold_topo_build(n, key, pkg, &c->topo);
        for (int r = 0; r < nn && status == FOLD_OK; r++) {
            key[r] = r;
        }
        if (status == FOLD_OK) {
            status = fold_topo_build(nn, key, pkg, &c->inter_topo);
        }
        if (status == FOLD_OK) {
            c->shape_hash = fold_hash(FOLD_HASH_INIT, c->topo->node_of,
                                (size_t)n * sizeof(int));
        }
    }
    free(key);
    free(pkg);
    return status;
}

/* ---- the communicator's memo of predictions ------------------------------------ */

/*
 * The model is a pure function of its question, so each answer is kept per
 * communicator (until fold_select_cache_clear: the parameters or settings changed)
 * and a question asked again costs a lookup. Questions repeat a lot: a decision
 * and fold_serve_advice evaluate the same candidates, the best flat algorithm
 * between nodes is picked per leader count for each node-aware algorithm, and the
 * large size classes all extrapolate from the same two sizes. The key is the whole
 * question, compared field by field (not a hash of it), so an answer is never
 * another question's.
 */
typedef struct memo_key {
    const fold_topo_t *topo;
    const fold_alg_t  *alg;
    const fold_alg_t  *inter;
    int                what;    /* MEMO_TIME or MEMO_STEPS */
    int                pricing; /* PRICE_* bits: the parameters it was priced with */
    int                coll, leaders, root_weight, depth;
    size_t             count, seg_count, shm_count;
    double             ws_scale;
} memo_key_t;

/* Which parameters a replay takes: the context's, or derived from them. */
enum {
    PRICE_MAPPED = 1,   /* buffers in fold memory on every rank (fold_model_mapped) */
    PRICE_TINY   = 2    /* shm_flat's tiny-message path (fold_model_tiny) */
};

static int pricing_of(const fold_choice_t *choice)
{
    return (choice->memory ? PRICE_MAPPED : 0) | (choice->fast ? PRICE_TINY : 0);
}

enum {
    MEMO_TIME,    /* a replay: the model's time for count elements */
    MEMO_STEPS,   /* rank 0's steps */
    MEMO_SYMMETRY, /* node symmetry (steps: fold_model_symmetry's answer) */
    MEMO_EVAL     /* a node-aware algorithm's best configuration for count bytes */
};

typedef struct memo_entry {
    memo_key_t    key;
    double        us;      /* MEMO_TIME, MEMO_EVAL: the time, or (exact = 0) a lower
                              bound of it */
    size_t        steps;   /* MEMO_STEPS */
    fold_choice_t choice;  /* MEMO_EVAL, exact */
    int           exact;
    int           alike;   /* MEMO_TIME: the same under either PRICE_MAPPED (the
                              replay's kernel_free) */
    uint32_t      next;    /* chain of its hash bucket */
} memo_entry_t;

#define MEMO_BUCKETS 4096
#define MEMO_MAX     (1u << 18)
#define MEMO_NONE    UINT32_MAX

/* What the answers were found with, besides the key: tools and tests set the
 * parameters and settings directly, without fold_select_configure. */
typedef struct memo_basis {
    fold_model_params_t     model;
    size_t                  segment_size;
    long                    pipeline_depth, dpml_leaders;
    const fold_tune_rule_t *tune, *file;   /* the rules pick the flat algorithm */
    int                     ntune, nfile;  /* between nodes */
} memo_basis_t;

struct fold_select_memo_table {
    memo_basis_t  basis;
    uint32_t      bucket[MEMO_BUCKETS];
    memo_entry_t *entries;
    uint32_t      n, cap;
};

static void memo_free(fold_select_cache_t *c)
{
    if (c->memo != NULL) {
        free(c->memo->entries);
        free(c->memo);
        c->memo = NULL;
    }
}

static memo_key_t memo_key(const fold_topo_t *topo, const fold_model_query_t *q, int what,
                           int pricing)
{
    memo_key_t k;
    memset(&k, 0, sizeof(k));   /* padding too: keys compare with memcmp */
    k.topo        = topo;
    k.alg         = q->alg;
    k.inter       = q->proto.inter;
    k.what        = what;
    k.pricing     = pricing;
    k.coll        = (int)q->proto.coll;
    k.leaders     = q->proto.leaders;
    k.root_weight = q->proto.root_weight;
    k.depth       = q->proto.depth;
    k.count       = q->proto.count;
    k.seg_count   = q->proto.seg_count;
    k.shm_count   = q->proto.shm_count;
    k.ws_scale    = q->ws_scale;
    return k;
}

static uint32_t memo_bucket(const memo_key_t *k)
{
    return (uint32_t)(fold_hash(FOLD_HASH_INIT, k, sizeof(*k)) % MEMO_BUCKETS);
}

static void memo_basis_of(const fold_context_t *ctx, memo_basis_t *b)
{
    b->model          = ctx->model;
    b->segment_size   = ctx->config.segment_size;
    b->pipeline_depth = ctx->config.pipeline_depth;
    b->dpml_leaders   = ctx->config.dpml_leaders;
    b->tune           = ctx->tune.rules;
    b->ntune          = ctx->tune.nrules;
    b->file           = ctx->file.rules.rules;
    b->nfile          = ctx->file.rules.nrules;
}

static int memo_basis_same(const memo_basis_t *a, const memo_basis_t *b)
{
    return fold_model_equal(&a->model, &b->model) && a->segment_size == b->segment_size &&
           a->pipeline_depth == b->pipeline_depth && a->dpml_leaders == b->dpml_leaders &&
           a->tune == b->tune && a->ntune == b->ntune && a->file == b->file &&
           a->nfile == b->nfile;
}

/* The memo, emptied if its answers were found with other parameters or settings. */
static void memo_check(fold_comm_t *comm)
{
    memo_basis_t now;
    if (comm->select.memo != NULL) {
        memo_basis_of(comm->ctx, &now);
        if (!memo_basis_same(&now, &comm->select.memo->basis)) {
            memo_free(&comm->select);
        }
    }
}

static memo_entry_t *memo_find(fold_select_cache_t *c, const memo_key_t *k)
{
    if (c->memo == NULL) {
        return NULL;
    }
    for (uint32_t i = c->memo->bucket[memo_bucket(k)]; i != MEMO_NONE;
         i = c->memo->entries[i].next) {
        if (memcmp(&c->memo->entries[i].key, k, sizeof(*k)) == 0) {
            return &c->memo->entries[i];
        }
    }
    return NULL;
}

/* A new entry for k (not in the memo), or NULL when there is no room: the answer is
 * then simply not kept. */
static memo_entry_t *memo_add(fold_comm_t *comm, const memo_key_t *k)
{
    fold_select_cache_t *c = &comm->select;
    if (c->memo == NULL) {
        if ((c->memo = calloc(1, sizeof(*c->memo))) == NULL) {
            return NULL;
        }
        memset(c->memo->bucket, 0xff, sizeof(c->memo->bucket));   /* MEMO_NONE */
        memo_basis_of(comm->ctx, &c->memo->basis);
    }
    struct fold_select_memo_table *t = c->memo;
    if (t->n == t->cap) {
        uint32_t cap = t->cap ? 2 * t->cap : 256;
        memo_entry_t *e = cap <= MEMO_MAX ? realloc(t->entries, cap * sizeof(*e)) : NULL;
        if (e == NULL) {
            return NULL;
        }
        t->entries = e;
        t->cap     = cap;
    }
    uint32_t b = memo_bucket(k);
    memo_entry_t *e = &t->entries[t->n];
    *e = (memo_entry_t){.key = *k, .next = t->bucket[b]};
    t->bucket[b] = t->n++;
    return e;
}

int fold_select_reference;

/* The model's working memory lives as long as the outermost call that replays: a
 * decision reuses it over its tens of replays, and it is gone after. */
void fold_select_space_enter(fold_comm_t *comm)
{
    if (comm->select.space_users++ == 0 && comm->select.space == NULL) {
        comm->select.space = fold_model_space_new();   /* NULL: each its own */
    }
}

void fold_select_space_leave(fold_comm_t *comm)
{
    if (--comm->select.space_users == 0) {
        fold_model_space_free(comm->select.space);
        comm->select.space = NULL;
    }
}

/* Steps replayed per prediction, at most (about 0.03 s). Beyond, large messages are
 * predicted at a smaller size and extrapolated: every algorithm's time is linear in
 * the size once it is cut into many segments or chunks, which is what makes the
 * schedule long. */
#define MODEL_STEP_BUDGET  (64 * 1024)
#define MODEL_MIN_EXTRAP   (64 * 1024)
#define MODEL_STEP_LIMIT   (16 * MODEL_STEP_BUDGET)

/* Steps of rank 0's schedule: the replay costs about ranks x steps. */
static size_t rank0_steps(fold_comm_t *comm, const fold_topo_t *topo,
                          const fold_model_query_t *q)
{
    if (fold_select_reference) {
        return fold_model_rank_steps(topo, q, 0, NULL);
    }
    memo_key_t k = memo_key(topo, q, MEMO_STEPS, 0);
    memo_entry_t *e = memo_find(&comm->select, &k);
    if (e != NULL) {
        return e->steps;
    }
    size_t n = fold_model_rank_steps(topo, q, 0, comm->select.space);
    if ((e = memo_add(comm, &k)) != NULL) {
        e->steps = n;
        e->exact = 1;
    }
    return n;
}

/* The key of q's symmetry on topo: the schedules', whatever rates replay them. */
static memo_key_t symmetry_key(const fold_topo_t *topo, const fold_model_query_t *q)
{
    memo_key_t k = memo_key(topo, q, MEMO_SYMMETRY, 0);
    k.ws_scale = 0;
    return k;
}

/* The symmetry of q on topo (fold_model_symmetry), remembered. */
static int symmetry_of(fold_comm_t *comm, const fold_topo_t *topo, const fold_model_query_t *q)
{
    if (topo->nnodes < 2) {
        return FOLD_MODEL_SYM_NONE;
    }
    if (fold_select_reference) {
        return fold_model_symmetry(topo, q, NULL);
    }
    memo_key_t k = symmetry_key(topo, q);
    memo_entry_t *e = memo_find(&comm->select, &k);
    if (e != NULL) {
        return (int)e->steps;
    }
    int family = fold_model_symmetry(topo, q, comm->select.space);
    if ((e = memo_add(comm, &k)) != NULL) {
        e->steps = (size_t)family;
        e->exact = 1;
    }
    return family;
}

/* The ranks a replay of q on topo simulates: one node's where every node is its
 * image, else all. */
static size_t replay_ranks(fold_comm_t *comm, const fold_topo_t *topo,
                           const fold_model_query_t *q)
{
    return symmetry_of(comm, topo, q) != FOLD_MODEL_SYM_NONE ? (size_t)topo->min_ppn
                                                            : (size_t)topo->size;
}

/* Steps a replay of q on topo simulates, about: rank 0's times the ranks replayed
 * (*steps: rank 0's). Node symmetry is looked for only where it brings the replay
 * within MODEL_STEP_BUDGET, since looking builds node 0's schedules. */
static size_t replay_steps(fold_comm_t *comm, const fold_topo_t *topo,
                           const fold_model_query_t *q, size_t *steps)
{
    *steps = rank0_steps(comm, topo, q);
    const size_t all = *steps * (size_t)topo->size;
    if (all <= MODEL_STEP_BUDGET || *steps * (size_t)topo->min_ppn > MODEL_STEP_BUDGET) {
        return all;
    }
    return *steps * replay_ranks(comm, topo, q);
}

/* q's count and segment for `bytes` cut into seg_bytes: a segment no shorter than
 * the message is the message (one segment: one question, one answer). */
static void query_at(const fold_context_t *ctx, fold_model_query_t *q, size_t seg_bytes,
                     size_t bytes)
{
    q->proto.count     = bytes / MODEL_ESIZE ? bytes / MODEL_ESIZE : 1;
    q->proto.seg_count = fold_select_seg_count(ctx, seg_bytes, q->proto.count * MODEL_ESIZE,
                                               MODEL_ESIZE);
    if (q->proto.seg_count > q->proto.count) {
        q->proto.seg_count = q->proto.count;
    }
}

/* The parameters a prediction priced `pricing` takes: the context's, or derived from
 * them into derived[]. */
static const fold_model_params_t *priced_params(const fold_context_t *ctx, int pricing,
                                                fold_model_params_t derived[2])
{
    const fold_model_params_t *params = &ctx->model;
    if (pricing & PRICE_MAPPED) {
        fold_model_mapped(params, &derived[0]);
        params = &derived[0];
    }
    if (pricing & PRICE_TINY) {
        fold_model_tiny(params, &derived[1]);
        params = &derived[1];
    }
    return params;
}

/* The model's time for `bytes`, or, where that is at least cutoff, possibly only a
 * lower bound of it that is itself at least cutoff (*exact = 0). */
static double predict_at(fold_comm_t *comm, const fold_topo_t *topo, fold_model_query_t *q,
                         size_t seg_bytes, size_t bytes, int pricing, double cutoff, int *exact)
{
    const fold_context_t *ctx = comm->ctx;
    query_at(ctx, q, seg_bytes, bytes);
    fold_model_params_t derived[2];
    const fold_model_params_t *params = priced_params(ctx, pricing, derived);
    fold_model_result_t res;
    if (fold_select_reference) {
        *exact = 1;
        return fold_model_predict(params, topo, q, &res) == FOLD_OK ? res.time_us : INFINITY;
    }
    memo_key_t k = memo_key(topo, q, MEMO_TIME, pricing);
    memo_entry_t *e = memo_find(&comm->select, &k);
    if (e != NULL && (e->exact || e->us >= cutoff)) {
        *exact = e->exact;
        return e->us;
    }
    /* The same replay under the other mapping's prices, where those price nothing. */
    memo_key_t other = memo_key(topo, q, MEMO_TIME, pricing ^ PRICE_MAPPED);
    const memo_entry_t *twin = memo_find(&comm->select, &other);
    if (twin != NULL && twin->alike && (twin->exact || twin->us >= cutoff)) {
        *exact = twin->exact;
        return twin->us;
    }
    double us = INFINITY;
    *exact = 1;
    memo_key_t sk = symmetry_key(topo, q);
    const memo_entry_t *known = memo_find(&comm->select, &sk);
    q->symmetry = known != NULL ? (int)known->steps : FOLD_MODEL_SYM_UNKNOWN;
    int status = fold_model_predict_within(params, topo, q, cutoff, comm->select.space, &res);
    q->symmetry = FOLD_MODEL_SYM_UNKNOWN;
    if (status == FOLD_OK) {
        us     = res.time_us;
        *exact = !res.cut;
    }
    if (e != NULL || (e = memo_add(comm, &k)) != NULL) {
        e->us    = us;
        e->exact = *exact;
        e->alike = status == FOLD_OK && res.kernel_free;
    }
    return us;
}

/* The extrapolation from two predicted sizes (fold_select_predict). Non-decreasing
 * in t, as each of its floating-point operations is. */
static double extrapolate(double t, double half, size_t at, size_t bytes)
{
    double per_byte = (t - half) / (double)(at - at / 2);
    return t + per_byte * (double)(bytes - at);
}

/* The least time t that extrapolates to at least bound (extrapolate(t) >= bound
 * for every t at or above it), or INFINITY if none is found. */
static double extrapolation_cutoff(double bound, double half, size_t at, size_t bytes)
{
    if (!isfinite(bound) || !isfinite(half)) {
        return INFINITY;
    }
    double d = (double)(at - at / 2), e = (double)(bytes - at);
    double t = (bound + half * e / d) / (1 + e / d);
    if (!isfinite(t)) {
        return INFINITY;
    }
    /* Rounding may leave t a few units in the last place off either way. */
    for (int i = 0; i < 64 && extrapolate(t, half, at, bytes) >= bound; i++) {
        double lower = nextafter(t, -INFINITY);
        if (extrapolate(lower, half, at, bytes) < bound) {
            return t;
        }
        t = lower;
    }
    for (int i = 0; i < 64; i++) {
        if (extrapolate(t, half, at, bytes) >= bound) {
            return t;
        }
        t = nextafter(t, INFINITY);
    }
    return INFINITY;
}


size_t fold_select_tiny_limit(const fold_comm_t *comm)
{
    return comm->shape.nnodes == 1 && !comm->node_none ? fold_node_fast_limit(comm->size) : 0;
}

/* Whether a blocking call of ALG over BYTES may take the node's tiny-message path. */
static int takes_tiny_path(const fold_comm_t *comm, const fold_alg_t *alg, size_t bytes)
{
    return alg == &fold_alg_shm_flat && bytes <= fold_select_tiny_limit(comm);
}

/* Data bytes of the communicator's node segment: what its set-up agreed on, or
 * FOLD_SHM_SIZE before (and on virtual communicators, which have none). */
static size_t comm_shm_bytes(const fold_comm_t *comm)
{
    return comm->node != NULL ? comm->node->shm_bytes : comm->ctx->config.shm_size;
}

/* ---- shapes too large to replay ----------------------------------------------- */

/*
 * A schedule whose replay would take more than MODEL_STEP_LIMIT steps even at the
 * smallest size it extrapolates from (a ring over thousands of ranks, anything over
 * tens of thousands) is replayed on the ranks of the communicator's first nodes
 * instead, at three node counts (m / 4, m / 2 and m, the most nodes whose replay
 * takes at most MODEL_FEWER_STEPS), and its time is carried to the whole node count
 * by a + b log2(nodes) + c nodes through them: the latency rounds of trees and
 * recursive doubling grow with the logarithm, a ring's and a chain's with the nodes,
 * and what the nodes do within themselves not at all. b and c are never negative,
 * so the time never falls below the largest replay's.
 */
#define MODEL_FEWER_STEPS (MODEL_STEP_LIMIT / 4)
#define FEWER_SHAPES      64

typedef struct fewer_shape {
    const fold_topo_t *base;
    int                nnodes;
    fold_topo_t       *topo;
} fewer_shape_t;

struct fold_select_fewer {
    int           n;
    fewer_shape_t shape[FEWER_SHAPES];
};

static void fewer_free(fold_select_cache_t *c)
{
    for (int i = 0; c->fewer != NULL && i < c->fewer->n; i++) {
        fold_topo_free(c->fewer->shape[i].topo);
    }
    free(c->fewer);
    c->fewer = NULL;
}

/* The ranks of base's first nnodes nodes, in their order in base; NULL without
 * memory. Kept in the cache, so that the memo's answers about it stay valid. */
static const fold_topo_t *fewer_nodes(fold_comm_t *comm, const fold_topo_t *base, int nnodes)
{
    fold_select_cache_t *c = &comm->select;
    if (c->fewer == NULL && (c->fewer = calloc(1, sizeof(*c->fewer))) == NULL) {
        return NULL;
    }
    for (int i = 0; i < c->fewer->n; i++) {
        if (c->fewer->shape[i].base == base && c->fewer->shape[i].nnodes == nnodes) {
            return c->fewer->shape[i].topo;
        }
    }
    if (c->fewer->n == FEWER_SHAPES) {
        return NULL;
    }
    int n = base->node_first[nnodes];
    int *key = malloc((size_t)n * sizeof(int)), *pkg = malloc((size_t)n * sizeof(int));
    fold_topo_t *topo = NULL;
    if (key != NULL && pkg != NULL) {
        for (int r = 0, kept = 0; r < base->size; r++) {
            if (base->node_of[r] < nnodes) {
                pkg[kept]   = -1;
                key[kept++] = base->node_of[r];
            }
        }
        if (fold_topo_build(n, key, pkg, &topo) != FOLD_OK) {
            topo = NULL;
        }
    }
    free(key);
    free(pkg);
    if (topo != NULL) {
        c->fewer->shape[c->fewer->n++] = (fewer_shape_t){base, nnodes, topo};
    }
    return topo;
}

/* The time at `target` nodes of a + b log2(n) + c n through the npts points (n[i]
 * increasing), with b, c >= 0: three points fix both where that keeps them
 * non-negative; otherwise the last two fix one of them (the logarithm where the times
 * grow slower than the nodes, else the line). One point scales with the nodes. */
static double extend_to_nodes(const double *n, const double *t, int npts, double target)
{
    const double last_n = n[npts - 1], last_t = t[npts - 1];
    if (npts == 1) {
        return last_t * target / last_n;
    }
    double dn = last_n - n[npts - 2], dt = last_t - t[npts - 2];
    double dlog = log2(last_n / n[npts - 2]);
    double b = 0, c = dt > 0 ? dt / dn : 0;   /* two points: the line */
    if (npts == 3) {
        double l1 = log2(n[1] / n[0]), m1 = n[1] - n[0], d1 = t[1] - t[0];
        double det = l1 * dn - dlog * m1;
        double fb = (d1 * dn - dt * m1) / det, fc = (l1 * dt - dlog * d1) / det;
        if (fb >= 0 && fc >= 0) {
            b = fb;
            c = fc;
        } else if (fc < 0) {
            b = dt > 0 ? dt / dlog : 0;
            c = 0;
        }
    }
    double us = last_t + b * log2(target / last_n) + c * (target - last_n);
    return us > last_t ? us : last_t;
}

static double predict_below(fold_comm_t *comm, const fold_topo_t *topo, fold_coll_t coll,
                            const fold_choice_t *choice, size_t bytes, double bound);

/* The query of choice on topo; its count and segment are set per prediction. */
static fold_model_query_t query_of(const fold_comm_t *comm, const fold_topo_t *topo,
                                   fold_coll_t coll, const fold_choice_t *choice)
{
    return (fold_model_query_t){
        .alg   = choice->alg,
        .esize = MODEL_ESIZE,
        .proto = {.coll = coll, .size = topo->size, .root = 0,
                  .depth = (int)comm->ctx->config.pipeline_depth, .commutative = 1,
                  .leaders = choice->leaders, .shm_count = comm_shm_bytes(comm) / MODEL_ESIZE,
                  .inter = choice->inter, .root_weight = choice->root_weight},
    };
}

/* The size a replay of `bytes` is made at: bytes, or a smaller one it extrapolates
 * from, halved while rank 0's steps follow the size and the replay would exceed
 * MODEL_STEP_BUDGET steps (*steps: the replay's, about). */
static size_t replay_size(fold_comm_t *comm, const fold_topo_t *topo, fold_model_query_t *q,
                          size_t seg, size_t bytes, size_t *steps)
{
    const fold_context_t *ctx = comm->ctx;
    size_t at = bytes, rank0;
    query_at(ctx, q, seg, at);
    *steps = replay_steps(comm, topo, q, &rank0);
    while (at / 2 >= MODEL_MIN_EXTRAP && *steps > MODEL_STEP_BUDGET) {
        query_at(ctx, q, seg, at / 2);
        size_t fewer_rank0, fewer = replay_steps(comm, topo, q, &fewer_rank0);
        if (fewer_rank0 >= rank0) {
            break;   /* the step count no longer follows the size (latency-bound) */
        }
        at /= 2;
        rank0  = fewer_rank0;
        *steps = fewer;
    }
    return at;
}

/* Whether choice's replay of `bytes` on topo takes at most `limit` steps. */
static int replay_fits(fold_comm_t *comm, const fold_topo_t *topo, fold_coll_t coll,
                       const fold_choice_t *choice, size_t bytes, size_t limit)
{
    fold_model_query_t q = query_of(comm, topo, coll, choice);
    size_t steps;
    replay_size(comm, topo, &q, choice->seg_bytes, bytes, &steps);
    return steps <= limit;
}

/* choice's time on all of topo's nodes, from replays on its first nodes, or any value
 * >= bound where that is: the time is at least the largest replay's, which goes
 * first and stops at bound. */
static double predict_on_fewer_nodes(fold_comm_t *comm, const fold_topo_t *topo,
                                     fold_coll_t coll, const fold_choice_t *choice,
                                     size_t bytes, double bound)
{
    int m = topo->nnodes / 2;
    const fold_topo_t *at_m = NULL;
    for (; m >= 1; m /= 2) {
        at_m = fewer_nodes(comm, topo, m);
        if (at_m == NULL || replay_fits(comm, at_m, coll, choice, bytes, MODEL_FEWER_STEPS)) {
            break;
        }
    }
    if (m < 1 || at_m == NULL) {
        fold_debug("model: %s %s of %zu B on %d ranks: too long to replay even on one of "
                   "its nodes; not a candidate", choice->alg->name, fold_coll_name(coll),
                   bytes, topo->size);
        return INFINITY;
    }
    double largest = predict_below(comm, at_m, coll, choice, bytes, bound);
    if (largest >= bound || !isfinite(largest)) {
        return largest;
    }
    double n[3], t[3];
    int npts = 0;
    /* m / 4 and m / 2 (those of them at least 1, distinct and below m), then m. */
    const int smaller[2] = {m / 4, m / 2};
    for (int i = 0; i < 2; i++) {
        const int k = smaller[i];
        if (k < 1 || k >= m || (i == 1 && k == smaller[0])) {
            continue;
        }
        const fold_topo_t *fewer = fewer_nodes(comm, topo, k);
        if (fewer == NULL) {
            return INFINITY;
        }
        n[npts]   = k;
        t[npts++] = predict_below(comm, fewer, coll, choice, bytes, INFINITY);
    }
    n[npts]   = m;
    t[npts++] = largest;
    return extend_to_nodes(n, t, npts, topo->nnodes);
}

/* ---- shapes priced in closed form --------------------------------------------- */

/*
 * Above FOLD_SELECT_CLOSED_RANKS a replay of one question takes milliseconds (a
 * node of 64 ranks replays 64 schedules even where every node is alike; a reduce
 * replays every rank), and a decision asks a hundred: the closed forms answer the
 * same question in microseconds, within a few tens of percent of the replay where
 * both run (test_model_closed). Algorithms without a form are left out there. The
 * replay keeps the small shapes, where it is checked against measurements.
 */
int fold_select_closed_ranks = FOLD_SELECT_CLOSED_RANKS;

static int closed_prices(const fold_topo_t *topo)
{
    return topo->size > fold_select_closed_ranks;
}

static double predict_closed(fold_comm_t *comm, const fold_topo_t *topo, fold_model_query_t *q,
                             size_t seg_bytes, size_t bytes, int pricing)
{
    query_at(comm->ctx, q, seg_bytes, bytes);
    fold_model_params_t derived[2];
    const fold_model_params_t *params = priced_params(comm->ctx, pricing, derived);
    fold_model_result_t res;
    int status = fold_model_closed(params, topo, q, &res);
    if (status != FOLD_OK) {
        fold_debug("model: %s %s of %zu B on %d ranks: %s; not a candidate", q->alg->name,
                   fold_coll_name(q->proto.coll), bytes, topo->size,
                   status == FOLD_ERR_UNSUPPORTED ? "no closed form" : "does not fit");
        return INFINITY;
    }
    return res.time_us;
}

/* fold_select_predict, or any value >= bound where the prediction is >= bound. */
static double predict_below(fold_comm_t *comm, const fold_topo_t *topo, fold_coll_t coll,
                            const fold_choice_t *choice, size_t bytes, double bound)
{
    memo_check(comm);
    if (fold_select_reference) {
        bound = INFINITY;
    }
    fold_model_query_t q = query_of(comm, topo, coll, choice);
    size_t steps, seg = choice->seg_bytes;
    if (closed_prices(topo)) {
        return predict_closed(comm, topo, &q, seg, bytes, pricing_of(choice));
    }
    size_t at = replay_size(comm, topo, &q, seg, bytes, &steps);
    if (steps > MODEL_STEP_LIMIT) {
        return predict_on_fewer_nodes(comm, topo, coll, choice, bytes, bound);
    }
    int exact;
    if (at == bytes) {
        return predict_at(comm, topo, &q, seg, at, pricing_of(choice), bound, &exact);
    }
    /* The smaller size first: it bounds where the larger may stop. A lower bound of
     * t extrapolates to a lower bound of the result, the extrapolation being
     * non-decreasing in t. */
    /* Both at the rates of the call's own working set (fold_model_query_t). */
    q.ws_scale = (double)bytes / (double)(at / 2);
    double half = predict_at(comm, topo, &q, seg, at / 2, pricing_of(choice), INFINITY,
                             &exact);
    q.ws_scale = (double)bytes / (double)at;
    double t = predict_at(comm, topo, &q, seg, at, pricing_of(choice),
                          extrapolation_cutoff(bound, half, at, bytes), &exact);
    return extrapolate(t, half, at, bytes);
}

double fold_select_predict(fold_comm_t *comm, const fold_topo_t *topo, fold_coll_t coll,
                           const fold_choice_t *choice, size_t bytes)
{
    fold_select_space_enter(comm);
    double us = predict_below(comm, topo, coll, choice, bytes, INFINITY);
    fold_select_space_leave(comm);
    return us;
}

/* The fastest flat algorithm between the leaders of nnodes nodes for part_bytes, cut
 * into the node-aware algorithm's segments (seg_bytes). */
static const fold_alg_t *pick_inter(fold_comm_t *comm, fold_coll_t coll, size_t part_bytes,
                                    size_t seg_bytes)
{
    int nn = comm->shape.nnodes;
    fold_shape_t shape = {nn, nn, 1, 1};
    const fold_tune_rule_t *rule = fold_select_find_rule(comm->ctx, coll, part_bytes, &shape,
                                             FOLD_ALG_NODE_AWARE);
    const fold_alg_t *best = coll == FOLD_COLL_ALLREDUCE ? &fold_alg_recursive_doubling
                                                         : &fold_alg_binomial;
    if (rule == NULL) {
        return best;
    }
    double best_us = INFINITY;
    for (int a = 0; a < rule->nalgs; a++) {
        const fold_alg_t *alg = rule->algs[a];
        if (alg->flags & FOLD_ALG_NODE_AWARE) {
            continue;
        }
        fold_choice_t flat = {.alg = alg, .seg_bytes = seg_bytes};
        double us = rule->nalgs == 1 ? 0 : predict_below(comm, comm->select.inter_topo, coll,
                                                         &flat, part_bytes, best_us);
        if (us < best_us) {
            best_us = us;
            best    = alg;
        }
    }
    return best;
}

/* Leaders to try: 1, 2, 4, ... and the fewest ranks on a node, or the forced count. */
static int leader_candidates(const fold_comm_t *comm, int *out)
{
    int min_ppn = comm->shape.min_ppn, n = 0;
    long forced = comm->ctx->config.dpml_leaders;
    if (forced > 0) {
        out[n++] = forced < min_ppn ? (int)forced : min_ppn;
        return n;
    }
    for (int l = 1; l < min_ppn && n < FOLD_SELECT_MAX_LEADER_TRIES - 1; l *= 2) {
        out[n++] = l;
    }
    out[n++] = min_ppn;
    return n;
}

/* Segment sizes to try for alg: seg_bytes where a rule or forced name fixed it, or
 * FOLD_SEGMENT_SIZE where set; the model's tries for a node-aware algorithm. */
static int seg_candidates(const fold_comm_t *comm, const fold_alg_t *alg, size_t seg_bytes,
                          size_t *out)
{
    if (seg_bytes != 0 || comm->ctx->config.segment_size != 0 ||
        !(alg->flags & FOLD_ALG_NODE_AWARE)) {
        out[0] = seg_bytes;
        return 1;
    }
    memcpy(out, fold_select_seg_tries, sizeof(fold_select_seg_tries));
    return FOLD_SELECT_SEG_TRIES;
}

/*
 * Evaluates one candidate algorithm, with its best leader count and segment size
 * for node-aware ones; fills *choice and returns the predicted time, where that is
 * below bound. Else it returns some value >= bound (and *choice is one of the
 * alg's configurations): a caller that takes a candidate only when it is faster
 * than bound learns all it needs, and the model stops each replay as soon as it is
 * sure the time reaches bound. Likewise between configurations, against the best
 * so far; the first of equally fast ones still wins, as each must be faster.
 */
static double evaluate_below(fold_comm_t *comm, fold_coll_t coll, const fold_alg_t *alg,
                             size_t seg_bytes, size_t bytes, int mapped, double bound,
                             fold_choice_t *choice);

/* evaluate_below with the model's memory held over it. */
static double evaluate_held(fold_comm_t *comm, fold_coll_t coll, const fold_alg_t *alg,
                            size_t seg_bytes, size_t bytes, int mapped, double bound,
                            fold_choice_t *choice)
{
    fold_select_space_enter(comm);
    double us = evaluate_below(comm, coll, alg, seg_bytes, bytes, mapped, bound, choice);
    fold_select_space_leave(comm);
    return us;
}

double fold_select_evaluate_below(fold_comm_t *comm, fold_coll_t coll, const fold_alg_t *alg,
                                  size_t seg_bytes, size_t bytes, double bound,
                                  fold_choice_t *choice)
{
    return evaluate_held(comm, coll, alg, seg_bytes, bytes, 0, bound, choice);
}

static double evaluate_below(fold_comm_t *comm, fold_coll_t coll, const fold_alg_t *alg,
                             size_t seg_bytes, size_t bytes, int mapped, double bound,
                             fold_choice_t *choice)
{
    const int fast = takes_tiny_path(comm, alg, bytes);
    *choice = (fold_choice_t){.alg = alg, .seg_bytes = seg_bytes, .memory = mapped,
                              .fast = fast};
    if (!(alg->flags & FOLD_ALG_NODE_AWARE)) {
        return predict_below(comm, comm->select.topo, coll, choice, bytes, bound);
    }
    memo_check(comm);
    /* The question: the algorithm, the size and the segment a rule fixed (bytes). */
    fold_model_query_t key_q = {.alg = alg,
                                .proto = {.coll = coll, .count = bytes, .seg_count = seg_bytes}};
    memo_key_t k = memo_key(comm->select.topo, &key_q, MEMO_EVAL,
                            mapped ? PRICE_MAPPED : 0);   /* fast follows from the key */
    memo_entry_t *e = NULL;
    if (fold_select_reference) {
        bound = INFINITY;
    } else {
        e = memo_find(&comm->select, &k);
    }
    if (e != NULL && (e->exact || e->us >= bound)) {
        if (e->exact) {
            *choice = e->choice;
        }
        return e->us;
    }
    int leaders[FOLD_SELECT_MAX_LEADER_TRIES];
    int n = leader_candidates(comm, leaders);
    size_t segs[FOLD_SELECT_SEG_TRIES];
    int nsegs = seg_candidates(comm, alg, seg_bytes, segs);
    /* A single-copy reduce's root writes nothing back: the model weighs how much
     * more than the other owners it should fold. */
    static const int weights[] = {0, 125, 150, 200, 300};
    int nweights = (alg->flags & FOLD_ALG_SINGLE_COPY) && coll == FOLD_COLL_REDUCE
                 ? (int)(sizeof(weights) / sizeof(weights[0])) : 1;
    double best_us = INFINITY;
    for (int i = 0; i < n; i++) {
        const fold_alg_t *inter[FOLD_SELECT_SEG_TRIES] = {NULL};
        for (int g = 0; g < nsegs && comm->shape.nnodes > 1; g++) {
            inter[g] = pick_inter(comm, coll, bytes / (size_t)leaders[i], segs[g]);
        }
        for (int w = 0; w < nweights && (w == 0 || leaders[i] > 1); w++) {
            for (int g = 0; g < nsegs; g++) {
                fold_choice_t c = {.alg = alg, .leaders = leaders[i], .inter = inter[g],
                                   .root_weight = weights[w], .fast = fast,
                                   .seg_bytes = segs[g], .memory = mapped};
                double us = predict_below(comm, comm->select.topo, coll, &c, bytes,
                                          best_us < bound ? best_us : bound);
                if (us < best_us || (i == 0 && w == 0 && g == 0)) {
                    best_us = us;
                    *choice = c;
                }
            }
        }
    }
    /* Below bound the best is exact: a replay that stopped early only gave a
     * value at least as large as what it had to beat. */
    if (!fold_select_reference && (e != NULL || (e = memo_add(comm, &k)) != NULL)) {
        e->us     = best_us;
        e->exact  = !(best_us >= bound);
        e->choice = *choice;
    }
    return best_us;
}

double fold_select_evaluate(fold_comm_t *comm, fold_coll_t coll, const fold_alg_t *alg,
                            size_t bytes, fold_choice_t *choice)
{
    return fold_select_evaluate_below(comm, coll, alg, 0, bytes, INFINITY, choice);
}

double fold_select_evaluate_mapped(fold_comm_t *comm, fold_coll_t coll, const fold_alg_t *alg,
                                   size_t bytes, fold_choice_t *choice)
{
    return evaluate_held(comm, coll, alg, 0, bytes, 1, INFINITY, choice);
}

/*
 * Decisions shared by the communicators of this process: the same shape, question
 * and settings give the same answer, so communicators duplicated by the application
 * (and the ranks-as-threads of the tests) replay each question once.
 */
typedef struct shared_decision {
    uint64_t                key;
    fold_choice_t           choice;
    double                  us;
    struct shared_decision *next;
} shared_decision_t;

#define SHARED_MAX 4096
static shared_decision_t *shared_head;
static int                shared_count;
static pthread_mutex_t    shared_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t decision_key(const fold_comm_t *comm, fold_coll_t coll, int k,
                             const fold_alg_t *const *algs, const size_t *segs, int nalgs,
                             int mapped)
{
    const fold_context_t *ctx = comm->ctx;
    const fold_config_t *cfg = &ctx->config;
    uint64_t h = comm->select.shape_hash;
    h = fold_hash(h, &coll, sizeof(coll));
    h = fold_hash(h, &k, sizeof(k));
    h = fold_hash(h, &mapped, sizeof(mapped));
    for (int a = 0; a < nalgs; a++) {
        h = fold_hash(h, algs[a]->name, strlen(algs[a]->name) + 1);
        h = fold_hash(h, &segs[a], sizeof(segs[a]));
    }
    h = fold_model_hash(&ctx->model, h);
    size_t shm = comm_shm_bytes(comm);
    h = fold_hash(h, &shm, sizeof(shm));
    h = fold_hash(h, &comm->node_none, sizeof(comm->node_none));
    h = fold_hash(h, &cfg->segment_size, sizeof(cfg->segment_size));
    h = fold_hash(h, &cfg->pipeline_depth, sizeof(cfg->pipeline_depth));
    h = fold_hash(h, &cfg->dpml_leaders, sizeof(cfg->dpml_leaders));
    /* The rules pick the flat algorithm between nodes. */
    h = fold_hash(h, &ctx->tune.nrules, sizeof(ctx->tune.nrules));
    h = fold_hash(h, ctx->tune.rules, (size_t)ctx->tune.nrules * sizeof(*ctx->tune.rules));
    return fold_hash(h, ctx->file.rules.rules,
               (size_t)ctx->file.rules.nrules * sizeof(*ctx->file.rules.rules));
}

static int shared_find(uint64_t key, fold_choice_t *choice, double *us)
{
    pthread_mutex_lock(&shared_lock);
    shared_decision_t *d = shared_head;
    while (d != NULL && d->key != key) {
        d = d->next;
    }
    if (d != NULL) {
        *choice = d->choice;
        *us     = d->us;
    }
    pthread_mutex_unlock(&shared_lock);
    return d != NULL;
}

static void shared_add(uint64_t key, const fold_choice_t *choice, double us)
{
    pthread_mutex_lock(&shared_lock);
    shared_decision_t *d = shared_count < SHARED_MAX ? malloc(sizeof(*d)) : NULL;
    if (d != NULL) {
        *d = (shared_decision_t){key, *choice, us, shared_head};
        shared_head = d;
        shared_count++;
    }
    pthread_mutex_unlock(&shared_lock);
}

__attribute__((destructor)) static void shared_free(void)
{
    while (shared_head != NULL) {
        shared_decision_t *d = shared_head;
        shared_head = d->next;
        free(d);
    }
}

/* The model's pick among `algs` (with their rule's segments) for this size class,
 * for buffers in fold memory on every rank or not (mapped), cached per communicator. */
static int model_pick(fold_comm_t *comm, fold_coll_t coll, size_t bytes,
                      const fold_alg_t *const *algs, const size_t *segs, int nalgs,
                      int mapped, fold_choice_t *choice)
{
    int k = fold_select_class(bytes);
    fold_select_cache_t *c = &comm->select;
    if (mapped && c->mapped_entry == NULL &&
        (c->mapped_entry = calloc(FOLD_COLL_REDUCE + 1, sizeof(*c->mapped_entry))) == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    fold_select_entry_t *e = mapped ? &c->mapped_entry[coll][k] : &c->entry[coll][k];
    if (e->valid && e->nalgs == nalgs &&
        memcmp(e->algs, algs, (size_t)nalgs * sizeof(*algs)) == 0 &&
        memcmp(e->segs, segs, (size_t)nalgs * sizeof(*segs)) == 0) {
        *choice = e->choice;
        return FOLD_OK;
    }
    int status = fold_select_topos(comm);
    if (status != FOLD_OK) {
        return status;
    }
    uint64_t key = decision_key(comm, coll, k, algs, segs, nalgs, mapped);
    double best_us = INFINITY;
    if (fold_select_reference || !shared_find(key, choice, &best_us)) {
        size_t at = (size_t)1 << k;
        fold_select_space_enter(comm);
        for (int a = 0; a < nalgs; a++) {
            fold_choice_t cand;
            double us = evaluate_held(comm, coll, algs[a], segs[a], at, mapped,
                                      a == 0 ? INFINITY : best_us, &cand);
            fold_trace("comm %u %s %zu B%s: %s leaders %d segment %zu predicted %.2f us",
                       comm->id, fold_coll_name(coll), at, mapped ? " in fold memory" : "",
                       algs[a]->name, cand.leaders, cand.seg_bytes, us);
            if (a == 0 || us < best_us) {
                best_us = us;
                *choice = cand;
            }
        }
        fold_select_space_leave(comm);
        if (!fold_select_reference) {
            shared_add(key, choice, best_us);
        }
        char name[96], weight[32] = "";
        fold_select_format_alg(choice->alg, choice->seg_bytes, name, sizeof(name));
        if (choice->root_weight > 0) {
            snprintf(weight, sizeof(weight), ", root's block %d%%", choice->root_weight);
        }
        fold_debug("comm %u: %s from %zu B%s: %s (leaders %d%s%s%s), predicted %.2f us",
                   comm->id, fold_coll_name(coll), at, mapped ? " in fold memory" : "", name,
                   choice->leaders, weight,
                   choice->inter ? ", between nodes " : "",
                   choice->inter ? choice->inter->name : "", best_us);
    }
    e->valid  = 1;
    e->us     = best_us;
    e->nalgs  = nalgs;
    memcpy(e->algs, algs, (size_t)nalgs * sizeof(*algs));
    memcpy(e->segs, segs, (size_t)nalgs * sizeof(*segs));
    e->choice = *choice;
    return FOLD_OK;
}

double fold_select_class_us(const fold_comm_t *comm, fold_coll_t coll, size_t bytes)
{
    if (coll > FOLD_COLL_REDUCE) {
        return -1;
    }
    const fold_select_entry_t *e = &comm->select.entry[coll][fold_select_class(bytes)];
    return e->valid && isfinite(e->us) ? e->us : -1;
}

void fold_select_entry_install(fold_comm_t *comm, fold_coll_t coll, int k,
                               const fold_select_entry_t *entry, int mapped)
{
    fold_select_cache_t *c = &comm->select;
    if (mapped && c->mapped_entry == NULL &&
        (c->mapped_entry = calloc(FOLD_COLL_REDUCE + 1, sizeof(*c->mapped_entry))) == NULL) {
        return;   /* the first call decides it */
    }
    (mapped ? c->mapped_entry : c->entry)[coll][k] = *entry;
    if (fold_select_topos(comm) == FOLD_OK) {
        shared_add(decision_key(comm, coll, k, entry->algs, entry->segs, entry->nalgs, mapped),
                   &entry->choice, entry->us);
    }
}

void fold_select_cache_clear(fold_comm_t *comm)
{
    fold_online_free(comm);
    memo_free(&comm->select);
    memset(comm->select.entry, 0, sizeof(comm->select.entry));
    memset(comm->select.advice, -1, sizeof(comm->select.advice));
    memset(comm->select.last, 0, sizeof(comm->select.last));
    free(comm->select.mapped_entry);
    comm->select.mapped_entry = NULL;
    memset(comm->select.last_mapped, 0, sizeof(comm->select.last_mapped));
}

void fold_select_cache_free(fold_comm_t *comm)
{
    fold_online_free(comm);
    fold_topo_free(comm->select.topo);
    fold_topo_free(comm->select.inter_topo);
    comm->select.topo = comm->select.inter_topo = NULL;
    fewer_free(&comm->select);
    memo_free(&comm->select);
    free(comm->select.mapped_entry);
    comm->select.mapped_entry = NULL;
    fold_model_space_free(comm->select.space);
    comm->select.space       = NULL;
    comm->select.space_users = 0;
}

/* ---- the decision ----------------------------------------------------------- */

static int select_uncached(fold_comm_t *comm, fold_coll_t coll, size_t count, fold_dtype_t dtype,
                           fold_op_t op, int mapped, fold_choice_t *choice);

static int memo_hit(const fold_select_memo_t *m, size_t count, fold_dtype_t dtype, fold_op_t op)
{
    return m != NULL && m->valid && m->count == count && m->dtype == (int)dtype &&
           m->op == (int)op;
}

static void memo_keep(fold_select_memo_t *m, size_t count, fold_dtype_t dtype, fold_op_t op,
                      const fold_choice_t *choice)
{
    /* A user op's number may come back with another commutativity once freed. */
    if (m != NULL && op < FOLD_OP_PREDEFINED_COUNT) {
        *m = (fold_select_memo_t){1, count, (int)dtype, (int)op, *choice};
    }
}

int fold_select(fold_comm_t *comm, fold_coll_t coll, size_t count, fold_dtype_t dtype,
                fold_op_t op, fold_choice_t *choice)
{
    fold_select_memo_t *m = coll <= FOLD_COLL_REDUCE ? &comm->select.last[coll] : NULL;
    if (memo_hit(m, count, dtype, op)) {
        *choice = m->choice;
        return FOLD_OK;
    }
    int status = select_uncached(comm, coll, count, dtype, op, 0, choice);
    choice->fast = takes_tiny_path(comm, choice->alg, count * fold_dtype_size(dtype));
    if (status == FOLD_OK) {
        memo_keep(m, count, dtype, op, choice);
    }
    return status;
}

int fold_select_repeats_tiny(const fold_comm_t *comm, const fold_call_t *call)
{
    if (!call->blocking || call->coll > FOLD_COLL_REDUCE) {
        return 0;
    }
    const fold_select_memo_t *m = &comm->select.last[call->coll];
    return memo_hit(m, call->count, call->dtype, call->op) && m->choice.fast &&
           fold_online_ignores(comm, call, &m->choice);
}

/* Whether the choice for buffers in fold memory may differ from the ordinary one:
 * only a node-aware call's on one node, whose ranks all take turns and publish their
 * calls, which is where a rank whose buffers lie elsewhere is caught. */
static int placement_may_matter(const fold_comm_t *comm, fold_coll_t coll,
                                const fold_choice_t *choice)
{
    return !choice->fast && coll <= FOLD_COLL_REDUCE &&
           (choice->alg->flags & FOLD_ALG_NODE_AWARE) && comm->shape.nnodes == 1;
}

/* Whether this rank's buffers of a call lie in fold memory (out NULL: it has none). */
static int in_fold_memory(const void *in, const void *out, size_t bytes)
{
    fold_mem_place_t place;
    return fold_mem_find(in, bytes, &place) &&
           (out == NULL || out == in || fold_mem_find(out, bytes, &place));
}

/* choice, the ordinary one, becomes the one for buffers in fold memory where that
 * differs (placement_may_matter). */
static int select_mapped(fold_comm_t *comm, fold_coll_t coll, size_t count, fold_dtype_t dtype,
                         fold_op_t op, fold_choice_t *choice)
{
    int status;
    fold_select_memo_t *m = &comm->select.last_mapped[coll];
    if (memo_hit(m, count, dtype, op)) {
        *choice = m->choice;
        return FOLD_OK;
    }
    fold_choice_t mapped;
    if ((status = select_uncached(comm, coll, count, dtype, op, 1, &mapped)) != FOLD_OK) {
        return status;
    }
    /* Only another algorithm counts: a forced one, or a rule's only one, then serves
     * any mix of placements, with the leaders and segment chosen for the heap. */
    if (mapped.alg != choice->alg) {
        *choice = mapped;   /* memory = 1 */
    } else {
        choice->memory = 0;
    }
    memo_keep(m, count, dtype, op, choice);
    return FOLD_OK;
}

int fold_select_both(fold_comm_t *comm, fold_coll_t coll, size_t count, fold_dtype_t dtype,
                     fold_op_t op, fold_choice_t *heap, fold_choice_t *mapped, int *differ)
{
    int status = fold_select(comm, coll, count, dtype, op, heap);
    const fold_node_t *node = comm->node;
    *differ = 0;
    if (status != FOLD_OK || !placement_may_matter(comm, coll, heap) || node == NULL ||
        !node->single_copy) {
        return status;
    }
    *mapped = *heap;
    status  = select_mapped(comm, coll, count, dtype, op, mapped);
    *differ = status == FOLD_OK && mapped->alg != heap->alg;
    return status;
}

int fold_select_mappable(const fold_comm_t *comm, const void *in, const void *out, size_t bytes,
                         int adopt_passes, int adopt_steps)
{
    const fold_node_t *node = comm->node;
    if (node == NULL || !node->single_copy || node->xmap == NULL) {
        return 0;
    }
    if (in_fold_memory(in, out, bytes)) {
        return 1;
    }
    return node->adopt && fold_mem_adopt_would_in_steps(in, bytes, adopt_passes, adopt_steps) &&
           (out == NULL || out == in ||
            fold_mem_adopt_would_in_steps(out, bytes, adopt_passes, adopt_steps));
}

/* What adopting a call's buffers costs a rank, in us: IN and OUT copied into fold
 * memory at the calibration's rate. */
static double adopt_cost_us(const fold_comm_t *comm, size_t bytes)
{
    return 2.0 * (double)bytes / (comm->ctx->model.adopt_gbs * 1e3);
}

int fold_select_adopt_passes(fold_comm_t *comm, fold_coll_t coll, size_t count,
                             fold_dtype_t dtype, fold_op_t op)
{
    const fold_node_t *node = comm->node;
    if (coll > FOLD_COLL_REDUCE || node == NULL || !node->single_copy || node->xmap == NULL) {
        return 0;
    }
    const size_t bytes = count * fold_dtype_size(dtype);
    const int k = fold_select_class(bytes);
    fold_select_entry_t *heap = &comm->select.entry[coll][k];
    if (heap->valid && heap->adopt_passes != 0) {
        return heap->adopt_passes > 0 ? heap->adopt_passes : 0;
    }
    fold_choice_t choice;
    if (fold_select(comm, coll, count, dtype, op, &choice) != FOLD_OK ||
        select_uncached(comm, coll, count, dtype, op, 1, &choice) != FOLD_OK) {
        return 0;
    }
    const fold_select_entry_t *mapped = comm->select.mapped_entry != NULL
                                            ? &comm->select.mapped_entry[coll][k]
                                            : NULL;
    /* Where the model did not decide (a forced algorithm), there is nothing to weigh:
     * the second pass adopts. */
    int passes = 2;
    if (heap->valid && mapped != NULL && mapped->valid) {
        passes = fold_select_break_even_passes(heap->us - mapped->us,
                                               adopt_cost_us(comm, (size_t)1 << k));
    }
    if (heap->valid) {
        heap->adopt_passes = passes > 0 ? passes : -1;
    }
    return passes;
}

int fold_select_adopt_steps(fold_comm_t *comm, fold_coll_t coll, size_t count,
                            fold_dtype_t dtype)
{
    if (coll > FOLD_COLL_REDUCE) {
        return 1;
    }
    const size_t bytes = count * fold_dtype_size(dtype);
    const fold_select_entry_t *heap = &comm->select.entry[coll][fold_select_class(bytes)];
    if (!heap->valid) {
        return 1;
    }
    return fold_select_adopt_steps_for(heap->us, adopt_cost_us(comm, bytes));
}

int fold_select_adopt_steps_for(double call_us, double cost_us)
{
    if (!(call_us > 0) || !(cost_us > call_us) || !(cost_us < INFINITY)) {
        return 1;
    }
    const double steps = ceil(cost_us / call_us);
    return steps < FOLD_SELECT_ADOPT_MAX_STEPS ? (int)steps : FOLD_SELECT_ADOPT_MAX_STEPS;
}

int fold_select_break_even_passes(double gain_us, double cost_us)
{
    if (!(gain_us > 0) || !(cost_us < INFINITY)) {
        return 0;
    }
    const double after = ceil(cost_us / gain_us) + 1;
    return after < 2 ? 2 : after < FOLD_SELECT_ADOPT_MAX_PASSES ? (int)after : 0;
}

int fold_select_placed(fold_comm_t *comm, fold_coll_t coll, size_t count, fold_dtype_t dtype,
                       fold_op_t op, const void *in, const void *out, fold_choice_t *choice)
{
    int status = fold_select(comm, coll, count, dtype, op, choice);
    const fold_node_t *node = comm->node;
    /* The buffers are looked up last: the lookups take a lock once fold memory lives,
     * and a tiny call (the fast path) never needs them. */
    if (status != FOLD_OK || !placement_may_matter(comm, coll, choice) || node == NULL ||
        !node->single_copy || node->xmap == NULL ||
        !in_fold_memory(in, out, count * fold_dtype_size(dtype))) {
        return status;
    }
    return select_mapped(comm, coll, count, dtype, op, choice);
}

int fold_select_in_fold_memory(fold_comm_t *comm, fold_coll_t coll, size_t count,
                               fold_dtype_t dtype, fold_op_t op, fold_choice_t *choice)
{
    int status = fold_select(comm, coll, count, dtype, op, choice);
    if (status != FOLD_OK || !placement_may_matter(comm, coll, choice)) {
        return status;
    }
    return select_mapped(comm, coll, count, dtype, op, choice);
}

/* The algorithms the rules offer a call (with their rule's segments), after the
 * shape, the segment's room, single copy's availability and the op's commutativity
 * have taken out those that cannot run it; the same on every rank. Returns how many
 * (at least one). */
static int call_candidates(fold_comm_t *comm, fold_coll_t coll, size_t count, fold_dtype_t dtype,
                           fold_op_t op, const fold_alg_t **cand, size_t *cand_seg)
{
    fold_context_t *ctx = comm->ctx;
    size_t bytes = count * fold_dtype_size(dtype);
    /* A communicator without node shared memory runs what the rules name for its
     * shape among the node-unaware algorithms, a forced node-aware one included. */
    unsigned skip = comm->node_none ? FOLD_ALG_NODE_AWARE : 0;
    const fold_alg_t *const *algs = &ctx->forced[coll];
    const size_t *segs = &ctx->forced_seg[coll];
    int nalgs = 1;
    if (ctx->forced[coll] == NULL || (ctx->forced[coll]->flags & skip)) {
        const fold_tune_rule_t *rule = fold_select_find_rule(ctx, coll, bytes, &comm->shape,
                                                             skip);
        static const fold_alg_t *const fallback[FOLD_COLL_COUNT] = {
            [FOLD_COLL_ALLREDUCE] = &fold_alg_recursive_doubling,
            [FOLD_COLL_REDUCE]    = &fold_alg_binomial};
        static const size_t no_segs[FOLD_COLL_COUNT];
        algs  = rule != NULL ? rule->algs : &fallback[coll];
        segs  = rule != NULL ? rule->segs : &no_segs[coll];
        nalgs = rule != NULL ? rule->nalgs : 1;
    }
    /* Where shm_flat or single copy does not apply, what runs is dpml: select
     * dpml, so that what is reported (fold_selected_algorithm) is what runs.
     * shm_flat needs one node and every row in the segment; single copy one node
     * whose set-up found it allowed. */
    const fold_alg_t *fit[FOLD_RULE_MAX_ALGS];
    size_t seg_elems = comm_shm_bytes(comm) / fold_dtype_size(dtype);
    for (int a = 0; a < nalgs; a++) {
        fit[a] = algs[a];
        if (fit[a] == &fold_alg_shm_flat &&
            (comm->shape.nnodes > 1 || count * (size_t)comm->size > seg_elems)) {
            fit[a] = &fold_alg_dpml;
        }
        if ((fit[a]->flags & FOLD_ALG_SINGLE_COPY) &&
            (comm->shape.nnodes > 1 || !ctx->config.single_copy ||
             (comm->node != NULL && !comm->node->single_copy))) {
            fit[a] = &fold_alg_dpml;
        }
    }
    /* A non-commutative op keeps only the candidates that keep the rank order. */
    int ncand = 0, ordered_only = !fold_op_is_commutative(op);
    for (int a = 0; a < nalgs; a++) {
        if ((!ordered_only || (fit[a]->flags & FOLD_ALG_ORDERED)) && !(fit[a]->flags & skip)) {
            cand_seg[ncand] = segs[a];
            cand[ncand++]   = fit[a];
        }
    }
    if (ncand == 0) {
        cand_seg[ncand] = 0;
        cand[ncand++]   = coll == FOLD_COLL_ALLREDUCE ? &fold_alg_recursive_doubling
                                                      : &fold_alg_binomial;
        fold_debug("%s: %s does not keep the rank order a non-commutative op needs; using %s",
                   fold_coll_name(coll), algs[0]->name, cand[0]->name);
    }
    return ncand;
}

static int select_uncached(fold_comm_t *comm, fold_coll_t coll, size_t count, fold_dtype_t dtype,
                           fold_op_t op, int mapped, fold_choice_t *choice)
{
    const fold_alg_t *cand[FOLD_RULE_MAX_ALGS];
    size_t cand_seg[FOLD_RULE_MAX_ALGS];
    int ncand = call_candidates(comm, coll, count, dtype, op, cand, cand_seg);
    /* The model decides between several candidates, and the leaders and segment of a
     * node-aware one even when it is the only candidate. */
    if (ncand > 1 || (cand[0]->flags & FOLD_ALG_NODE_AWARE)) {
        return model_pick(comm, coll, count * fold_dtype_size(dtype), cand, cand_seg, ncand,
                          mapped, choice);
    }
    memset(choice, 0, sizeof(*choice));
    choice->alg       = cand[0];
    choice->seg_bytes = cand_seg[0];
    choice->memory    = mapped;
    return FOLD_OK;
}

/* A rival into alts[1 .. max - 1], kept in order of predicted time after the pick;
 * when full, the slowest makes room (or c is left out, if it is slower still). */
static void keep_rival(fold_choice_t *alts, double *alt_us, int *n, int max,
                       const fold_choice_t *c, double us)
{
    if (*n == max && !(us < alt_us[max - 1])) {
        return;
    }
    int i = *n < max ? (*n)++ : max - 1;
    for (; i > 1 && us < alt_us[i - 1]; i--) {
        alts[i]   = alts[i - 1];
        alt_us[i] = alt_us[i - 1];
    }
    alts[i]   = *c;
    alt_us[i] = us;
}

int fold_select_alternatives(fold_comm_t *comm, fold_coll_t coll, size_t count,
                             fold_dtype_t dtype, fold_op_t op, const fold_choice_t *picked,
                             double spread, fold_choice_t *alts, double *alt_us, int max)
{
    const fold_alg_t *cand[FOLD_RULE_MAX_ALGS];
    size_t cand_seg[FOLD_RULE_MAX_ALGS];
    int ncand = call_candidates(comm, coll, count, dtype, op, cand, cand_seg);
    if (max < 1 || (ncand < 2 && !(cand[0]->flags & FOLD_ALG_NODE_AWARE)) ||
        fold_select_topos(comm) != FOLD_OK) {
        return 0;
    }
    /* At the size the decision was made for, as model_pick does. */
    size_t at = (size_t)1 << fold_select_class(count * fold_dtype_size(dtype));
    alts[0]   = *picked;
    alt_us[0] = fold_select_predict(comm, comm->select.topo, coll, picked, at);
    const double bound = alt_us[0] * spread;
    int n = 1, seg_open = comm->ctx->config.segment_size == 0;   /* no rule fixed it */
    for (int a = 0; a < ncand && max > 1; a++) {
        fold_choice_t c;
        if (cand[a] == picked->alg) {
            seg_open = seg_open && cand_seg[a] == 0;
            continue;
        }
        double us = fold_select_evaluate_below(comm, coll, cand[a], cand_seg[a], at, bound, &c);
        int dup = 0;
        for (int i = 0; i < n; i++) {
            dup |= alts[i].alg == c.alg;
        }
        if (us < bound && !dup) {
            keep_rival(alts, alt_us, &n, max, &c, us);
        }
    }
    /* Single copy in 512 KiB chunks: in 128 KiB ones too. The model prices its copies
     * and folds by the call's working set, not a chunk's; a smaller chunk is still in
     * the L2 when it is folded and written on, which wins up to a few MiB where the
     * caches are large, while from there the larger chunks' fewer kernel calls win. */
    if ((picked->alg->flags & FOLD_ALG_SINGLE_COPY) && seg_open && max > 1 &&
        picked->seg_bytes > DEFAULT_SEGMENT_BYTES) {
        fold_choice_t c;
        double us = fold_select_evaluate_below(comm, coll, picked->alg, DEFAULT_SEGMENT_BYTES,
                                               at, bound, &c);
        if (us < bound) {
            keep_rival(alts, alt_us, &n, max, &c, us);
        }
    }
    return n;
}
