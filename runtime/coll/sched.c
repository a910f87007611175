/*
 * Schedule building and finalisation: dependencies from buffer ranges, message
 * numbering per peer. See sched.h for the rules builders follow.
 */
#include "sched.h"

#include <fold/fold_status.h>
#include <stdlib.h>
#include <string.h>

void fold_sched_init(fold_sched_t *s, const fold_coll_args_t *args)
{
    memset(s, 0, sizeof(*s));
    s->inplace = args->inplace;
    s->has_out = !(args->coll == FOLD_COLL_REDUCE && args->rank != args->root) &&
                 args->coll != FOLD_COLL_BARRIER;
}

void fold_sched_cleanup(fold_sched_t *s)
{
    free(s->steps);
    free(s->succ);
    memset(s, 0, sizeof(*s));
}

static fold_step_t *sched_append(fold_sched_t *s, int kind, size_t count)
{
    if (s->status != FOLD_OK) {
        return NULL;
    }
    if (s->nsteps == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 32;
        fold_step_t *steps = realloc(s->steps, cap * sizeof(*steps));
        if (steps == NULL) {
            s->status = FOLD_ERR_NO_MEMORY;
            return NULL;
        }
        s->steps = steps;
        s->cap   = cap;
    }
    fold_step_t *st = &s->steps[s->nsteps++];
    memset(st, 0, sizeof(*st));
    st->kind  = (uint8_t)kind;
    st->count = count;
    st->peer  = -1;
    return st;
}

static void sched_note_ref(fold_sched_t *s, fold_ref_t ref, size_t count)
{
    if (ref.buf == FOLD_BUF_TMP && ref.off + count > s->tmp_count) {
        s->tmp_count = ref.off + count;
    }
    if (ref.buf == FOLD_BUF_OUT && !s->has_out) {
        s->status = FOLD_ERR_INVALID_ARG;   /* builder bug: no OUT on this rank */
    }
}

void fold_sched_send(fold_sched_t *s, int peer, fold_ref_t src, size_t count)
{
    if (count == 0) {
        return;
    }
    fold_step_t *st = sched_append(s, FOLD_STEP_SEND, count);
    if (st != NULL) {
        st->peer = peer;
        st->src  = src;
        sched_note_ref(s, src, count);
    }
}

void fold_sched_recv(fold_sched_t *s, int peer, fold_ref_t dst, size_t count)
{
    if (count == 0) {
        return;
    }
    fold_step_t *st = sched_append(s, FOLD_STEP_RECV, count);
    if (st != NULL) {
        st->peer = peer;
        st->dst  = dst;
        sched_note_ref(s, dst, count);
    }
}

void fold_sched_signal(fold_sched_t *s, int peer)
{
    fold_step_t *st = sched_append(s, FOLD_STEP_SEND, 0);
    if (st != NULL) {
        st->peer = peer;
    }
}

void fold_sched_wait_signal(fold_sched_t *s, int peer)
{
    fold_step_t *st = sched_append(s, FOLD_STEP_RECV, 0);
    if (st != NULL) {
        st->peer = peer;
    }
}

void fold_sched_copy(fold_sched_t *s, fold_ref_t src, fold_ref_t dst, size_t count)
{
    if (count == 0 || (src.buf == dst.buf && src.off == dst.off) ||
        (s->inplace && src.buf != FOLD_BUF_TMP && dst.buf != FOLD_BUF_TMP &&
         src.off == dst.off)) {
        return;   /* copying onto itself (in-place IN is OUT) is no copy at all */
    }
    fold_step_t *st = sched_append(s, FOLD_STEP_COPY, count);
    if (st != NULL) {
        st->src = src;
        st->dst = dst;
        sched_note_ref(s, src, count);
        sched_note_ref(s, dst, count);
    }
}

void fold_sched_reduce(fold_sched_t *s, fold_ref_t left, fold_ref_t right, fold_ref_t dst,
                       size_t count)
{
    if (count == 0) {
        return;
    }
    fold_step_t *st = sched_append(s, FOLD_STEP_REDUCE, count);
    if (st != NULL) {
        st->src  = left;
        st->src2 = right;
        st->dst  = dst;
        sched_note_ref(s, left, count);
        sched_note_ref(s, right, count);
        sched_note_ref(s, dst, count);
    }
}

void fold_sched_send_segs(fold_sched_t *s, int peer, fold_ref_t src, size_t count,
                          size_t seg)
{
    seg = seg ? seg : count;
    for (size_t off = 0; off < count; off += seg) {
        size_t n = count - off < seg ? count - off : seg;
        fold_sched_send(s, peer, fold_ref_add(src, off), n);
    }
}

void fold_sched_recv_segs(fold_sched_t *s, int peer, fold_ref_t dst, size_t count,
                          size_t seg)
{
    seg = seg ? seg : count;
    for (size_t off = 0; off < count; off += seg) {
        size_t n = count - off < seg ? count - off : seg;
        fold_sched_recv(s, peer, fold_ref_add(dst, off), n);
    }
}

void fold_sched_recv_reduce_segs(fold_sched_t *s, int peer, fold_ref_t mine,
                                 fold_ref_t dst, size_t count, size_t seg, int depth,
                                 size_t tmp_base, int peer_is_left)
{
    seg   = seg ? seg : count;
    depth = depth > 0 ? depth : 1;
    size_t k = 0;
    for (size_t off = 0; off < count; off += seg, k++) {
        size_t n = count - off < seg ? count - off : seg;
        fold_ref_t slot = fold_ref_tmp(tmp_base + (k % (size_t)depth) * seg);
        fold_sched_recv(s, peer, slot, n);
        if (peer_is_left) {
            fold_sched_reduce(s, slot, fold_ref_add(mine, off), fold_ref_add(dst, off), n);
        } else {
            fold_sched_reduce(s, fold_ref_add(mine, off), slot, fold_ref_add(dst, off), n);
        }
    }
}

/* ---- finalisation ---------------------------------------------------------- */

typedef struct access {
    uint8_t buf;
    size_t  lo, hi;    /* element range [lo, hi) */
} access_t;

/* The buffer identity used for conflicts: in place, IN and OUT are one memory. */
static uint8_t alias_buf(const fold_sched_t *s, uint8_t buf)
{
    return (s->inplace && buf == FOLD_BUF_IN) ? FOLD_BUF_OUT : buf;
}

static int step_accesses(const fold_sched_t *s, const fold_step_t *st, access_t *reads,
                         int *nreads, access_t *write)
{
    *nreads = 0;
    int has_write = 0;
    switch (st->kind) {
    case FOLD_STEP_SEND:
        reads[(*nreads)++] = (access_t){alias_buf(s, st->src.buf), st->src.off,
                                        st->src.off + st->count};
        break;
    case FOLD_STEP_RECV:
        *write    = (access_t){alias_buf(s, st->dst.buf), st->dst.off, st->dst.off + st->count};
        has_write = 1;
        break;
    case FOLD_STEP_COPY:
        reads[(*nreads)++] = (access_t){alias_buf(s, st->src.buf), st->src.off,
                                        st->src.off + st->count};
        *write    = (access_t){alias_buf(s, st->dst.buf), st->dst.off, st->dst.off + st->count};
        has_write = 1;
        break;
    case FOLD_STEP_REDUCE:
        reads[(*nreads)++] = (access_t){alias_buf(s, st->src.buf), st->src.off,
                                        st->src.off + st->count};
        reads[(*nreads)++] = (access_t){alias_buf(s, st->src2.buf), st->src2.off,
                                        st->src2.off + st->count};
        *write    = (access_t){alias_buf(s, st->dst.buf), st->dst.off, st->dst.off + st->count};
        has_write = 1;
        break;
    }
    if (st->count == 0) {
        *nreads = 0;
        has_write = 0;
    }
    return has_write;
}

static int overlaps(const access_t *a, const access_t *b)
{
    return a->buf == b->buf && a->lo < b->hi && b->lo < a->hi;
}

static int step_conflicts(const access_t *r1, int n1, const access_t *w1, int hw1,
                          const access_t *r2, int n2, const access_t *w2, int hw2)
{
    if (hw1) {
        for (int i = 0; i < n2; i++) {
            if (overlaps(w1, &r2[i])) {
                return 1;       /* read after write */
            }
        }
        if (hw2 && overlaps(w1, w2)) {
            return 1;           /* write after write */
        }
    }
    if (hw2) {
        for (int i = 0; i < n1; i++) {
            if (overlaps(&r1[i], w2)) {
                return 1;       /* write after read */
            }
        }
    }
    return 0;
}

typedef struct peer_seq {
    int32_t  peer;
    uint32_t sends;
    uint32_t recvs;
} peer_seq_t;

/* Number messages per (peer, direction). A small open list: schedules talk to few peers. */
static int sched_number_messages(fold_sched_t *s)
{
    peer_seq_t *seqs = NULL;
    size_t nseqs = 0, cap = 0;

    for (size_t i = 0; i < s->nsteps; i++) {
        fold_step_t *st = &s->steps[i];
        if (st->kind != FOLD_STEP_SEND && st->kind != FOLD_STEP_RECV) {
            continue;
        }
        size_t j;
        for (j = 0; j < nseqs && seqs[j].peer != st->peer; j++) {
        }
        if (j == nseqs) {
            if (nseqs == cap) {
                cap = cap ? 2 * cap : 8;
                peer_seq_t *n = realloc(seqs, cap * sizeof(*n));
                if (n == NULL) {
                    free(seqs);
                    return FOLD_ERR_NO_MEMORY;
                }
                seqs = n;
            }
            seqs[nseqs++] = (peer_seq_t){st->peer, 0, 0};
        }
        st->seq = (st->kind == FOLD_STEP_SEND) ? seqs[j].sends++ : seqs[j].recvs++;
    }
    free(seqs);
    return FOLD_OK;
}

/*
 * Each step waits for every earlier conflicting step. Quadratic in the number of
 * steps, which is fine because schedules are built once and cached per shape; a
 * conflict already implied through an intermediate step is still recorded (the
 * executor only counts them).
 */
int fold_sched_finalize(fold_sched_t *s)
{
    if (s->status != FOLD_OK) {
        return s->status;
    }
    int status = sched_number_messages(s);
    if (status != FOLD_OK) {
        return s->status = status;
    }

    size_t n = s->nsteps;
    access_t (*reads)[2] = malloc((n ? n : 1) * sizeof(*reads));
    access_t *writes     = malloc((n ? n : 1) * sizeof(*writes));
    int *nreads          = malloc((n ? n : 1) * sizeof(*nreads));
    int *has_write       = malloc((n ? n : 1) * sizeof(*has_write));
    uint32_t *counts     = calloc(n + 1, sizeof(*counts));
    /* Edges are collected as (from, to) pairs, then laid out per source step. */
    uint32_t (*edges)[2] = NULL;
    size_t nedges = 0, edges_cap = 0;

    if (!reads || !writes || !nreads || !has_write || !counts) {
        status = FOLD_ERR_NO_MEMORY;
        goto out;
    }
    for (size_t j = 0; j < n; j++) {
        has_write[j] = step_accesses(s, &s->steps[j], reads[j], &nreads[j], &writes[j]);
        s->steps[j].npred = 0;
        for (size_t i = 0; i < j; i++) {
            if (!step_conflicts(reads[i], nreads[i], &writes[i], has_write[i], reads[j],
                                nreads[j], &writes[j], has_write[j])) {
                continue;
            }
            if (nedges == edges_cap) {
                edges_cap = edges_cap ? 2 * edges_cap : 64;
                uint32_t (*e)[2] = realloc(edges, edges_cap * sizeof(*e));
                if (e == NULL) {
                    status = FOLD_ERR_NO_MEMORY;
                    goto out;
                }
                edges = e;
            }
            edges[nedges][0] = (uint32_t)i;
            edges[nedges][1] = (uint32_t)j;
            nedges++;
            counts[i]++;
            s->steps[j].npred++;
        }
    }

    free(s->succ);
    s->succ  = malloc((nedges ? nedges : 1) * sizeof(*s->succ));
    s->nsucc = nedges;
    if (s->succ == NULL) {
        status = FOLD_ERR_NO_MEMORY;
        goto out;
    }
    uint32_t off = 0;
    for (size_t i = 0; i < n; i++) {
        s->steps[i].succ_off = off;
        s->steps[i].nsucc    = 0;
        off += counts[i];
    }
    for (size_t e = 0; e < nedges; e++) {
        fold_step_t *from = &s->steps[edges[e][0]];
        s->succ[from->succ_off + from->nsucc++] = edges[e][1];
    }

out:
    free(reads);
    free(writes);
    free(nreads);
    free(has_write);
    free(counts);
    free(edges);
    if (status != FOLD_OK) {
        s->status = status;
    }
    return status;
}

const char *fold_step_kind_name(int kind)
{
    static const char *const names[] = {"send", "recv", "reduce", "copy"};
    return (kind >= 0 && kind <= FOLD_STEP_COPY) ? names[kind] : "unknown";
}

const char *fold_coll_name(fold_coll_t coll)
{
    static const char *const names[] = {"allreduce", "reduce", "bcast", "barrier",
                                        "allgather"};
    return (coll >= 0 && coll < FOLD_COLL_COUNT) ? names[coll] : "unknown";
}
