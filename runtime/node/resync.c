/*
 * Bringing the node segment back into step after a call given up for a mismatch.
 *
 * Each rank numbers the calls it makes on the node: a node-aware call takes the
 * next epoch (turns.c), a tiny-message call the next fast number (fast.c), and its
 * position is how many calls it has started (fold_node_position: epoch + fast_calls,
 * less what resyncs skipped). Matching calls take the same path on every rank,
 * so both counters agree between ranks; the position agrees even where a mismatched
 * call sent ranks down different paths. What a given-up call leaves behind:
 *
 *   - flags and slots posted for it, and ones never posted;
 *   - counters that disagree when the ranks took different paths (one on the
 *     tiny-message path, another on a node schedule);
 *   - ranks that never saw the mismatch: the non-roots of a reduce return at once,
 *     and may have run further calls; late ranks have not reached the call yet.
 *
 * The resync. A rank that gives the call at position T up for a mismatch posts its
 * record (below) and sets the node's request word to T; it returns its error at
 * once. Every other local rank posts its record when it next looks: at the start
 * of its next call on the node (one compare of the word, fold_node_resync_pending),
 * or while it waits in one. A rank whose next call is T itself (it arrived late)
 * fails that call with FOLD_ERR_MISMATCH without running it. Then, at its next
 * call on the node, every rank waits (bounded by FOLD_TIMEOUT) until all records
 * for T are in and settles alone on what they say, the same on every rank:
 *
 *   record of rank r: its counters (epoch_r, fast_r) as they stood right after
 *   position T (a rank that has run further counts back through its history of
 *   node-aware calls), and whether it has run node-aware or tiny calls since;
 *   agreement: epoch* = max epoch_r, fast* = max fast_r; every rank moves its
 *   counters up to them. A rank that skips epochs posts their DONE (the next
 *   node-aware call waits for it); one that skips fast numbers says it read them.
 *
 * Afterwards every flag and slot posted for the given-up call holds a value below
 * what any later call waits for (flag values carry the epoch, slots their number),
 * so nothing stale satisfies a later wait. One case cannot be settled: a rank that
 * never saw the mismatch and ran further calls on a path whose counter must move
 * (a reduce's non-root, on the tiny-message path while another rank gave the call
 * up on a node schedule, which went on to a tiny call of its own before the others
 * had all failed): its later calls used numbers that now mean other calls. Every
 * rank then finds it in the records and marks the node broken; the communicator's
 * node-aware calls fail with FOLD_ERR_PEER_FAILED from then on, as after a peer's
 * failure, and the word's low bit tells every local rank at its next look. A rank
 * that fails for another reason (a timeout, a dead peer) leaves the node broken as
 * before: the others' waits on it run out and name it. So does any failure on a
 * communicator across nodes: a node cannot tell whether another node's ranks gave
 * the call up for a mismatch or ran out of time waiting (those never resync), and
 * a node brought back into step alone would wait on the others in its next call.
 *
 *   region (before the tiny-message path's): | request word | one line per rank |
 *   request word: T << 1 | broken
 *   record line: two slots (resyncs alternate between them, so a rank that has
 *   settled and moves on never overwrites a record another still reads)
 */
#include "node/node.h"
#include "log.h"
#include "util/clock.h"

#include <fold/fold_status.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

/* record bits: what the rank has run since position T */
#define AFTER_NODE  1u
#define AFTER_FAST  2u
#define AFTER_LOST  4u   /* its history does not reach back to T */

typedef struct resync_line {
    _Atomic uint64_t at[2];    /* the position the slot's record is for (0: none) */
    uint64_t         epoch[2];
    uint64_t         fast[2];
    uint64_t         after[2];
} resync_line_t;
_Static_assert(sizeof(resync_line_t) == 64, "one cache line per rank");

typedef struct resync_region {
    _Atomic uint64_t request;
    char             pad[64 - sizeof(uint64_t)];
    resync_line_t    line[];
} resync_region_t;

typedef struct agreement {
    uint64_t epoch, fast;
    int      lost;    /* a rank ran calls the agreement renumbers: cannot settle */
    int      who;     /* ... which local rank */
} agreement_t;

size_t fold_node_resync_region_bytes(int local_size)
{
    return sizeof(resync_region_t) + (size_t)local_size * sizeof(resync_line_t);
}

static resync_region_t *region(const fold_node_t *node)
{
    const fold_shm_seg_t *seg = &node->seg;
    char *end = seg->data + seg->data_size - fold_node_peer_region_bytes(seg->local_size) -
                fold_node_fast_region_bytes(seg->local_size);
    return (resync_region_t *)(end - fold_node_resync_region_bytes(seg->local_size));
}

void fold_node_resync_init(fold_node_t *node)
{
    node->resync_word = node->seg.base != NULL ? &region(node)->request : NULL;
}

void fold_node_break(fold_node_t *node)
{
    node->broken = 1;
    if (node->resync_word != NULL) {
        atomic_fetch_or_explicit(node->resync_word, 1, memory_order_acq_rel);
    }
}

/* This rank's counters right after position T, and what it ran since. */
static void counters_after(const fold_node_t *node, uint64_t T, uint64_t *epoch,
                           uint64_t *fast, unsigned *after)
{
    const uint64_t E = node->epoch, P = fold_node_position(node);
    *after = 0;
    if (P <= T) {   /* T was its last call, or it has not reached T */
        *epoch = E;
        *fast  = node->fast_calls;
        return;
    }
    uint64_t later = 0;   /* node-aware calls at positions past T */
    while (later < E && later < FOLD_NODE_HISTORY &&
           node->history[(E - later) % FOLD_NODE_HISTORY] > T) {
        later++;
    }
    if (later == FOLD_NODE_HISTORY && later < E) {
        *after = AFTER_LOST;
    }
    *epoch = E - later;
    *fast  = T + node->pos_skew - *epoch;
    *after |= (later > 0 ? AFTER_NODE : 0) | (P - T > later ? AFTER_FAST : 0);
}

static void post_record(fold_node_t *node, uint64_t T)
{
    resync_line_t *l = &region(node)->line[node->local_rank];
    const int s = (int)(node->resync_count & 1);
    uint64_t epoch, fast;
    unsigned after;
    counters_after(node, T, &epoch, &fast, &after);
    l->epoch[s] = epoch;
    l->fast[s]  = fast;
    l->after[s] = after;
    atomic_store_explicit(&l->at[s], T, memory_order_release);
    node->resync_posted = T;
}

/* 1 with the agreement once every local rank's record for T is in; else 0 and the
 * first local rank still missing in *missing. */
static int gather(const fold_node_t *node, uint64_t T, agreement_t *a, int *missing)
{
    const resync_region_t *r = region(node);
    const int s = (int)(node->resync_count & 1);
    *a = (agreement_t){0, 0, 0, -1};
    for (int l = 0; l < node->seg.local_size; l++) {
        if (atomic_load_explicit(&r->line[l].at[s], memory_order_acquire) != T) {
            *missing = l;
            return 0;
        }
        a->epoch = r->line[l].epoch[s] > a->epoch ? r->line[l].epoch[s] : a->epoch;
        a->fast  = r->line[l].fast[s] > a->fast ? r->line[l].fast[s] : a->fast;
    }
    for (int l = 0; l < node->seg.local_size && !a->lost; l++) {
        const resync_line_t *x = &r->line[l];
        a->lost = (x->after[s] & AFTER_LOST) ||
                  ((x->after[s] & AFTER_NODE) && x->epoch[s] < a->epoch) ||
                  ((x->after[s] & AFTER_FAST) && x->fast[s] < a->fast);
        a->who = a->lost ? l : -1;
    }
    return 1;
}

/* Moves this rank's counters to the agreement (or breaks the node). */
static int settle(fold_node_t *node, uint64_t word, const agreement_t *a)
{
    const uint64_t T = word >> 1;
    if (a->lost) {
        const fold_topo_t *t = node->topo;
        fold_error("comm %u: after the calls given up at node call %llu, rank %d had run "
                   "further calls on the node before it learnt of it, numbered as the "
                   "others do not (a reduce's non-root that never saw the mismatch), or "
                   "more than %d node-aware ones: the node segment cannot be brought back "
                   "into step, and this communicator's node-aware calls are refused from "
                   "now on", node->comm_id, (unsigned long long)T,
                   fold_topo_rank(t, t->node_of[node->comm_rank], a->who), FOLD_NODE_HISTORY);
        fold_node_break(node);
        return FOLD_ERR_PEER_FAILED;
    }
    const resync_line_t *mine = &region(node)->line[node->local_rank];
    const int s = (int)(node->resync_count & 1);
    if (mine->epoch[s] < a->epoch) {
        /* No node-aware call of its own since T (else a->lost): the skipped epochs
         * are its latest. */
        for (uint64_t e = a->epoch; e > node->epoch && a->epoch - e < FOLD_NODE_HISTORY;
             e--) {
            node->history[e % FOLD_NODE_HISTORY] = T;
        }
        node->epoch = a->epoch;
        fold_node_turn_owe_done(node, a->epoch);
    }
    if (mine->fast[s] < a->fast) {
        fold_node_fast_skip(node, a->fast);
    }
    /* Every rank now stands right after T, whichever numbers it skipped. */
    node->pos_skew = a->epoch + a->fast - T;
    node->fast_pos = node->epoch - node->pos_skew;
    node->resync_done = word;
    node->resync_count++;
    fold_debug("comm %u: node segment back in step after node call %llu (%llu node-aware, "
               "%llu tiny-message calls)", node->comm_id, (unsigned long long)T,
               (unsigned long long)a->epoch, (unsigned long long)a->fast);
    return FOLD_OK;
}

void fold_node_abandon(fold_node_t *node, uint64_t pos, uint64_t epoch, int status)
{
    /* Whatever the failure, the application may free this call's buffers next. */
    fold_node_peer_withdraw(node, epoch);
    if (node->broken) {
        return;
    }
    if (status == FOLD_ERR_TIMEOUT || status == FOLD_ERR_PEER_FAILED) {
        /* A timeout, a dead peer: broken here; the others find out from their own
         * waits, which name the rank they waited for. */
        node->broken = 1;
        return;
    }
    if (status != FOLD_ERR_MISMATCH && status != FOLD_ERR_TRUNCATED) {
        /* This rank's own failure (its kernel copy refused a bad address, memory ran
         * out): the others would wait for it until FOLD_TIMEOUT, so the node is told
         * (a 2-rank allreduce's other rank waited 60 s). */
        fold_node_break(node);
        return;
    }
    if (node->resync_word == NULL || node->topo->nnodes > 1) {
        /* Across nodes a mismatch is not brought back into step: another node's ranks
         * may have timed out instead, and they would not take part in a call this
         * node's ranks settled. Broken here, as a timeout. */
        node->broken = 1;
        return;
    }
    const uint64_t want = pos << 1;
    uint64_t cur = atomic_load_explicit(node->resync_word, memory_order_acquire);
    while (cur != want) {
        if ((cur & 1) || cur != node->resync_done) {
            /* broken already, or another resync not settled here yet: a second
             * mismatch on top of the first is not worth untangling */
            if (!(cur & 1)) {
                fold_error("comm %u: node call %llu was given up for a mismatch while the "
                           "node's ranks had not settled node call %llu's yet: the node "
                           "segment cannot be brought back into step, and this "
                           "communicator's node-aware calls are refused from now on",
                           node->comm_id, (unsigned long long)pos,
                           (unsigned long long)(cur >> 1));
            }
            fold_node_break(node);
            return;
        }
        if (atomic_compare_exchange_weak_explicit(node->resync_word, &cur, want,
                                                  memory_order_acq_rel,
                                                  memory_order_acquire)) {
            break;
        }
    }
    if (epoch != 0) {
        fold_node_turn_owe_done(node, epoch);   /* it no longer touches the segment */
    }
    post_record(node, pos);
    fold_debug("comm %u: node call %llu given up (%s): the node's ranks bring the segment "
               "back into step at their next call", node->comm_id, (unsigned long long)pos,
               fold_status_string(status));
}

/* The resync this rank works on: the one it has posted its record for and not
 * settled yet, else the word's (a rank that has settled may already have asked for
 * the next one). */
static uint64_t current(const fold_node_t *node, uint64_t word)
{
    if (node->resync_posted != 0 && node->resync_posted << 1 != node->resync_done) {
        return node->resync_posted;
    }
    return word >> 1;
}

/* The first look at a resync this rank has not posted for: where does it stand? */
enum { STAND_BEFORE, STAND_AT, STAND_PAST };

static int stand(uint64_t T, uint64_t pos)
{
    return pos < T ? STAND_BEFORE : pos == T ? STAND_AT : STAND_PAST;
}

int fold_node_resync_join(fold_node_t *node, const char *coll_name, double timeout_sec,
                          long spin_count)
{
    const uint64_t word = atomic_load_explicit(node->resync_word, memory_order_acquire);
    if (word == node->resync_done) {
        return FOLD_OK;
    }
    const uint64_t T = current(node, word), next = fold_node_position(node) + 1;
    if (node->broken && !(word & 1)) {
        /* This rank cannot take part (a call of its own timed out): nor can the others
         * go on without it. */
        fold_error("%s on comm %u: the node's ranks are bringing its segment back into step "
                   "after node call %llu, but an earlier collective failed here while using "
                   "it: this communicator's node-aware calls are refused from now on",
                   coll_name, node->comm_id, (unsigned long long)T);
        fold_node_break(node);
        return FOLD_ERR_PEER_FAILED;
    }
    if (word & 1) {
        fold_error("%s on comm %u: an earlier collective failed while using the node "
                   "segment; its flags are out of step, so this communicator cannot use it "
                   "again", coll_name, node->comm_id);
        node->broken = 1;
        return FOLD_ERR_PEER_FAILED;
    }
    if (node->resync_posted != T) {
        int where = stand(T, next);
        if (where == STAND_BEFORE) {
            return FOLD_OK;   /* the given-up call is still ahead of this one */
        }
        post_record(node, T);
        if (where == STAND_AT) {
            fold_error("%s on comm %u node call %llu: another rank of this node gave this "
                       "call up, the ranks' calls differ (its log says how)", coll_name,
                       node->comm_id, (unsigned long long)T);
            return FOLD_ERR_MISMATCH;
        }
    }
    agreement_t a;
    int missing = 0;
    double start = 0;
    for (long polls = 0; !gather(node, T, &a, &missing); polls++) {
        if (atomic_load_explicit(node->resync_word, memory_order_acquire) & 1) {
            fold_error("%s on comm %u: another rank of this node gave the node segment up "
                       "while bringing it back into step after node call %llu", coll_name,
                       node->comm_id, (unsigned long long)T);
            node->broken = 1;
            return FOLD_ERR_PEER_FAILED;
        }
        if (polls < spin_count) {
            continue;
        }
        sched_yield();
        double now = fold_util_time_now();
        if (start == 0) {
            start = now;
        } else if (now - start > timeout_sec) {
            const fold_topo_t *t = node->topo;
            fold_error("%s on comm %u: no progress for %.1f s (FOLD_TIMEOUT=%g) waiting for "
                       "rank %d to bring the node segment back into step after node call "
                       "%llu was given up", coll_name, node->comm_id, now - start,
                       timeout_sec, fold_topo_rank(t, t->node_of[node->comm_rank], missing),
                       (unsigned long long)T);
            fold_node_break(node);
            return FOLD_ERR_TIMEOUT;
        }
    }
    return settle(node, T << 1, &a);
}

int fold_node_resync_poll(fold_node_t *node, uint64_t pos, char *why, size_t whylen)
{
    if (!fold_node_resync_pending(node)) {
        return FOLD_OK;
    }
    const uint64_t word = atomic_load_explicit(node->resync_word, memory_order_acquire);
    const uint64_t T = current(node, word);
    if (word & 1) {
        snprintf(why, whylen, "another rank of this node gave the node segment up");
        node->broken = 1;
        return FOLD_ERR_PEER_FAILED;
    }
    if (node->broken) {
        snprintf(why, whylen, "the node's ranks are bringing its segment back into step "
                 "after node call %llu, and an earlier call failed here while using it",
                 (unsigned long long)T);
        fold_node_break(node);
        return FOLD_ERR_PEER_FAILED;
    }
    switch (stand(T, pos)) {
    case STAND_BEFORE:
        return FOLD_OK;
    case STAND_AT:
        snprintf(why, whylen, "another rank of this node gave this call (node call %llu) "
                 "up, the ranks' calls differ (its log says how)", (unsigned long long)T);
        return FOLD_ERR_MISMATCH;   /* the caller's failure posts its record */
    default:
        break;
    }
    /* Past it: this rank's record, and the agreement if it is complete. Settling
     * changes only the counter of a path this rank has not used since T. */
    if (node->resync_posted != T) {
        post_record(node, T);
    }
    agreement_t a;
    int missing;
    if (!gather(node, T, &a, &missing)) {
        return FOLD_INPROGRESS;   /* the counters may still be apart: see node.h */
    }
    if (settle(node, T << 1, &a) != FOLD_OK) {
        snprintf(why, whylen, "the node segment could not be brought back into step after "
                 "node call %llu was given up", (unsigned long long)T);
        return FOLD_ERR_PEER_FAILED;
    }
    return FOLD_OK;
}
