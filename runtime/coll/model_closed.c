/*
 * The cost model's closed forms (model_closed.h): the series of rounds, and the flat
 * algorithms' forms.
 *
 * A schedule here is a series of rounds that each segment of the message passes
 * through in order, as the algorithms' builders lay them out:
 *
 *   round      `times` alike in a row, each of q segments of b bytes: lat the wire's
 *              latency; wire the time a segment holds its link (between nodes,
 *              where `senders` of the node's ranks cross at once over nics links)
 *              or its channel (within a node); cpu what the rank's CPU spends on
 *              a segment (step_us per send and receive it posts, its reduction);
 *              held the time a message within the node holds the receiving core,
 *              which moves its bytes
 *
 * and a series takes the longest of
 *   - its rounds one after the other, each the first segment's way through it and
 *     the rest behind the slower of its wire and its CPU: a rank's rounds reuse
 *     the same receive slots, so a round ends before the next gets far; where each
 *     round is another rank's (a chain, a tree's levels), the first segment's way
 *     through every round, then the rest behind the slowest;
 *   - the busiest rank's CPU over all its segments: one rank's, where it takes
 *     part in every round (recursive doubling, Rabenseifner, ring, a tree's root),
 *     else the busiest round's rank (a chain's or a tree's inner ranks);
 *   - the node's link and a rank's channel over all the bytes they carry.
 * These are the replay's own prices (model.h): each step's step_us, a copy's or
 * reduction's move_us and bytes at the rates of the node's working set
 * (fold_model_rank_rates), a message's latency and bytes at its link's rate, the
 * link shared by the node's ranks that cross it at once, a flag's flag_us.
 *
 * The node-aware algorithms' forms, built of these series, are in model_closed_node.c.
 */
#include "model_closed.h"
#include "model_closed_rounds.h"

#include <fold/fold_status.h>
#include <math.h>

/* Over topo's ranks, or (topo NULL) nodes of ppn ranks in blocks. */
void fold_closed_init(closed_t *c, const fold_model_params_t *p, const fold_topo_t *topo,
                        int nodes, int ppn, double share, int depth, double priv, double shm)
{
    c->p     = p;
    c->topo  = topo;
    c->depth = depth > 0 ? depth : 1;
    c->nodes = topo != NULL ? topo->nnodes : nodes;
    c->ppn   = topo != NULL ? topo->max_ppn : ppn;
    c->size  = topo != NULL ? topo->size : nodes * ppn;
    c->rep   = 0;
    for (int n = 0; topo != NULL && n < topo->nnodes; n++) {
        if (fold_topo_ppn(topo, n) == topo->max_ppn) {
            c->rep = n;
            break;
        }
    }
    c->share = share;
    fold_closed_working_set(c, (double)c->ppn * priv + shm, priv);
}

void fold_closed_working_set(closed_t *c, double node_ws, double priv)
{
    const fold_model_params_t *p = c->p;
    fold_model_rank_rates(p, c->ppn, node_ws, priv, priv, &c->rates);
    /* As the replay moves a message within a node (model.c, sim_xfer). */
    double through_memory = fmin(c->rates.kernel, 2 * c->rates.copy);
    c->intra_pb = fmax(fmax(1.0 / (p->intra_gbs * 1e3), 1.0 / (p->shm_gbs * 1e3)),
                       fmax(c->rates.copy, through_memory));
}

/* A copy's or reduction's start grows with its bytes up to 4 KiB (model.c). */
double fold_closed_move(const fold_model_params_t *p, double bytes)
{
    return bytes >= 4096.0 ? p->move_us : p->move_us * bytes / 4096.0;
}

double fold_closed_reduce(const closed_t *c, double bytes)
{
    return c->p->step_us + fold_closed_move(c->p, bytes) + bytes * c->rates.reduce;
}

/* The round added, or NULL where it has no segment or the series is full. */
static round_t *add_raw(rounds_t *rs, round_t r)
{
    if (rs->n == MAX_ROUNDS || !(r.times > 0 && r.q > 0)) {
        return NULL;
    }
    rs->r[rs->n] = r;
    return &rs->r[rs->n++];
}

/* `times` rounds of q segments of b bytes, each posted by `posts` sends and receives
 * and followed by `work` on the CPU, over the link where `senders` ranks of the node
 * cross it at once, else within the node. */
static round_t *add_round(rounds_t *rs, const closed_t *c, double times, double q,
                          double b, int senders, int posts, double work)
{
    const fold_model_params_t *p = c->p;
    round_t r = {.times = times, .q = q, .cpu = posts * p->step_us + work};
    if (senders > 0) {
        r.link = 1;
        r.lat  = p->inter_lat_us;
        r.alone = b / (p->inter_gbs * 1e3);
        r.wire  = r.alone * ceil(senders * c->share / p->nics);
    } else {
        r.lat  = p->intra_lat_us;
        r.wire  = b * c->intra_pb;
        r.alone = r.wire;
        r.held  = r.wire;
    }
    return add_raw(rs, r);
}

series_time_t fold_closed_series(const rounds_t *rs)
{
    double one_by_one = 0, fill = 0, tail = 0, cpu = 0, link = 0, chan = 0;
    for (int i = 0; i < rs->n; i++) {
        const round_t *r = &rs->r[i];
        double busy = r->cpu + r->held, pass = (r->q - 1) * fmax(r->wire, busy);
        one_by_one += r->times * (r->lat + r->wire + r->cpu + pass);
        fill += r->times * (r->lat + (r->alone > 0 ? r->alone : r->wire) + r->cpu);
        tail = fmax(tail, pass);
        double rank_cpu = r->q * busy * (rs->spread ? 1 : r->times);
        cpu = rs->spread ? fmax(cpu, rank_cpu) : cpu + rank_cpu;
        double carried = r->q * r->wire * (rs->spread ? 1 : r->times);
        if (r->link) {
            link = rs->spread ? fmax(link, carried) : link + carried;
        } else {
            chan = rs->spread ? fmax(chan, carried) : chan + carried;
        }
    }
    double way = rs->spread ? fill + tail : one_by_one;

    series_time_t t = {fmax(fmax(way, cpu), fmax(link, chan)), cpu, link};
    return t;
}

/* ---- flat algorithms -------------------------------------------------------- */

static int pof2_floor(int n)
{
    int p = 1;
    while (p <= n / 2) {
        p *= 2;
    }
    return p;
}

/* The node of rank r (c's ranks). */
static int node_of(const closed_t *c, int r)
{
    return c->topo != NULL ? c->topo->node_of[r] : r / c->ppn;
}

/* Rank l of the representative node. */
static int rep_rank(const closed_t *c, int l)
{
    return c->topo != NULL ? fold_topo_rank(c->topo, c->rep, l) : c->rep * c->ppn + l;
}

/* The representative node's ranks whose partner rank ^ mask lies on another node:
 * those of a round of pairs that cross its link at once. */
static int crossers(const closed_t *c, int mask)
{
    int n = 0;
    for (int l = 0; l < c->ppn; l++) {
        int r = rep_rank(c, l), partner = r ^ mask;
        n += partner < c->size && node_of(c, partner) != c->rep;
    }
    return n;
}

/* The representative node's ranks that take a child's message from another node at
 * the level of a tree rooted at rank 0 where children lie `mask` above their parents. */
static int tree_crossers(const closed_t *c, int mask)
{
    int n = 0;
    for (int l = 0; l < c->ppn; l++) {
        int r = rep_rank(c, l);
        n += r % (2 * mask) == 0 && r + mask < c->size && node_of(c, r + mask) != c->rep;
    }
    return n;
}

/* The representative node's ranks whose next rank lies on another node: a ring's
 * hops that cross its link at once. */
static int ring_senders(const closed_t *c)
{
    int n = 0;
    for (int l = 0; l < c->ppn; l++) {
        int r = rep_rank(c, l);
        n += node_of(c, (r + 1) % c->size) != c->rep;
    }
    return n;
}

/* Hops of a ring over c's ranks that cross between nodes. */
static int ring_cuts(const closed_t *c)
{
    return c->topo != NULL ? c->topo->ring_cuts : c->nodes > 1 ? c->nodes : 0;
}

/* Segments of b bytes (at least one, at most bytes / 1) of a round of `bytes`. */
double fold_closed_segs(double bytes, double b)
{
    return bytes <= b ? 1 : ceil(bytes / b);
}

/* The pairing of a non-power-of-two size before and after (block_math.h): pairs of
 * neighbours, within a node where nodes hold two ranks or more. */
static void pairing_rounds(rounds_t *rs, const closed_t *c, double bytes, double b, int work)
{
    double q = fold_closed_segs(bytes, b), seg = bytes / q;
    add_round(rs, c, 1, q, seg, c->ppn == 1, 2, work ? fold_closed_reduce(c, seg) : 0);
}

static void recursive_doubling(rounds_t *rs, const closed_t *c, double n, double b)
{
    const int size = c->size, pof2 = pof2_floor(size);
    double q = fold_closed_segs(n, b), seg = n / q;
    if (size > pof2) {
        pairing_rounds(rs, c, n, b, 1);
    }
    for (int mask = 1; mask < pof2; mask <<= 1) {
        add_round(rs, c, 1, q, seg, crossers(c, mask), 2, fold_closed_reduce(c, seg));
    }
    if (size > pof2) {
        pairing_rounds(rs, c, n, b, 0);
    }
}

/* Every other rank's block straight to the root: `blocks` of `block` bytes, those of
 * the root's node within it, the rest over its link. */
static void gather_to_root(rounds_t *rs, const closed_t *c, int blocks, double block,
                           double b)
{
    const fold_model_params_t *p = c->p;
    int near = c->ppn - 1 < blocks ? c->ppn - 1 : blocks;
    double far = (double)(blocks - near) * block;
    double posts = (double)blocks * fold_closed_segs(block, b);
    /* The root posts its receives while the bytes come in. */
    double posting = posts * p->step_us, copying = (double)near * block * c->intra_pb;
    add_raw(rs, (round_t){.times = 1, .q = 1, .link = far > 0,
                          .lat  = far > 0 ? p->inter_lat_us : p->intra_lat_us,
                          .wire = fmax(far / (p->inter_gbs * 1e3) / p->nics, posting + copying),
                          .held = posting + copying});
}

static void rabenseifner(rounds_t *rs, const closed_t *c, int allreduce, double n, double b)
{
    const int size = c->size, pof2 = pof2_floor(size);
    if (size > pof2) {
        pairing_rounds(rs, c, n, b, 1);
    }
    for (int mask = 1; mask < pof2; mask <<= 1) {   /* reduce-scatter, halves */
        double bytes = n / (2.0 * mask), q = fold_closed_segs(bytes, b);
        add_round(rs, c, 1, q, bytes / q, crossers(c, mask), 2, fold_closed_reduce(c, bytes / q));
    }
    if (!allreduce) {
        gather_to_root(rs, c, pof2 - 1, n / pof2, b);
        return;
    }
    for (int mask = pof2 / 2; mask >= 1; mask >>= 1) {   /* allgather */
        double bytes = n / (2.0 * mask), q = fold_closed_segs(bytes, b);
        add_round(rs, c, 1, q, bytes / q, crossers(c, mask), 2, 0);
    }
    if (size > pof2) {
        pairing_rounds(rs, c, n, b, 0);
    }
}

/* A phase of the ring: each block goes round all size - 1 hops, nodes / size of them
 * between nodes, its first segment at each hop's own pace, and each rank passes
 * blocks - 1 of them (fewer where blocks are empty), its other segments behind the
 * slower kind of hop. */
static void ring_phase(rounds_t *rs, const closed_t *c, double blocks, double block,
                       double b, int reduce, int one_slot)
{
    const double size = c->size, across = ring_cuts(c) / size;
    double q = fold_closed_segs(block, b), seg = block / q;
    double work = reduce ? fold_closed_reduce(c, seg) : 0;
    rounds_t hops = {.n = 0};
    const round_t *x = add_round(&hops, c, 1, q, seg, ring_senders(c), 2, work);
    const round_t *w = add_round(&hops, c, 1, q, seg, 0, 2, work);
    double x_hop = x->lat + x->wire + x->cpu, w_hop = w->lat + w->wire + w->cpu;
    double hop = across * x_hop + (1 - across) * w_hop;
    if (one_slot && across > 0 && blocks >= size) {
        /* A reduce's non-root holds one block of its accumulator (alg_ring.c): where
         * every rank has a block, the ring then has one in flight per rank, and every
         * step waits for the slowest hop. */
        hop = fmax(x_hop, c->ppn > 1 ? w_hop : 0);
    }
    const int within_slower = c->ppn > 1 && fmax(w->wire, w->cpu + w->held) > fmax(x->wire, x->cpu);
    round_t step = within_slower ? *w : *x;
    step.times = blocks - 1;
    step.lat   = fmax(0, hop - step.wire - step.cpu);
    add_raw(rs, step);
    add_raw(rs, (round_t){.times = size - blocks, .q = 1, .lat = hop});   /* empty blocks */
}

static void ring(rounds_t *rs, const closed_t *c, int allreduce, double n, double count,
                 double b)
{
    const int size = c->size;
    /* With fewer elements than ranks only `count` blocks have any (alg_ring.c). */
    double blocks = count < size ? count : size, block = n / blocks;
    ring_phase(rs, c, blocks, block, b, 1, !allreduce);
    if (allreduce) {
        ring_phase(rs, c, blocks, block, b, 0, 0);
    } else {
        gather_to_root(rs, c, (int)blocks - 1, block, b);
    }
}

static void binomial(rounds_t *rs, const closed_t *c, double n, double b)
{
    const int size = c->size;
    double q = fold_closed_segs(n, b), seg = n / q;
    for (int mask = 1; mask < size; mask <<= 1) {
        add_round(rs, c, 1, q, seg, tree_crossers(c, mask), 2, fold_closed_reduce(c, seg));
    }
}

/* The greedy plan (tree_math.c): each segment reduced by a binomial tree, the next
 * one starting among the ranks that have sent theirs, so segments follow each other
 * behind the root, which takes each one's log2 messages in. */
static void greedy(rounds_t *rs, const closed_t *c, double n, double b)
{
    const int size = c->size;
    double q = fold_closed_segs(n, b), seg = n / q;
    round_t root = {.times = 1, .q = q - 1};
    for (int mask = 1; mask < size; mask <<= 1) {
        const round_t *level = add_round(rs, c, 1, 1, seg, tree_crossers(c, mask), 2,
                                         fold_closed_reduce(c, seg));
        if (level == NULL) {
            break;
        }
        root.cpu  += level->cpu;
        root.held += level->held;
        root.wire += level->wire;
        root.link |= level->link;
    }
    add_raw(rs, root);
}

/* A rank whose core moves its incoming messages (within a node) takes the next
 * segments in, as many as its receive slots hold, before it reduces the first one
 * (the replay's transfers claim the core as they start). */
static void hold_ahead(round_t *r, const closed_t *c)
{
    if (r != NULL && r->held > 0) {
        r->lat += (fmin(r->q, c->depth) - 1) * r->held;
    }
}

/* In-order binary tree: the rank at height h folds its two children's segments, from
 * 2^(h-1) positions either side. */
static void bintree(rounds_t *rs, const closed_t *c, double n, double b)
{
    const int size = c->size;
    double q = fold_closed_segs(n, b), seg = n / q;
    rs->spread = 1;
    for (int d = 1; 2 * d <= size; d <<= 1) {
        /* both children's segments come in over the one link or channel */
        add_round(rs, c, 1, q, 2 * seg, crossers(c, d) > 0, 3, 2 * fold_closed_reduce(c, seg));
    }
}

static void chain(rounds_t *rs, const closed_t *c, double n, double b)
{
    double q = fold_closed_segs(n, b), seg = n / q;
    rs->spread = 1;
    /* a chain does not wrap round from its last rank to its first */
    const double across = ring_cuts(c) - (node_of(c, c->size - 1) != node_of(c, 0));
    hold_ahead(add_round(rs, c, c->size - 1 - across, q, seg, 0, 2, fold_closed_reduce(c, seg)), c);
    /* at most q hops carry a segment at once */
    add_round(rs, c, across, q, seg, (int)fmin(ring_senders(c), q), 2, fold_closed_reduce(c, seg));
}

/* The bytes a rank other than a reduce's root touches (model.c, prog_note_footprint):
 * its input, its output or accumulator, and its receive slots. */
static double flat_footprint(const fold_model_query_t *q, int size, double n, double slots)
{
    const fold_alg_t *alg = q->alg;
    if (q->proto.coll == FOLD_COLL_ALLREDUCE) {
        return 2 * n + slots;
    }
    if (alg == &fold_alg_ring) {
        return n + n / size + slots;
    }
    if (alg == &fold_alg_rabenseifner) {
        return 1.5 * n + slots;
    }
    if (alg == &fold_alg_binomial) {
        return 2 * n + slots;
    }
    return n + (alg == &fold_alg_bintree ? 2 : 1) * slots;   /* the chain's, a tree's */
}

/* The flat algorithms with a form, and the rounds of each over c's ranks for n bytes
 * (count elements) in segments of b bytes. */
int fold_closed_has_form(const fold_alg_t *alg, int allreduce)
{
    if (allreduce) {
        return alg == &fold_alg_recursive_doubling || alg == &fold_alg_rabenseifner ||
               alg == &fold_alg_ring;
    }
    return alg == &fold_alg_binomial || alg == &fold_alg_rabenseifner || alg == &fold_alg_ring ||
           alg == &fold_alg_bintree || alg == &fold_alg_chain || alg == &fold_alg_greedy;
}

void fold_closed_flat(rounds_t *rs, const closed_t *c, const fold_alg_t *alg, int allreduce,
                        double n, double count, double b)
{
    if (alg == &fold_alg_recursive_doubling) {
        recursive_doubling(rs, c, n, b);
    } else if (alg == &fold_alg_rabenseifner) {
        rabenseifner(rs, c, allreduce, n, b);
    } else if (alg == &fold_alg_ring) {
        ring(rs, c, allreduce, n, count, b);
    } else if (alg == &fold_alg_binomial) {
        binomial(rs, c, n, b);
    } else if (alg == &fold_alg_bintree) {
        bintree(rs, c, n, b);
    } else if (alg == &fold_alg_chain) {
        chain(rs, c, n, b);
    } else {
        greedy(rs, c, n, b);
    }
}

/* ---- the entry points ------------------------------------------------------------ */

static int is_dpml(const fold_alg_t *alg)
{
    return alg == &fold_alg_dpml || alg == &fold_alg_dpml_pipelined;
}

int fold_model_closed_covers(const fold_topo_t *topo, const fold_model_query_t *q)
{
    if (topo == NULL || q == NULL || q->alg == NULL || topo->size < 2) {
        return 0;
    }
    const int allreduce = q->proto.coll == FOLD_COLL_ALLREDUCE;
    if (q->alg->flags & FOLD_ALG_NODE_AWARE) {
        /* across nodes shm_flat and cma build dpml, which needs its exchange's form */
        int known = is_dpml(q->alg) || q->alg == &fold_alg_shm_flat || q->alg == &fold_alg_cma;
        return known && (topo->nnodes == 1 || (q->proto.inter != NULL &&
                                              fold_closed_has_form(q->proto.inter, allreduce)));
    }
    return fold_closed_has_form(q->alg, allreduce);
}

int fold_model_closed(const fold_model_params_t *p, const fold_topo_t *topo,
                      const fold_model_query_t *q, fold_model_result_t *res)
{
    if (p == NULL || res == NULL || !fold_model_closed_covers(topo, q)) {
        return FOLD_ERR_UNSUPPORTED;
    }
    *res = (fold_model_result_t){0};
    double us;
    if (q->alg->flags & FOLD_ALG_NODE_AWARE) {
        int status = q->alg == &fold_alg_shm_flat ? fold_closed_shm_flat(p, topo, q, &us)
                   : q->alg == &fold_alg_cma      ? fold_closed_cma(p, topo, q, &us)
                   : fold_closed_dpml(p, topo, q, q->alg == &fold_alg_dpml_pipelined, &us);
        if (status != FOLD_OK) {
            return status;
        }
    } else {
        const double es = (double)q->esize, count = (double)(q->proto.count ? q->proto.count : 1);
        const double n = count * es;
        const double b = q->proto.seg_count ? (double)q->proto.seg_count * es : n;
        const double depth = q->proto.depth > 0 ? q->proto.depth : 1;
        const double scale = q->ws_scale > 1 ? q->ws_scale : 1;
        closed_t c;
        fold_closed_init(&c, p, topo, 0, 0, 1, q->proto.depth,
                    flat_footprint(q, topo->size, n, fmin(n, depth * b)) * scale, 0);
        rounds_t rs = {.n = 0};
        fold_closed_flat(&rs, &c, q->alg, q->proto.coll == FOLD_COLL_ALLREDUCE, n, count, b);
        us = fold_closed_series(&rs).time;
    }
    res->time_us = us;
    res->root_us = us;
    return FOLD_OK;
}
