/*
 * fold memory (fold_mem_alloc, mem.c): allocations the other ranks of a node can map,
 * so that single copy moves their bytes at memcpy's speed instead of the kernel's
 * (node/xmap.c maps them, node/peer.c uses the mapping).
 */
#ifndef FOLD_MEM_H
#define FOLD_MEM_H

#include <stddef.h>
#include <stdint.h>

/* Where a buffer lies in fold memory: enough for a peer process to map it. */
typedef struct fold_mem_place {
    int32_t  fd;      /* this process's descriptor of the allocation (-1: not fold memory) */
    uint32_t pages_only;   /* 1: only the buffer's whole pages lie in it (an adopted buffer
                              that starts or ends inside a page), from off on */
    uint64_t ino;     /* its inode: names it for as long as it lives */
    uint64_t off;     /* the buffer's offset in it (pages_only: its first whole page's) */
    uint64_t bytes;   /* the allocation's size */
} fold_mem_place_t;

/* 1 with *place when [p, p + len) lies inside one live allocation; else 0 and
 * place->fd = -1. Costs one atomic load while no allocation lives. */
int fold_mem_find(const void *p, size_t len, fold_mem_place_t *place);

/* Allocations freed so far in this process: a peer that mapped one of them drops its
 * mappings of this process when the number moves (the pages live while mapped). */
uint64_t fold_mem_frees(void);
/* One more: fold memory stopped being mappable where a peer may have mapped it. */
void     fold_mem_count_free(void);

/* The whole pages of `page` bytes (a power of two) inside [addr, addr + bytes):
 * [*lo, *hi), none where *hi <= *lo. What an adopted buffer moves (mem_adopt.c), what a
 * peer maps of it (node/peer.c), what gets huge pages (node/huge.c). */
static inline void fold_mem_whole_pages(uintptr_t addr, size_t bytes, uintptr_t page,
                                        uintptr_t *lo, uintptr_t *hi)
{
    *lo = (addr + page - 1) & ~(page - 1);
    *hi = (addr + bytes) & ~(page - 1);
}

/* mem_adopt.c: a buffer single copy moves, passed the second time, moves into fold
 * memory at its own address (its whole pages, of private anonymous memory only). 1
 * with *place once [buf, buf + bytes) lies in adopted memory (place->pages_only where
 * only its whole pages do); else 0, place->fd -1. */
int fold_mem_adopt(const void *buf, size_t bytes, fold_mem_place_t *place);
/* The same at the `passes`-th pass of the buffer or later (at least the second); every
 * pass is counted, and passes <= 0 never adopts. */
int fold_mem_adopt_after(const void *buf, size_t bytes, int passes, fold_mem_place_t *place);
/* The same with its adoption spread over `steps` calls (at most 1: all in one): the
 * pass that starts it and each one after moves the next 1/steps of its pages, and it
 * lies in fold memory from the pass that moves the last, so that no call pays for
 * more than its share of the copy. */
int fold_mem_adopt_in_steps(const void *buf, size_t bytes, int passes, int steps,
                            fold_mem_place_t *place);
/* Whether an adoption of [buf, buf + bytes) in steps is under way: some of its pages
 * lie in fold memory, the rest follow at its next passes. */
int fold_mem_adopt_under_way(const void *buf, size_t bytes);
/* A pass of a buffer that a call did not hand to single copy: counted as
 * fold_mem_adopt counts its passes, so that a later single copy of it adopts it
 * (selection may choose single copy for it then: fold_mem_adopt_would). */
void fold_mem_adopt_note(const void *buf, size_t bytes);
/* Whether fold_mem_adopt would find [buf, buf + bytes) adopted, or adopt it, now. */
int fold_mem_adopt_would(const void *buf, size_t bytes);
/* ... by fold_mem_adopt_after with `passes`. */
int fold_mem_adopt_would_after(const void *buf, size_t bytes, int passes);
/* ... by fold_mem_adopt_in_steps with `passes` and `steps`: this pass moves its last
 * part. */
int fold_mem_adopt_would_in_steps(const void *buf, size_t bytes, int passes, int steps);
/* Whether adoption can start in this process (glibc's malloc, UCX's memory events
 * seen; tested once). */
int fold_mem_adopt_usable(void);
/* NULL where adoption can start, else why not (for fold_info). */
const char *fold_mem_adopt_why_off(void);
/* Tests under a sanitizer, on memory they map themselves: skip the allocator's check. */
void fold_mem_adopt_trust_any_allocator(void);

/* mem_maps.c: whether [lo, hi) lies wholly in private anonymous writable mappings (the
 * heap or anonymous memory, not the stack) or in shared mappings of fold's own files,
 * whose names begin with `ours` ("/memfd:NAME"). */
int fold_mem_maps_plain(uintptr_t lo, uintptr_t hi, const char *ours);
/* Tests: answer from the text of /proc/self/maps (on: 1), as kernels before 6.11 make
 * it, or from the kernel's query where it has one (0). */
void fold_mem_maps_read_text(int on);

typedef struct fold_mem_adopt_stats {
    int      pieces;             /* adopted ranges watched */
    int      exposed;            /* of them whole buffers peers may map */
    uint64_t adopted_bytes;      /* moved into fold memory so far */
    uint64_t privatised_bytes;   /* made private again (releases, forks) */
    int      wasted;             /* buffers released before their third call */
} fold_mem_adopt_stats_t;
void fold_mem_adopt_stats(fold_mem_adopt_stats_t *s);

#endif
