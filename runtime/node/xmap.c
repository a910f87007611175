/*
 * Other local ranks' fold memory (mem.c) mapped into this process, for single copy
 * at memcpy's speed: a rank whose buffer lies in fold memory publishes the
 * allocation's descriptor number, inode and the buffer's offset (peer.c); a rank
 * that reads or writes it opens /proc/<pid>/fd/<fd>, checks the inode (the number
 * may name another file by now) and maps the whole allocation once.
 *
 * Mappings are kept per communicator node, at most XMAP_SLOTS (the least recently used
 * goes), and all of one peer's are dropped when its count of freed allocations moves:
 * a mapping keeps the pages alive, so a freed allocation must not stay mapped here.
 * A peer frees only between calls (its buffers are in use until every rank is done
 * with them), so a mapping never goes away under a copy. Where the kernel refuses the
 * open, the caller copies through the kernel instead (process_vm_readv), as before.
 */
#define _GNU_SOURCE
#include "node/node.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define XMAP_SLOTS 16

typedef struct xmap_entry {
    int      local;    /* -1: empty */
    uint64_t ino;
    char    *base;
    size_t   bytes;
    uint64_t used;     /* when last looked up, for the eviction */
} xmap_entry_t;

struct fold_node_xmap {
    xmap_entry_t entry[XMAP_SLOTS];
    uint64_t    *frees;        /* per local rank: its count when its mappings were made */
    uint64_t     clock;
    uint64_t     copies;       /* copies made through a mapping (tests, debug log) */
    uint64_t     views;        /* folds straight from a mapping (node.h) */
    uint64_t     along;        /* results streamed into mappings by their reduction */
    int          refused;      /* the kernel said no once: copy through it from now on */
};

int fold_node_xmap_create(fold_node_t *node)
{
    struct fold_node_xmap *x = calloc(1, sizeof(*x));
    if (x == NULL || (x->frees = calloc((size_t)node->seg.local_size, sizeof(uint64_t))) == NULL) {
        free(x);
        return FOLD_ERR_NO_MEMORY;
    }
    for (int i = 0; i < XMAP_SLOTS; i++) {
        x->entry[i].local = -1;
    }
    node->xmap = x;
    return FOLD_OK;
}

static void drop(xmap_entry_t *e)
{
    munmap(e->base, e->bytes);
    *e = (xmap_entry_t){.local = -1};
}

void fold_node_xmap_destroy(fold_node_t *node)
{
    struct fold_node_xmap *x = node->xmap;
    if (x == NULL) {
        return;
    }
    for (int i = 0; i < XMAP_SLOTS; i++) {
        if (x->entry[i].local >= 0) {
            drop(&x->entry[i]);
        }
    }
    free(x->frees);
    free(x);
    node->xmap = NULL;
}

/* A new mapping of local's allocation, or NULL (logged at debug level). */
static char *map_peer(const fold_node_t *node, int local, int32_t fd, uint64_t ino,
                      uint64_t bytes)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%lld/fd/%d", (long long)node->pids[local], (int)fd);
    int f = open(path, O_RDWR | O_CLOEXEC);
    struct stat st;
    char *base = MAP_FAILED;
    if (f >= 0 && fstat(f, &st) == 0 && (uint64_t)st.st_ino == ino &&
        (uint64_t)st.st_size == bytes) {
        base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    }
    if (base == MAP_FAILED) {
        fold_debug("fold memory of local rank %d (%s): %s", local, path,
                   f < 0 ? strerror(errno) : "not the allocation it published");
    }
    if (f >= 0) {
        close(f);
    }
    return base == MAP_FAILED ? NULL : base;
}

void *fold_node_xmap(const fold_node_t *node, int local, int32_t fd, uint64_t ino,
                     uint64_t bytes, uint64_t frees)
{
    struct fold_node_xmap *x = node->xmap;
    if (x == NULL || x->refused || fd < 0) {
        return NULL;
    }
    if (x->frees[local] != frees) {
        for (int i = 0; i < XMAP_SLOTS; i++) {
            if (x->entry[i].local == local) {
                drop(&x->entry[i]);
            }
        }
        x->frees[local] = frees;
    }
    xmap_entry_t *oldest = &x->entry[0];
    for (int i = 0; i < XMAP_SLOTS; i++) {
        xmap_entry_t *e = &x->entry[i];
        if (e->local == local && e->ino == ino && e->bytes == bytes) {
            e->used = ++x->clock;
            return e->base;
        }
        if (e->local < 0 || (oldest->local >= 0 && e->used < oldest->used)) {
            oldest = e;
        }
    }
    char *base = map_peer(node, local, fd, ino, bytes);
    if (base == NULL) {
        x->refused = 1;
        return NULL;
    }
    if (oldest->local >= 0) {
        drop(oldest);
    }
    *oldest = (xmap_entry_t){local, ino, base, (size_t)bytes, ++x->clock};
    return base;
}

void fold_node_xmap_count(const fold_node_t *node, int view)
{
    struct fold_node_xmap *x = node->xmap;
    if (x != NULL) {
        *(view ? &x->views : &x->copies) += 1;
    }
}

void fold_node_xmap_count_along(const fold_node_t *node, int writes)
{
    struct fold_node_xmap *x = node->xmap;
    if (x != NULL) {
        x->copies += (uint64_t)writes;
        x->along++;
    }
}

uint64_t fold_node_xmap_along(const fold_node_t *node)
{
    return node->xmap != NULL ? node->xmap->along : 0;
}

void fold_node_xmap_stats(const fold_node_t *node, int *mapped, uint64_t *copies,
                          uint64_t *views)
{
    const struct fold_node_xmap *x = node->xmap;
    *mapped = 0;
    *copies = x != NULL ? x->copies : 0;
    *views  = x != NULL ? x->views : 0;
    for (int i = 0; x != NULL && i < XMAP_SLOTS; i++) {
        *mapped += x->entry[i].local >= 0;
    }
}
