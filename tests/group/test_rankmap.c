/*
 * Compressed rank maps (Kumar et al.): MPI_Dims_create's world rectangles, which
 * member lists are compressed (the paper's Fig. 2 examples, sub-rectangles of 2/3/4-D
 * grids in every traversal order, strides, rows, columns, unions) and which fall back
 * to a table (shuffles, random subsets), translation both ways against the dense
 * list for every rank and every non-member, the caches under eviction, and the
 * maps of communicators made by fold_comm_split.
 */
#include <criterion/criterion.h>

#include "group/rankmap.h"
#include "loopback_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const fold_rankmap_params_t compressed = {FOLD_RANKMAP_COMPRESSED, FOLD_RANKCACHE_AUTO,
                                                 NULL};

/* Every comm rank forward, every context rank below world backwards. */
static void check_both_ways(fold_rankmap_t *m, const int *ranks, int n, int world)
{
    int *comm_of = malloc((size_t)world * sizeof(int));
    cr_assert_not_null(comm_of);
    for (int x = 0; x < world; x++) {
        comm_of[x] = -1;
    }
    for (int i = 0; i < n; i++) {
        cr_assert_eq(fold_rankmap_ctx(m, i), ranks[i], "comm rank %d: %d, not %d", i,
                     fold_rankmap_ctx(m, i), ranks[i]);
        comm_of[ranks[i]] = i;
    }
    for (int x = 0; x < world; x++) {
        cr_assert_eq(fold_rankmap_comm(m, x), comm_of[x], "context rank %d: %d, not %d", x,
                     fold_rankmap_comm(m, x), comm_of[x]);
    }
    free(comm_of);
}

/* Builds the map with params, checks it both ways, returns its kind. */
static int map_kind(const int *ranks, int n, int world, const fold_rankmap_params_t *params,
                    fold_rankmap_t *m)
{
    cr_assert_eq(fold_rankmap_init(m, n, ranks, params), FOLD_OK);
    check_both_ways(m, ranks, n, world);
    return m->kind;
}

Test(rankmap, dims_create_as_mpi)
{
    int d[4];
    fold_dims_create(80, 3, d);
    cr_expect(d[0] == 5 && d[1] == 4 && d[2] == 4, "80 in 3-D: %dx%dx%d", d[0], d[1], d[2]);
    fold_dims_create(262144, 4, d);
    cr_expect(d[0] == 32 && d[1] == 32 && d[2] == 16 && d[3] == 16);
    fold_dims_create(12, 2, d);
    cr_expect(d[0] == 4 && d[1] == 3);
    fold_dims_create(360, 3, d);   /* Open MPI 4.1's MPI_Dims_create gives these */
    cr_expect(d[0] == 10 && d[1] == 6 && d[2] == 6);
    fold_dims_create(720, 4, d);
    cr_expect(d[0] == 6 && d[1] == 6 && d[2] == 5 && d[3] == 4);
    fold_dims_create(1000, 4, d);
    cr_expect(d[0] == 8 && d[1] == 5 && d[2] == 5 && d[3] == 5);
    fold_world_rects_t w;
    fold_world_rects_init(&w, 7);   /* prime: no rectangle without a dimension of 1 */
    cr_expect_eq(w.count, 0);
    fold_world_rects_init(&w, 80);
    cr_expect_eq(w.count, 3);
    cr_expect(w.rect[1].ndims == 3 && w.rect[1].stride[0] == 1 && w.rect[1].stride[1] == 5 &&
              w.rect[1].stride[2] == 20);
}

/* Kumar et al., sec. 4.1: on 80 ranks (5x4x4) every example is compressed, the
 * 2-D and 3-D blocks as sub-rectangles of the 3-D world. */
Test(rankmap, paper_figure_2_examples)
{
    fold_world_rects_t w;
    fold_world_rects_init(&w, 80);
    fold_rankmap_params_t p = compressed;
    p.worlds = &w;
    static const int row[] = {0, 1, 2, 3, 4}, col[] = {0, 5, 10, 15},
                     zcol[] = {15, 35, 55, 75}, twocols[] = {15, 16, 35, 36, 55, 56, 75, 76},
                     box[] = {10, 11, 15, 16, 30, 31, 35, 36, 50, 51, 55, 56, 70, 71, 75, 76};
    int plane[10];
    for (int i = 0; i < 10; i++) {
        plane[i] = 10 + i;
    }
    fold_rankmap_t m;
    cr_expect_eq(map_kind(row, 5, 80, &p, &m), FOLD_RANKMAP_PROGRESSION);
    fold_rankmap_free(&m);
    cr_expect_eq(map_kind(col, 4, 80, &p, &m), FOLD_RANKMAP_PROGRESSION);
    fold_rankmap_free(&m);
    cr_expect_eq(map_kind(plane, 10, 80, &p, &m), FOLD_RANKMAP_PROGRESSION);
    fold_rankmap_free(&m);
    cr_expect_eq(map_kind(zcol, 4, 80, &p, &m), FOLD_RANKMAP_PROGRESSION);
    fold_rankmap_free(&m);
    cr_expect_eq(map_kind(twocols, 8, 80, &p, &m), FOLD_RANKMAP_PIECES);
    cr_expect(m.npieces == 1 && m.world_dims == 3 && m.pieces[0].nlevels == 2,
              "two columns: %d pieces, world %d-D, %d levels", m.npieces, m.world_dims,
              m.pieces[0].nlevels);
    fold_rankmap_free(&m);
    cr_expect_eq(map_kind(box, 16, 80, &p, &m), FOLD_RANKMAP_PIECES);
    cr_expect(m.npieces == 1 && m.world_dims == 3 && m.pieces[0].nlevels == 3);
    fold_rankmap_free(&m);
}

/* The sub-rectangle lo + [0, ext) of grid dims, walked in `order` (fastest
 * first); returns the member count. */
static int sub_rect(int nd, const int *dims, const int *lo, const int *ext, const int *order,
                    int *out)
{
    int stride[4], n = 1;
    for (int d = 0, s = 1; d < nd; d++) {
        stride[d] = s;
        s *= dims[d];
        n *= ext[d];
    }
    for (int i = 0; i < n; i++) {
        int rest = i, x = 0;
        for (int k = 0; k < nd; k++) {
            int d = order[k];
            x += (lo[d] + rest % ext[d]) * stride[d];
            rest /= ext[d];
        }
        out[i] = x;
    }
    return n;
}

static int next_permutation(int *a, int n)
{
    int i = n - 2;
    while (i >= 0 && a[i] >= a[i + 1]) {
        i--;
    }
    if (i < 0) {
        return 0;
    }
    int j = n - 1;
    while (a[j] <= a[i]) {
        j--;
    }
    int t = a[i];
    a[i] = a[j];
    a[j] = t;
    for (int l = i + 1, r = n - 1; l < r; l++, r--) {
        t = a[l];
        a[l] = a[r];
        a[r] = t;
    }
    return 1;
}

/* Sub-rectangles of each world rectangle of 720 ranks (30x24, 10x9x8, 6x5x4x6 ...)
 * in every traversal order, at several corners and extents: one piece, matched
 * against a world rectangle, right both ways. */
Test(rankmap, sub_rectangles_of_2_3_4_d_worlds)
{
    const int world = 720;
    fold_world_rects_t w;
    fold_world_rects_init(&w, world);
    cr_assert_eq(w.count, 3);
    fold_rankmap_params_t p = compressed;
    p.worlds = &w;
    int *ranks = malloc(world * sizeof(int));
    cr_assert_not_null(ranks);
    unsigned seed = 7;
    int checked = 0;
    for (int k = 0; k < w.count; k++) {
        const fold_world_rect_t *rect = &w.rect[k];
        int nd = rect->ndims;
        for (int trial = 0; trial < 12; trial++) {
            int lo[4], ext[4], order[4];
            int extents_over_one = 0;
            for (int d = 0; d < nd; d++) {
                ext[d] = 2 + (int)(rand_r(&seed) % (unsigned)(rect->dims[d] - 1));
                ext[d] = ext[d] > rect->dims[d] ? rect->dims[d] : ext[d];
                lo[d]  = (int)(rand_r(&seed) % (unsigned)(rect->dims[d] - ext[d] + 1));
                order[d] = d;
                extents_over_one += ext[d] > 1;
            }
            do {
                int n = sub_rect(nd, rect->dims, lo, ext, order, ranks);
                fold_rankmap_t m;
                int kind = map_kind(ranks, n, world, &p, &m);
                cr_expect(kind != FOLD_RANKMAP_TABLE, "%d-D box of %d ranks kept a table", nd, n);
                if (kind == FOLD_RANKMAP_PIECES && extents_over_one == nd) {
                    cr_expect(m.npieces == 1 && m.world_dims == nd,
                              "%d-D box: %d pieces, world %d", nd, m.npieces, m.world_dims);
                }
                fold_rankmap_free(&m);
                checked++;
            } while (next_permutation(order, nd));
        }
    }
    cr_expect_gt(checked, 300);
    free(ranks);
}

/* Strided patterns, rows and columns of a grid: O(1) progressions. */
Test(rankmap, strides_rows_columns)
{
    int ranks[200];
    fold_rankmap_t m;
    for (int stride = -7; stride <= 7; stride++) {
        if (stride == 0) {
            continue;
        }
        int start = stride < 0 ? 199 : 3, n = 0;
        for (int x = start; x >= 0 && x < 200 && n < 25; x += stride) {
            ranks[n++] = x;
        }
        cr_expect_eq(map_kind(ranks, n, 200, &compressed, &m), FOLD_RANKMAP_PROGRESSION);
        fold_rankmap_free(&m);
    }
    for (int r = 0; r < 10; r++) {           /* 20 x 10 grid: row r, column r */
        for (int c = 0; c < 20; c++) {
            ranks[c] = r * 20 + c;
        }
        cr_expect_eq(map_kind(ranks, 20, 200, &compressed, &m), FOLD_RANKMAP_PROGRESSION);
        fold_rankmap_free(&m);
        for (int c = 0; c < 10; c++) {
            ranks[c] = c * 20 + r;
        }
        cr_expect_eq(map_kind(ranks, 10, 200, &compressed, &m), FOLD_RANKMAP_PROGRESSION);
        fold_rankmap_free(&m);
    }
}

/* Unions of pieces: two boxes of a 12 x 10 grid, an L shape, a box followed by a
 * strided tail; each a few pieces, none a table. */
Test(rankmap, unions_of_pieces)
{
    int ranks[120], n = 0;
    fold_rankmap_t m;
    for (int y = 1; y < 4; y++) {            /* 3 x 3 box at (2,1), 2 x 4 box at (8,5) */
        for (int x = 2; x < 5; x++) {
            ranks[n++] = y * 12 + x;
        }
    }
    for (int y = 5; y < 9; y++) {
        for (int x = 8; x < 10; x++) {
            ranks[n++] = y * 12 + x;
        }
    }
    cr_expect_eq(map_kind(ranks, n, 120, &compressed, &m), FOLD_RANKMAP_PIECES);
    cr_expect_eq(m.npieces, 2);
    fold_rankmap_free(&m);

    n = 0;                                   /* L: rows 0-3 of column 0-1, then row 3 */
    for (int y = 0; y < 4; y++) {
        for (int x = 0; x < 2; x++) {
            ranks[n++] = y * 12 + x;
        }
    }
    for (int x = 2; x < 12; x++) {
        ranks[n++] = 3 * 12 + x;
    }
    cr_expect_eq(map_kind(ranks, n, 120, &compressed, &m), FOLD_RANKMAP_PIECES);
    cr_expect_leq(m.npieces, 3);
    fold_rankmap_free(&m);

    n = 0;                                   /* 0..29 then every 7th from 40 */
    for (int x = 0; x < 30; x++) {
        ranks[n++] = x;
    }
    for (int x = 40; x < 120; x += 7) {
        ranks[n++] = x;
    }
    cr_expect_eq(map_kind(ranks, n, 120, &compressed, &m), FOLD_RANKMAP_PIECES);
    cr_expect_eq(m.npieces, 2);
    fold_rankmap_free(&m);
}

/* A shuffled box and a random subset are not mapping functions: a table, still
 * right both ways. A box walked backwards is one (negative strides). */
Test(rankmap, non_matching_sets_keep_a_table)
{
    const int world = 720;
    fold_world_rects_t w;
    fold_world_rects_init(&w, world);
    fold_rankmap_params_t p = compressed;
    p.worlds = &w;
    int ranks[720], n;
    fold_rankmap_t m;
    unsigned seed = 3;
    int dims[3] = {10, 9, 8}, lo[3] = {1, 2, 3}, ext[3] = {4, 5, 3}, order[3] = {0, 1, 2};
    n = sub_rect(3, dims, lo, ext, order, ranks);
    for (int i = n - 1; i > 0; i--) {         /* shuffle */
        int j = (int)(rand_r(&seed) % (unsigned)(i + 1)), t = ranks[i];
        ranks[i] = ranks[j];
        ranks[j] = t;
    }
    cr_expect_eq(map_kind(ranks, n, world, &p, &m), FOLD_RANKMAP_TABLE);
    fold_rankmap_free(&m);

    n = 0;
    for (int x = 0; x < world; x++) {
        if (rand_r(&seed) % 3 == 0) {
            ranks[n++] = x;
        }
    }
    cr_expect_eq(map_kind(ranks, n, world, &p, &m), FOLD_RANKMAP_TABLE);
    fold_rankmap_free(&m);

    n = sub_rect(3, dims, lo, ext, order, ranks);
    for (int i = 0; i < n / 2; i++) {
        int t = ranks[i];
        ranks[i] = ranks[n - 1 - i];
        ranks[n - 1 - i] = t;
    }
    cr_expect_eq(map_kind(ranks, n, world, &p, &m), FOLD_RANKMAP_PIECES);
    cr_expect_eq(m.npieces, 1);
    fold_rankmap_free(&m);
}

/* auto compresses a sub-rectangle only from FOLD_RANKMAP_AUTO_MIN ranks; table never. */
Test(rankmap, modes)
{
    const int world = 4096;
    fold_world_rects_t w;
    fold_world_rects_init(&w, world);   /* 64 x 64 */
    int dims[2] = {64, 64}, lo[2] = {3, 5}, order[2] = {0, 1};
    int *ranks = malloc(world * sizeof(int));
    cr_assert_not_null(ranks);
    fold_rankmap_params_t p = {FOLD_RANKMAP_AUTO, FOLD_RANKCACHE_AUTO, &w};
    fold_rankmap_t m;
    int small[2] = {10, 10}, big[2] = {40, 30};
    int n = sub_rect(2, dims, lo, small, order, ranks);
    cr_expect_eq(map_kind(ranks, n, world, &p, &m), FOLD_RANKMAP_TABLE);
    fold_rankmap_free(&m);
    n = sub_rect(2, dims, lo, big, order, ranks);
    cr_assert_eq(fold_rankmap_init(&m, n, ranks, &p), FOLD_OK);
    cr_expect_eq(m.kind, FOLD_RANKMAP_PIECES);
    /* Before its first translation creates the cache: */
    cr_expect_lt(fold_rankmap_bytes(&m) * 10, fold_rankmap_dense_bytes(n));
    check_both_ways(&m, ranks, n, world);
    cr_expect_gt(fold_rankmap_bytes(&m), sizeof(fold_rankcache_t));
    fold_rankmap_free(&m);
    int identity[100];
    for (int i = 0; i < 100; i++) {
        identity[i] = i;
    }
    p.mode = FOLD_RANKMAP_DENSE;
    cr_expect_eq(map_kind(identity, 100, 100, &p, &m), FOLD_RANKMAP_TABLE);
    fold_rankmap_free(&m);
    cr_expect_eq(map_kind(ranks, n, world, &p, &m), FOLD_RANKMAP_TABLE);
    fold_rankmap_free(&m);
    /* A cache named explicitly fronts even a progression. */
    p = (fold_rankmap_params_t){FOLD_RANKMAP_AUTO, FOLD_RANKCACHE_LINEAR_KIND, &w};
    cr_expect_eq(map_kind(identity, 100, 100, &p, &m), FOLD_RANKMAP_PIECES);
    cr_expect_eq(m.cache_kind, FOLD_RANKCACHE_LINEAR_KIND);
    fold_rankmap_free(&m);
    free(ranks);
}

/* ---- through fold_comm_split ---------------------------------------------------- */

#define GRID_X 4   /* 12 ranks: MPI_Dims_create gives 4 x 3 */
#define GRID_Y 3

/* Splits the 4 x 3 world into 2 x 2 blocks (the last row's are 2 x 1) and those into
 * columns; each member checks its communicators' maps against the members it
 * expects, both ways, and that an allreduce over them sums the right ranks. */
static int split_blocks(fold_context_t *ctx, int rank, int size, void *arg)
{
    const int *want_kind = arg;
    int x = rank % GRID_X, y = rank / GRID_X, bad = 0;
    fold_comm_h block, column;
    if (fold_comm_split(fold_comm_world(ctx), (y / 2) * 2 + x / 2, rank, &block) != FOLD_OK ||
        fold_comm_split(block, x, rank, &column) != FOLD_OK) {
        return 1;
    }
    int members[4], n = 0, sum = 0;
    for (int yy = y / 2 * 2; yy < y / 2 * 2 + 2 && yy < GRID_Y; yy++) {
        for (int xx = x / 2 * 2; xx < x / 2 * 2 + 2; xx++) {
            members[n++] = yy * GRID_X + xx;
            sum += yy * GRID_X + xx;
        }
    }
    bad |= block->size != n;
    for (int r = 0; r < n && !bad; r++) {
        int c;
        bad |= fold_comm_context_rank(block, r, &c) != FOLD_OK || c != members[r];
        bad |= fold_rankmap_comm(&block->map, members[r]) != r;
    }
    bad |= fold_rankmap_comm(&block->map, (rank + 2) % size) != -1;   /* a neighbour block */
    if (n == 4) {
        bad |= block->map.kind != want_kind[0];
    }
    int total = rank, col_total = rank;
    bad |= fold_allreduce(FOLD_IN_PLACE, &total, 1, FOLD_INT32, FOLD_OP_SUM, block) != FOLD_OK;
    bad |= fold_allreduce(FOLD_IN_PLACE, &col_total, 1, FOLD_INT32, FOLD_OP_SUM, column) != FOLD_OK;
    bad |= total != sum;
    bad |= col_total != (y < 2 ? x + x + GRID_X : rank);
    if (bad) {
        fprintf(stderr, "rank %d: block %d ranks (kind %d), sum %d of %d, column %d\n", rank,
                block->size, block->map.kind, total, sum, col_total);
    }
    fold_comm_free(&column);
    fold_comm_free(&block);
    return bad;
}

Test(rankmap, split_compressed_with_each_cache)
{
    static const char *caches[] = {"none", "linear", "assoc"};
    int kind[1] = {FOLD_RANKMAP_PIECES};
    setenv("FOLD_RANK_MAP", "compressed", 1);
    for (int i = 0; i < 3; i++) {
        setenv("FOLD_RANK_CACHE", caches[i], 1);
        cr_expect_eq(lh_run(GRID_X * GRID_Y, split_blocks, kind), 0, "cache %s", caches[i]);
    }
}

Test(rankmap, split_with_tables)
{
    int kind[1] = {FOLD_RANKMAP_TABLE};
    setenv("FOLD_RANK_MAP", "table", 1);
    cr_expect_eq(lh_run(GRID_X * GRID_Y, split_blocks, kind), 0);
    setenv("FOLD_RANK_MAP", "auto", 1);   /* 4 ranks: below auto's threshold */
    cr_expect_eq(lh_run(GRID_X * GRID_Y, split_blocks, kind), 0);
}
