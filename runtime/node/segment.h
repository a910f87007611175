/*
 * The node segment: one POSIX shared-memory object per communicator per node,
 * created by one local rank and attached by the others. It holds a header, a
 * cache line of sequence flags per local rank, and a data area the node-aware
 * algorithms lay their slots out in. It knows nothing about the network or about
 * what the flags mean.
 *
 * Reservation: the creator backs every page at creation (posix_fallocate), so a
 * tmpfs that cannot hold the segment fails the creation instead of killing with
 * SIGBUS whichever rank first writes a page it could not back.
 *
 * Lifetime: the creator makes it with mode 0600 and O_EXCL; every attacher counts
 * itself in the header, and whoever completes the count unlinks the name (the
 * creator unlinks it too once it knows everyone tried), so the name is gone from
 * /dev/shm as soon as every local rank has the mapping, and nothing is left behind
 * when a process is killed later. The mapping itself goes away with the last process.
 *
 * Flags: FOLD_SHM_NFLAGS 64-bit counters per local rank, each written only by its
 * rank (store-release) and read by the others (load-acquire). Values only grow, so
 * a waiter asks "has it reached v?".
 */
#ifndef FOLD_SHM_SEGMENT_H
#define FOLD_SHM_SEGMENT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define FOLD_SHM_NFLAGS   4
#define FOLD_SHM_NAME_MAX 240
/* Where glibc's shm_open keeps its objects: the tmpfs every segment draws from. */
#define FOLD_SHM_DIR      "/dev/shm"

typedef struct fold_shm_flags {
    _Atomic uint64_t value[FOLD_SHM_NFLAGS];
    char             pad[64 - FOLD_SHM_NFLAGS * sizeof(uint64_t)];
} fold_shm_flags_t;

typedef struct fold_shm_header fold_shm_header_t;

typedef struct fold_shm_seg {
    void              *base;        /* the whole mapping; NULL when not mapped */
    size_t             map_size;
    fold_shm_header_t *hdr;
    fold_shm_flags_t  *flags;       /* local_size entries */
    char              *data;        /* page aligned */
    size_t             data_size;   /* bytes */
    int                local_size;
    char               name[FOLD_SHM_NAME_MAX];
} fold_shm_seg_t;

/* "/fold-<job>-<node>-c<comm>-<nonce>", characters outside [A-Za-z0-9._-] replaced
 * by '_', the job and node parts shortened (never the comm id and nonce) to fit. */
void fold_shm_make_name(char *buf, size_t len, const char *job, const char *node,
                        uint32_t comm_id, uint64_t nonce);

/* Bytes a segment for local_size ranks with data_size bytes of data takes in
 * FOLD_SHM_DIR (header and flags included). */
size_t fold_shm_footprint(int local_size, size_t data_size);
/* Creates the segment for local_size ranks with data_size bytes of data, every page
 * reserved, and maps it. Fails with FOLD_ERR_BUSY when the name exists already,
 * FOLD_ERR_NO_MEMORY when it cannot be created or reserved (errno says why; logged
 * at debug level only: the caller decides what a missing segment means). */
int  fold_shm_create(fold_shm_seg_t *seg, const char *name, int local_size, size_t data_size);
/* Maps an existing segment, checks its header against local_size and counts this
 * rank in; the rank that completes the count unlinks the name. */
int  fold_shm_attach(fold_shm_seg_t *seg, const char *name, int local_size);
/* Checks the header of a mapping another process wrote (seg->base, map_size and hdr
 * set) and, when its offsets and sizes lie inside the mapping, sets the other views;
 * FOLD_ERR_MALFORMED with why otherwise (the caller logs it). */
int  fold_shm_check_header(fold_shm_seg_t *seg, int local_size, char *why, size_t whylen);
/* Removes the name if it is still there (harmless when it is not). */
void fold_shm_unlink(const char *name);
/* Removes every segment name of this job, node and communicator id, whatever its
 * nonce: what a creator that died before unlinking left. Returns how many. */
int  fold_shm_unlink_stale(const char *job, const char *node, uint32_t comm_id);
/* Unmaps; the memory is freed once every process has unmapped it. */
void fold_shm_detach(fold_shm_seg_t *seg);

/* Ranks counted in so far (tests). */
int  fold_shm_attached(const fold_shm_seg_t *seg);

static inline void fold_shm_flag_post(fold_shm_seg_t *seg, int local, int flag, uint64_t value)
{
    atomic_store_explicit(&seg->flags[local].value[flag], value, memory_order_release);
}

static inline uint64_t fold_shm_flag_read(const fold_shm_seg_t *seg, int local, int flag)
{
    return atomic_load_explicit(&seg->flags[local].value[flag], memory_order_acquire);
}

static inline int fold_shm_flag_reached(const fold_shm_seg_t *seg, int local, int flag,
                                        uint64_t value)
{
    return fold_shm_flag_read(seg, local, flag) >= value;
}

/* Blocking wait for code outside the executor (tests, setup): spins spin_count
 * polls, then yields between polls; FOLD_ERR_TIMEOUT after timeout_sec. */
int fold_shm_flag_wait(const fold_shm_seg_t *seg, int local, int flag, uint64_t value,
                       long spin_count, double timeout_sec);

#endif
