/*
 * The closed forms of the node-aware algorithms (model_closed.h), from the parts in
 * model_closed_rounds.h.
 *
 * DPML is its phases per chunk (alg_dpml.c: copy in, the leaders' fold, the exchange
 * between nodes, copy out) with the exchange one series among the leaders j of every
 * node, the node's leaders sharing its link, and the chunks pipelined behind the
 * busiest of the leader's CPU, another rank's CPU, the link and the stages the
 * segment holds.
 */
#include "model_closed_rounds.h"
#include "alg_dpml.h"
#include "model_build.h"

#include <fold/fold_status.h>
#include <math.h>

int fold_closed_dpml(const fold_model_params_t *p, const fold_topo_t *topo,
                     const fold_model_query_t *q, int pipelined, double *us)
{
    fold_coll_args_t a = fold_model_rank_args(topo, q, 0);
    fold_dpml_layout_t lay;
    int status = fold_dpml_layout(&a, pipelined, &lay);
    if (status != FOLD_OK) {
        return status;
    }
    const int allreduce = q->proto.coll == FOLD_COLL_ALLREDUCE;
    const int N = topo->nnodes, P = topo->max_ppn, L = lay.leaders, S = lay.subparts;
    const double es = (double)q->esize, n = (double)a.count * es;
    const double chunks = (double)lay.nchunks, chunk = n / chunks;
    const double sub = chunk / L / S, b = (double)(a.seg_count ? a.seg_count : a.count) * es;
    const double scale = q->ws_scale > 1 ? q->ws_scale : 1;
    const double shm = P > 1 ? (double)lay.stages * (P + lay.results) * L *
                                   (double)lay.part_cap * es : 0;
    /* A rank touches its input and, in allreduce, its output (a reduce's root alone
     * has one). */
    const double priv = (allreduce ? 2 : 1) * n * scale;
    closed_t c;
    fold_closed_init(&c, p, NULL, N, P, 1, a.depth, priv, shm * scale);
    const fold_model_rates_t *r = &c.rates;
    const double s = p->step_us;

    /* Copy in (a leader skips its own block), the leaders' fold of P rows, copy out
     * (allreduce every rank, reduce the root), each with its flag post and wait. */
    double cin = 0, cin_leader = 0, flag = 0, fold = 0, cout = 0;
    if (P > 1) {
        double in_pb = fmax(r->copy, 1.0 / (p->shm_write_gbs * 1e3));
        double out_pb = fmax(r->copy, 1.0 / (p->shm_gbs * 1e3));
        double leader_part = chunk * (L - 1) / L;
        cin = 2 * s + fold_closed_move(p, chunk) + chunk * in_pb;
        cin_leader = leader_part > 0
                         ? 2 * s + fold_closed_move(p, leader_part) + leader_part * in_pb
                         : s;
        flag = p->flag_us + s;
        fold = s + fold_closed_move(p, sub) +
               fmax(sub * ((P - 1) * r->fold_cache + (P + 1) * r->stream_mem),
                    (P - 1) * sub / (p->shm_reduce_gbs * 1e3));
        cout = 2 * s + fold_closed_move(p, chunk) + chunk * out_pb;
    }
    /* The exchange of one sub-partition among the leaders j, all L of a node at once. */
    series_time_t x = {0, 0, 0};
    if (N > 1) {
        closed_t between;
        fold_closed_init(&between, p, NULL, N, 1, L, a.depth, priv, shm * scale);
        rounds_t rs = {.n = 0};
        fold_closed_flat(&rs, &between, a.inter, allreduce, sub, sub / es, b);
        x = fold_closed_series(&rs);
    }
    double sub_pass = fmax(fold + x.cpu, x.link);
    double fill = cin + flag + fold + x.time + (S - 1) * sub_pass + flag + s + cout;
    /* A leader's CPU takes its steps as they become ready: in dpml a chunk's fold is
     * long and holds up the exchange of the chunk before it, so a leader's folds,
     * exchanges and copies out follow each other; dpml_pipelined's folds are short
     * (sub-partitions) and its exchanges overlap them and each other. */
    double leader = pipelined ? cin_leader + S * (fold + s + x.cpu)
                              : cin_leader + fold + s + x.time;
    leader += cout;   /* allreduce: every leader; reduce: the root, a leader of its node */
    double other = cin + (allreduce ? cout : 0);
    double per_chunk = fmax(fmax(leader, other), fmax(S * x.link, fill / lay.stages));
    *us = fill + (chunks - 1) * per_chunk + (P > 1 ? 2 * s : 0);
    return FOLD_OK;
}


/* shm_flat (alg_shm_flat.c): every rank copies its row into the segment segment by
 * segment, then (allreduce: every rank; reduce: the root) folds all rows of each
 * segment as they are written; a rank's copies are ready at once, so its CPU makes
 * them all before its first fold. A message too large for the segment is DPML's. */
int fold_closed_shm_flat(const fold_model_params_t *p, const fold_topo_t *topo,
                         const fold_model_query_t *q, double *us)
{
    const int P = topo->max_ppn;
    const double es = (double)q->esize, count = (double)(q->proto.count ? q->proto.count : 1);
    if (topo->nnodes > 1 || count * P > (double)q->proto.shm_count) {
        return fold_closed_dpml(p, topo, q, 0, us);
    }
    const int allreduce = q->proto.coll == FOLD_COLL_ALLREDUCE;
    const double n = count * es, scale = q->ws_scale > 1 ? q->ws_scale : 1;
    const double b = q->proto.seg_count ? (double)q->proto.seg_count * es : n;
    const double segs = fold_closed_segs(n, b), seg = n / segs, s = p->step_us;
    closed_t c;
    fold_closed_init(&c, p, NULL, 1, P, 1, q->proto.depth, (allreduce ? 2 : 1) * n * scale,
                     P * n * scale);
    const fold_model_rates_t *r = &c.rates;
    double copy = s + fold_closed_move(p, seg) +
                  seg * fmax(r->copy, 1.0 / (p->shm_write_gbs * 1e3));
    double fold = s + fold_closed_move(p, seg) +
                  fmax(seg * ((P - 1) * r->fold_cache + (P + 1) * r->stream_mem),
                       (P - 1) * seg * r->fold);
    *us = s + segs * (copy + s) + p->flag_us + segs * (s + fold) + s;
    return FOLD_OK;
}

/* cma (alg_cma.c): k owners each fold their block chunk by chunk from every other
 * rank's input (a kernel copy each, or through a mapping none where the fold reads
 * it in place), and an allreduce's owner writes each chunk into every other rank's
 * output (a reduce's owner but the root's, into the root's); the others only wait.
 * A reduce's root owns root_weight percent of another owner's block. */
int fold_closed_cma(const fold_model_params_t *p, const fold_topo_t *topo,
                    const fold_model_query_t *q, double *us)
{
    if (topo->nnodes > 1) {
        return fold_closed_dpml(p, topo, q, 0, us);
    }
    const int P = topo->max_ppn, allreduce = q->proto.coll == FOLD_COLL_ALLREDUCE;
    const int k = q->proto.leaders < 1 ? 1 : q->proto.leaders > P ? P : q->proto.leaders;
    const double es = (double)q->esize, count = (double)(q->proto.count ? q->proto.count : 1);
    const double n = count * es, scale = q->ws_scale > 1 ? q->ws_scale : 1;
    const double b = q->proto.seg_count ? (double)q->proto.seg_count * es : n;
    const double s = p->step_us, w = allreduce ? 0 : q->proto.root_weight / 100.0;
    /* Only the owners' steps touch buffers (the others' are read and written by the
     * owners' peer reads and writes): owner j its IN (allreduce: and OUT; a reduce's
     * owners but the root fold into a slot) up to the end of block j, and its two
     * slots (model.c counts extents from a buffer's start). */
    closed_t c;
    double slots = 2 * fmin(n, b) * scale;
    fold_closed_init(&c, p, NULL, 1, P, 1, q->proto.depth, 2 * n * scale + slots, 0);
    fold_closed_working_set(&c, (allreduce ? 1 : 0.5) * n * (k + 1) * scale + k * slots,
                            2 * n * scale + slots);
    /* The root's block and another owner's. */
    double root_block = k > 1 && w > 0 ? n * w / (w + k - 1) : n / k;
    double other_block = k > 1 ? (n - root_block) / (k - 1) : 0;
    double worst = 0;
    for (int root = 0; root < 2; root++) {
        double block = root ? root_block : other_block;
        if (block <= 0) {
            continue;
        }
        double chunks = fold_closed_segs(block, b), m = block / chunks;
        double kernel = p->cma_us + m * c.rates.kernel;
        double view = p->peer_views > 0 ? 0 : kernel;   /* the fold reads it in place */
        double writes = allreduce ? P - 1 : root ? 0 : 1;
        double chunk = kernel + (P - 2) * view + (P - 1) * (s + fold_closed_reduce(&c, m)) +
                       writes * (s + kernel);
        double owner = s + (P - 1) * s + p->flag_us + chunks * chunk + 2 * s + p->flag_us;
        worst = fmax(worst, owner);
    }
    *us = worst;
    return FOLD_OK;
}
