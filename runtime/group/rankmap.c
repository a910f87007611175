/*
 * Rank maps: detection at creation (progression, world sub-rectangle, strided
 * pieces, else a table) and translation both ways.
 */
#include "rankmap.h"

#include <fold/fold_status.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const fold_rankmap_mode_names[] = {"auto", "compressed", "table", NULL};

static int rank_of(const int *ctx_ranks, int i)
{
    return ctx_ranks != NULL ? ctx_ranks[i] : i;
}

static int is_progression(int size, const int *ctx_ranks, int *start, int *stride)
{
    *start  = rank_of(ctx_ranks, 0);
    *stride = size > 1 ? rank_of(ctx_ranks, 1) - *start : 1;
    if (*stride == 0) {
        return 0;
    }
    for (int i = 2; i < size; i++) {
        if (rank_of(ctx_ranks, i) - rank_of(ctx_ranks, i - 1) != *stride) {
            return 0;
        }
    }
    return 1;
}

static int make_table(fold_rankmap_t *m, int size, const int *ctx_ranks)
{
    m->kind  = FOLD_RANKMAP_TABLE;
    m->table = malloc((size_t)size * sizeof(int));
    if (m->table == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    for (int i = 0; i < size; i++) {
        m->table[i] = rank_of(ctx_ranks, i);
    }
    return FOLD_OK;
}

/* The whole list as one sub-rectangle of a world rectangle, the paper's way. */
static int match_world(const fold_world_rects_t *worlds, const int *ranks, int size,
                       fold_rank_piece_t *p)
{
    for (int w = 0; worlds != NULL && w < worlds->count; w++) {
        if (fold_world_rect_match(&worlds->rect[w], ranks, size, p)) {
            return worlds->rect[w].ndims;
        }
    }
    return 0;
}

/* The list cut into strided pieces, each as long as it goes; 0 when more than
 * FOLD_RANKMAP_MAX_PIECES are needed or one cannot be searched backwards. */
static int cut_pieces(const int *ranks, int size, fold_rank_piece_t *pieces)
{
    int n = 0;
    for (int pos = 0; pos < size; n++) {
        if (n == FOLD_RANKMAP_MAX_PIECES) {
            return 0;
        }
        int len = fold_piece_grow(ranks + pos, size - pos, &pieces[n]);
        pieces[n].first = pos;
        if (!fold_piece_reversible(&pieces[n])) {
            return 0;
        }
        pos += len;
    }
    return n;
}

static int resolve_cache(int kind)
{
    return kind == FOLD_RANKCACHE_AUTO ? FOLD_RANKCACHE_ASSOC : kind;
}

int fold_rankmap_init(fold_rankmap_t *m, int size, const int *ctx_ranks,
                      const fold_rankmap_params_t *params)
{
    memset(m, 0, sizeof(*m));
    m->size = size;
    int mode  = params != NULL ? params->mode : FOLD_RANKMAP_AUTO;
    int cache = params != NULL ? params->cache : FOLD_RANKCACHE_AUTO;
    if (mode == FOLD_RANKMAP_DENSE) {
        return make_table(m, size, ctx_ranks);
    }
    fold_rank_piece_t found[FOLD_RANKMAP_MAX_PIECES];
    int npieces = 0;
    if (is_progression(size, ctx_ranks, &m->start, &m->stride)) {
        if (cache == FOLD_RANKCACHE_AUTO || cache == FOLD_RANKCACHE_NONE) {
            m->kind = FOLD_RANKMAP_PROGRESSION;   /* a multiply beats any cache */
            return FOLD_OK;
        }
        /* A cache asked for by name fronts even a progression. */
        found[0] = (fold_rank_piece_t){.first = 0, .size = size, .base = m->start,
                                       .nlevels = 1, .extent = {size}, .stride = {m->stride}};
        npieces = 1;
    } else if (mode == FOLD_RANKMAP_AUTO && size < FOLD_RANKMAP_AUTO_MIN) {
        return make_table(m, size, ctx_ranks);
    } else if ((m->world_dims = match_world(params ? params->worlds : NULL, ctx_ranks, size,
                                            &found[0])) != 0) {
        npieces = 1;
    } else {
        npieces = cut_pieces(ctx_ranks, size, found);
    }
    if (npieces == 0) {
        return make_table(m, size, ctx_ranks);
    }
    m->pieces = malloc((size_t)npieces * sizeof(*m->pieces));
    if (m->pieces == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    memcpy(m->pieces, found, (size_t)npieces * sizeof(*found));
    m->kind       = FOLD_RANKMAP_PIECES;
    m->npieces    = npieces;
    m->cache_kind = resolve_cache(cache);
    return FOLD_OK;
}

void fold_rankmap_free(fold_rankmap_t *m)
{
    free(m->pieces);
    fold_rankcache_free(m->cache);
    free(m->table);
    free(m->by_ctx);
    memset(m, 0, sizeof(*m));
}

/* The mapping function: the piece holding r, then its levels. */
static int pieces_ctx(const fold_rankmap_t *m, int r)
{
    int k = m->npieces - 1;
    while (k > 0 && r < m->pieces[k].first) {
        k--;
    }
    return fold_piece_at(&m->pieces[k], r - m->pieces[k].first);
}

int fold_rankmap_ctx_slow(fold_rankmap_t *m, int r)
{
    if (m->cache == NULL && m->cache_kind != FOLD_RANKCACHE_NONE) {
        if ((m->cache = fold_rankcache_create(m->cache_kind)) == NULL) {
            m->cache_kind = FOLD_RANKCACHE_NONE;   /* out of memory: compute every time */
        } else {
            m->cache->misses++;                    /* the lookup that found no cache */
        }
    }
    int x = pieces_ctx(m, r);
    if (m->cache != NULL) {
        fold_rankcache_put(m->cache, r, x);
    }
    return x;
}

static int by_value(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Comm ranks sorted by their context rank, for binary search. */
static int build_reverse(fold_rankmap_t *m)
{
    uint64_t *pairs = malloc((size_t)m->size * sizeof(*pairs));
    m->by_ctx = malloc((size_t)m->size * sizeof(int));
    if (pairs == NULL || m->by_ctx == NULL) {
        free(pairs);
        free(m->by_ctx);
        m->by_ctx = NULL;
        return FOLD_ERR_NO_MEMORY;
    }
    for (int i = 0; i < m->size; i++) {
        pairs[i] = (uint64_t)(uint32_t)m->table[i] << 32 | (uint32_t)i;
    }
    qsort(pairs, (size_t)m->size, sizeof(*pairs), by_value);
    for (int i = 0; i < m->size; i++) {
        m->by_ctx[i] = (int)(uint32_t)pairs[i];
    }
    free(pairs);
    return FOLD_OK;
}

static int table_comm(fold_rankmap_t *m, int x)
{
    if (m->by_ctx == NULL && build_reverse(m) != FOLD_OK) {
        for (int i = 0; i < m->size; i++) {   /* no memory for the index: search */
            if (m->table[i] == x) {
                return i;
            }
        }
        return -1;
    }
    int lo = 0, hi = m->size - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, v = m->table[m->by_ctx[mid]];
        if (v == x) {
            return m->by_ctx[mid];
        }
        if (v < x) {
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return -1;
}

int fold_rankmap_comm(fold_rankmap_t *m, int x)
{
    switch (m->kind) {
    case FOLD_RANKMAP_PROGRESSION: {
        long d = (long)x - m->start;
        long i = d / m->stride;
        return d % m->stride == 0 && i >= 0 && i < m->size ? (int)i : -1;
    }
    case FOLD_RANKMAP_PIECES:
        for (int k = 0; k < m->npieces; k++) {
            int i = fold_piece_index(&m->pieces[k], x);
            if (i >= 0) {
                return m->pieces[k].first + i;
            }
        }
        return -1;
    default:
        return table_comm(m, x);
    }
}

size_t fold_rankmap_bytes(const fold_rankmap_t *m)
{
    size_t bytes = sizeof(*m) + (size_t)m->npieces * sizeof(*m->pieces) +
                   fold_rankcache_bytes(m->cache);
    if (m->table != NULL) {
        bytes += (size_t)m->size * sizeof(int);
    }
    if (m->by_ctx != NULL) {
        bytes += (size_t)m->size * sizeof(int);
    }
    return bytes;
}

size_t fold_rankmap_dense_bytes(int size)
{
    return sizeof(fold_rankmap_t) + (size_t)size * sizeof(int);
}

void fold_rankmap_describe(const fold_rankmap_t *m, char *buf, size_t len)
{
    switch (m->kind) {
    case FOLD_RANKMAP_PROGRESSION:
        snprintf(buf, len, "progression %d + %d r", m->start, m->stride);
        break;
    case FOLD_RANKMAP_PIECES:
        if (m->world_dims != 0) {
            snprintf(buf, len, "%d-level sub-rectangle of the %d-D world rectangle, cache %s",
                     m->pieces[0].nlevels, m->world_dims, fold_rankcache_names[m->cache_kind]);
        } else {
            snprintf(buf, len, "%d strided piece%s, cache %s", m->npieces,
                     m->npieces > 1 ? "s" : "", fold_rankcache_names[m->cache_kind]);
        }
        break;
    default:
        snprintf(buf, len, "table");
        break;
    }
}
