/*
 * Schedule building and finalisation: dependencies from buffer ranges, message
 * numbering per peer. See sched.h for the rules builders follow.
 */
#include "sched.h"
#include "util/grow.h"

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
    free(s->ops);
    memset(s, 0, sizeof(*s));
}

void fold_sched_reset(fold_sched_t *s, const fold_coll_args_t *args)
{
    fold_step_t *steps = s->steps;
    uint32_t *succ = s->succ;
    fold_ref_t *ops = s->ops;
    size_t cap = s->cap, succ_cap = s->succ_cap, ops_cap = s->ops_cap;
    fold_sched_init(s, args);
    s->steps    = steps;
    s->cap      = cap;
    s->succ     = succ;
    s->succ_cap = succ_cap;
    s->ops      = ops;
    s->ops_cap  = ops_cap;
}

void fold_sched_serial(fold_sched_t *s)
{
    s->serial = 1;
}

void fold_sched_count_only(fold_sched_t *s)
{
    s->count_only = 1;
}

static fold_step_t *sched_append(fold_sched_t *s, int kind, size_t count)
{
    if (s->status != FOLD_OK) {
        return NULL;
    }
    if (s->count_only) {   /* what the caller writes into it is never read */
        s->nsteps++;
        return &s->discard;
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
    if (ref.buf == FOLD_BUF_SHM) {
        s->uses_shm = 1;
        if (ref.off + count > s->shm_count) {
            s->shm_count = ref.off + count;
        }
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

static int is_user_buf(fold_ref_t r)
{
    return r.buf == FOLD_BUF_IN || r.buf == FOLD_BUF_OUT;
}

void fold_sched_copy(fold_sched_t *s, fold_ref_t src, fold_ref_t dst, size_t count)
{
    if (count == 0 || (src.buf == dst.buf && src.off == dst.off) ||
        (s->inplace && is_user_buf(src) && is_user_buf(dst) && src.off == dst.off)) {
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

/* Whether a and b, count elements each, share memory (in place, IN is OUT). */
static int refs_overlap(const fold_sched_t *s, fold_ref_t a, fold_ref_t b, size_t count)
{
    int same_buf = a.buf == b.buf || (s->inplace && is_user_buf(a) && is_user_buf(b));
    return same_buf && a.off < b.off + count && b.off < a.off + count;
}

static int grow(void **buf, size_t *cap, size_t need, size_t elem)
{
    return fold_util_grow(buf, cap, need, elem, 16);
}

/* Keeps step st's n operands or ranges in the schedule's side array. */
static void store_ops(fold_sched_t *s, fold_step_t *st, const fold_ref_t *ops, int n)
{
    st->nops = (uint32_t)n;
    if (s->count_only) {
        return;
    }
    if (grow((void **)&s->ops, &s->ops_cap, s->nops + (size_t)n, sizeof(*s->ops)) != FOLD_OK) {
        s->status = FOLD_ERR_NO_MEMORY;
        return;
    }
    st->ops_off = (uint32_t)s->nops;
    memcpy(s->ops + s->nops, ops, (size_t)n * sizeof(*ops));
    s->nops += (size_t)n;
}

void fold_sched_reduce_rows(fold_sched_t *s, const fold_ref_t *ops, int nops, fold_ref_t dst,
                            size_t count)
{
    if (nops < 1) {
        s->status = s->status == FOLD_OK ? FOLD_ERR_INVALID_ARG : s->status;
        return;
    }
    if (nops == 1) {
        fold_sched_copy(s, ops[0], dst, count);
        return;
    }
    if (nops == 2) {
        fold_sched_reduce(s, ops[0], ops[1], dst, count);
        return;
    }
    if (count == 0) {
        return;
    }
    for (int k = 0; k < nops; k++) {
        if (refs_overlap(s, ops[k], dst, count) && (k > 0 || ops[k].off != dst.off)) {
            s->status = s->status == FOLD_OK ? FOLD_ERR_INVALID_ARG : s->status;
            return;   /* builder bug: a later block or group would read what it wrote */
        }
    }
    fold_step_t *st = sched_append(s, FOLD_STEP_REDUCE_ROWS, count);
    if (st == NULL) {
        return;
    }
    st->dst = dst;
    sched_note_ref(s, dst, count);
    for (int k = 0; k < nops; k++) {
        sched_note_ref(s, ops[k], count);
    }
    store_ops(s, st, ops, nops);
}

int fold_step_nreads(const fold_step_t *st)
{
    switch (st->kind) {
    case FOLD_STEP_SEND:
    case FOLD_STEP_COPY:
    case FOLD_STEP_PEER_READ:
    case FOLD_STEP_PEER_WRITE:
        return 1;
    case FOLD_STEP_REDUCE:
        return 2;
    case FOLD_STEP_REDUCE_ROWS:
        return (int)st->nops;
    default:
        return 0;
    }
}

fold_ref_t fold_step_read(const fold_sched_t *s, const fold_step_t *st, int k)
{
    if (st->kind == FOLD_STEP_REDUCE_ROWS) {
        return s->ops[st->ops_off + (uint32_t)k];
    }
    return k == 0 ? st->src : st->src2;
}

void fold_sched_shm_post(fold_sched_t *s, int flag, uint64_t value, fold_ref_t range,
                         size_t count)
{
    fold_step_t *st = sched_append(s, FOLD_STEP_SHM_POST, count);
    if (st != NULL) {
        st->flag  = (uint8_t)flag;
        st->value = value;
        st->dst   = range;
        st->local = -1;
        s->uses_shm = 1;
        sched_note_ref(s, range, count);
    }
}

void fold_sched_shm_wait(fold_sched_t *s, int peer, int local, int flag, uint64_t value,
                         fold_ref_t range, size_t count)
{
    if (count == 0) {
        return;
    }
    fold_step_t *st = sched_append(s, FOLD_STEP_SHM_WAIT, count);
    if (st != NULL) {
        st->peer  = peer;
        st->local = local;
        st->flag  = (uint8_t)flag;
        st->value = value;
        st->dst   = range;
        s->uses_shm = 1;
        sched_note_ref(s, range, count);
    }
}

void fold_sched_shm_wait_all(fold_sched_t *s, int flag, uint64_t value,
                             const fold_ref_t *ranges, int n, size_t count)
{
    if (n <= 1 || count == 0) {
        if (n == 1) {
            fold_sched_shm_wait(s, -1, -1, flag, value, ranges[0], count);
        }
        return;
    }
    fold_step_t *st = sched_append(s, FOLD_STEP_SHM_WAIT, count);
    if (st != NULL) {
        st->local = -1;
        st->flag  = (uint8_t)flag;
        st->value = value;
        st->dst   = ranges[0];
        s->uses_shm = 1;
        for (int k = 0; k < n; k++) {
            sched_note_ref(s, ranges[k], count);
        }
        store_ops(s, st, ranges, n);
    }
}

int fold_step_nwrites(const fold_step_t *st)
{
    if (st->count == 0 || st->kind == FOLD_STEP_SEND) {
        return 0;
    }
    return st->kind == FOLD_STEP_SHM_WAIT && st->nops > 0 ? (int)st->nops : 1;
}

fold_ref_t fold_step_write(const fold_sched_t *s, const fold_step_t *st, int k)
{
    return st->kind == FOLD_STEP_SHM_WAIT && st->nops > 0 ? s->ops[st->ops_off + (uint32_t)k]
                                                         : st->dst;
}

void fold_sched_peer_publish(fold_sched_t *s, int flag, size_t count)
{
    s->uses_shm = s->uses_peer = 1;
    fold_sched_shm_post(s, flag, 1, fold_ref_peer(0), count);
}

void fold_sched_peer_read(fold_sched_t *s, int peer, int local, int which, size_t off,
                          fold_ref_t dst, size_t count)
{
    fold_step_t *st = sched_append(s, FOLD_STEP_PEER_READ, count);
    if (st != NULL) {
        st->peer  = peer;
        st->local = local;
        st->flag  = (uint8_t)which;
        st->src   = fold_ref_peer(off);
        st->dst   = dst;
        s->uses_shm = s->uses_peer = 1;
        sched_note_ref(s, dst, count);
        if (which != FOLD_BUF_IN && which != FOLD_BUF_OUT) {
            s->status = FOLD_ERR_INVALID_ARG;
        }
    }
}

void fold_sched_peer_write(fold_sched_t *s, fold_ref_t src, int peer, int local, size_t off,
                           size_t count)
{
    fold_step_t *st = sched_append(s, FOLD_STEP_PEER_WRITE, count);
    if (st != NULL) {
        st->peer  = peer;
        st->local = local;
        st->flag  = FOLD_BUF_OUT;
        st->src   = src;
        st->dst   = fold_ref_peer(off);
        s->uses_shm = s->uses_peer = 1;
        sched_note_ref(s, src, count);
    }
}

static fold_ref_t embed_ref(fold_ref_t r, fold_ref_t in, fold_ref_t out, size_t tmp_base)
{
    switch (r.buf) {
    case FOLD_BUF_IN:  return fold_ref_add(in, r.off);
    case FOLD_BUF_OUT: return fold_ref_add(out, r.off);
    case FOLD_BUF_TMP: return fold_ref_tmp(tmp_base + r.off);
    default:           return r;
    }
}

void fold_sched_embed(fold_sched_t *s, const fold_sched_t *inner, fold_ref_t in,
                      fold_ref_t out, size_t tmp_base, const int *peers)
{
    if (inner->status != FOLD_OK && s->status == FOLD_OK) {
        s->status = inner->status;
    }
    for (size_t i = 0; i < inner->nsteps; i++) {
        const fold_step_t *from = &inner->steps[i];
        fold_step_t *st = sched_append(s, from->kind, from->count);
        if (st == NULL) {
            return;
        }
        st->peer = from->peer >= 0 ? peers[from->peer] : -1;
        st->src  = embed_ref(from->src, in, out, tmp_base);
        st->src2 = embed_ref(from->src2, in, out, tmp_base);
        st->dst  = embed_ref(from->dst, in, out, tmp_base);
        if (from->count == 0) {
            continue;
        }
        switch (from->kind) {
        case FOLD_STEP_SEND:
            sched_note_ref(s, st->src, st->count);
            break;
        case FOLD_STEP_RECV:
            sched_note_ref(s, st->dst, st->count);
            break;
        case FOLD_STEP_REDUCE:
            sched_note_ref(s, st->src2, st->count);
            /* fall through */
        case FOLD_STEP_COPY:
            sched_note_ref(s, st->src, st->count);
            sched_note_ref(s, st->dst, st->count);
            break;
        default:
            s->status = FOLD_ERR_INVALID_ARG;   /* only flat algorithms embed */
        }
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

void fold_sched_ordered_forward(fold_sched_t *s, int rank, int root, int next, int end,
                                fold_ref_t part, size_t off, size_t len)
{
    if (next >= 0) {
        fold_sched_send(s, next, part, len);
    } else if (rank != root) {
        fold_sched_send(s, root, part, len);   /* the ordered result, ended here */
    } else if (part.buf == FOLD_BUF_IN) {
        fold_sched_copy(s, part, fold_ref_out(off), len);   /* size 1 */
    }
    if (rank == root && rank != end) {
        fold_sched_recv(s, end, fold_ref_out(off), len);
    }
}

/* ---- finalisation ---------------------------------------------------------- */

typedef struct access {
    uint8_t buf;
    size_t  lo, hi;    /* element range [lo, hi) */
} access_t;

/* Besides the buffers, a post writes its flag: posts to one flag stay in order; and
 * in a serial schedule every local step writes the core, so they keep theirs. */
#define ACCESS_FLAG FOLD_BUF_COUNT
#define ACCESS_CORE (FOLD_BUF_COUNT + 1)

static int local_step(const fold_step_t *st)
{
    return st->kind == FOLD_STEP_COPY || st->kind == FOLD_STEP_REDUCE ||
           st->kind == FOLD_STEP_REDUCE_ROWS || st->kind == FOLD_STEP_PEER_READ ||
           st->kind == FOLD_STEP_PEER_WRITE;
}

/* The buffer identity used for conflicts: in place, IN and OUT are one memory. */
static uint8_t alias_buf(const fold_sched_t *s, uint8_t buf)
{
    return (s->inplace && buf == FOLD_BUF_IN) ? FOLD_BUF_OUT : buf;
}

static access_t range_of(const fold_sched_t *s, fold_ref_t r, size_t count)
{
    return (access_t){alias_buf(s, r.buf), r.off, r.off + count};
}

/*
 * Dependencies through a map of every buffer's element ranges: each span knows its
 * last writer and the readers since. A read waits for the last writer of what it
 * reads; a write waits for the last writer and every reader since. That orders a
 * step after every earlier conflicting step (read after write, write after write,
 * write after read), directly or through a chain, with edges linear in the
 * accesses rather than quadratic in the steps.
 */
#define NO_READERS UINT32_MAX
#define NBUFS      (ACCESS_CORE + 1)

typedef struct span {
    size_t   lo, hi;
    int64_t  writer;    /* step, or -1 */
    uint32_t readers;   /* head of a reader list in the pool, or NO_READERS */
} span_t;

typedef struct reader_node {
    uint32_t step;
    uint32_t next;      /* lists are immutable, so split spans share their tails */
} reader_node_t;

typedef struct dep_map {
    span_t        *spans[NBUFS];
    size_t         nspans[NBUFS], cap[NBUFS];
    size_t         gap[NBUFS];   /* where the free room sits among the spans (below) */
    reader_node_t *pool;
    size_t         npool, pool_cap;
    span_t        *scratch;
    size_t         scratch_cap;
    uint32_t      *mark;      /* per step: last step + 1 that counted it as a predecessor */
    uint32_t      *counts;    /* per step: its successors */
    size_t         mark_cap, counts_cap;
    uint32_t     (*edges)[2];
    size_t         nedges, edges_cap;
    int            status;
} dep_map_t;

/* The map's buffers outlive one finalisation (fold_sched_scratch_t). */
struct fold_sched_scratch {
    dep_map_t map;
};


static void add_pred(dep_map_t *m, int64_t pred, uint32_t step)
{
    if (pred < 0 || m->mark[pred] == step + 1 || m->status != FOLD_OK) {
        return;
    }
    m->mark[pred] = step + 1;
    if ((m->status = grow((void **)&m->edges, &m->edges_cap, m->nedges + 1,
                          sizeof(*m->edges))) == FOLD_OK) {
        m->edges[m->nedges][0] = (uint32_t)pred;
        m->edges[m->nedges][1] = step;
        m->nedges++;
    }
}

/*
 * A buffer's spans are sorted by offset in one array with its free room, a gap,
 * kept where the last change was (spans [0, gap) at the start, the rest at the
 * end): a change next to the previous one moves little. Builders walk their
 * buffers in order, forwards or (a ring's blocks) backwards, where a plain array
 * moved every span after the change: O(p) per step of a ring on p ranks.
 */
static span_t *span_at(const dep_map_t *m, int b, size_t i)
{
    return &m->spans[b][i < m->gap[b] ? i : i + (m->cap[b] - m->nspans[b])];
}

/* Moves the gap to before logical span i. */
static void gap_move(dep_map_t *m, int b, size_t i)
{
    span_t *sp = m->spans[b];
    size_t room = m->cap[b] - m->nspans[b], g = m->gap[b];
    if (i < g) {
        memmove(sp + i + room, sp + i, (g - i) * sizeof(span_t));
    } else if (i > g) {
        memmove(sp + g, sp + g + room, (i - g) * sizeof(span_t));
    }
    m->gap[b] = i;
}

/* Room for `need` spans in buffer b (the gap moves to the end first). */
static int span_reserve(dep_map_t *m, int b, size_t need)
{
    if (need <= m->cap[b]) {
        return FOLD_OK;
    }
    gap_move(m, b, m->nspans[b]);
    size_t cap = m->cap[b];
    int status = grow((void **)&m->spans[b], &cap, need, sizeof(span_t));
    if (status == FOLD_OK) {
        m->cap[b] = cap;   /* the gap, at the end, grows with it */
    }
    return status;
}

/* Index of the first span of buffer b that ends after lo: in the part before the
 * gap if its last span does, else in the part after it. */
static size_t first_span(const dep_map_t *m, int b, size_t lo)
{
    const span_t *sp = m->spans[b];
    size_t g = m->gap[b], n = m->nspans[b], a, z, shift;
    if (g > 0 && sp[g - 1].hi > lo) {
        a = 0, z = g, shift = 0;
    } else {
        shift = m->cap[b] - n;
        a = g + shift, z = n + shift;
    }
    while (a < z) {
        size_t mid = (a + z) / 2;
        if (sp[mid].hi <= lo) {
            a = mid + 1;
        } else {
            z = mid;
        }
    }
    return a - shift;
}

static void collect(dep_map_t *m, const access_t *acc, int is_write, uint32_t step)
{
    int b = acc->buf;
    for (size_t i = first_span(m, b, acc->lo); i < m->nspans[b] && span_at(m, b, i)->lo < acc->hi;
         i++) {
        const span_t *sp = span_at(m, b, i);
        add_pred(m, sp->writer, step);
        for (uint32_t r = sp->readers; is_write && r != NO_READERS; r = m->pool[r].next) {
            add_pred(m, m->pool[r].step, step);
        }
    }
}

/* Replaces what buffer b holds over [lo, hi) with the spans in m->scratch. */
static void splice(dep_map_t *m, int b, size_t lo, size_t hi, size_t nnew)
{
    size_t a = first_span(m, b, lo), z = a;
    while (z < m->nspans[b] && span_at(m, b, z)->lo < hi) {
        z++;
    }
    /* Parts of the first and last old spans outside [lo, hi) survive. */
    span_t head = {0, 0, -1, NO_READERS}, tail = head;
    int has_head = a < z && span_at(m, b, a)->lo < lo;
    int has_tail = a < z && span_at(m, b, z - 1)->hi > hi;
    if (has_head) {
        head    = *span_at(m, b, a);
        head.hi = lo;
    }
    if (has_tail) {
        tail    = *span_at(m, b, z - 1);
        tail.lo = hi;
    }
    size_t add = nnew + (size_t)has_head + (size_t)has_tail, n = m->nspans[b];
    if (m->status != FOLD_OK ||
        (m->status = span_reserve(m, b, n - (z - a) + add)) != FOLD_OK) {
        return;
    }
    /* Spans [a, z) go: the gap to z, then it swallows them, then the new ones fill
     * it from its start. */
    gap_move(m, b, z);
    m->gap[b]    = a;
    m->nspans[b] = n - (z - a);
    span_t *sp = m->spans[b] + a;
    if (has_head) {
        *sp++ = head;
    }
    memcpy(sp, m->scratch, nnew * sizeof(span_t));
    sp += nnew;
    if (has_tail) {
        *sp++ = tail;
    }
    m->gap[b]    += add;
    m->nspans[b] += add;
}

static void record_read(dep_map_t *m, const access_t *acc, uint32_t step)
{
    int b = acc->buf;
    size_t nnew = 0, pos = acc->lo;
    size_t i = first_span(m, b, acc->lo);
    /* Every old span (or gap) inside [lo, hi) gains this reader. */
    while (pos < acc->hi && m->status == FOLD_OK) {
        span_t piece = {pos, acc->hi, -1, NO_READERS};
        if (i < m->nspans[b] && span_at(m, b, i)->lo <= pos) {
            piece = *span_at(m, b, i++);
            piece.lo = pos;
            piece.hi = piece.hi < acc->hi ? piece.hi : acc->hi;
        } else if (i < m->nspans[b] && span_at(m, b, i)->lo < acc->hi) {
            piece.hi = span_at(m, b, i)->lo;   /* a hole before the next span */
        }
        if ((m->status = grow((void **)&m->pool, &m->pool_cap, m->npool + 1,
                              sizeof(*m->pool))) != FOLD_OK ||
            (m->status = grow((void **)&m->scratch, &m->scratch_cap, nnew + 1,
                              sizeof(span_t))) != FOLD_OK) {
            return;
        }
        m->pool[m->npool] = (reader_node_t){step, piece.readers};
        piece.readers = (uint32_t)m->npool++;
        m->scratch[nnew++] = piece;
        pos = piece.hi;
    }
    splice(m, b, acc->lo, acc->hi, nnew);
}

static void record_write(dep_map_t *m, const access_t *acc, uint32_t step)
{
    if (m->status == FOLD_OK &&
        (m->status = grow((void **)&m->scratch, &m->scratch_cap, 1, sizeof(span_t))) ==
            FOLD_OK) {
        m->scratch[0] = (span_t){acc->lo, acc->hi, step, NO_READERS};
        splice(m, acc->buf, acc->lo, acc->hi, 1);
    }
}

static void dep_map_free(dep_map_t *m)
{
    for (int b = 0; b < NBUFS; b++) {
        free(m->spans[b]);
    }
    free(m->pool);
    free(m->scratch);
    free(m->mark);
    free(m->counts);
    free(m->edges);
}

fold_sched_scratch_t *fold_sched_scratch_new(void)
{
    return calloc(1, sizeof(fold_sched_scratch_t));
}

void fold_sched_scratch_free(fold_sched_scratch_t *x)
{
    if (x != NULL) {
        dep_map_free(&x->map);
        free(x);
    }
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

int fold_sched_finalize(fold_sched_t *s)
{
    fold_sched_scratch_t x;
    memset(&x, 0, sizeof(x));
    int status = fold_sched_finalize_with(s, &x);
    dep_map_free(&x.map);
    return status;
}

int fold_sched_finalize_with(fold_sched_t *s, fold_sched_scratch_t *x)
{
    if (s->status != FOLD_OK) {
        return s->status;
    }
    int status = sched_number_messages(s);
    if (status != FOLD_OK) {
        return s->status = status;
    }

    size_t n = s->nsteps;
    dep_map_t *mp = &x->map, m;
    m = *mp;   /* the buffers, emptied */
    memset(m.nspans, 0, sizeof(m.nspans));
    memset(m.gap, 0, sizeof(m.gap));
    m.npool = m.nedges = 0;
    m.status = FOLD_OK;
    if (grow((void **)&m.mark, &m.mark_cap, n + 1, sizeof(*m.mark)) != FOLD_OK ||
        grow((void **)&m.counts, &m.counts_cap, n + 1, sizeof(*m.counts)) != FOLD_OK) {
        m.status = FOLD_ERR_NO_MEMORY;
    } else {
        memset(m.mark, 0, (n + 1) * sizeof(*m.mark));
        memset(m.counts, 0, (n + 1) * sizeof(*m.counts));
    }
    uint32_t *counts = m.counts;
    for (size_t j = 0; j < n && m.status == FOLD_OK; j++) {
        /* Besides its buffers, a post writes its flag: posts to one flag keep order. */
        const fold_step_t *st = &s->steps[j];
        const int nreads = st->count > 0 ? fold_step_nreads(st) : 0;
        const int nwrites = fold_step_nwrites(st);
        const access_t flag = {ACCESS_FLAG, st->flag, st->flag + 1u};
        const access_t core = {ACCESS_CORE, 0, 1};
        const int posts = st->kind == FOLD_STEP_SHM_POST;
        const int on_core = s->serial && local_step(st);
        for (int k = 0; k < nreads; k++) {
            access_t a = range_of(s, fold_step_read(s, st, k), st->count);
            collect(&m, &a, 0, (uint32_t)j);
        }
        if (posts) {
            collect(&m, &flag, 1, (uint32_t)j);
        }
        if (on_core) {
            collect(&m, &core, 1, (uint32_t)j);
        }
        for (int k = 0; k < nwrites; k++) {
            access_t a = range_of(s, fold_step_write(s, st, k), st->count);
            collect(&m, &a, 1, (uint32_t)j);
        }
        for (int k = 0; k < nreads; k++) {
            access_t a = range_of(s, fold_step_read(s, st, k), st->count);
            record_read(&m, &a, (uint32_t)j);
        }
        if (posts) {
            record_write(&m, &flag, (uint32_t)j);
        }
        if (on_core) {
            record_write(&m, &core, (uint32_t)j);
        }
        for (int k = 0; k < nwrites; k++) {
            access_t a = range_of(s, fold_step_write(s, st, k), st->count);
            record_write(&m, &a, (uint32_t)j);
        }
    }
    if ((status = m.status) != FOLD_OK) {
        goto out;
    }

    /* Lay the edges out per source step. */
    for (size_t j = 0; j < n; j++) {
        s->steps[j].npred = 0;
    }
    for (size_t e = 0; e < m.nedges; e++) {
        counts[m.edges[e][0]]++;
        s->steps[m.edges[e][1]].npred++;
    }
    if (grow((void **)&s->succ, &s->succ_cap, m.nedges ? m.nedges : 1, sizeof(*s->succ)) !=
        FOLD_OK) {
        status = FOLD_ERR_NO_MEMORY;
        goto out;
    }
    s->nsucc = m.nedges;
    uint32_t off = 0;
    for (size_t i = 0; i < n; i++) {
        s->steps[i].succ_off = off;
        s->steps[i].nsucc    = 0;
        off += counts[i];
    }
    for (size_t e = 0; e < m.nedges; e++) {
        fold_step_t *from = &s->steps[m.edges[e][0]];
        s->succ[from->succ_off + from->nsucc++] = m.edges[e][1];
    }

    s->uses_tl = 0;
    for (size_t i = 0; i < n; i++) {
        s->uses_tl |= s->steps[i].kind == FOLD_STEP_SEND || s->steps[i].kind == FOLD_STEP_RECV;
    }

out:
    *mp = m;   /* the buffers, grown, for the next */
    if (status != FOLD_OK) {
        s->status = status;
    }
    return status;
}

/* ---- schedules of one shape --------------------------------------------------- */

/*
 * finalize derives the dependencies from what each step reads and writes (and a
 * post's flag), never from peers, and a step's accesses form a set: the order of a
 * reduction's two operands changes neither the edges nor their order (each step's
 * successors come out sorted). So two schedules whose steps agree in everything
 * but peers, local indices, flag values and that order have the same
 * dependencies: the ranks of an algorithm that differ only in whom they talk to
 * (the same local rank on every node, the two sides of a recursive-doubling
 * exchange) are finalized once.
 */
static int same_ref(fold_ref_t a, fold_ref_t b)
{
    return a.buf == b.buf && a.off == b.off;
}

static int same_step_shape(const fold_sched_t *sa, const fold_step_t *a,
                           const fold_sched_t *sb, const fold_step_t *b)
{
    if (a->kind != b->kind || a->count != b->count || !same_ref(a->dst, b->dst) ||
        (a->kind == FOLD_STEP_SHM_POST && a->flag != b->flag)) {
        return 0;
    }
    if (a->nops != 0 || b->nops != 0) {   /* reduce rows, waits over ranges */
        if (a->nops != b->nops || !same_ref(a->src, b->src)) {
            return 0;
        }
        for (uint32_t k = 0; k < a->nops; k++) {
            if (!same_ref(sa->ops[a->ops_off + k], sb->ops[b->ops_off + k])) {
                return 0;
            }
        }
        return 1;
    }
    if (a->kind == FOLD_STEP_REDUCE) {
        return (same_ref(a->src, b->src) && same_ref(a->src2, b->src2)) ||
               (same_ref(a->src, b->src2) && same_ref(a->src2, b->src));
    }
    return same_ref(a->src, b->src) && same_ref(a->src2, b->src2);
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static uint64_t ref_word(fold_ref_t r)
{
    return ((uint64_t)r.buf << 56) ^ (uint64_t)r.off;
}

uint64_t fold_sched_shape_hash(const fold_sched_t *s)
{
    uint64_t h = mix(0, (uint64_t)s->nsteps * 4 + (uint64_t)(s->serial != 0) * 2 +
                            (s->inplace != 0));
    for (size_t i = 0; i < s->nsteps; i++) {
        const fold_step_t *st = &s->steps[i];
        uint64_t a = ref_word(st->src), b = ref_word(st->src2);
        if (st->kind == FOLD_STEP_REDUCE && b < a) {   /* operands as a set */
            uint64_t t = a;
            a = b;
            b = t;
        }
        h = mix(h, ((uint64_t)st->kind << 56) ^ (st->kind == FOLD_STEP_SHM_POST
                                                   ? (uint64_t)st->flag << 48 : 0) ^
                       (uint64_t)st->count);
        h = mix(mix(mix(h, ref_word(st->dst)), a), b);
        for (uint32_t k = 0; k < st->nops; k++) {
            h = mix(h, ref_word(s->ops[st->ops_off + k]));
        }
    }
    return h;
}

int fold_sched_same_shape(const fold_sched_t *a, const fold_sched_t *b)
{
    if (a->nsteps != b->nsteps || (a->inplace != 0) != (b->inplace != 0) ||
        a->serial != b->serial) {
        return 0;
    }
    for (size_t i = 0; i < a->nsteps; i++) {
        if (!same_step_shape(a, &a->steps[i], b, &b->steps[i])) {
            return 0;
        }
    }
    return 1;
}

int fold_sched_finalize_like(fold_sched_t *s, const fold_sched_t *like)
{
    if (s->status != FOLD_OK) {
        return s->status;
    }
    if (!fold_sched_same_shape(s, like)) {
        return s->status = FOLD_ERR_INVALID_ARG;
    }
    int status = sched_number_messages(s);
    if (status == FOLD_OK &&
        grow((void **)&s->succ, &s->succ_cap, like->nsucc ? like->nsucc : 1,
             sizeof(*s->succ)) != FOLD_OK) {
        status = FOLD_ERR_NO_MEMORY;
    }
    if (status != FOLD_OK) {
        return s->status = status;
    }
    for (size_t i = 0; i < s->nsteps; i++) {
        s->steps[i].npred    = like->steps[i].npred;
        s->steps[i].succ_off = like->steps[i].succ_off;
        s->steps[i].nsucc    = like->steps[i].nsucc;
    }
    memcpy(s->succ, like->succ, like->nsucc * sizeof(*s->succ));
    s->nsucc   = like->nsucc;
    s->uses_tl = like->uses_tl;
    return FOLD_OK;
}

const char *fold_step_kind_name(int kind)
{
    static const char *const names[] = {"send",      "recv",      "reduce",     "copy",
                                        "shm post",  "shm wait",  "peer read",  "peer write",
                                        "reduce rows"};
    return (kind >= 0 && kind <= FOLD_STEP_REDUCE_ROWS) ? names[kind] : "unknown";
}

const char *fold_flag_name(int flag)
{
    static const char *const names[] = {"written", "published", "copied", "done"};
    return (flag >= 0 && flag <= FOLD_FLAG_DONE) ? names[flag] : "unknown";
}

int fold_reduction_from_name(const char *name, fold_coll_t *coll)
{
    if (name != NULL && strcmp(name, "allreduce") == 0) {
        *coll = FOLD_COLL_ALLREDUCE;
    } else if (name != NULL && strcmp(name, "reduce") == 0) {
        *coll = FOLD_COLL_REDUCE;
    } else {
        return -1;
    }
    return 0;
}

const char *fold_coll_name(fold_coll_t coll)
{
    static const char *const names[] = {"allreduce", "reduce", "bcast", "barrier",
                                        "allgather"};
    return (coll >= 0 && coll < FOLD_COLL_COUNT) ? names[coll] : "unknown";
}
