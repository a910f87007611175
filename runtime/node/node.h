/*
 * The node module: what the ranks of one communicator that share a node have in
 * common, below the executor and above nothing but the segment, the topology and
 * the reduce kernels.
 *
 *   setup.c    collective set-up and teardown: topology, segment create/attach
 *   budget.c   how much of the node's /dev/shm a new segment may take
 *   turns.c    the order node-aware calls take the segment in (epochs, a queue)
 *   resync.c   bringing the segment back into step after a mismatched call
 *   fast.c     the tiny-message path of shm_flat, outside any schedule
 *   peer.c     single copy: reading and writing other local ranks' buffers
 *   huge.c     huge pages under the buffers single copy has the kernel copy
 *   segment.c  the shared-memory object, its flags and its lifetime
 *   topo.c     who shares a node and a socket, leader order
 *
 * It knows nothing of communicators, requests or transports: the set-up gets an
 * allgather over the communicator from its caller (comm.c), and the turn queue
 * links the callers' entries.
 */
#ifndef FOLD_NODE_H
#define FOLD_NODE_H

#include "node/segment.h"
#include "node/topo.h"

#include <fold/fold.h>
#include <stdatomic.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>

/* fast.c: blocking shm_flat calls of at most a node's limit in bytes (a power of two,
 * at most FOLD_FAST_MAX_BYTES: fold_node_fast_limit) on one node, with this many slots
 * per rank (calls a rank may run ahead of its readers). */
#define FOLD_FAST_MAX_BYTES 65536
#define FOLD_FAST_SLOTS     8

/* One node-aware call waiting for, or holding, the node's turn (turns.c). */
typedef struct fold_node_turn {
    struct fold_node_turn *next;
    uint64_t               epoch;   /* 0: not queued */
    uint64_t               pos;     /* its place among the node's calls (resync.c) */
} fold_node_turn_t;

/* Node-aware calls remembered by their epoch: where each stood among all the node's
 * calls (resync.c). */
#define FOLD_NODE_HISTORY 8

/* The flag every node-aware schedule posts FOLD_SHM_CALL_DONE to when it is done with
 * the segment (coll/sched.h's FOLD_FLAG_DONE): epoch e's end is the value e << 32. */
#define FOLD_NODE_FLAG_DONE 3

/* huge.c: the ranges of this rank's buffers it passed last, and which it had backed
 * with huge pages. */
#define FOLD_NODE_HUGE_RANGES 32
typedef struct fold_node_huge {
    int      on;            /* FOLD_HUGE_PAGES auto, and the kernel has not refused */
    unsigned next;          /* the entry the next new range takes */
    unsigned unused;        /* backed ranges forgotten without having been passed
                               again */
    size_t   backed_bytes;  /* backed so far */
    size_t   short_bytes;   /* wanted and not backed: the kernel had no huge page free
                               (after it said so, the rest of a buffer is not asked) */
    int    (*collapse)(void *lo, size_t len);   /* fold_node_huge_collapse; tests put
                                                   a kernel of their own here */
    struct fold_node_huge_range {
        uintptr_t lo, hi;   /* whole huge pages; hi 0: an empty entry */
        unsigned  uses;     /* calls that passed it */
        unsigned  backed_at;   /* the pass that backed it; 0: not backed */
    } range[FOLD_NODE_HUGE_RANGES];
} fold_node_huge_t;

/*
 * A communicator's node state: its topology and, when this node has more than
 * one of its ranks, the node segment. Node-aware calls run one at a time, in the
 * order they were started (the same order on every rank), each with the next epoch.
 * Every call on the node -- a node-aware one or one on the tiny-message path --
 * has a position: how many calls on the node this rank has started, the same on
 * every rank whichever path each took (resync.c relies on it).
 */
typedef struct fold_node {
    fold_topo_t      *topo;
    fold_shm_seg_t    seg;          /* mapped iff this node has several of the ranks */
    int               local_rank;   /* this rank's local index */
    int               comm_rank;
    int               comm_size;
    uint32_t          comm_id;      /* for messages */
    size_t            shm_bytes;    /* data bytes every node can offer (min over the comm) */
    uint64_t          epoch;        /* node-aware calls started so far */
    fold_node_turn_t *head, *tail;  /* node-aware calls not finished, in start order */
    int               broken;       /* a call failed midway and could not be brought
                                       back into step: the segment is not used again */
    uint64_t          history[FOLD_NODE_HISTORY];  /* position of node-aware call e at
                                                      [e % FOLD_NODE_HISTORY] */
    uint64_t          pos_skew;      /* numbers a resync skipped beyond the calls made */
    uint64_t          fast_pos;      /* epoch - pos_skew: a tiny call's position is
                                        fast_pos + its number */
    /* resync.c: after a call given up for a mismatch */
    _Atomic uint64_t *resync_word;   /* the node's request word (NULL: no segment) */
    uint64_t          resync_done;   /* the word as this rank last settled it */
    uint64_t          resync_posted; /* the position this rank's last record is for */
    uint64_t          resync_count;  /* resyncs settled */
    uint64_t          done_owed;     /* epoch whose DONE this rank still owes once its
                                        earlier node-aware calls are over (0: none) */
    int               single_copy;  /* every rank of the comm can reach its local
                                       peers' memory (peer.c), and may */
    int64_t          *pids;         /* per local rank, for single copy */
    fold_node_huge_t  huge;         /* huge pages under buffers peers copy (huge.c) */
    int               adopt;        /* buffers peers copy may move into fold memory
                                       (FOLD_ADOPT, mem_adopt.c) */
    struct fold_node_xmap *xmap;    /* peers' fold memory mapped here (xmap.c) */
    uint64_t          probe;        /* a known value peers read at setup */
    uint64_t          nonce;        /* the segment's, shared by its holders (pool.c) */
    size_t            seg_bytes;    /* the data bytes this node's segment has */
    size_t            shm_size;     /* the FOLD_SHM_SIZE it was made for */
    /* shm_flat's tiny-message fast path (fast.c) */
    uint64_t          fast_calls;       /* calls so far */
    size_t            fast_limit;       /* calls of fewer bytes take it (0: none) */
    char             *fast_region;      /* its first rank's slots (NULL: no segment) */
    int               fast_readers[FOLD_FAST_SLOTS];  /* who reads each slot's data: -1
                                                         all, else the root */
    int               fast_saw_all;     /* the last call waited for every rank's input */
    int               fast_done_rank;   /* the rank whose `done` was read last ... */
    uint64_t          fast_done_seen;   /* ... and the value it had */
    _Alignas(16) char fast_own[FOLD_FAST_MAX_BYTES];  /* an in-place input kept */
    _Alignas(16) char fast_row[1024];  /* a peer's lined row, made contiguous */
} fold_node_t;

/* An allgather over the communicator: `bytes` from every rank into all[rank]. */
typedef int (*fold_node_allgather_fn)(void *arg, const void *mine, void *all, size_t bytes);

typedef struct fold_node_params {
    int                    rank, size;   /* in the communicator */
    uint32_t               comm_id;
    const int             *node_key;     /* per comm rank: equal keys share a node */
    const char            *job_id;       /* for the segment's name */
    const char            *node_name;
    size_t                 shm_size;     /* this rank's FOLD_SHM_SIZE */
    size_t                 shm_reserve;  /* FOLD_SHM_RESERVE; SIZE_MAX: auto */
    long                   pipeline_depth;  /* FOLD_PIPELINE_DEPTH (the DPML layout's
                                               stages, for the smallest segment) */
    int                    single_copy;  /* FOLD_SINGLE_COPY: may peers' memory be
                                            used (then probed) */
    int                    huge_pages;   /* FOLD_HUGE_PAGES: may the buffers peers copy
                                            be backed with huge pages (huge.c) */
    int                    adopt;        /* FOLD_ADOPT: may they move into fold memory
                                            (mem_adopt.c) */
    struct fold_node_pool *pool;         /* the context's kept segment (pool.c); NULL:
                                            none is taken (the same on every rank: it
                                            costs one more allgather) */
    fold_node_allgather_fn allgather;
    void                  *allgather_arg;
} fold_node_params_t;

/* setup.c. Collective over the communicator: every rank gets the same status, and
 * nothing is left in /dev/shm whatever it is. FOLD_ERR_UNSUPPORTED: a node of the
 * communicator could not have its segment (the /dev/shm budget, or the system said
 * no); the rank that found out logged it, and `why` says it on every rank. The
 * communicator then runs the node-unaware algorithms. */
int  fold_node_create(const fold_node_params_t *params, fold_node_t **node_p, char *why,
                      size_t why_len);
/* Whether an attached segment holds shm_bytes of schedule data besides the fast path's
 * and single copy's regions (its header is another process's word): FOLD_OK, or
 * FOLD_ERR_MALFORMED with why (the caller logs it). */
int  fold_node_check_segment(const fold_shm_seg_t *seg, size_t shm_bytes, char *why,
                             size_t whylen);
/* Frees the state; the segment is kept in pool for the next communicator of the same
 * ranks where it is whole (NULL pool: detached). */
struct fold_node_pool;
void fold_node_free(fold_node_t *node, struct fold_node_pool *pool);

/* pool.c: the segment of the last communicator a context freed, kept mapped for
 * the next one of the same ranks (see there). keep takes seg over (and gives back the
 * one kept before); offer says the kept segment's nonce where it fits a node of
 * local_size ranks asking for shm_size, else 0; take hands it over when its nonce is
 * still `nonce`; release gives it back. */
typedef struct fold_node_pool {
    pthread_mutex_t lock;
    fold_shm_seg_t  seg;         /* mapped while kept */
    uint64_t        nonce;
    size_t          seg_bytes;   /* the data bytes its creator reserved */
    size_t          shm_size;    /* the FOLD_SHM_SIZE it was made for */
    unsigned long   reuses;      /* setups that took it (tests) */
} fold_node_pool_t;
void     fold_node_pool_init(fold_node_pool_t *pool);
void     fold_node_pool_destroy(fold_node_pool_t *pool);
void     fold_node_pool_keep(fold_node_pool_t *pool, fold_shm_seg_t *seg, uint64_t nonce,
                             size_t seg_bytes, size_t shm_size);
uint64_t fold_node_pool_offer(fold_node_pool_t *pool, int local_size, size_t shm_size);
int      fold_node_pool_take(fold_node_pool_t *pool, uint64_t nonce, fold_shm_seg_t *seg,
                             size_t *seg_bytes);
void     fold_node_pool_release(fold_node_pool_t *pool);

/* budget.c: what a new segment may take of the node's shared memory. */
typedef struct fold_shm_budget {
    size_t page;
    size_t cap;       /* data bytes wanted: FOLD_SHM_SIZE */
    size_t floor;     /* fewest data bytes worth a segment */
    size_t fixed;     /* bytes a segment takes besides those data: header, flags, the
                         fast path's and single copy's regions */
    size_t free;      /* FOLD_SHM_DIR's free bytes (statvfs) ... */
    size_t total;     /* ... its size ... */
    size_t reserve;   /* ... and what fold leaves free for others */
} fold_shm_budget_t;

/* Sets page, free, total and reserve (reserve_cfg, or an eighth of the tmpfs for
 * SIZE_MAX). FOLD_ERR_NOT_FOUND, errno set, when FOLD_SHM_DIR cannot be asked. */
int    fold_shm_budget_measure(fold_shm_budget_t *b, size_t reserve_cfg);
/* The data bytes a new segment gets: cap when it fits beyond the reserve, else
 * whole pages of what fits if that is at least floor, else 0. */
size_t fold_shm_budget_grant(const fold_shm_budget_t *b);
/* Bytes the segment takes in FOLD_SHM_DIR with `data` data bytes. */
size_t fold_shm_budget_need(const fold_shm_budget_t *b, size_t data);
/* The floor for a communicator with at most max_ppn ranks on a node. */
size_t fold_shm_budget_floor(size_t cap, int max_ppn, long depth);

/* turns.c */
/* Queues a call for the segment with the next epoch. */
void fold_node_turn_take(fold_node_t *node, fold_node_turn_t *turn);
/* Removes a call that finished with `status`. A call given up for a mismatch
 * (FOLD_ERR_MISMATCH, FOLD_ERR_TRUNCATED) asks the node's ranks to bring the segment
 * back into step (resync.c); any other failure leaves the node broken. */
void fold_node_turn_leave(fold_node_t *node, fold_node_turn_t *turn, int status);
/* Posts epoch's DONE once this rank's node-aware calls of earlier epochs are over
 * (at once when none is running). */
void fold_node_turn_owe_done(fold_node_t *node, uint64_t epoch);
/* Whether it is this call's turn (it heads the queue). */
static inline int fold_node_turn_is_mine(const fold_node_t *node, const fold_node_turn_t *turn)
{
    return node->head == turn;
}

/* resync.c. A node-aware or tiny-message call that a rank gives up for a mismatch
 * leaves the segment's flags and slots out of step: its peers may have taken the other
 * path, posted more or less, or not arrived yet. The rank records where its counters
 * stand and asks for a resync; every local rank records its own (at its next call on
 * the node, or while it waits in one), and each settles alone on the same agreement:
 * every rank's counters move up to the highest, so the given-up call used one
 * number on each path any rank took, and the next call starts in step. */
size_t fold_node_resync_region_bytes(int local_size);
/* Points node->resync_word at the segment's region (after the setup). */
void   fold_node_resync_init(fold_node_t *node);
/* Calls on the node this rank has started (the position of its latest). */
static inline uint64_t fold_node_position(const fold_node_t *node)
{
    return node->epoch + node->fast_calls - node->pos_skew;
}
/* Whether a resync this rank has not settled was asked for (one compare). */
static inline int fold_node_resync_pending(const fold_node_t *node)
{
    return node->resync_word != NULL &&
           atomic_load_explicit(node->resync_word, memory_order_relaxed) != node->resync_done;
}
/* The call at position pos (epoch: its node-aware epoch, 0 on the tiny-message path)
 * failed with status: a mismatch asks for a resync, anything else leaves this rank's
 * node broken. */
void   fold_node_abandon(fold_node_t *node, uint64_t pos, uint64_t epoch, int status);
/* Before a call on the node, while one is pending (blocking, FOLD_TIMEOUT): FOLD_OK
 * to go on in step; FOLD_ERR_MISMATCH when this very call was given up by another
 * rank; FOLD_ERR_PEER_FAILED when the node is broken; FOLD_ERR_TIMEOUT. Logs why. */
int    fold_node_resync_join(fold_node_t *node, const char *coll_name, double timeout_sec,
                             long spin_count);
/* While the call at position pos waits on another rank: FOLD_OK; FOLD_INPROGRESS
 * while a resync of an earlier call is not settled (the other path's counter may
 * still move: a rank that seems to have started a call there is not to be trusted);
 * else the status to fail the call with and why (the caller logs it). */
int    fold_node_resync_poll(fold_node_t *node, uint64_t pos, char *why, size_t whylen);
/* Marks the node broken on every local rank (they see it at their next look): a
 * resync that cannot be settled. */
void   fold_node_break(fold_node_t *node);

/* peer.c (single copy; the segment's last lines hold the published addresses) */
size_t fold_node_peer_region_bytes(int local_size);
/* This rank's IN and OUT for the call with this epoch, with what it was asked to do
 * and, in call->call, the call's position: a rank reading or writing them fails with
 * FOLD_ERR_MISMATCH where that differs from its own call (fingerprint.h), or stands
 * elsewhere among the node's calls. */
struct fold_fingerprint;
/* adopt_passes: the pass of a buffer at which it is adopted, or backed with huge
 * pages (fold_select_adopt_passes; <= 0: never); adopt_steps: the calls its adoption
 * is spread over (fold_select_adopt_steps; <= 1: one). */
void   fold_node_peer_publish(fold_node_t *node, uint64_t epoch, const void *in, void *out,
                              const struct fold_fingerprint *call, int single_copy,
                              int adopt_passes, int adopt_steps);
/* len bytes from byte off_bytes of local rank `local`'s IN (from_out 0) or OUT into
 * dst; or from src into its OUT. On failure `why` says what happened. */
int    fold_node_peer_read(const fold_node_t *node, int local, uint64_t epoch, int from_out,
                           size_t off_bytes, void *dst, size_t len, char *why, size_t whylen);
/* For a call given up: no other rank reads or writes this rank's buffers of the
 * call of `epoch` from now on (their copies fail with FOLD_ERR_PEER_FAILED), and none
 * is still inside such a copy when it returns, unless one is stopped (SIGSTOP, a
 * debugger) or has been stuck in it for a second (logged). Nothing where the call
 * published no buffers. */
void   fold_node_peer_withdraw(fold_node_t *node, uint64_t epoch);
/* FOLD_ERR_MISMATCH, with why naming both ranks and the field, when local rank
 * `local` published a different call for this epoch; FOLD_OK otherwise. */
int    fold_node_peer_check(const fold_node_t *node, int local, uint64_t epoch, char *why,
                            size_t whylen);
/* Whether local rank `local` has started a node-aware call this rank has not (its
 * published epoch is past this rank's): 1 and what it was asked to do, its `call`
 * the low 20 bits of the call's position. */
int    fold_node_peer_started(const fold_node_t *node, int local,
                              struct fold_fingerprint *theirs);
int    fold_node_peer_write(const fold_node_t *node, int local, uint64_t epoch,
                            size_t off_bytes, const void *src, size_t len, char *why,
                            size_t whylen);
/* A fold straight from len bytes at byte off_bytes of local rank `local`'s IN
 * (from_out 0) or OUT, through this rank's mapping of its fold memory, checked as a
 * read is: FOLD_OK with *view those bytes, this rank's to read until
 * fold_node_peer_view_end (a rank that gives the call up waits for it, as for a copy);
 * FOLD_OK with *view NULL where no mapping holds them (the caller reads them with
 * fold_node_peer_read); else the error a read would return, `why` saying what. */
int    fold_node_peer_view_begin(const fold_node_t *node, int local, uint64_t epoch,
                                 int from_out, size_t off_bytes, size_t len,
                                 const void **view, char *why, size_t whylen);
void   fold_node_peer_view_end(const fold_node_t *node);
/* Writes into n ranks' OUT at once, len bytes at off_bytes[k] of local rank
 * locals[k]'s, through this rank's mappings of their fold memory (a result streamed
 * along, exec_plan.h), checked as writes are: FOLD_OK with at[k] where each lies,
 * this rank's to write until fold_node_peer_targets_end (a rank that gives the call
 * up waits for it, as for a copy; held: the local rank whose view this rank holds
 * now, whose end also ends this, or -1); FOLD_OK with at[0] NULL where a mapping
 * does not hold them all (nothing begun beyond the view; the caller writes them with
 * fold_node_peer_write); else the error a write would return, `why` saying what. */
int    fold_node_peer_targets_begin(const fold_node_t *node, uint64_t epoch, int held,
                                    const int *locals, const size_t *off_bytes, int n,
                                    size_t len, void **at, char *why, size_t whylen);
void   fold_node_peer_targets_end(const fold_node_t *node, int n);
/* Whether this process can read the 8 bytes at addr in process pid (== expect). */
int    fold_node_peer_probe(int64_t pid, uint64_t addr, uint64_t expect);

/* xmap.c: local peers' fold memory (mem.h) mapped into this process, where single copy
 * is on. fold_node_xmap gives the base of local rank `local`'s allocation (its
 * published descriptor, inode, size and count of freed allocations), mapped at first
 * use, or NULL where the kernel does not allow it (the caller copies through it). */
int   fold_node_xmap_create(fold_node_t *node);
void  fold_node_xmap_destroy(fold_node_t *node);
void *fold_node_xmap(const fold_node_t *node, int local, int32_t fd, uint64_t ino,
                     uint64_t bytes, uint64_t frees);
/* Counts one copy (view 0) or one fold straight from a mapping (view 1). */
void  fold_node_xmap_count(const fold_node_t *node, int view);
/* Counts one result a reduction streamed into `writes` mappings (its writes along). */
void  fold_node_xmap_count_along(const fold_node_t *node, int writes);
/* Results streamed into mappings so far. */
uint64_t fold_node_xmap_along(const fold_node_t *node);
/* Allocations mapped now, and copies and folds made through a mapping so far. */
void  fold_node_xmap_stats(const fold_node_t *node, int *mapped, uint64_t *copies,
                           uint64_t *views);

/* huge.c: a buffer local peers will copy through the kernel gets its whole huge pages
 * backed with huge pages (madvise MADV_COLLAPSE; see there) at its `passes`-th pass
 * (the second at the earliest; <= 0: never), where adopting it would have paid
 * (fold_select_adopt_passes): the kernel walks those at a fraction of the cost of
 * 4 KiB ones. Nothing
 * where h is off, the buffer holds no whole huge page, or was backed before. */
void   fold_node_huge_init(fold_node_huge_t *h, int on);
void   fold_node_huge_back(fold_node_huge_t *h, const void *buf, size_t bytes, int passes);
/* The kernel's transparent huge page size; 0 where it has none or they are off. */
size_t fold_node_huge_page_bytes(void);
/* madvise MADV_COLLAPSE of [lo, lo + len), whole huge pages: 0, or -1 and errno. */
int    fold_node_huge_collapse(void *lo, size_t len);

/* calibrate.c: what fold_init measures of the node, for the cost model's
 * parameters of the same names (0: not measured) */
typedef struct fold_node_calib {
    double copy_gbs;        /* memcpy of 1 MiB in cache; the model's shm_gbs until the
                               cores are probed */
    double reduce_gbs;      /* float32 c = a + b over 1 MiB in cache */
    double l2_bytes;        /* a core's own cache below the last level (sysconf); 0
                               where unknown or implausible */
    double copy_l2_gbs;     /* memcpy and c = a + b of 64 KiB: within that cache */
    double reduce_l2_gbs;
    double copy_mem_gbs;    /* the same two from memory */
    double reduce_mem_gbs;
    double reduce_stream_gbs; /* reduce from memory with the result streamed
                                 (fold_reduce_local_stream); 0 where it cannot */
    double reduce_loop_gbs; /* reduce in cache, in a loop of its own: ordinary stores */
    double reduce_loop_stream_gbs;   /* ... and streamed */
    double rounds_bytes;    /* what those loops touch (their three buffers) */
    double xcopy_gbs;       /* probe.c, at the world's node setup (0 before): memcpy */
    double xreduce_gbs;     /* and float32 sum of 64 KiB another core just wrote
                               into the segment, over lines that core read last, */
    double xwrite_gbs;      /* memcpy of 64 KiB into the segment, over lines the
                               other core read last, */
    double xfold_gbs;       /* the sum of 64 KiB it wrote into this rank's own
                               buffer, */
    double xfold_far_gbs;   /* ... the same of 1 MiB (xfold_gbs where no room), */
    double xcma_gbs;        /* the kernel's copy (process_vm_readv) of 64 KiB the
                               other core just wrote, its call's cost left out; 0
                               where the kernel refuses */
    double flag_us;         /* and a flag's trip from one core to the other */
    int    single_copy;     /* the kernel lets this process copy through it ... */
    double cma_gbs;         /* ... at this rate (1 MiB reads) */
    double cma_mem_gbs;     /* ... and out of cache (estimated, calibrate.c) */
    double cma_huge_mem_gbs; /* ... and out of cache from huge pages (measured; 0
                                where the kernel would not back memory with them) */
    double cma_us;          /* ... and this cost per call */
    double adopt_gbs;       /* moving private pages into fold memory (calibrate.c) */
} fold_node_calib_t;
/* Measures the copy paths on this process's own memory, interleaved so that all
 * see the same conditions, on the process's first call; later calls get the same
 * figures. */
void   fold_node_calibrate(fold_node_calib_t *out);

/* probe.c: what the node's first and last local ranks measure of each other through
 * a new segment: both the transfer rates, the last the flag's trip; zeros elsewhere,
 * where the segment is too small, or where the probe took over 50 ms (the other rank
 * was not running). Both must call it. */
void fold_node_probe_cores(fold_node_t *node, fold_node_calib_t *out);

/* fast.c */
typedef struct fold_node_call {
    int          allreduce;     /* else a reduce to `root` */
    const char  *coll_name;     /* for messages */
    const void  *in;
    void        *out;
    size_t       count;
    fold_dtype_t dtype;
    fold_op_t    op;
    int          root;
    double       timeout_sec;
    long         spin_count;
    size_t       thread_threshold;
} fold_node_call_t;

/* Calls of fewer bytes take the fast path on a node of local_size ranks: a power of two
 * from 4 KiB to FOLD_FAST_MAX_BYTES (2 ranks), smaller as ranks are added (their slots
 * share a budget; a flat gather of many rows is no fast path), 0 past
 * FOLD_FAST_MAX_RANKS. */
#define FOLD_FAST_MAX_RANKS 4096
size_t fold_node_fast_limit(int local_size);
/* Bytes of segment the fast path lays out past the node-aware schedules' area. */
size_t fold_node_fast_region_bytes(int local_size);
/* Lays out the tiny-message region and maps its pages at set-up (setup.c). */
void   fold_node_fast_init(fold_node_t *node);
/* Whether a call of `bytes` can take the fast path on this node. */
int    fold_node_fast_eligible(const fold_node_t *node, size_t bytes);
int    fold_node_fast_reduction(fold_node_t *node, const fold_node_call_t *call);
/* Whether local rank `local` has posted a tiny-message call this rank has not made:
 * 1 and what it was asked to do, its `call` the low 8 bits of the call's position. */
int    fold_node_fast_peer_ahead(const fold_node_t *node, int local,
                                 struct fold_fingerprint *theirs);
/* Moves this rank's tiny-message count up to `calls` without taking part (the calls
 * in between were given up): it will read none of them. */
/* Every seq word of the region holds a call number, never data (tests). */
int    fold_node_fast_seqs_sane(const fold_node_t *node);
void   fold_node_fast_skip(fold_node_t *node, uint64_t calls);

#endif
