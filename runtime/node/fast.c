/*
 * The tiny-message fast path of shm_flat: a blocking allreduce or reduce of at most
 * FOLD_FAST_MAX_BYTES on a communicator that lives on one node runs here, outside
 * the executor, in a few hundred nanoseconds. Same protocol as the schedule
 * (coll/alg_shm_flat.c), cut to the bone:
 *
 *   region (end of the node segment), per local rank l:
 *     slot[l][0 .. S-1]        | seq (8 B) | data ... |   S = FOLD_FAST_SLOTS
 *     done[l]                  | seq of the last call l finished reading |
 *
 *   call k (the same count on every rank), b = k mod S:
 *     1. before overwriting slot[me][b] (call k - S's data), wait until its readers
 *        (everyone, or the root of a reduce) have stored done >= k - S -- unless
 *        this rank saw every other rank's input of call k - 1, which they post only
 *        after finishing call k - 2 (back-to-back allreduces never wait here). With
 *        S slots the non-roots of back-to-back reduces run up to S calls ahead of
 *        the root and look at its done line once every S / 2 calls.
 *     2. copy the input to slot[me][b] with what this rank was asked to do (a
 *        fingerprint, compared by the folding ranks: mismatched calls fail with
 *        FOLD_ERR_MISMATCH), store seq = k (release); the root of a reduce, whose
 *        row nobody else reads, folds it straight from its input
 *     3. allreduce, or the root of a reduce: wait for every slot[r][b].seq == k,
 *        fold the rows in rank order into the output
 *     4. every S / 2 calls, store done = k (see finish()); then ask for the lines
 *        of the others' next slots, which ranks running ahead have already filled
 *
 * The sequence number shares a cache line with the first 56 bytes of data, so a
 * small message costs the reader one line transfer per peer. Every rank folds the
 * same rows in the same order, so all get the same bits, for any op.
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

#define SLOT_BYTES (FOLD_FAST_MAX_BYTES + 64)   /* seq + data, whole lines */
#define DONE_EVERY (FOLD_FAST_SLOTS / 2)       /* calls between stores of `done` */

/* A slot's fingerprint carries the low bits of the call's position among the node's
 * calls (node.h) where a packed count's high bits would be, which are zero here: a
 * rank whose calls on the node went on without meeting the others' (a reduce's
 * non-root, node/resync.c) reads another call's input as a mismatch, never folds it. */
#define POS_SHIFT 56
#define POS_BITS  (UINT64_C(0xff) << POS_SHIFT)
_Static_assert(FOLD_FAST_MAX_BYTES < (1u << (POS_SHIFT - 44)),
               "a tiny call's count leaves the packed count's top bits free");

static inline uint64_t at_position(uint64_t pos)
{
    return (pos & 0xff) << POS_SHIFT;
}

typedef struct fast_slot {
    _Atomic uint64_t seq;
    uint64_t         call;   /* what the poster was asked to do (fingerprint.h) */
    char             data[SLOT_BYTES - 2 * sizeof(uint64_t)];
} fast_slot_t;

typedef struct fast_rank {
    fast_slot_t      slot[FOLD_FAST_SLOTS];
    _Atomic uint64_t done;
    char             pad[64 - sizeof(uint64_t)];
} fast_rank_t;

size_t fold_node_fast_region_bytes(int local_size)
{
    return (size_t)local_size * sizeof(fast_rank_t);
}

static fast_rank_t *region(const fold_node_t *node, int local)
{
    const fold_shm_seg_t *seg = &node->seg;
    char *base = seg->data + seg->data_size - fold_node_peer_region_bytes(seg->local_size) -
                 fold_node_fast_region_bytes(seg->local_size);
    return (fast_rank_t *)base + local;
}

/* Call k is over for this rank: it read all it will of calls <= k. Said every
 * DONE_EVERY calls, whether this rank folded or not: a rank that ran ahead then
 * looks at this line once per DONE_EVERY calls instead of pulling it across after
 * each store. A rank reusing a slot needs done >= k - S of its readers, and done
 * lags at most DONE_EVERY - 1 < S calls behind what they finished, so the rank
 * furthest behind can always go on: nobody waits for good. */
static void finish(fast_rank_t *me, uint64_t k)
{
    if (k % DONE_EVERY == 0) {
        atomic_store_explicit(&me->done, k, memory_order_release);
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

/* Waits until *word >= value; FOLD_ERR_TIMEOUT after the call's timeout. With `mine`,
 * fails with FOLD_ERR_MISMATCH if the peer went on to the node's schedules. */
static int wait_for(fold_node_t *node, const fold_node_call_t *call, _Atomic uint64_t *word,
                    uint64_t value, int peer, const char *what, const fold_fingerprint_t *mine)
{
    double start = 0;
    for (unsigned long polls = 0;; polls++) {
        if (atomic_load_explicit(word, memory_order_acquire) >= value) {
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

void fold_node_fast_prefault(fold_node_t *node)
{
    /* The region's pages mapped writable now rather than faulted in by the first tiny
     * calls (1-3 us each, on the writer and on each reader). Only this region: mapping
     * the whole segment at set-up costs ~4 ms per communicator (mp_shm_budget's churn). */
    char *start = (char *)region(node, 0);
    size_t len = fold_node_fast_region_bytes(node->seg.local_size);
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
    return bytes <= FOLD_FAST_MAX_BYTES && node != NULL && node->seg.base != NULL &&
           !node->broken && node->topo->nnodes == 1 && node->seg.local_size == node->comm_size;
}

int fold_node_fast_peer_ahead(const fold_node_t *node, int local, fold_fingerprint_t *theirs)
{
    const uint64_t next = node->fast_calls + 1;
    const fast_slot_t *slot = &region(node, local)->slot[next % FOLD_FAST_SLOTS];
    if (atomic_load_explicit(&slot->seq, memory_order_acquire) != next) {
        return 0;
    }
    *theirs = fold_fingerprint_unpack(slot->call & ~POS_BITS);
    theirs->call = slot->call >> POS_SHIFT;
    return 1;
}

void fold_node_fast_skip(fold_node_t *node, uint64_t calls)
{
    if (calls <= node->fast_calls) {
        return;
    }
    node->fast_calls   = calls;
    node->fast_saw_all = 0;   /* it saw nobody's input of the last one */
    atomic_store_explicit(&region(node, node->local_rank)->done, calls, memory_order_release);
}

/* Call k failed midway: this rank reads nothing more of it. A mismatch asks the
 * node's ranks to bring their counters into step (the others may have run this call
 * on a node schedule); anything else breaks the node. */
static int give_up(fold_node_t *node, fast_rank_t *me, uint64_t k, int status)
{
    node->fast_saw_all = 0;
    finish(me, k);
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
    fast_rank_t *me = region(node, node->local_rank);
    int status = FOLD_OK;

    /* 1. Nobody still reads what this slot held two calls ago. */
    int readers = node->fast_readers[b];
    const uint64_t reused = k - FOLD_FAST_SLOTS;   /* the call whose data slot b holds */
    if (k > FOLD_FAST_SLOTS && !node->fast_saw_all &&
        !(readers >= 0 && readers == node->fast_done_rank && node->fast_done_seen >= reused)) {
        for (int r = 0; r < size && status == FOLD_OK; r++) {
            if (r != me_rank && (readers < 0 || readers == r)) {
                _Atomic uint64_t *done = &region(node, topo->local_of[r])->done;
                status = wait_for(node, call, done, reused, r, "reading of call", NULL);
                /* A root usually is a call ahead: remember, and skip the next look. */
                node->fast_done_rank = r;
                node->fast_done_seen = atomic_load_explicit(done, memory_order_acquire);
            }
        }
        if (status != FOLD_OK) {
            return give_up(node, me, k, status);
        }
    }
    node->fast_readers[b] = allreduce ? -1 : root;
    node->fast_saw_all    = folds;

    /* 2. Post the input. A reduce's root reads its own row from IN instead, unless
     * in place with rows before its own: their fold overwrites IN first. */
    const void *own = call->in;
    const fold_fingerprint_t mine = {
        .allreduce = allreduce, .count = count, .dtype = call->dtype, .op = call->op,
        .root = allreduce ? 0 : root};   /* in place or not gives the same result here */
    const uint64_t mine_bits = fold_fingerprint_pack(&mine) | at_position(node->fast_pos + k);
    if (allreduce || me_rank != root || (call->in == call->out && me_rank > 0)) {
        memcpy(me->slot[b].data, call->in, bytes);
        own = me->slot[b].data;
    }
    /* Posted even by a root that keeps its row: a rank that took itself for the
     * root then meets this post and its fingerprint, not a wait for good. */
    me->slot[b].call = mine_bits;
    atomic_store_explicit(&me->slot[b].seq, k, memory_order_release);
    if (!folds) {
        finish(me, k);   /* it read nothing of call k */
        return FOLD_OK;
    }

    /* 3. Fold everyone's. */
    for (int r = 0; r < size; r++) {
        fast_rank_t *peer = region(node, topo->local_of[r]);
        if (r != me_rank &&
            (status = wait_for(node, call, &peer->slot[b].seq, k, r, "input of call", &mine)) !=
                FOLD_OK) {
            return give_up(node, me, k, status);
        }
    }
    /* The posts say what each rank was asked: fold nothing if they differ. */
    for (int r = 0; r < size; r++) {
        uint64_t theirs = region(node, topo->local_of[r])->slot[b].call;
        if (r != me_rank && theirs != mine_bits) {
            fold_fingerprint_t f = fold_fingerprint_unpack(theirs & ~POS_BITS);
            char line[256] = "";
            if (fold_fingerprint_diff(&f, r, &mine, me_rank, line, sizeof(line)) == 0) {
                snprintf(line, sizeof(line), "rank %d posted the input of another call (an "
                         "earlier mismatched call went unseen)", r);
            }
            fold_error("%s on comm %u call %llu: %s", call->coll_name, node->comm_id,
                       (unsigned long long)k, line);
            return give_up(node, me, k, FOLD_ERR_MISMATCH);
        }
    }
    /* Rank order; a rank's own row is `own` (in place, out is in). */
    const void *acc = me_rank == 0 ? own : region(node, topo->local_of[0])->slot[b].data;
    for (int r = 1; r < size; r++) {
        const void *row = r == me_rank ? own : region(node, topo->local_of[r])->slot[b].data;
        status = fold_reduce_local(call->op, call->dtype, acc, row, call->out, count, 1,
                                   call->thread_threshold);
        if (status != FOLD_OK) {
            return status;
        }
        acc = call->out;
    }
    finish(me, k);
    /* The others' next slots, which ranks that run ahead have already filled: their
     * lines cross now, while the caller computes, rather than in the next call. */
    for (int r = 0; r < size; r++) {
        const char *line = (const char *)&region(node, topo->local_of[r])->slot[(b + 1) %
                                                                                 FOLD_FAST_SLOTS];
        for (size_t at = 0; r != me_rank && at < bytes + sizeof(uint64_t); at += 64) {
            __builtin_prefetch(line + at);
        }
    }
    return FOLD_OK;
}
