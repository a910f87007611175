/*
 * Flat shared-memory allreduce and reduce for small messages on one node: the
 * latency path of DPML (Bayatpour et al. sec. 4) with no leader hop and no
 * transport. Every rank copies its input into its own row of the node segment and
 * raises its `written` flag; then every rank (allreduce) or the root (reduce)
 * waits for the others' flags and folds all rows, in rank order, into its output.
 * One flag hop instead of DPML's two (written, then published), and every rank
 * computes the same bits, since each folds the same rows in the same order.
 *
 *   rank:      0          1          2
 *   row:     [ x0 ]     [ x1 ]     [ x2 ]      copy in, post written = 1
 *   out:     x0+x1+x2   x0+x1+x2   x0+x1+x2    wait written >= 1 of the others
 *
 * A rank's own contribution is read from IN (in place: from its row). The rows are
 * reused by the next call: the builder's first step waits for every local rank's
 * `done` of the previous call, posted after its last read.
 *
 * Rows longer than a pipeline segment go in segments, `written` counting them, and
 * are folded segment by segment as they arrive: the copy of one overlaps the fold
 * of the one before, and a reader never pulls more than a segment that another core
 * has just written. In one go, a row of 1 MiB no longer fits in the writer's private
 * cache: with two cores that share no L3 its fold reads it at memory speed, and a
 * 1 MiB allreduce takes twice dpml's time.
 *
 * Where it does not apply (several nodes, or a message too big for the segment)
 * the builder builds DPML instead, which also serves those cases, so forcing the
 * algorithm is never an error. Not marked rank-ordered because of that fallback.
 */
#include "alg_dpml.h"
#include "node/topo.h"

#include <fold/fold_status.h>
#include <stdlib.h>

static fold_ref_t row_of(const fold_topo_t *t, int rank, size_t n)
{
    return fold_ref_shm((size_t)t->local_of[rank] * n);
}

static int shm_flat_build(const fold_coll_args_t *args, fold_sched_t *s)
{
    const fold_topo_t *t = args->topo;
    const size_t n = args->count;

    if (t == NULL || t->size != args->size || args->root < 0 || args->root >= args->size) {
        return FOLD_ERR_INVALID_ARG;
    }
    if (t->nnodes > 1 || n * (size_t)args->size > args->shm_count) {
        return fold_dpml_build(args, s, 0);
    }
    const int p = args->size, me = args->rank;
    const int allreduce = args->coll == FOLD_COLL_ALLREDUCE;
    const int folds = allreduce || me == args->root;
    if (n == 0) {
        return s->status;
    }
    if (p == 1) {
        fold_sched_copy(s, fold_ref_in(0), fold_ref_out(0), n);
        return s->status;
    }
    /* Rank r's row is SHM[l * n, (l + 1) * n), l its local index. */
    fold_ref_t *rows = folds ? malloc(2 * (size_t)p * sizeof(*rows)) : NULL;
    if (folds && rows == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    fold_ref_t *others = rows != NULL ? rows + p : NULL;
    const size_t whole = n * (size_t)p;
    fold_sched_shm_wait(s, -1, -1, FOLD_FLAG_DONE, 0, fold_ref_shm(0), whole);
    /* In place, OUT is IN: the fold overwrites it before reaching this rank's turn,
     * so its own contribution is read back from its row. */
    const size_t seg = args->seg_count ? args->seg_count : n;
    const int posts = !folds || allreduce || args->inplace;
    for (size_t at = 0, k = 1; at < n; at += seg, k++) {
        const size_t c = n - at < seg ? n - at : seg;
        if (posts) {
            fold_ref_t part = fold_ref_add(row_of(t, me, n), at);
            fold_sched_copy(s, fold_ref_add(fold_ref_in(0), at), part, c);
            fold_sched_shm_post(s, FOLD_FLAG_WRITTEN, k, part, c);
        }
        if (!folds) {
            continue;
        }
        /* Every row in rank order, this rank's own input in its place; one wait for
         * the others' rows and one fold of them all (sched.h). */
        const fold_ref_t own = fold_ref_add(args->inplace ? row_of(t, me, n) : fold_ref_in(0),
                                            at);
        int nothers = 0;
        for (int r = 0; r < p; r++) {
            rows[r] = r == me ? own : fold_ref_add(row_of(t, r, n), at);
            if (r != me) {
                others[nothers++] = rows[r];
            }
        }
        fold_sched_shm_wait_all(s, FOLD_FLAG_WRITTEN, k, others, nothers, c);
        fold_sched_reduce_rows(s, rows, p, fold_ref_add(fold_ref_out(0), at), c);
    }
    free(rows);
    fold_sched_shm_post(s, FOLD_FLAG_DONE, FOLD_SHM_CALL_DONE, fold_ref_shm(0), whole);
    return s->status;
}

const fold_alg_t fold_alg_shm_flat = {
    .name        = "shm_flat",
    .description = "small messages on one node: every rank posts its input in the node "
                   "segment and folds all of them, one flag hop, no transport (dpml "
                   "across nodes)",
    .allreduce   = shm_flat_build,
    .reduce      = shm_flat_build,
    .flags       = FOLD_ALG_NODE_AWARE,
};
