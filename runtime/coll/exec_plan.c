/*
 * The executor's plan of a finalized schedule (exec_plan.h): codec links and soft
 * waits, read off the schedule's steps and dependencies.
 *
 * Codec links. The executor may send any message encoded
 * (runtime/codec/codec.h): a receiver tells an encoded message from a dense one by
 * its length. What this file finds are the places where the codec work can ride
 * on a reduction pass instead of costing one of its own:
 *
 *   recv TMP[a..b) from q  ->  reduce(TMP[a..b), mine -> dst)
 *       the reduction reads the encoded message straight from the slot and decodes
 *       while it reduces (a_C op b -> a); nothing else may read the slot before it
 *       is written again, and dst must not overlap it.
 *
 *   reduce(..., -> X[a..b))  ->  send X[a..b) to q
 *       the reduction counts the density of its result, so the send picks its
 *       codec without another pass over the data; where X is TMP and nothing else
 *       reads X[a..b), the reduction may instead write its result encoded, straight
 *       into the send's staging buffer (a op b -> a_C, a_C op b -> a_C).
 *
 * Every reader of a range has an edge from the range's last writer, and every later
 * writer an edge from the readers since, so both patterns can be read off the
 * successor lists.
 */
#include "coll/exec_plan.h"

#include <fold/fold_status.h>
#include <stdlib.h>

static int node_differs(void *arg, int peer)
{
    const fold_remote_nodes_t *r = arg;
    return r->node_of[peer] != r->node;
}

const fold_remote_t *fold_remote_nodes(fold_remote_nodes_t *r, const int *node_of, int node)
{
    *r = (fold_remote_nodes_t){{node_differs, r}, node_of, node};
    return &r->remote;
}

/* ---- codec links --------------------------------------------------------------- */

static uint8_t alias_of(const fold_sched_t *s, uint8_t buf)
{
    return (s->inplace && buf == FOLD_BUF_IN) ? FOLD_BUF_OUT : buf;
}

static int same_range(const fold_sched_t *s, fold_ref_t a, fold_ref_t b)
{
    return alias_of(s, a.buf) == alias_of(s, b.buf) && a.off == b.off;
}

static int overlaps(const fold_sched_t *s, fold_ref_t a, size_t na, fold_ref_t b, size_t nb)
{
    return na != 0 && nb != 0 && alias_of(s, a.buf) == alias_of(s, b.buf) &&
           a.off < b.off + nb && b.off < a.off + na;
}

/* Whether step st reads the range [r, r + n). */
static int reads_range(const fold_sched_t *s, const fold_step_t *st, fold_ref_t r, size_t n)
{
    if (st->kind == FOLD_STEP_PEER_READ || st->kind == FOLD_STEP_PEER_WRITE) {
        return 0;
    }
    for (int k = 0; k < fold_step_nreads(st); k++) {
        if (overlaps(s, fold_step_read(s, st, k), st->count, r, n)) {
            return 1;
        }
    }
    return 0;
}

static int writes_range(const fold_sched_t *s, const fold_step_t *st, fold_ref_t r, size_t n)
{
    for (int k = 0; k < fold_step_nwrites(st); k++) {
        if (overlaps(s, fold_step_write(s, st, k), st->count, r, n)) {
            return 1;
        }
    }
    return 0;
}

static int is_successor(const fold_sched_t *s, uint32_t from, uint32_t to)
{
    const fold_step_t *st = &s->steps[from];
    for (uint32_t k = 0; k < st->nsucc; k++) {
        if (s->succ[st->succ_off + k] == to) {
            return 1;
        }
    }
    return 0;
}

/* The one reduction that may decode receive i's message, or FOLD_STEP_NONE. */
static uint32_t wire_consumer(const fold_sched_t *s, uint32_t i)
{
    const fold_step_t *rv = &s->steps[i];
    uint32_t consumer = FOLD_STEP_NONE;

    if (rv->dst.buf != FOLD_BUF_TMP || rv->count == 0) {
        return FOLD_STEP_NONE;   /* user and node-shared memory must hold plain data */
    }
    for (uint32_t k = 0; k < rv->nsucc; k++) {
        uint32_t j = s->succ[rv->succ_off + k];
        const fold_step_t *st = &s->steps[j];
        if (!reads_range(s, st, rv->dst, rv->count)) {
            continue;
        }
        if (consumer != FOLD_STEP_NONE || st->kind != FOLD_STEP_REDUCE ||
            st->count != rv->count ||
            !(same_range(s, st->src, rv->dst) || same_range(s, st->src2, rv->dst)) ||
            overlaps(s, st->dst, st->count, rv->dst, rv->count)) {
            return FOLD_STEP_NONE;
        }
        consumer = j;
    }
    if (consumer == FOLD_STEP_NONE) {
        return FOLD_STEP_NONE;
    }
    /* A later write into the slot must come after the consumer has read it. */
    for (uint32_t k = 0; k < rv->nsucc; k++) {
        uint32_t w = s->succ[rv->succ_off + k];
        if (w != consumer && writes_range(s, &s->steps[w], rv->dst, rv->count) &&
            !is_successor(s, consumer, w)) {
            return FOLD_STEP_NONE;
        }
    }
    return consumer;
}

/* Finds the steps the executor may fuse with a codec: a receive into TMP whose only
 * reader is one reduction that reads exactly what it received (the reduction
 * decodes it while reducing), and a reduction whose result a send forwards
 * unchanged (it counts the density the send chooses a codec by, or encodes its
 * result for the send directly). */
static void plan_codec_links(fold_wire_plan_t *plan, const fold_sched_t *s)
{
    for (uint32_t i = 0; i < s->nsteps; i++) {
        const fold_step_t *st = &s->steps[i];
        fold_plan_step_t *ps = &plan->steps[i];
        if (st->kind == FOLD_STEP_RECV) {
            uint32_t j = wire_consumer(s, i);
            if (j != FOLD_STEP_NONE) {
                fold_plan_step_t *red = &plan->steps[j];
                ps->wire  = 1;
                red->wire = same_range(s, s->steps[j].src, st->dst) ? 1 : 2;
                red->link = i;
            }
        } else if (st->kind == FOLD_STEP_REDUCE) {
            int readers = 0;
            for (uint32_t k = 0; k < st->nsucc; k++) {
                uint32_t j = s->succ[st->succ_off + k];
                const fold_step_t *snd = &s->steps[j];
                readers += reads_range(s, snd, st->dst, st->count);
                if (snd->kind == FOLD_STEP_SEND && snd->count == st->count &&
                    same_range(s, snd->src, st->dst) && ps->fwd == FOLD_STEP_NONE) {
                    ps->counts = 1;
                    ps->fwd    = j;
                    plan->steps[j].link = i;
                }
            }
            if (ps->counts && readers == 1 && st->dst.buf == FOLD_BUF_TMP) {
                ps->counts = 2;
            }
        }
    }
}

/* ---- soft waits ---------------------------------------------------------------- */

/* A send to a peer on another node that answers it, its data derived from a message
 * the peer sent, waits (softly: see exec_plan.h) until this rank's latest earlier
 * send to that peer of data not derived from its messages is done. Otherwise, where
 * the peer's message came early (small: sparse data, encoded), the answer would
 * share the link with the message the peer needs first, and the peer would wait for
 * both. Sends of the same kind keep their overlap (pipelines stay full), and peers
 * on this node are left alone: a rank pulls their messages in the order it needs
 * them. */
static void plan_answers_to(fold_wire_plan_t *plan, const fold_sched_t *s, int32_t peer,
                            uint32_t *source)
{
    /* source[i]: the latest receive from the peer that step i derives from, carried
     * along the dependencies (every edge goes to a later step). */
    size_t n = s->nsteps;
    for (size_t i = 0; i < n; i++) {
        const fold_step_t *st = &s->steps[i];
        source[i] = (st->kind == FOLD_STEP_RECV && st->peer == peer) ? (uint32_t)i
                                                                      : FOLD_STEP_NONE;
    }
    for (size_t i = 0; i < n; i++) {
        const fold_step_t *st = &s->steps[i];
        uint32_t from = source[i];
        for (uint32_t k = 0; k < st->nsucc && from != FOLD_STEP_NONE; k++) {
            uint32_t *to = &source[s->succ[st->succ_off + k]];
            if (*to == FOLD_STEP_NONE || from > *to) {
                *to = from;
            }
        }
    }
    int64_t own = -1;
    for (size_t i = 0; i < n; i++) {
        const fold_step_t *st = &s->steps[i];
        if (st->kind != FOLD_STEP_SEND || st->peer != peer) {
            continue;
        }
        if (source[i] == FOLD_STEP_NONE) {
            own = (int64_t)i;
        } else if (own >= 0) {
            plan->steps[i].soft     = (uint32_t)own;
            plan->steps[i].soft_src = source[i];
            plan->soft_steps[plan->nsoft++] = (uint32_t)i;
        }
    }
}

static int plan_answers(fold_wire_plan_t *plan, const fold_sched_t *s,
                        const fold_remote_t *remote)
{
    size_t n = s->nsteps;
    if (remote == NULL) {
        return FOLD_OK;
    }
    uint32_t *source = NULL;
    for (size_t i = 0; i < n; i++) {
        const fold_step_t *st = &s->steps[i];
        if (st->kind != FOLD_STEP_SEND || !fold_remote_peer(remote, st->peer)) {
            continue;
        }
        int seen = 0;   /* the first send to each remote peer orders them all */
        for (size_t k = 0; k < i && !seen; k++) {
            seen = s->steps[k].kind == FOLD_STEP_SEND && s->steps[k].peer == st->peer;
        }
        if (seen) {
            continue;
        }
        if (source == NULL && (source = malloc((n + 1) * sizeof(*source))) == NULL) {
            return FOLD_ERR_NO_MEMORY;
        }
        plan_answers_to(plan, s, st->peer, source);
    }
    free(source);
    /* Each own send's waiters, in step order (the order they become ready in). */
    for (size_t k = plan->nsoft; k-- > 0;) {
        uint32_t j = plan->soft_steps[k];
        fold_plan_step_t *own = &plan->steps[plan->steps[j].soft];
        plan->steps[j].soft_next = own->soft_first;
        own->soft_first = j;
    }
    return FOLD_OK;
}

/* ---- final results ------------------------------------------------------------- */

/* The range of OUT step st reads from its operand r, if it does. */
static int reads_out(const fold_sched_t *s, fold_ref_t r, size_t count, size_t *lo, size_t *hi)
{
    if (count == 0 || alias_of(s, r.buf) != FOLD_BUF_OUT) {
        return 0;
    }
    *lo = r.off;
    *hi = r.off + count;
    return 1;
}

/* Marks the reductions and copies into OUT that no later step reads (see the header). Steps
 * are built in an order their dependencies follow, so a reader with a lower index
 * runs before: sweeping backwards, the OUT ranges read so far are those read after
 * the step at hand. */
static int plan_final_results(fold_wire_plan_t *plan, const fold_sched_t *s)
{
    size_t cap = 16, nread = 0;
    size_t (*read)[2] = malloc(cap * sizeof(*read));
    if (read == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    for (size_t i = s->nsteps; i-- > 0;) {
        const fold_step_t *st = &s->steps[i];
        if ((st->kind == FOLD_STEP_REDUCE || st->kind == FOLD_STEP_REDUCE_ROWS ||
             st->kind == FOLD_STEP_COPY) &&
            alias_of(s, st->dst.buf) == FOLD_BUF_OUT && st->count > 0) {
            int read_later = 0;
            for (size_t k = 0; k < nread && !read_later; k++) {
                read_later = st->dst.off < read[k][1] && read[k][0] < st->dst.off + st->count;
            }
            /* A sum kept in OUT (OUT op x -> OUT) finds its lines in the cache, dirty
             * from the step that wrote them: streaming stores would first write them
             * back, and save no fetch (2-rank 16 MiB reduce by single copy summing in
             * OUT: 1.8-2x the time). In place, IN's lines are clean: that streams.
             * An operand a peer read fills is read where it lies when the executor
             * finds it mapped (final_viewed). */
            const fold_plan_step_t *ps = &plan->steps[i];
            const int viewed_operand = ps->view_of != FOLD_STEP_NONE ? ps->view_operand : 0;
            int own = 0, viewed = 0;
            for (int k = 0; k < fold_step_nreads(st); k++) {
                fold_ref_t r = fold_step_read(s, st, k);
                if (r.buf == FOLD_BUF_OUT && st->dst.off < r.off + st->count &&
                    r.off < st->dst.off + st->count) {
                    *(k + 1 == viewed_operand ? &viewed : &own) = 1;
                }
            }
            const int along = ps->writes_along > 0;
            plan->steps[i].final_out    = !read_later && !own && !viewed && !along;
            plan->steps[i].final_viewed = !read_later && !own && (viewed || along);
        }
        if (plan->steps[i].written_by != FOLD_STEP_NONE) {
            continue;   /* it reads only its reduction's result, which it makes along */
        }
        for (int k = 0; k < fold_step_nreads(st); k++) {
            size_t lo, hi;
            if (!reads_out(s, fold_step_read(s, st, k), st->count, &lo, &hi)) {
                continue;
            }
            if (nread == cap) {
                void *grown = realloc(read, 2 * cap * sizeof(*read));
                if (grown == NULL) {
                    free(read);
                    return FOLD_ERR_NO_MEMORY;
                }
                read = grown;
                cap *= 2;
            }
            read[nread][0] = lo;
            read[nread][1] = hi;
            nread++;
        }
    }
    free(read);
    return FOLD_OK;
}

/* ---- copies made along ---------------------------------------------------------- */

/* Whether copy c takes reduction r's result, unchanged and whole, into OUT, with
 * nothing but r and posts right after r before it (see exec_plan.h). */
static int copies_along(const fold_sched_t *s, uint32_t r, uint32_t c)
{
    const fold_step_t *red = &s->steps[r], *cp = &s->steps[c];
    if (cp->kind != FOLD_STEP_COPY || cp->count != red->count ||
        !same_range(s, cp->src, red->dst) || alias_of(s, cp->dst.buf) != FOLD_BUF_OUT) {
        return 0;
    }
    /* An operand in OUT may be the copy's very range (in place: the fold reads each
     * element before it writes the same one), not another part of it. */
    for (int k = 0; k < fold_step_nreads(red); k++) {
        fold_ref_t op = fold_step_read(s, red, k);
        if (overlaps(s, cp->dst, cp->count, op, red->count) && !same_range(s, cp->dst, op)) {
            return 0;
        }
    }
    /* Every step c waits for is r or a post right after it: a step that read or
     * wrote c's destination, or wrote its source, in between would be another (a
     * post after such a writer waits for it, not for r). */
    uint32_t known = is_successor(s, r, c);
    for (uint32_t k = 0; k < red->nsucc; k++) {
        uint32_t p = s->succ[red->succ_off + k];
        known += s->steps[p].kind == FOLD_STEP_SHM_POST && is_successor(s, p, c);
    }
    return known == cp->npred;
}

uint32_t fold_plan_copy_along(const fold_sched_t *s, uint32_t r)
{
    const fold_step_t *red = &s->steps[r];
    if ((red->kind != FOLD_STEP_REDUCE && red->kind != FOLD_STEP_REDUCE_ROWS) ||
        red->dst.buf != FOLD_BUF_SHM || red->count == 0) {
        return FOLD_STEP_NONE;
    }
    /* The copy follows r directly, or a post of r's range does. */
    for (uint32_t k = 0; k < red->nsucc; k++) {
        uint32_t j = s->succ[red->succ_off + k];
        const fold_step_t *st = &s->steps[j];
        if (copies_along(s, r, j)) {
            return j;
        }
        for (uint32_t m = 0; st->kind == FOLD_STEP_SHM_POST && m < st->nsucc; m++) {
            uint32_t c = s->succ[st->succ_off + m];
            if (copies_along(s, r, c)) {
                return c;
            }
        }
    }
    return FOLD_STEP_NONE;
}

/* (No copy is made along by two reductions: every step it waits for is one of them
 * or a post right after it.) */
static void plan_copies_along(fold_wire_plan_t *plan, const fold_sched_t *s)
{
    for (uint32_t r = 0; r < s->nsteps; r++) {
        uint32_t c = fold_plan_copy_along(s, r);
        if (c != FOLD_STEP_NONE) {
            plan->steps[r].copy_along = c;
            plan->steps[c].copied     = 1;
        }
    }
}

/* ---- peer reads folded from where they lie --------------------------------------- */

/* Whether step st reads [r, r + n) of this rank's buffers, a peer write's source
 * included (reads_range leaves peer steps out: they are no codec's business). */
static int reads_local(const fold_sched_t *s, const fold_step_t *st, fold_ref_t r, size_t n)
{
    for (int k = 0; k < fold_step_nreads(st); k++) {
        if (overlaps(s, fold_step_read(s, st, k), st->count, r, n)) {
            return 1;
        }
    }
    return 0;
}

static int touches(const fold_sched_t *s, const fold_step_t *st, fold_ref_t r, size_t n)
{
    return reads_local(s, st, r, n) || writes_range(s, st, r, n);
}

/* The first step after `from` that touches [r, r + n), or FOLD_STEP_NONE. */
static uint32_t next_user(const fold_sched_t *s, uint32_t from, fold_ref_t r, size_t n)
{
    for (uint32_t k = from + 1; k < s->nsteps; k++) {
        if (touches(s, &s->steps[k], r, n)) {
            return k;
        }
    }
    return FOLD_STEP_NONE;
}

/* Step st writes all of [r, r + n) and reads none of it. */
static int overwrites(const fold_sched_t *s, const fold_step_t *st, fold_ref_t r, size_t n)
{
    if (reads_local(s, st, r, n)) {
        return 0;
    }
    for (int k = 0; k < fold_step_nwrites(st); k++) {
        fold_ref_t w = fold_step_write(s, st, k);
        if (alias_of(s, w.buf) == alias_of(s, r.buf) && w.off <= r.off &&
            w.off + st->count >= r.off + n) {
            return 1;
        }
    }
    return 0;
}

/* The operand (1 src, 2 src2) of reduction j that may fold peer read i's bytes where
 * they lie, or 0 (see exec_plan.h). In a serial schedule the steps that touch this
 * rank's buffers run in the order built, so the next user of the read's range is the
 * next step in that order that touches it. */
static int peer_view_operand(const fold_sched_t *s, uint32_t i, uint32_t j)
{
    const fold_step_t *rd = &s->steps[i], *red = &s->steps[j];
    if (red->kind != FOLD_STEP_REDUCE || red->count != rd->count ||
        fold_plan_copy_along(s, j) != FOLD_STEP_NONE) {
        return 0;
    }
    int operand = same_range(s, red->src, rd->dst) ? 1 : same_range(s, red->src2, rd->dst) ? 2 : 0;
    fold_ref_t other = operand == 1 ? red->src2 : red->src;
    if (operand == 0 || overlaps(s, other, red->count, rd->dst, rd->count)) {
        return 0;   /* not its operand, or both are */
    }
    if (same_range(s, red->dst, rd->dst)) {
        return operand;   /* the result goes over the range */
    }
    if (overlaps(s, red->dst, red->count, rd->dst, rd->count)) {
        return 0;
    }
    /* The range keeps what it held before the read: whoever uses it next must write
     * all of it first. */
    uint32_t k = next_user(s, j, rd->dst, rd->count);
    return k == FOLD_STEP_NONE || overwrites(s, &s->steps[k], rd->dst, rd->count) ? operand : 0;
}

uint32_t fold_plan_peer_view(const fold_sched_t *s, uint32_t i, int *operand)
{
    const fold_step_t *rd = &s->steps[i];
    *operand = 0;
    if (!s->serial || rd->kind != FOLD_STEP_PEER_READ || rd->count == 0) {
        return FOLD_STEP_NONE;
    }
    uint32_t j = next_user(s, i, rd->dst, rd->count);
    *operand = j == FOLD_STEP_NONE ? 0 : peer_view_operand(s, i, j);
    return *operand != 0 ? j : FOLD_STEP_NONE;
}

/* (A reduction whose operand or result a codec handles takes no read over.) */
static void plan_peer_views(fold_wire_plan_t *plan, const fold_sched_t *s)
{
    for (uint32_t i = 0; s->serial && i < s->nsteps; i++) {
        int operand;
        uint32_t j = fold_plan_peer_view(s, i, &operand);
        if (j != FOLD_STEP_NONE && plan->steps[j].wire == 0 && plan->steps[j].counts == 0 &&
            plan->steps[j].view_of == FOLD_STEP_NONE) {
            plan->steps[i].viewed_by    = j;
            plan->steps[j].view_of      = i;
            plan->steps[j].view_operand = (uint8_t)operand;
        }
    }
}

/* ---- results written along ------------------------------------------------------- */

int fold_plan_writes_along(const fold_sched_t *s, uint32_t r)
{
    const fold_step_t *red = &s->steps[r];
    if (!s->serial || red->kind != FOLD_STEP_REDUCE || red->count == 0) {
        return 0;
    }
    int k = 0;
    for (uint32_t w = r + 1; w < s->nsteps && k < FOLD_PLAN_ALONG_MAX; w++, k++) {
        const fold_step_t *st = &s->steps[w];
        if (st->kind != FOLD_STEP_PEER_WRITE || st->count != red->count ||
            !same_range(s, st->src, red->dst)) {
            break;
        }
    }
    return k;
}

/* A reduction's own destination, when not OUT, may go unwritten if the next step after
 * its writes that touches it writes all of it first (in a serial schedule, steps run
 * in the order built). */
static void plan_writes_along(fold_wire_plan_t *plan, const fold_sched_t *s)
{
    for (uint32_t r = 0; s->serial && r < s->nsteps; r++) {
        const int k = fold_plan_writes_along(s, r);
        if (k == 0 || plan->steps[r].wire != 0 || plan->steps[r].counts != 0 ||
            plan->steps[r].copy_along != FOLD_STEP_NONE) {
            continue;
        }
        const fold_step_t *red = &s->steps[r];
        plan->steps[r].writes_along = (uint8_t)k;
        for (int w = 1; w <= k; w++) {
            plan->steps[r + (uint32_t)w].written_by = r;
        }
        if (alias_of(s, red->dst.buf) != FOLD_BUF_OUT) {
            uint32_t next = next_user(s, r + (uint32_t)k, red->dst, red->count);
            plan->steps[r].dst_dead =
                next == FOLD_STEP_NONE || overwrites(s, &s->steps[next], red->dst, red->count);
        }
    }
}

/* ---- the plan ------------------------------------------------------------------ */

int fold_wire_plan_build(fold_wire_plan_t *plan, const fold_sched_t *s,
                         const fold_remote_t *remote)
{
    size_t n = s->nsteps;
    plan->nsteps     = n;
    plan->nsoft      = 0;
    plan->steps      = malloc((n + 1) * sizeof(*plan->steps));
    plan->soft_steps = malloc((n + 1) * sizeof(*plan->soft_steps));
    if (plan->steps == NULL || plan->soft_steps == NULL) {
        fold_wire_plan_free(plan);
        return FOLD_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < n; i++) {
        plan->steps[i] = (fold_plan_step_t){.link = FOLD_STEP_NONE, .fwd = FOLD_STEP_NONE,
                                            .soft = FOLD_STEP_NONE,
                                            .soft_src = FOLD_STEP_NONE,
                                            .soft_first = FOLD_STEP_NONE,
                                            .soft_next = FOLD_STEP_NONE,
                                            .copy_along = FOLD_STEP_NONE,
                                            .viewed_by = FOLD_STEP_NONE,
                                            .view_of = FOLD_STEP_NONE,
                                            .written_by = FOLD_STEP_NONE};
    }
    plan_codec_links(plan, s);
    plan_copies_along(plan, s);
    plan_peer_views(plan, s);
    plan_writes_along(plan, s);
    int status = plan_answers(plan, s, remote);
    if (status == FOLD_OK) {
        status = plan_final_results(plan, s);
    }
    if (status != FOLD_OK) {
        fold_wire_plan_free(plan);
    }
    return status;
}

void fold_wire_plan_free(fold_wire_plan_t *plan)
{
    free(plan->steps);
    free(plan->soft_steps);
    *plan = (fold_wire_plan_t){0};
}
