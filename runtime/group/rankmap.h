/*
 * A communicator's rank map: comm rank -> context rank and back, the one
 * interface the rest of fold translates ranks through (Kumar et al.).
 *
 * Built once from the member list when a communicator is created; detection is
 * O(P) and every member computes the same map from the same list:
 *
 *   progression  one arithmetic progression (world, a row, a strided pattern):
 *                start + r * stride, nothing else stored
 *   pieces       a sub-rectangle of one of the virtual world rectangles
 *                (world_rect.h), or up to FOLD_RANKMAP_MAX_PIECES strided pieces
 *                (rank_piece.h) covering consecutive comm ranks (unions, grids
 *                other than MPI_Dims_create's); the mapping function divides, so
 *                a translation cache (rankcache.h) sits in front of it
 *   table        anything else: one int per rank (a reverse index is built at the
 *                first context -> comm lookup)
 *
 * FOLD_RANK_MAP=auto compresses progressions always and other patterns only from
 * FOLD_RANKMAP_AUTO_MIN ranks (below that a table is smaller than piece + cache
 * and faster, as the paper notes); compressed compresses whatever it can; table
 * keeps a table for every communicator (the dense reference).
 */
#ifndef FOLD_GROUP_RANKMAP_H
#define FOLD_GROUP_RANKMAP_H

#include "rank_piece.h"
#include "rankcache.h"
#include "world_rect.h"

#include <stddef.h>
#include <stdint.h>

#define FOLD_RANKMAP_MAX_PIECES 8
#define FOLD_RANKMAP_AUTO_MIN   1024

/* FOLD_RANK_MAP, in the order of fold_rankmap_mode_names. */
typedef enum fold_rankmap_mode {
    FOLD_RANKMAP_AUTO, FOLD_RANKMAP_COMPRESSED, FOLD_RANKMAP_DENSE
} fold_rankmap_mode_t;

extern const char *const fold_rankmap_mode_names[];   /* "auto", "compressed", "table" */

typedef enum fold_rankmap_kind {
    FOLD_RANKMAP_PROGRESSION, FOLD_RANKMAP_PIECES, FOLD_RANKMAP_TABLE
} fold_rankmap_kind_t;

typedef struct fold_rankmap_params {
    int                       mode;     /* fold_rankmap_mode_t */
    int                       cache;    /* fold_rankcache_kind_t */
    const fold_world_rects_t *worlds;   /* the context's world rectangles; NULL: none */
} fold_rankmap_params_t;

typedef struct fold_rankmap {
    int                kind;            /* fold_rankmap_kind_t */
    int                size;
    int                start, stride;   /* progression */
    int                npieces;         /* pieces */
    int                world_dims;      /* pieces: 2..4 when a world rectangle matched */
    int                cache_kind;      /* pieces: LINEAR_KIND, ASSOC or NONE */
    fold_rank_piece_t *pieces;
    fold_rankcache_t  *cache;           /* created at the first translation */
    int               *table;           /* table */
    int               *by_ctx;          /* table: comm ranks sorted by context rank */
} fold_rankmap_t;

/* The map of comm ranks 0 .. size-1 onto ctx_ranks (NULL: the identity). */
int    fold_rankmap_init(fold_rankmap_t *m, int size, const int *ctx_ranks,
                         const fold_rankmap_params_t *params);
void   fold_rankmap_free(fold_rankmap_t *m);

/* Context rank of comm rank r from the mapping function, remembered in the cache
 * (created at the first call). */
int    fold_rankmap_ctx_slow(fold_rankmap_t *m, int r);

/* Context rank of comm rank r (0 <= r < size). */
static inline int fold_rankmap_ctx(fold_rankmap_t *m, int r)
{
    if (m->kind == FOLD_RANKMAP_PROGRESSION) {
        return m->start + r * m->stride;
    }
    if (m->kind == FOLD_RANKMAP_TABLE) {
        return m->table[r];
    }
    int x;
    if (m->cache != NULL && fold_rankcache_find(m->cache, r, &x)) {
        return x;
    }
    return fold_rankmap_ctx_slow(m, r);
}

/* Comm rank of context rank x, or -1 when x is not a member. */
int    fold_rankmap_comm(fold_rankmap_t *m, int x);

/* Bytes of mapping state (the map, its pieces or table, reverse index, cache). */
size_t fold_rankmap_bytes(const fold_rankmap_t *m);
/* Bytes a table of this size would take (the dense reference). */
size_t fold_rankmap_dense_bytes(int size);

/* "3-level sub-rectangle of the 4-D world", "2 pieces", "table", ... */
void   fold_rankmap_describe(const fold_rankmap_t *m, char *buf, size_t len);

#endif
