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
    uint32_t pad;
    uint64_t ino;     /* its inode: names it for as long as it lives */
    uint64_t off;     /* the buffer's offset in it */
    uint64_t bytes;   /* the allocation's size */
} fold_mem_place_t;

/* 1 with *place when [p, p + len) lies inside one live allocation; else 0 and
 * place->fd = -1. Costs one atomic load while no allocation lives. */
int fold_mem_find(const void *p, size_t len, fold_mem_place_t *place);

/* Allocations freed so far in this process: a peer that mapped one of them drops its
 * mappings of this process when the number moves (the pages live while mapped). */
uint64_t fold_mem_frees(void);

#endif
