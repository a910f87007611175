/*
 * Codec links in a finalized schedule. The executor may send any message encoded
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
#include "sched.h"

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
    switch (st->kind) {
    case FOLD_STEP_SEND:
    case FOLD_STEP_COPY:
        return overlaps(s, st->src, st->count, r, n);
    case FOLD_STEP_REDUCE:
        return overlaps(s, st->src, st->count, r, n) || overlaps(s, st->src2, st->count, r, n);
    default:
        return 0;
    }
}

static int writes_range(const fold_sched_t *s, const fold_step_t *st, fold_ref_t r, size_t n)
{
    return st->kind != FOLD_STEP_SEND && overlaps(s, st->dst, st->count, r, n);
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

void fold_sched_mark_wire(fold_sched_t *s)
{
    for (size_t i = 0; i < s->nsteps; i++) {
        s->steps[i].wire   = 0;
        s->steps[i].counts = 0;
        s->steps[i].link   = FOLD_STEP_NONE;
        s->steps[i].fwd    = FOLD_STEP_NONE;
    }
    for (uint32_t i = 0; i < s->nsteps; i++) {
        fold_step_t *st = &s->steps[i];
        if (st->kind == FOLD_STEP_RECV) {
            uint32_t j = wire_consumer(s, i);
            if (j != FOLD_STEP_NONE) {
                fold_step_t *red = &s->steps[j];
                st->wire  = 1;
                red->wire = same_range(s, red->src, st->dst) ? 1 : 2;
                red->link = i;
            }
        } else if (st->kind == FOLD_STEP_REDUCE) {
            int readers = 0;
            for (uint32_t k = 0; k < st->nsucc; k++) {
                uint32_t j = s->succ[st->succ_off + k];
                fold_step_t *snd = &s->steps[j];
                readers += reads_range(s, snd, st->dst, st->count);
                if (snd->kind == FOLD_STEP_SEND && snd->count == st->count &&
                    same_range(s, snd->src, st->dst) && st->fwd == FOLD_STEP_NONE) {
                    st->counts = 1;
                    st->fwd    = j;
                    snd->link  = i;
                }
            }
            if (st->counts && readers == 1 && st->dst.buf == FOLD_BUF_TMP) {
                st->counts = 2;
            }
        }
    }
}
