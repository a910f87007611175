/*
 * The tiny-message fast path of shm_flat: a blocking allreduce or reduce of at most
 * the node's limit in bytes (fold_node_fast_limit: 64 KiB for 2 ranks) on a
 * communicator that lives on one node runs here, outside the executor, in a few
 * hundred nanoseconds. Same protocol as the schedule (coll/alg_shm_flat.c), cut to
 * the bone:
 *
 *   region (end of the node segment), per local rank l, S = FOLD_FAST_SLOTS:
 *     slot[l][0 .. S-1]   16 lines of | seq (8 B) | call (8 B) | 48 B of data |,
 *                         then a tail of the limit's bytes
 *     done[l]             | seq of the last call l finished reading |
 *
 *   A row of up to 768 B goes 48 B a line, each line with its seq; a longer one
 *   into the tail, contiguous, with the seq of the first line alone. The tail is
 *   apart from the lines so that no data ever lands on a seq: a long row written
 *   over the lines left numbers there that a reader of the next short row in the
 *   slot took for posted (the shim's checks read stale bytes 96-99 of 100).
 *
 *   call k (the same count on every rank), b = k mod S:
 *     1. before overwriting slot[me][b] (call k - S's data), wait until its readers
 *        (everyone, or the root of a reduce) have stored done >= k - S -- unless
 *        this rank saw every other rank's input of call k - 1, which they post only
 *        after finishing call k - 2 (back-to-back allreduces never wait here). With
 *        S slots the non-roots of back-to-back reduces run up to S calls ahead of
 *        the root and look at its done line once every S / 2 calls.
 *     2. copy the input to slot[me][b], each seq = k stored after the data it covers
 *        (release), and what this rank was asked to do in the first line (a
 *        fingerprint, compared by the folding ranks: mismatched calls fail with
 *        FOLD_ERR_MISMATCH); the root of a reduce, whose row nobody else reads,
 *        posts only the first seq and folds its input straight
 *     3. allreduce, or the root of a reduce: wait for every seq of every slot[r][b]
 *        to be k, fold the rows in rank order into the output
 *     4. every S / 2 calls, store done = k (see finish()); then claim the lines of
 *        slot[me][b + 1] for writing (claim_next()), and a reduce's root asks for
 *        the lines of the others' next slots, which ranks running ahead have filled
 *
 * A short row's lines each carry a sequence number, so a reader polls all of them at
 * once and they cross together, in one transfer time: with one number ahead of the
 * data, the data lines would cross only after it, a second transfer time between
 * cores apart. A line whose seq the reader acquires holds the data stored before that
 * release. Every rank folds the same rows in the same order, so all get the same
 * bits, for any op.
 * Waits spin, yield once the node is oversubscribed, and fail after FOLD_TIMEOUT
 * naming the rank they waited for; the region is then left alone for good. A call
 * given up for a mismatch (a rank on the node's schedules instead) leaves it to
 * node/resync.c, which brings every rank's count back into step.
 */
#include "node/node.h"
#include "fingerprint.h"
#include "log.h"
#include "codec/reduce_kernel.h"
#include "util/clock.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>

#define LINE_DATA   48   /* a multiple of every type's size */
#define LINED_LINES 16   /* rows of at most this many lines carry a seq in every line */
#define LINED_MAX   (LINED_LINES * LINE_DATA)
#define DONE_EVERY (FOLD_FAST_SLOTS / 2)       /* calls between stores of `done` */
_Static_assert(LINED_MAX <= sizeof(((fold_node_t *)0)->fast_row), "a lined row fits fast_row");

/* The ranks' tails share this many bytes of the segment: 64 KiB rows for 2 ranks,
 * 16 KiB for 8, 4 KiB from 32 on; never below 4 KiB. A 2-rank reduce of a row this
 * size runs well ahead of the single copy, so the path is worth its megabyte. */
#define TAILS_BUDGET ((size_t)1 << 20)
#define LIMIT_MIN    ((size_t)4096)

/* What a slot's first line says the poster was asked to do, in 64 bits: the packed
 * fingerprint's flags, datatype and op (fingerprint.h), then the root in 12 bits (a
 * rank of one node), the count in 20 and the low 8 bits of the call's position among
 * the node's calls (node.h): a rank whose calls on the node went on without meeting
 * the others' (a reduce's non-root, node/resync.c) reads another call's input as a
 * mismatch, never folds it. */
#define ROOT_SHIFT  24
#define COUNT_SHIFT 36
#define POS_SHIFT   56
#define LOW_BITS    ((UINT64_C(1) << ROOT_SHIFT) - 1)
_Static_assert(FOLD_FAST_MAX_RANKS <= (1 << (COUNT_SHIFT - ROOT_SHIFT)), "a root fits");
_Static_assert(FOLD_FAST_MAX_BYTES <= (1 << (POS_SHIFT - COUNT_SHIFT)), "a count fits");

static uint64_t call_word(const fold_fingerprint_t *f, uint64_t pos)
{
    fold_fingerprint_t low = *f;
    low.root  = 0;
    low.count = 0;
    return (fold_fingerprint_pack(&low) & LOW_BITS) | (uint64_t)f->root << ROOT_SHIFT |
           (uint64_t)f->count << COUNT_SHIFT | (pos & 0xff) << POS_SHIFT;
}

static fold_fingerprint_t call_of(uint64_t word)
{
    fold_fingerprint_t f = fold_fingerprint_unpack(word & LOW_BITS);
    f.root  = (int)(word >> ROOT_SHIFT & 0xfff);
    f.count = (size_t)(word >> COUNT_SHIFT & 0xfffff);
    f.call  = word >> POS_SHIFT;
    return f;
}

typedef struct fast_line {
    _Atomic uint64_t seq;
    uint64_t         call;   /* first line: what the poster was asked to do (fingerprint.h) */
    char             data[LINE_DATA];
} fast_line_t;
_Static_assert(sizeof(fast_line_t) == 64, "a line of the tiny path is a cache line");

/* A rank's part of the region: FOLD_FAST_SLOTS slots of `limit` bytes of tail each,
 * then its done line. Its size depends on the node's ranks (fold_node_fast_limit). */
typedef struct fast_slot {
    fast_line_t line[LINED_LINES];
    char        tail[];   /* a longer row's data */
} fast_slot_t;

typedef struct fast_done {
    _Atomic uint64_t done;
    char             pad[64 - sizeof(uint64_t)];
} fast_done_t;

size_t fold_node_fast_limit(int local_size)
{
    if (local_size < 1 || local_size > FOLD_FAST_MAX_RANKS) {
        return 0;
    }
    size_t limit = FOLD_FAST_MAX_BYTES;
    while (limit > LIMIT_MIN && (size_t)local_size * FOLD_FAST_SLOTS * limit > TAILS_BUDGET) {
        limit /= 2;
    }
    return limit;
}

static size_t slot_bytes(size_t limit)
{
    return sizeof(fast_slot_t) + limit;
}

static size_t rank_bytes(size_t limit)
{
    return FOLD_FAST_SLOTS * slot_bytes(limit) + sizeof(fast_done_t);
}

size_t fold_node_fast_region_bytes(int local_size)
{
    return (size_t)local_size * rank_bytes(fold_node_fast_limit(local_size));
}

/* Local rank `local`'s slot b, and its done word. */
static fast_slot_t *slot_of(const fold_node_t *node, int local, int b)
{
    return (fast_slot_t *)(node->fast_region + (size_t)local * rank_bytes(node->fast_limit) +
                           (size_t)b * slot_bytes(node->fast_limit));
}

static _Atomic uint64_t *done_of(const fold_node_t *node, int local)
{
    return &((fast_done_t *)(node->fast_region +
                             (size_t)(local + 1) * rank_bytes(node->fast_limit)) - 1)->done;
}

/* Call k is over for this rank: it read all it will of calls <= k. Said every
 * DONE_EVERY calls, whether this rank folded or not: a rank that ran ahead then
 * looks at this line once per DONE_EVERY calls instead of pulling it across after
 * each store. A rank reusing a slot needs done >= k - S of its readers, and done
 * lags at most DONE_EVERY - 1 < S calls behind what they finished, so the rank
 * furthest behind can always go on: nobody waits for good. */
static void finish(_Atomic uint64_t *done, uint64_t k)
{
    if (k % DONE_EVERY == 0) {
        atomic_store_explicit(done, k, memory_order_release);
    }
}

/* A rank this one waits for has started a node-aware call instead (a larger or a
 * nonblocking one): it will never post this call's input. */
static int other_path(fold_node_t *node, const fold_node_call_t *call, _Atomic uint64_t *word,
                      uint64_t value, int peer, const fold_fingerprint_t *mine)
{
    fold_fingerprint_t theirs;
    if (mine == NULL || !fold_node_peer_started(node, node->topo->local_of[peer], &theirs) ||
        atomic_load_explicit(word, memory_order_acquire) >= value) {
        return 0;   /* (the input read after the epoch: posted before that call if at all) */
    }
    if (theirs.call != (fold_node_position(node) & 0xfffff)) {
        return 0;   /* another call than this one: a mismatch earlier, which node/resync.c
                       settles (this wait then goes on, or fails there) */
    }
    char line[256] = "";
    theirs.inplace = mine->inplace;   /* not recorded here */
    theirs.call    = mine->call;
    if (fold_fingerprint_diff(&theirs, peer, mine, node->comm_rank, line, sizeof(line)) == 0) {
        snprintf(line, sizeof(line), "rank %d runs a nonblocking call, rank %d a blocking one",
                 peer, node->comm_rank);
    }
    fold_error("%s on comm %u: %s (rank %d on the node's schedules, rank %d on its tiny-message "
               "path)", call->coll_name, node->comm_id, line, peer, node->comm_rank);
    return 1;   /* the caller gives the call up: node/resync.c brings the paths into step */
}

/* How many lines carry call k's seq: every line of a row of up to LINED_MAX bytes,
 * whose lines a reader then polls all at once, so that they cross together; the
 * first one alone of a longer row, whose data is in the tail. Past LINED_MAX a reader
 * polling every line fights the poster for them, and a row cut into pieces that small
 * has more lines to cross than its data needs. */
static size_t seq_lines(size_t bytes)
{
    return bytes > LINED_MAX || bytes == 0 ? 1 : (bytes + LINE_DATA - 1) / LINE_DATA;
}

static char *contiguous(const fast_slot_t *slot)
{
    return (char *)slot->tail;
}

/* Every seq line of the row holds call k, or the first says it is another call (then
 * the fingerprints tell). The loads are independent: the lines cross at once. */
static int posted(const fast_slot_t *slot, size_t lines, uint64_t k, uint64_t mine_bits)
{
    int all = 1;
    for (size_t j = 0; j < lines; j++) {
        all &= atomic_load_explicit(&slot->line[j].seq, memory_order_acquire) >= k;
    }
    return all || (atomic_load_explicit(&slot->line[0].seq, memory_order_acquire) >= k &&
                   slot->line[0].call != mine_bits);
}

/* Waits until *word >= value, or with a slot (word NULL) until posted(slot, lines,
 * value, ...); FOLD_ERR_TIMEOUT after the call's timeout. With `mine`, fails with
 * FOLD_ERR_MISMATCH if the peer went on to the node's schedules. */
static int wait_for(fold_node_t *node, const fold_node_call_t *call, _Atomic uint64_t *word,
                    const fast_slot_t *slot, size_t lines, uint64_t mine_bits, uint64_t value,
                    int peer, const char *what, const fold_fingerprint_t *mine)
{
    if (slot != NULL) {
        word = (_Atomic uint64_t *)&slot->line[0].seq;   /* the seq the others follow */
    }
    double start = 0;
    for (unsigned long polls = 0;; polls++) {
        if (slot != NULL ? posted(slot, lines, value, mine_bits)
                         : atomic_load_explicit(word, memory_order_acquire) >= value) {
            return FOLD_OK;
        }
        if ((polls & 255) == 255) {
            /* Another rank gave this call up, or an earlier one (node/resync.c). */
            char why[192];
            int status = fold_node_resync_poll(node, fold_node_position(node), why,
                                               sizeof(why));
            if (status != FOLD_OK && status != FOLD_INPROGRESS &&
                atomic_load_explicit(word, memory_order_acquire) < value) {
                fold_error("%s (shm_flat) on comm %u, rank %d of %d: %s, while waiting for "
                           "rank %d's %s %llu", call->coll_name, node->comm_id,
                           node->comm_rank, node->comm_size, why, peer, what,
                           (unsigned long long)value);
                return status;
            }
            if (status == FOLD_OK && other_path(node, call, word, value, peer, mine)) {
                return FOLD_ERR_MISMATCH;
            }
        }
        /* Once yielding, the clock is read at every poll: a yield on a loaded node
         * may cost milliseconds, and 4096 of them would run far past the timeout. */
        const int yielding = (long)polls > call->spin_count;
        if (yielding) {
            sched_yield();
        }
        if (yielding || (polls & 4095) == 4095) {
            double now = fold_util_time_now();
            if (start == 0) {
                start = now;
            } else if (now - start > call->timeout_sec) {
                fold_error("%s (shm_flat) on comm %u, rank %d of %d: no progress for %.1f s "
                           "(FOLD_TIMEOUT=%g) waiting for rank %d's %s %llu",
                           call->coll_name, node->comm_id, node->comm_rank, node->comm_size,
                           now - start, call->timeout_sec, peer, what,
                           (unsigned long long)value);
                return FOLD_ERR_TIMEOUT;   /* the caller breaks the node */
            }
        }
    }
}

void fold_node_fast_init(fold_node_t *node)
{
    const fold_shm_seg_t *seg = &node->seg;
    size_t len = fold_node_fast_region_bytes(seg->local_size);
    char *start = seg->data + seg->data_size - fold_node_peer_region_bytes(seg->local_size) -
                  len;
    node->fast_region = start;
    node->fast_limit  = fold_node_fast_limit(seg->local_size);
    /* The region's pages mapped writable now rather than faulted in by the first tiny
     * calls (a fault each, on the writer and on each reader). Only this region: mapping
     * the whole segment at set-up costs milliseconds per communicator, which a program
     * creating many pays (mp_shm_budget's churn). */
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    char *first = (char *)((uintptr_t)start & ~(page - 1));
#ifdef MADV_POPULATE_WRITE
    if (madvise(first, (size_t)(start + len - first), MADV_POPULATE_WRITE) == 0) {
        return;
    }
#endif
    /* Older kernels: a write to each page that changes nothing (peers may be writing). */
    for (char *p = start; p < start + len; p += page) {
        __atomic_fetch_add((unsigned char *)p, 0, __ATOMIC_RELAXED);
    }
}

int fold_node_fast_eligible(const fold_node_t *node, size_t bytes)
{
    return node != NULL && bytes <= node->fast_limit && node->fast_region != NULL &&
           !node->broken && node->topo->nnodes == 1 && node->seg.local_size == node->comm_size;
}

int fold_node_fast_peer_ahead(const fold_node_t *node, int local, fold_fingerprint_t *theirs)
{
    if (node->fast_region == NULL) {
        return 0;
    }
    const uint64_t next = node->fast_calls + 1;
    const fast_slot_t *slot = slot_of(node, local, (int)(next % FOLD_FAST_SLOTS));
    if (atomic_load_explicit(&slot->line[0].seq, memory_order_acquire) != next) {
        return 0;
    }
    *theirs = call_of(slot->line[0].call);
    return 1;
}

int fold_node_fast_seqs_sane(const fold_node_t *node)
{
    const uint64_t most = node->fast_calls + FOLD_FAST_SLOTS;   /* peers run ahead */
    for (int l = 0; l < node->seg.local_size; l++) {
        for (int b = 0; b < FOLD_FAST_SLOTS; b++) {
            const fast_slot_t *slot = slot_of(node, l, b);
            for (int j = 0; j < LINED_LINES; j++) {
                if (atomic_load_explicit(&slot->line[j].seq, memory_order_acquire) > most) {
                    return 0;
                }
            }
        }
    }
    return 1;
}

void fold_node_fast_skip(fold_node_t *node, uint64_t calls)
{
    if (calls <= node->fast_calls) {
        return;
    }
    node->fast_calls   = calls;
    node->fast_saw_all = 0;   /* it saw nobody's input of the last one */
    atomic_store_explicit(done_of(node, node->local_rank), calls, memory_order_release);
}

/* A lined row's data into a contiguous buffer. Whole lines are copies of a constant
 * size, which the compiler inlines, not a call per line. */
static void gather(void *dst, const fast_slot_t *slot, size_t bytes)
{
    size_t j = 0;
    for (; (j + 1) * LINE_DATA <= bytes; j++) {
        memcpy((char *)dst + j * LINE_DATA, slot->line[j].data, LINE_DATA);
    }
    if (j * LINE_DATA < bytes) {
        memcpy((char *)dst + j * LINE_DATA, slot->line[j].data, bytes - j * LINE_DATA);
    }
}

/* IN into this rank's slot, then call k's seq into its seq lines, each after the
 * data it covers; without IN (a reduce's root, whose row nobody reads) the first
 * seq alone, which carries the fingerprint. */
static void post(fast_slot_t *slot, const void *in, size_t bytes, uint64_t k)
{
    const size_t lines = in != NULL ? seq_lines(bytes) : 1;
    size_t j = 0;
    if (in != NULL && bytes > LINED_MAX) {
        memcpy(contiguous(slot), in, bytes);
    } else if (in != NULL) {
        for (; (j + 1) * LINE_DATA <= bytes; j++) {
            memcpy(slot->line[j].data, (const char *)in + j * LINE_DATA, LINE_DATA);
            atomic_store_explicit(&slot->line[j].seq, k, memory_order_release);
        }
        if (j * LINE_DATA < bytes) {
            memcpy(slot->line[j].data, (const char *)in + j * LINE_DATA, bytes - j * LINE_DATA);
        }
    }
    for (; j < lines; j++) {
        atomic_store_explicit(&slot->line[j].seq, k, memory_order_release);
    }
}

/* Row r's data, contiguous: in the slot, or gathered into BUF. */
static const void *row_of(const fast_slot_t *slot, size_t bytes, void *buf)
{
    if (bytes > LINED_MAX) {
        return contiguous(slot);
    }
    gather(buf, slot, bytes);
    return buf;
}

/* Asks for the lines of this rank's next slot with intent to write, as a call ends:
 * its seq lines, and the first CLAIM_TAIL_MAX bytes of a longer row's tail. The others
 * have read them since this rank last wrote there, and the first store to a line
 * another core shares waits for it in the store buffer, with every store behind it (a
 * call's way down the API pushes a hundred), which more than doubles a small reduce's
 * time on its non-root ranks. From 16 KiB on the copy's own stream of requests keeps
 * up, and claiming all of it gains nothing. Rows of the same size are the rule; a
 * wrong guess costs a few lines. */
#define CLAIM_TAIL_MAX ((size_t)8192)

static void claim_for_write(const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));   /* a no-op where unknown */
#else
    __builtin_prefetch(p, 1);
#endif
}

static void claim_next(const fold_node_t *node, int b, size_t lines, size_t tail_bytes)
{
    fast_slot_t *next = slot_of(node, node->local_rank, (b + 1) % FOLD_FAST_SLOTS);
    for (size_t j = 0; j < lines; j++) {
        claim_for_write(&next->line[j]);
    }
    const size_t tail = tail_bytes > LINED_MAX ? tail_bytes : 0;
    for (size_t at = 0; at < tail && at < CLAIM_TAIL_MAX; at += 64) {
        claim_for_write(next->tail + at);
    }
}

/* Call k failed midway: this rank reads nothing more of it. A mismatch asks the
 * node's ranks to bring their counters into step (the others may have run this call
 * on a node schedule); anything else breaks the node. */
static int give_up(fold_node_t *node, uint64_t k, int status)
{
    node->fast_saw_all = 0;
    finish(done_of(node, node->local_rank), k);
    fold_node_abandon(node, node->fast_pos + k, 0, status);
    return status;
}

int fold_node_fast_reduction(fold_node_t *node, const fold_node_call_t *call)
{
    const fold_topo_t *topo = node->topo;
    const size_t count = call->count;
    const size_t bytes = count * fold_dtype_size(call->dtype);
    const int allreduce = call->allreduce, root = call->root, size = node->comm_size;
    const int me_rank = node->comm_rank;
    const int folds = allreduce || me_rank == root;
    const uint64_t k = ++node->fast_calls;
    const int b = (int)(k % FOLD_FAST_SLOTS);
    _Atomic uint64_t *my_done = done_of(node, node->local_rank);
    int status = FOLD_OK;

    /* 1. Nobody still reads what this slot held two calls ago. */
    int readers = node->fast_readers[b];
    const uint64_t reused = k - FOLD_FAST_SLOTS;   /* the call whose data slot b holds */
    if (k > FOLD_FAST_SLOTS && !node->fast_saw_all &&
        !(readers >= 0 && readers == node->fast_done_rank && node->fast_done_seen >= reused)) {
        for (int r = 0; r < size && status == FOLD_OK; r++) {
            if (r != me_rank && (readers < 0 || readers == r)) {
                _Atomic uint64_t *done = done_of(node, topo->local_of[r]);
                status = wait_for(node, call, done, NULL, 0, 0, reused, r, "reading of call",
                                  NULL);
                /* A root usually is a call ahead: remember, and skip the next look. */
                node->fast_done_rank = r;
                node->fast_done_seen = atomic_load_explicit(done, memory_order_acquire);
            }
        }
        if (status != FOLD_OK) {
            return give_up(node, k, status);
        }
    }
    node->fast_readers[b] = allreduce ? -1 : root;
    node->fast_saw_all    = folds;

    /* 2. Post the input; a reduce's root only says it came (nobody reads its row). */
    const fold_fingerprint_t mine = {
        .allreduce = allreduce, .count = count, .dtype = call->dtype, .op = call->op,
        .root = allreduce ? 0 : root};   /* in place or not gives the same result here */
    const uint64_t mine_bits = call_word(&mine, node->fast_pos + k);
    const size_t lines = seq_lines(bytes);
    fast_slot_t *mine_slot = slot_of(node, node->local_rank, b);
    mine_slot->line[0].call = mine_bits;
    const void *posted_in = allreduce || me_rank != root ? call->in : NULL;
    const size_t posted_lines = posted_in != NULL ? lines : 1;
    const size_t posted_bytes = posted_in != NULL ? bytes : 0;
    post(mine_slot, posted_in, bytes, k);
    if (!folds) {
        claim_next(node, b, posted_lines, posted_bytes);
        finish(my_done, k);   /* it read nothing of call k */
        return FOLD_OK;
    }
    /* In place, rows before this rank's fold over IN first: keep it (a contiguous
     * post is a copy already). */
    const void *own = call->in;
    if (call->in == call->out && me_rank > 0) {
        if (bytes > LINED_MAX && allreduce) {   /* a root's row is not posted */
            own = contiguous(mine_slot);
        } else {
            memcpy(node->fast_own, call->in, bytes);
            own = node->fast_own;
        }
    }

    /* 3. Fold everyone's. */
    for (int r = 0; r < size; r++) {
        const fast_slot_t *slot = slot_of(node, topo->local_of[r], b);
        if (r != me_rank &&
            (status = wait_for(node, call, NULL, slot, lines, mine_bits, k, r, "input of call",
                               &mine)) != FOLD_OK) {
            return give_up(node, k, status);
        }
    }
    /* The posts say what each rank was asked: fold nothing if they differ. This rank's
     * own line is never loaded: its stores may still wait in the store buffer for the
     * line, and a load there would wait with them. */
    for (int r = 0; r < size; r++) {
        if (r == me_rank) {
            continue;
        }
        const uint64_t theirs = slot_of(node, topo->local_of[r], b)->line[0].call;
        if (theirs != mine_bits) {
            fold_fingerprint_t f = call_of(theirs);
            char line[256] = "";
            if (fold_fingerprint_diff(&f, r, &mine, me_rank, line, sizeof(line)) == 0) {
                snprintf(line, sizeof(line), "rank %d posted the input of another call (an "
                         "earlier mismatched call went unseen)", r);
            }
            fold_error("%s on comm %u call %llu: %s", call->coll_name, node->comm_id,
                       (unsigned long long)k, line);
            return give_up(node, k, FOLD_ERR_MISMATCH);
        }
    }
    /* Rank order: a lined first row gathered straight into OUT (OWN is IN or a copy,
     * never OUT unless this is rank 0). */
    const void *acc = own;
    if (me_rank != 0) {
        acc = row_of(slot_of(node, topo->local_of[0], b), bytes, call->out);
    }
    for (int r = 1; r < size; r++) {
        const void *row = r == me_rank ? own : row_of(slot_of(node, topo->local_of[r], b),
                                                      bytes, node->fast_row);
        status = fold_reduce_local(call->op, call->dtype, acc, row, call->out, count, 1,
                                   call->thread_threshold);
        if (status != FOLD_OK) {
            return status;
        }
        acc = call->out;
    }
    finish(my_done, k);
    claim_next(node, b, posted_lines, posted_bytes);
    /* A reduce's root: the others' next slots, which non-roots running ahead have
     * already filled; their lines cross now, while the caller computes, rather than in
     * the next call. Not an allreduce's: its peers fill their next slots only after
     * this call, and pulling those lines makes the posters take them back, which
     * slows small calls a little and a tail by half again. */
    for (int r = 0; r < size && !allreduce; r++) {
        const fast_slot_t *next = slot_of(node, topo->local_of[r], (b + 1) % FOLD_FAST_SLOTS);
        for (size_t j = 0; r != me_rank && j < lines; j++) {
            __builtin_prefetch(&next->line[j]);
        }
        for (size_t at = 0; r != me_rank && bytes > LINED_MAX && at < bytes; at += 64) {
            __builtin_prefetch(next->tail + at);
        }
    }
    return FOLD_OK;
}
