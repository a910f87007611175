/*
 * Single copy between the ranks of a node: each rank publishes where its IN and
 * OUT of the current call are, and the others read from or write to them through
 * the kernel (Linux cross-memory attach, process_vm_readv / process_vm_writev),
 * with no stop in the segment. The kernel allows it between processes of one user
 * unless a security policy forbids ptrace access (Yama ptrace_scope, seccomp in
 * containers); setup.c probes it once per communicator and every rank learns
 * whether all of them can.
 *
 *   region (past the fast path's), per local rank l, four cache lines:
 *     | epoch | in | out | count | call | prev: epoch count call |
 *     | ino, off, bytes of IN and OUT in fold memory | their fds | frees |
 *       (bytes' top bit: only the buffer's whole pages lie there, mem_adopt.c)
 *   written by l when its call takes its turn, and
 *     | withdrawn: the epoch of the call whose buffers l took back |
 *     | busy: the epoch and local rank whose buffer l is copying, 0 between copies |
 *   written by l when it gives a call up, and around each of its copies of another
 *   rank's buffers
 *
 * A rank that gives its call up (a timeout, a peer's failure, its own, a mismatch)
 * returns to an application that may free its buffers at once, while another rank
 * may be reading or writing them: the failure path skips the call's closing
 * handshake. So it first withdraws its buffers (no copy starts after that), then
 * waits until no rank is still inside a copy of them (fold_node_peer_withdraw). A
 * copier stores busy before it looks at withdrawn, the withdrawer withdrawn before it
 * looks at busy (both sequentially consistent), so either the copier sees the
 * withdrawal and does not copy, or the withdrawer sees the copy and waits for it.
 * The published call stays as it was, for the others' comparisons of calls.
 *
 * count and call say what l was asked to do (fingerprint.h), and where the call
 * stands among the node's calls (its position, node/resync.c, in the packed count's
 * bits; the fingerprint's memory in count's top bit): a rank about to read or write l's buffers, or waiting on l's flags, first
 * compares them with its own call, so mismatched calls fail with FOLD_ERR_MISMATCH
 * instead of copying the wrong bytes. prev keeps l's call before: a rank that is
 * still in that call when l has moved on to its next (a reduce's non-root returns
 * at once) compares with it, so a culprit that ran ahead is caught all the same.
 */
#define _GNU_SOURCE
#include "node/node.h"
#include "fingerprint.h"
#include "log.h"
#include "mem.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <fold/fold_status.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/process.h"

typedef struct peer_line {
    _Atomic uint64_t epoch;
    uint64_t         in, out;
    uint64_t         count;   /* of the call */
    uint64_t         call;    /* the rest of its fingerprint, packed with count 0, and
                                 its position in the count's bits */
    uint64_t         prev_epoch, prev_count, prev_call;   /* the call before */
    /* second line: where IN and OUT lie in fold memory (fd -1: they do not), and how
     * many allocations the process has freed (xmap.c) */
    uint64_t         ino[2], off[2], bytes[2];
    int32_t          fd[2];
    uint64_t         frees;
    /* third line: read by every copy of this rank's buffers */
    _Atomic uint64_t withdrawn;
    char             pad3[56];
    /* fourth line: written around each copy this rank makes, read by a rank that
     * withdraws its buffers */
    _Atomic uint64_t busy;
    char             pad4[56];
} peer_line_t;
_Static_assert(sizeof(peer_line_t) == 256, "four cache lines per rank");

/* What a rank copying local rank `local`'s buffers in the call of `epoch` stores in
 * busy; BUSY_ANY while it writes into several ranks' at once (a result written along). */
#define BUSY_WORD(epoch, local) ((epoch) << 24 | (uint64_t)((local) + 1))
#define BUSY_ANY(epoch)         ((epoch) << 24)
/* How long a rank that withdraws its buffers waits for a copy of them to end: one
 * copy moves a chunk in milliseconds; a copier stopped in the middle (SIGSTOP, a
 * debugger) may never end it, and the failing rank returns all the same. */
#define WITHDRAW_WAIT_S 1.0
/* How often that wait looks whether the copier is stopped, which ends it: a stopped
 * copier finishes nothing until it is resumed (a fault test stops ranks inside calls,
 * and the others' failure then took their timeout and this second). */
#define WITHDRAW_LOOK_S 1e-3

/* The packed fingerprint's count bits, which the line's call word uses for the
 * call's position (its low 20 bits: enough to tell neighbours apart). */
#define POS_SHIFT 44
#define POS_MASK  UINT64_C(0xfffff)
/* The count word's top bit: the fingerprint's memory (no count reaches it). */
#define MEMORY_BIT (UINT64_C(1) << 63)
/* A published allocation size's top bit: only the buffer's whole pages lie in it,
 * from off on (an adopted buffer that starts or ends inside a page, mem_adopt.c). */
#define PAGES_ONLY_BIT (UINT64_C(1) << 63)

static uint64_t count_word(const fold_fingerprint_t *f)
{
    return (uint64_t)f->count | (f->memory ? MEMORY_BIT : 0);
}

/* The fingerprint of a line's (count, call) words. */
static fold_fingerprint_t unpack_line(uint64_t count, uint64_t call)
{
    fold_fingerprint_t f = fold_fingerprint_unpack(call);
    f.count  = (size_t)(count & ~MEMORY_BIT);
    f.memory = (count & MEMORY_BIT) != 0;
    return f;
}

size_t fold_node_peer_region_bytes(int local_size)
{
    return (size_t)local_size * sizeof(peer_line_t);
}

static peer_line_t *line(const fold_node_t *node, int local)
{
    const fold_shm_seg_t *seg = &node->seg;
    char *end = seg->data + seg->data_size;
    return (peer_line_t *)(end - fold_node_peer_region_bytes(seg->local_size)) + local;
}

/* Where IN and OUT lie in fold memory, for peers to map instead of copying through
 * the kernel (fd -1: they do not); only a schedule that reads or writes them (single
 * copy) looks, another counts the pass for adoption and moves its buffers on where
 * adopting pays. What the kernel will copy gets huge
 * pages first (huge.c), before the line is rewritten: peers waiting on it would wait
 * through the kernel's work. */
static void find_places(fold_node_t *node, const void *in, const void *out,
                        const fold_fingerprint_t *call, int single_copy, int passes,
                        int steps, fold_mem_place_t p[2])
{
    const size_t bytes = call->count * fold_dtype_size((fold_dtype_t)call->dtype);
    p[0] = p[1] = (fold_mem_place_t){.fd = -1};
    const int adopt = node->adopt;
    if (!single_copy) {
        /* Its next pass may go to single copy: the pass counts, and where adopting pays
         * (selection's choice in fold memory differs), the adoption goes on. */
        fold_mem_place_t unused;
        if (adopt) {
            fold_mem_adopt_in_steps(in, bytes, passes, steps, &unused);
            if (out != NULL && out != in) {
                fold_mem_adopt_in_steps(out, bytes, passes, steps, &unused);
            }
        }
        return;
    }
    if (!fold_mem_find(in, bytes, &p[0]) && adopt) {
        fold_mem_adopt_in_steps(in, bytes, passes, steps, &p[0]);
    }
    if (out == in) {
        p[1] = p[0];
    } else if (!fold_mem_find(out, bytes, &p[1]) && adopt && out != NULL) {
        fold_mem_adopt_in_steps(out, bytes, passes, steps, &p[1]);
    }
    /* Pages on their way into fold memory are shared already: no huge page for them. */
    if (p[0].fd < 0 && !fold_mem_adopt_under_way(in, bytes)) {
        fold_node_huge_back(&node->huge, in, bytes, passes);
    }
    if (p[1].fd < 0 && out != in && !fold_mem_adopt_under_way(out, bytes)) {
        fold_node_huge_back(&node->huge, out, bytes, passes);
    }
}

static void publish_places(peer_line_t *me, const fold_mem_place_t p[2])
{
    for (int b = 0; b < 2; b++) {
        me->fd[b]    = p[b].fd;
        me->ino[b]   = p[b].ino;
        me->off[b]   = p[b].off;
        me->bytes[b] = p[b].bytes | (p[b].pages_only ? PAGES_ONLY_BIT : 0);
    }
    me->frees = fold_mem_frees();
}

void fold_node_peer_publish(fold_node_t *node, uint64_t epoch, const void *in, void *out,
                            const fold_fingerprint_t *call, int single_copy, int adopt_passes,
                            int adopt_steps)
{
    peer_line_t *me = line(node, node->local_rank);
    fold_mem_place_t places[2];
    find_places(node, in, out, call, single_copy, adopt_passes, adopt_steps, places);
    fold_fingerprint_t rest = *call;
    rest.count = 0;
    const uint64_t pos = call->call;
    const uint64_t before = atomic_load_explicit(&me->epoch, memory_order_relaxed);
    /* Epoch 0 while the line changes: a rank comparing calls while it waits on this
     * rank's flags (fold_node_peer_check) may read it as this rank moves on. */
    atomic_store_explicit(&me->epoch, 0, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    me->prev_epoch = before;
    me->prev_count = me->count;
    me->prev_call  = me->call;
    me->in    = (uint64_t)(uintptr_t)in;
    me->out   = (uint64_t)(uintptr_t)out;
    publish_places(me, places);
    me->count = count_word(call);
    me->call  = fold_fingerprint_pack(&rest) | (pos & POS_MASK) << POS_SHIFT;
    atomic_store_explicit(&me->epoch, epoch, memory_order_release);
}

/* The bytes of a buffer that lie in fold memory, [lo, hi) in the buffer. */
typedef struct window {
    size_t lo, hi;
} window_t;

/* Local rank `local`'s buffer `which`: none of it, all of it, or its whole pages
 * (PAGES_ONLY_BIT). */
static window_t mapped_window(const fold_node_t *node, int local, int which)
{
    const peer_line_t *l = line(node, local);
    if (l->fd[which] < 0) {
        return (window_t){0, 0};
    }
    if (!(l->bytes[which] & PAGES_ONLY_BIT)) {
        return (window_t){0, SIZE_MAX};
    }
    const fold_fingerprint_t f = unpack_line(l->count, l->call);
    const uintptr_t addr = (uintptr_t)(which ? l->out : l->in);
    uintptr_t first, end;
    fold_mem_whole_pages(addr, f.count * fold_dtype_size((fold_dtype_t)f.dtype),
                         (uintptr_t)sysconf(_SC_PAGESIZE), &first, &end);
    return (window_t){first - addr, end - addr};
}

/* Bytes [off_bytes, off_bytes + len) of local rank `local`'s buffer `which` (whose
 * window w is) through its fold memory mapped here, or NULL: not fold memory, no
 * mapping, or not all of them in it. */
static char *mapped_at(const fold_node_t *node, int local, int which, window_t w,
                       size_t off_bytes, size_t len)
{
    if (off_bytes < w.lo || off_bytes >= w.hi || len > w.hi - off_bytes) {
        return NULL;
    }
    const peer_line_t *l = line(node, local);
    const uint64_t bytes = l->bytes[which] & ~PAGES_ONLY_BIT;
    char *base = fold_node_xmap(node, local, l->fd[which], l->ino[which], bytes, l->frees);
    const uint64_t at = l->off[which] + (off_bytes - w.lo);
    if (base == NULL || at > bytes || len > bytes - at) {
        return NULL;   /* no mapping, or a range it does not hold: the kernel checks it */
    }
    return base + at;
}

/* How much of [off_bytes, off_bytes + len) from its start lies on one side of w's
 * edges: all of it in (*inside 1) or out, or up to the next edge. */
static size_t same_side(window_t w, size_t off_bytes, size_t len, int *inside)
{
    *inside = off_bytes >= w.lo && off_bytes < w.hi;
    const size_t edge = off_bytes < w.lo ? w.lo : *inside ? w.hi : SIZE_MAX;
    return edge - off_bytes < len ? edge - off_bytes : len;
}

/* Through the peer's fold memory mapped here (1), else 0: the kernel copies. */
static int mapped_copy(const fold_node_t *node, int local, int which, window_t w, void *mine,
                       size_t off_bytes, size_t len, int write)
{
    char *theirs = mapped_at(node, local, which, w, off_bytes, len);
    if (theirs == NULL) {
        return 0;
    }
    if (write) {
        memcpy(theirs, mine, len);
    } else {
        memcpy(mine, theirs, len);
    }
    fold_node_xmap_count(node, 0);
    return 1;
}

/* The kernel moves min(len, what it could) bytes per call; loop until done. */
static int peer_copy(const fold_node_t *node, int local, void *mine, uint64_t theirs,
                     size_t len, int write, char *why, size_t whylen)
{
    pid_t pid = (pid_t)node->pids[local];
    while (len > 0) {
        struct iovec l = {mine, len}, r = {(void *)(uintptr_t)theirs, len};
        ssize_t n = write ? process_vm_writev(pid, &l, 1, &r, 1, 0)
                          : process_vm_readv(pid, &l, 1, &r, 1, 0);
        if (n <= 0) {
            snprintf(why, whylen, "%s local rank %d (pid %d) failed: %s",
                     write ? "process_vm_writev to" : "process_vm_readv from", local,
                     (int)pid, n < 0 ? strerror(errno) : "no progress");
            return n < 0 && errno == ESRCH ? FOLD_ERR_PEER_FAILED : FOLD_ERR_TRANSPORT;
        }
        mine = (char *)mine + n;
        theirs += (uint64_t)n;
        len -= (size_t)n;
    }
    return FOLD_OK;
}

/* FOLD_ERR_MISMATCH, with why naming both ranks and the field, when local rank
 * `local` published (count, call) for this very call and was asked something else. */
static int compare_calls(const fold_node_t *node, uint64_t count, uint64_t call, int local,
                         char *why, size_t whylen)
{
    const peer_line_t *mine = line(node, node->local_rank);
    if (count == mine->count && call == mine->call) {
        return FOLD_OK;
    }
    fold_fingerprint_t theirs = unpack_line(count, call);
    fold_fingerprint_t own = unpack_line(mine->count, mine->call);
    const fold_topo_t *t = node->topo;
    const int peer = fold_topo_rank(t, t->node_of[node->comm_rank], local);
    why[0] = '\0';
    if (fold_fingerprint_diff(&theirs, peer, &own, node->comm_rank, why, whylen) == 0) {
        /* Alike but at different places: ranks whose calls went on without meeting
         * (every one a reduce's non-root) numbered them apart. */
        snprintf(why, whylen, "rank %d is at node call %llu, rank %d at %llu (an earlier "
                 "mismatched call went unseen)", peer,
                 (unsigned long long)(call >> POS_SHIFT & POS_MASK), node->comm_rank,
                 (unsigned long long)(mine->call >> POS_SHIFT & POS_MASK));
    }
    return FOLD_ERR_MISMATCH;
}

/* Where the peer's buffer lies in this call; the builder waited for its post. The
 * caller has stored busy (see the top), hence the order of this load. */
static int peer_addr(const fold_node_t *node, int local, uint64_t epoch, int from_out,
                     uint64_t *addr, char *why, size_t whylen)
{
    const peer_line_t *l = line(node, local);
    if (atomic_load_explicit(&l->withdrawn, memory_order_seq_cst) == epoch) {
        snprintf(why, whylen, "local rank %d gave the call up and took its buffers back",
                 local);
        return FOLD_ERR_PEER_FAILED;
    }
    uint64_t e = atomic_load_explicit(&l->epoch, memory_order_acquire);
    if (e != epoch) {
        snprintf(why, whylen, "local rank %d published call %llu's buffers, not call %llu's",
                 local, (unsigned long long)e, (unsigned long long)epoch);
        return FOLD_ERR_PEER_FAILED;
    }
    *addr = from_out ? l->out : l->in;
    return compare_calls(node, l->count, l->call, local, why, whylen);
}

int fold_node_peer_check(const fold_node_t *node, int local, uint64_t epoch, char *why,
                         size_t whylen)
{
    const peer_line_t *l = line(node, local);
    const uint64_t e = atomic_load_explicit(&l->epoch, memory_order_acquire);
    if (e != epoch && (e < epoch || e == 0)) {
        return FOLD_OK;   /* not at this call yet: nothing to compare */
    }
    /* At this call, or gone on to its next: then its call before is this one. */
    uint64_t at = e == epoch ? epoch : l->prev_epoch;
    uint64_t count = e == epoch ? l->count : l->prev_count;
    uint64_t call = e == epoch ? l->call : l->prev_call;
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&l->epoch, memory_order_relaxed) != e || at != epoch) {
        return FOLD_OK;   /* it moved on while this rank read (see the publish) */
    }
    return compare_calls(node, count, call, local, why, whylen);
}

int fold_node_peer_started(const fold_node_t *node, int local, fold_fingerprint_t *theirs)
{
    const peer_line_t *l = line(node, local);
    uint64_t e = atomic_load_explicit(&l->epoch, memory_order_acquire);
    if (e <= node->epoch) {
        return 0;   /* no call this rank has not started too (0: it is rewriting it) */
    }
    uint64_t count = l->count, call = l->call;
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&l->epoch, memory_order_relaxed) != e) {
        return 0;   /* moved on while read: the next look tells */
    }
    *theirs = unpack_line(count, call);
    theirs->call = call >> POS_SHIFT & POS_MASK;
    return 1;
}

/* The start of a use of local rank `local`'s buffer: this rank's busy word says so
 * (see the top), then the call is checked and *addr is where the buffer lies. The use
 * ends with use_end, whatever the status. */
static int use_begin(const fold_node_t *node, int local, uint64_t epoch, int which,
                     uint64_t *addr, char *why, size_t whylen)
{
    peer_line_t *me = line(node, node->local_rank);
    atomic_store_explicit(&me->busy, BUSY_WORD(epoch, local), memory_order_seq_cst);
    return peer_addr(node, local, epoch, which, addr, why, whylen);
}

static void use_end(const fold_node_t *node)
{
    atomic_store_explicit(&line(node, node->local_rank)->busy, 0, memory_order_release);
}

/* One copy of local rank `local`'s buffer: through its mapping where it lies in fold
 * memory, else through the kernel (an adopted buffer's partial pages at either end). */
static int peer_move(const fold_node_t *node, int local, uint64_t epoch, int which,
                     size_t off_bytes, void *mine, size_t len, int write, char *why,
                     size_t whylen)
{
    uint64_t addr;
    int status = use_begin(node, local, epoch, which, &addr, why, whylen);
    const window_t w = status == FOLD_OK ? mapped_window(node, local, which) : (window_t){0, 0};
    for (size_t done = 0; status == FOLD_OK && done < len;) {
        int inside;
        size_t part = same_side(w, off_bytes + done, len - done, &inside);
        char *at = (char *)mine + done;
        if (!inside || !mapped_copy(node, local, which, w, at, off_bytes + done, part, write)) {
            status = peer_copy(node, local, at, addr + off_bytes + done, part, write, why,
                               whylen);
        }
        done += part;
    }
    use_end(node);
    return status;
}

int fold_node_peer_view_begin(const fold_node_t *node, int local, uint64_t epoch,
                              int from_out, size_t off_bytes, size_t len,
                              const void **view, char *why, size_t whylen)
{
    *view = NULL;
    if (line(node, local)->fd[from_out] < 0) {
        return FOLD_OK;   /* not fold memory: the caller's read checks the call once */
    }
    uint64_t addr;
    int status = use_begin(node, local, epoch, from_out, &addr, why, whylen);
    if (status == FOLD_OK) {
        *view = mapped_at(node, local, from_out, mapped_window(node, local, from_out),
                          off_bytes, len);
    }
    if (*view == NULL) {
        use_end(node);
        return status;
    }
    fold_node_xmap_count(node, 1);
    return FOLD_OK;
}

void fold_node_peer_view_end(const fold_node_t *node)
{
    use_end(node);
}

int fold_node_peer_targets_begin(const fold_node_t *node, uint64_t epoch, int held,
                                 const int *locals, const size_t *off_bytes, int n,
                                 size_t len, void **at, char *why, size_t whylen)
{
    at[0] = NULL;
    int one = held;   /* the only rank covered so far, or -1 */
    for (int k = 0; k < n; k++) {
        if (line(node, locals[k])->fd[1] < 0) {
            return FOLD_OK;   /* not fold memory */
        }
        one = k == 0 && one < 0 ? locals[k] : one == locals[k] ? one : -2;
    }
    peer_line_t *me = line(node, node->local_rank);
    atomic_store_explicit(&me->busy, one >= 0 ? BUSY_WORD(epoch, one) : BUSY_ANY(epoch),
                          memory_order_seq_cst);
    int status = FOLD_OK;
    for (int k = 0; k < n && status == FOLD_OK; k++) {
        uint64_t addr;
        status = peer_addr(node, locals[k], epoch, 1, &addr, why, whylen);
        at[k] = status == FOLD_OK ? mapped_at(node, locals[k], 1,
                                              mapped_window(node, locals[k], 1), off_bytes[k],
                                              len)
                                  : NULL;
        if (at[k] == NULL) {
            at[0] = NULL;
            break;
        }
    }
    if (at[0] == NULL && held < 0) {
        use_end(node);
    }
    return status;
}

void fold_node_peer_targets_end(const fold_node_t *node, int n)
{
    use_end(node);
    fold_node_xmap_count_along(node, n);
}

int fold_node_peer_read(const fold_node_t *node, int local, uint64_t epoch, int from_out,
                        size_t off_bytes, void *dst, size_t len, char *why, size_t whylen)
{
    return peer_move(node, local, epoch, from_out, off_bytes, dst, len, 0, why, whylen);
}

int fold_node_peer_write(const fold_node_t *node, int local, uint64_t epoch, size_t off_bytes,
                         const void *src, size_t len, char *why, size_t whylen)
{
    return peer_move(node, local, epoch, 1, off_bytes, (void *)src, len, 1, why, whylen);
}

/* Whether local rank `local` (pid) still runs. */
static int alive(const fold_node_t *node, int local)
{
    return node->pids == NULL || kill((pid_t)node->pids[local], 0) == 0 || errno != ESRCH;
}

/* Local rank `local`'s process is stopped (SIGSTOP, a debugger). */
static int stopped(const fold_node_t *node, int local)
{
    return node->pids != NULL && fold_util_process_stopped((pid_t)node->pids[local]);
}

void fold_node_peer_withdraw(fold_node_t *node, uint64_t epoch)
{
    if (node->seg.base == NULL || epoch == 0) {
        return;
    }
    peer_line_t *me = line(node, node->local_rank);
    if (atomic_load_explicit(&me->epoch, memory_order_relaxed) != epoch) {
        return;   /* this call never published its buffers */
    }
    atomic_store_explicit(&me->withdrawn, epoch, memory_order_seq_cst);
    const uint64_t copying_mine = BUSY_WORD(epoch, node->local_rank), copying_any = BUSY_ANY(epoch);
    const double start = fold_util_time_now(), until = start + WITHDRAW_WAIT_S;
    double next_look = start + WITHDRAW_LOOK_S;
    for (int l = 0; l < node->seg.local_size; l++) {
        if (l == node->local_rank) {
            continue;
        }
        const peer_line_t *other = line(node, l);
        uint64_t b;
        while ((b = atomic_load_explicit(&other->busy, memory_order_seq_cst)) == copying_mine ||
               b == copying_any) {
            if (!alive(node, l)) {
                break;   /* a dead process copies nothing more */
            }
            const double now = fold_util_time_now();
            int halted = 0;
            if (now > next_look) {
                halted    = stopped(node, l);
                next_look = now + WITHDRAW_LOOK_S;
            }
            if (halted || now > until) {
                fold_warn("comm %u: local rank %d is still copying this rank's buffers "
                          "of the call it gave up, %.3f s on%s; returning: they must stay "
                          "valid until that rank's call has failed too", node->comm_id, l,
                          now - start, halted ? ", and is stopped" : "");
                break;
            }
            sched_yield();
        }
    }
}

int fold_node_peer_probe(int64_t pid, uint64_t addr, uint64_t expect)
{
    uint64_t got = 0;
    struct iovec l = {&got, sizeof(got)}, r = {(void *)(uintptr_t)addr, sizeof(got)};
    ssize_t n = process_vm_readv((pid_t)pid, &l, 1, &r, 1, 0);
    if (n != (ssize_t)sizeof(got) || got != expect) {
        fold_debug("single copy: reading pid %lld: %s", (long long)pid,
                   n < 0 ? strerror(errno) : "wrong value");
        return 0;
    }
    return 1;
}
