/*
 * The node's shared-memory budget. The tmpfs behind shm_open (FOLD_SHM_DIR) is the
 * pool that every communicator of every job on the node draws its segment from, and
 * a segment is reserved for real when it is created (segment.c), so what statvfs
 * says is free is what is left of the pool. A new segment may take what is free
 * beyond a reserve kept for others (UCX's and the MPI library's own shared memory,
 * other jobs), at most FOLD_SHM_SIZE of data; below a floor it is not worth having,
 * and the communicator runs without one. Freeing a communicator gives its segment
 * back to the pool.
 */
#include "node/node.h"

#include <errno.h>
#include <fold/fold_status.h>
#include <stdint.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* Below this much data a segment is not worth its set-up: the node-aware algorithms
 * would cut every message into tiny chunks. */
#define BUDGET_MIN_DATA (64 * 1024)

static size_t round_down(size_t n, size_t to)
{
    return n / to * to;
}

size_t fold_shm_budget_need(const fold_shm_budget_t *b, size_t data)
{
    return b->fixed + (data + b->page - 1) / b->page * b->page;
}

size_t fold_shm_budget_floor(size_t cap, int max_ppn, long depth)
{
    /* DPML cuts its data into stages x ranks x leaders parts (alg_dpml_layout.c),
     * leaders at most ranks: at least one float64 each. */
    size_t stages = depth > 2 ? (size_t)depth : 2;
    size_t dpml = stages * (size_t)max_ppn * (size_t)max_ppn * sizeof(double);
    size_t floor = dpml > BUDGET_MIN_DATA ? dpml : BUDGET_MIN_DATA;
    return floor < cap ? floor : cap;   /* a smaller FOLD_SHM_SIZE is the user's call */
}

size_t fold_shm_budget_grant(const fold_shm_budget_t *b)
{
    size_t room = b->free > b->reserve ? b->free - b->reserve : 0;
    if (room >= fold_shm_budget_need(b, b->cap)) {
        return b->cap;
    }
    size_t data = room > b->fixed ? round_down(room - b->fixed, b->page) : 0;
    return data >= b->floor && data > 0 ? data : 0;
}

int fold_shm_budget_measure(fold_shm_budget_t *b, size_t reserve_cfg)
{
    struct statvfs st;
    long page = sysconf(_SC_PAGESIZE);
    b->page = page > 0 ? (size_t)page : 4096;
    if (statvfs(FOLD_SHM_DIR, &st) != 0) {
        int err = errno;
        b->free = b->total = b->reserve = 0;
        errno = err;
        return FOLD_ERR_NOT_FOUND;
    }
    b->free    = (size_t)st.f_bavail * (size_t)st.f_frsize;
    b->total   = (size_t)st.f_blocks * (size_t)st.f_frsize;
    b->reserve = reserve_cfg == SIZE_MAX ? b->total / 8 : reserve_cfg;
    return FOLD_OK;
}
