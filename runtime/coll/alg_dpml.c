/*
 * DPML, data-partitioning multi-leader allreduce and reduce (Bayatpour et al.,
 * SC17, section 4.1). Each node has `leaders` leaders; leader j owns block j of
 * every chunk (alg_dpml.h has the layout). Per chunk, the paper's four phases:
 *
 *   1. copy in    every rank copies block j of its input into leader j's slot of
 *                 its own row (a leader never copies its own block: it reads IN)
 *   2. reduce     leader j reduces its IN block with every other row's slot j,
 *                 straight into the published result (its own row's slot j)
 *   3. exchange   leader j of every node runs a flat allreduce (reduce: towards
 *                 the root's node) over the transport, in place on that result;
 *                 the flat algorithm's steps are embedded here with its ranks
 *                 mapped to the leaders j, so no sub-communicator is needed
 *   4. copy out   every rank (reduce: the root) copies each leader's result into
 *                 its own output
 *
 * Nothing else is copied: the reduction reads the slots and writes the result in
 * place, and the final copy lands in the caller's buffer. Where the root of a
 * reduce leads a block, it reduces that block straight into its output. A node
 * with a single rank has no segment: its rank leads every block, and the exchange
 * reads IN and writes OUT.
 *
 * Flags (one counter each per rank, values within the call; sched.h):
 *   written    rank i copied chunk k in           (leaders wait before reducing)
 *   published  leader j finished sub-block (k, t) (readers wait before copying out;
 *                                                   reduce: writers before reusing)
 *   copied     rank i copied chunk k out          (leader waits before overwriting
 *                                                   its result of chunk k + stages)
 *   done       rank i is done with this call      (every rank waits for everyone's
 *                                                   previous call before it starts)
 * A rank's copy-out of chunk k is ordered before its copy-in of chunk k + stages,
 * so in allreduce a writer needs no wait to reuse a slot: the leader finished with
 * it before publishing, which the writer waited for. Phases of successive chunks
 * overlap as their dependencies allow. Not rank-ordered: commutative ops only.
 */
#include "alg_dpml.h"
#include "block_math.h"
#include "node/topo.h"

#include <fold/fold_status.h>
#include <stdlib.h>
#include <string.h>

/* Distinct sub-partition sizes of one leader: two for full chunks, two for the
 * last one. */
#define INNER_CACHE 8

typedef struct inner_sched {
    size_t       count;
    fold_sched_t sched;
} inner_sched_t;

typedef struct dpml_plan {
    const fold_coll_args_t *args;
    fold_sched_t           *s;
    const fold_topo_t      *topo;
    fold_dpml_layout_t      lay;
    int    allreduce;
    int    node, local, ppn;    /* this rank's node, local index, ranks on the node */
    int    shm;                 /* this node has a segment */
    int    my_part;             /* the block this rank leads, or -1 */
    int    has_out;             /* allreduce, or the root of a reduce */
    int    root_local;          /* reduce: the root's local index here, or -1 */
    int    inner_inplace;
    int   *peers;               /* node -> its leader of my_part */
    fold_ref_t *rows;           /* a leader's operands: IN, then the other rows' slots */
    inner_sched_t inner[INNER_CACHE];
    int    ninner;
    size_t inner_tmp;           /* TMP of one inner operation in flight */
} dpml_plan_t;

/* ---- layout helpers ----------------------------------------------------------- */

static size_t chunk_off(const dpml_plan_t *p, size_t k)
{
    return k * p->lay.chunk_cap;
}

static size_t chunk_count(const dpml_plan_t *p, size_t k)
{
    size_t rest = p->args->count - chunk_off(p, k);
    return rest < p->lay.chunk_cap ? rest : p->lay.chunk_cap;
}

static size_t part_off(const dpml_plan_t *p, size_t k, int j)
{
    return fold_block_offset(chunk_count(p, k), p->lay.leaders, j);
}

static size_t part_count(const dpml_plan_t *p, size_t k, int j)
{
    return fold_block_count(chunk_count(p, k), p->lay.leaders, j);
}

static int leader_of(const dpml_plan_t *p, int j);

static size_t row_size(const dpml_plan_t *p)
{
    return (size_t)p->lay.leaders * p->lay.part_cap;
}

/* A stage: the rows of the node's ranks, then (lay.results) the leaders' results. */
static size_t stage_size(const dpml_plan_t *p)
{
    return ((size_t)p->ppn + (size_t)p->lay.results) * row_size(p);
}

static fold_ref_t slot(const dpml_plan_t *p, size_t k, int row, int part, size_t off)
{
    size_t stage = k % (size_t)p->lay.stages;
    size_t cell  = (size_t)row * (size_t)p->lay.leaders + (size_t)part;
    return fold_ref_shm(stage * stage_size(p) + cell * p->lay.part_cap + off);
}

/* Where leader j publishes its result of chunk k: side by side with the others' in
 * the stage's result row, as in the chunk (lay.results), else in its own row. */
static fold_ref_t result_of(const dpml_plan_t *p, size_t k, int j, size_t off)
{
    if (!p->lay.results) {
        return slot(p, k, leader_of(p, j), j, off);
    }
    size_t stage = k % (size_t)p->lay.stages;
    return fold_ref_shm(stage * stage_size(p) + (size_t)p->ppn * row_size(p) +
                        part_off(p, k, j) + off);
}

static int rank_of(const dpml_plan_t *p, int local)
{
    return fold_topo_rank(p->topo, p->node, local);
}

static int leader_of(const dpml_plan_t *p, int j)
{
    return fold_topo_leader_local(p->topo, p->node, j);
}

/* Published-flag value of sub-block t of chunk k; a chunk ends at (k + 1) * q. */
static uint64_t unit(const dpml_plan_t *p, size_t k, int t)
{
    return (uint64_t)k * (uint64_t)p->lay.subparts + (uint64_t)t + 1;
}

/* ---- the exchange between nodes ---------------------------------------------- */

static fold_sched_t *inner_get(dpml_plan_t *p, size_t count)
{
    for (int i = 0; i < p->ninner; i++) {
        if (p->inner[i].count == count) {
            return &p->inner[i].sched;
        }
    }
    fold_alg_build_fn build = p->args->inter ? fold_alg_builder(p->args->inter, p->args->coll)
                                             : NULL;
    if (p->ninner == INNER_CACHE || build == NULL) {
        p->s->status = FOLD_ERR_INVALID_ARG;
        return NULL;
    }
    fold_coll_args_t ia = {
        .coll        = p->args->coll,
        .rank        = p->node,
        .size        = p->topo->nnodes,
        .root        = p->allreduce ? 0 : p->topo->node_of[p->args->root],
        .count       = count,
        .seg_count   = p->args->seg_count,
        .depth       = p->args->depth,
        .inplace     = p->inner_inplace,
        .commutative = p->args->commutative,
    };
    inner_sched_t *e = &p->inner[p->ninner++];
    e->count = count;
    fold_sched_init(&e->sched, &ia);
    if (build(&ia, &e->sched) != FOLD_OK && p->s->status == FOLD_OK) {
        p->s->status = e->sched.status != FOLD_OK ? e->sched.status : FOLD_ERR_INVALID_ARG;
    }
    if (e->sched.tmp_count > p->inner_tmp) {
        p->inner_tmp = e->sched.tmp_count;
    }
    return &e->sched;
}

/* Builds every sub-block's exchange once up front: their TMP need sets the stride
 * between the operations in flight. */
static void inner_prepare(dpml_plan_t *p)
{
    for (size_t k = 0; k < p->lay.nchunks; k++) {
        size_t pc = part_count(p, k, p->my_part);
        for (int t = 0; t < p->lay.subparts; t++) {
            size_t sc = fold_block_count(pc, p->lay.subparts, t);
            if (sc > 0) {
                inner_get(p, sc);
            }
        }
    }
}

static void exchange(dpml_plan_t *p, size_t k, int t, fold_ref_t in, fold_ref_t out,
                     size_t count)
{
    if (p->topo->nnodes == 1 || count == 0) {
        return;
    }
    const fold_sched_t *inner = inner_get(p, count);
    if (inner == NULL) {
        return;
    }
    /* Operations in flight at once get distinct TMP, so they really overlap. */
    size_t instance = (k % (size_t)p->lay.stages) * (size_t)p->lay.subparts + (size_t)t;
    fold_sched_embed(p->s, inner, in, out, instance * p->inner_tmp, p->peers);
}

/* ---- the phases --------------------------------------------------------------- */

static void copy_in(dpml_plan_t *p, size_t k)
{
    const int l = p->lay.leaders;
    const size_t off = chunk_off(p, k);
    if (!p->shm) {
        return;
    }
    /* In a reduce nobody else's copy-out orders this: wait for the leader to have
     * finished with the slot's previous chunk. */
    if (!p->allreduce && k >= (size_t)p->lay.stages) {
        uint64_t prev_end = unit(p, k - (size_t)p->lay.stages, p->lay.subparts - 1);
        if (p->lay.results) {   /* every rank posts published (lead) */
            fold_sched_shm_wait(p->s, -1, -1, FOLD_FLAG_PUBLISHED, prev_end,
                                slot(p, k, p->local, 0, 0), row_size(p));
        }
        for (int j = 0; j < l && !p->lay.results; j++) {
            int lead = leader_of(p, j);
            if (lead != p->local) {
                fold_sched_shm_wait(p->s, rank_of(p, lead), lead, FOLD_FLAG_PUBLISHED,
                                    prev_end, slot(p, k, p->local, j, 0), part_count(p, k, j));
            }
        }
    }
    /* One copy per run of blocks that lie side by side in IN and in the row. */
    int run = -1, wrote = 0;
    size_t run_count = 0;
    for (int j = 0; j <= l; j++) {
        size_t pc = j < l ? part_count(p, k, j) : 0;
        int take = pc > 0 && leader_of(p, j) != p->local;
        int extends = take && run >= 0 && run_count == (size_t)(j - run) * p->lay.part_cap;
        if (run >= 0 && !extends) {
            fold_sched_copy(p->s, fold_ref_in(off + part_off(p, k, run)),
                            slot(p, k, p->local, run, 0), run_count);
            run = -1;
        }
        if (take) {
            if (run < 0) {
                run       = j;
                run_count = 0;
            }
            run_count += pc;
            wrote = 1;
        }
    }
    if (wrote) {
        fold_sched_shm_post(p->s, FOLD_FLAG_WRITTEN, k + 1, slot(p, k, p->local, 0, 0),
                            row_size(p));
    }
}

static void lead(dpml_plan_t *p, size_t k)
{
    const int j = p->my_part, q = p->lay.subparts, stages = p->lay.stages;
    if (j < 0) {
        if (p->lay.results) {
            /* Nothing to publish: say so at once, so that one wait for every other
             * rank's flag waits for the leaders (copy_out). */
            fold_sched_shm_post(p->s, FOLD_FLAG_PUBLISHED, unit(p, k, q - 1), fold_ref_shm(0), 0);
        }
        return;
    }
    const size_t off = chunk_off(p, k) + part_off(p, k, j), pc = part_count(p, k, j);
    /* Where the block's result goes: the published slot, or the caller's output
     * where nobody else reads it (the root of a reduce, a node of one rank). */
    int to_out = p->has_out && (!p->shm || !p->allreduce);
    fold_ref_t res = to_out ? fold_ref_out(off) : p->shm ? result_of(p, k, j, 0)
                                                          : fold_ref_in(off);
    if (p->shm) {
        if (!to_out && k >= (size_t)stages) {
            /* the readers of chunk k - stages have copied it out */
            uint64_t copied = k - (size_t)stages + 1;
            if (p->allreduce) {
                fold_sched_shm_wait(p->s, -1, -1, FOLD_FLAG_COPIED, copied, res, pc);
            } else if (p->root_local >= 0) {
                fold_sched_shm_wait(p->s, rank_of(p, p->root_local), p->root_local,
                                    FOLD_FLAG_COPIED, copied, res, pc);
            }
        }
        /* One wait for every other row's slot j, one fold of them (sched.h). */
        int n = 0;
        for (int i = 0; i < p->ppn; i++) {
            if (i != p->local) {
                p->rows[1 + n++] = slot(p, k, i, j, 0);
            }
        }
        fold_sched_shm_wait_all(p->s, FOLD_FLAG_WRITTEN, k + 1, p->rows + 1, n, pc);
    }
    for (int t = 0; t < q; t++) {
        size_t so = fold_block_offset(pc, q, t), sc = fold_block_count(pc, q, t);
        fold_ref_t acc = fold_ref_in(off + so), dst = fold_ref_add(res, so);
        if (p->shm) {
            p->rows[0] = acc;
            for (int i = 0, n = 1; i < p->ppn; i++) {
                if (i != p->local) {
                    p->rows[n++] = slot(p, k, i, j, so);
                }
            }
            fold_sched_reduce_rows(p->s, p->rows, p->ppn, dst, sc);
            acc = dst;
        }
        exchange(p, k, t, acc, dst, sc);
        if (p->shm) {
            fold_sched_shm_post(p->s, FOLD_FLAG_PUBLISHED, unit(p, k, t), dst, sc);
        }
    }
}

/* The leaders' results side by side (lay.results, one sub-partition): this rank's
 * own block first, which its fold copies along (exec_plan.h), then one wait for
 * every other rank and the rest of the chunk in at most two copies. One wait and one
 * copy per leader cost a 64-rank node 64 executor steps each. */
static void copy_out_row(dpml_plan_t *p, size_t k)
{
    const int mine = p->my_part;
    const size_t n = chunk_count(p, k), off = chunk_off(p, k);
    const size_t lo = mine >= 0 ? part_off(p, k, mine) : n;
    const size_t hi = mine >= 0 ? lo + part_count(p, k, mine) : n;
    if (mine >= 0 && p->allreduce) {
        fold_sched_copy(p->s, result_of(p, k, mine, 0), fold_ref_out(off + lo), hi - lo);
    }
    fold_sched_shm_wait(p->s, -1, -1, FOLD_FLAG_PUBLISHED, unit(p, k, 0), result_of(p, k, 0, 0),
                        n);
    fold_sched_copy(p->s, result_of(p, k, 0, 0), fold_ref_out(off), lo);
    fold_sched_copy(p->s, fold_ref_add(result_of(p, k, 0, 0), hi), fold_ref_out(off + hi),
                    n - hi);
}

/* Each leader's block, sub-partition by sub-partition, each once its leader published
 * it. */
static void copy_out_leaders(dpml_plan_t *p, size_t k)
{
    const int q = p->lay.subparts;
    for (int j = 0; j < p->lay.leaders; j++) {
        int lead = leader_of(p, j);
        const size_t off = chunk_off(p, k) + part_off(p, k, j), pc = part_count(p, k, j);
        if (lead == p->local && !p->allreduce) {
            continue;   /* the root reduced its own block into its output */
        }
        for (int t = 0; t < q; t++) {
            size_t so = fold_block_offset(pc, q, t), sc = fold_block_count(pc, q, t);
            fold_ref_t from = result_of(p, k, j, so);
            if (lead != p->local) {
                fold_sched_shm_wait(p->s, rank_of(p, lead), lead, FOLD_FLAG_PUBLISHED,
                                    unit(p, k, t), from, sc);
            }
            fold_sched_copy(p->s, from, fold_ref_out(off + so), sc);
        }
    }
}

static void copy_out(dpml_plan_t *p, size_t k)
{
    if (!p->shm || !p->has_out) {
        return;
    }
    if (p->lay.results && p->lay.subparts == 1) {
        copy_out_row(p, k);
    } else {
        copy_out_leaders(p, k);
    }
    fold_sched_shm_post(p->s, FOLD_FLAG_COPIED, k + 1, slot(p, k, 0, 0, 0), stage_size(p));
}

/* ---- the builder -------------------------------------------------------------- */

static int plan_init(dpml_plan_t *p, const fold_coll_args_t *args, fold_sched_t *s,
                     int pipelined)
{
    memset(p, 0, sizeof(*p));
    p->args = args;
    p->s    = s;
    p->topo = args->topo;
    if (p->topo == NULL || p->topo->size != args->size || args->root < 0 ||
        args->root >= args->size) {
        return FOLD_ERR_INVALID_ARG;
    }
    int status = fold_dpml_layout(args, pipelined, &p->lay);
    if (status != FOLD_OK) {
        return status;
    }
    const fold_topo_t *t = p->topo;
    p->allreduce  = args->coll == FOLD_COLL_ALLREDUCE;
    p->node       = t->node_of[args->rank];
    p->local      = t->local_of[args->rank];
    p->ppn        = fold_topo_ppn(t, p->node);
    p->shm        = p->ppn > 1;
    p->my_part    = fold_topo_leader_index(t, args->rank, p->lay.leaders);
    p->has_out    = p->allreduce || args->rank == args->root;
    p->root_local = (!p->allreduce && t->node_of[args->root] == p->node)
                        ? t->local_of[args->root] : -1;
    p->inner_inplace = p->shm ? 1 : (p->has_out ? args->inplace : 0);
    if (p->shm && p->my_part >= 0 &&
        (p->rows = malloc((size_t)p->ppn * sizeof(*p->rows))) == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    if (p->my_part >= 0 && t->nnodes > 1) {
        p->peers = malloc((size_t)t->nnodes * sizeof(int));
        if (p->peers == NULL) {
            return FOLD_ERR_NO_MEMORY;
        }
        for (int n = 0; n < t->nnodes; n++) {
            p->peers[n] = fold_topo_rank(t, n, fold_topo_leader_local(t, n, p->my_part));
        }
    }
    return FOLD_OK;
}

static void plan_cleanup(dpml_plan_t *p)
{
    for (int i = 0; i < p->ninner; i++) {
        fold_sched_cleanup(&p->inner[i].sched);
    }
    free(p->peers);
    free(p->rows);
}

int fold_dpml_build(const fold_coll_args_t *args, fold_sched_t *s, int pipelined)
{
    dpml_plan_t p;
    int status = plan_init(&p, args, s, pipelined);
    if (status != FOLD_OK || args->count == 0) {
        plan_cleanup(&p);
        return status;
    }
    if (p.my_part >= 0 && p.topo->nnodes > 1) {
        inner_prepare(&p);
    }
    size_t whole = (size_t)p.lay.stages * stage_size(&p);
    if (p.shm) {
        /* The layout may differ from the previous call's: start once every local
         * rank is done with that one. */
        fold_sched_shm_wait(s, -1, -1, FOLD_FLAG_DONE, 0, fold_ref_shm(0), whole);
    }
    for (size_t k = 0; k < p.lay.nchunks; k++) {
        copy_in(&p, k);
        lead(&p, k);
        copy_out(&p, k);
    }
    if (p.shm) {
        fold_sched_shm_post(s, FOLD_FLAG_DONE, FOLD_SHM_CALL_DONE, fold_ref_shm(0), whole);
    }
    plan_cleanup(&p);
    return s->status;
}

static int dpml_build(const fold_coll_args_t *args, fold_sched_t *s)
{
    return fold_dpml_build(args, s, 0);
}

const fold_alg_t fold_alg_dpml = {
    .name        = "dpml",
    .description = "DPML: node shared memory, several leaders per node each reducing a "
                   "partition, flat exchange between nodes (Bayatpour et al.)",
    .allreduce   = dpml_build,
    .reduce      = dpml_build,
    .flags       = FOLD_ALG_NODE_AWARE,
};
