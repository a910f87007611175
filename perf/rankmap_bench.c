/*
 * rankmap_bench: Kumar et al.'s experiments for one process of a virtual job,
 * built through the code fold_comm_split runs (group/split.h, group/rankmap.h).
 *
 *   rankmap_bench [--ranks N,N,...] [--dims AxBx...] [--rank R] [--lookups N]
 *                 [--no-split] [--no-lookup]
 *
 * Split test (sec. 5): the world of N ranks is an n-D grid (fastest dimension
 * first; default: 32 ranks a node times MPI_Dims_create(N / 32, 5) nodes, the
 * paper's 4x4x16x16x2 nodes at 262,144 ranks and 64^4 at 16M). Along each
 * dimension of size D and at each point k < D - 1 the world splits into the
 * ranks with coordinate <= k and the rest; the process (rank R, default N/2) is
 * in one of the two each time, so in sum(D - 1) communicators (68 at 262,144).
 * Each is built as fold_comm_split builds it from the gathered (color, key =
 * rank) of all N ranks, and its map's bytes are summed: FOLD_RANK_MAP=auto
 * (compressed) against table (one int per rank). Also the node layout
 * (32-rank blocks) as context state against an int per rank.
 *
 * Lookups (sec. 4.2, 5): translation cost per comm -> context rank on a 16^3
 * sub-box of the 4-D world rectangle of 262,144 ranks (a 3-level mapping
 * function), from its centre, in the paper's patterns: neighbour exchange with
 * 6, 8 and 10 neighbours and the multi-hop 3-D exchange with every rank within
 * d = 1..4 hops per dimension (26, 124, 342, 728 neighbours), for a dense table,
 * the function with no cache, the 16-entry linear cache and the 128 x 8
 * set-associative cache: ns and TSC cycles per lookup, and the hit rate.
 */
#include "group/rankmap.h"
#include "group/nodemap.h"
#include "group/split.h"

#include <fold/fold_status.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

#define MAX_DIMS 8

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- the split test ------------------------------------------------------------ */

typedef struct grid {
    int ndims;
    int dims[MAX_DIMS];     /* fastest first */
    int stride[MAX_DIMS];
} grid_t;

static void grid_finish(grid_t *g)
{
    for (int d = 0, s = 1; d < g->ndims; d++) {
        g->stride[d] = s;
        s *= g->dims[d];
    }
}

static int grid_parse(const char *text, grid_t *g)
{
    g->ndims = 0;
    while (*text != '\0' && g->ndims < MAX_DIMS) {
        char *end;
        long v = strtol(text, &end, 10);
        if (end == text || v < 1) {
            return -1;
        }
        g->dims[g->ndims++] = (int)v;
        text = *end == 'x' ? end + 1 : end;
        if (*end != 'x' && *end != '\0') {
            return -1;
        }
    }
    grid_finish(g);
    return 0;
}

/* The paper's shapes where it names them, else 32 a node x a 5-D node grid. */
static void grid_default(long n, grid_t *g)
{
    if (n == 262144) {
        grid_parse("32x2x16x16x4x4", g);   /* T, E, D, C, B, A of the BG/Q run */
    } else if (n == 16777216) {
        grid_parse("64x64x64x64", g);
    } else {
        int nodes[5];
        fold_dims_create((int)(n / 32), 5, nodes);
        g->ndims = 1;
        g->dims[0] = 32;
        for (int d = 0; d < 5; d++) {
            if (nodes[d] > 1) {
                g->dims[g->ndims++] = nodes[d];
            }
        }
        grid_finish(g);
    }
}

static long grid_size(const grid_t *g)
{
    long n = 1;
    for (int d = 0; d < g->ndims; d++) {
        n *= g->dims[d];
    }
    return n;
}

static void format_bytes(double b, char *buf, size_t len)
{
    if (b >= 1 << 20) {
        snprintf(buf, len, "%.1f MiB", b / (1 << 20));
    } else if (b >= 1 << 10) {
        snprintf(buf, len, "%.1f KiB", b / (1 << 10));
    } else {
        snprintf(buf, len, "%.0f B", b);
    }
}

static int split_test(const grid_t *g, long rank_arg)
{
    int n = (int)grid_size(g), me = rank_arg >= 0 ? (int)rank_arg : n / 2;
    fold_split_entry_t *all = malloc((size_t)n * sizeof(*all));
    int *ctx_ranks = malloc((size_t)n * sizeof(int)), *node_of = malloc((size_t)n * sizeof(int));
    if (all == NULL || ctx_ranks == NULL || node_of == NULL) {
        fprintf(stderr, "rankmap_bench: no memory for %d ranks\n", n);
        return -1;
    }
    fold_world_rects_t worlds;
    fold_world_rects_init(&worlds, n);   /* as the context does at its first split */
    fold_rankmap_t world;
    fold_rankmap_init(&world, n, NULL, NULL);
    fold_rankmap_params_t on = {FOLD_RANKMAP_AUTO, FOLD_RANKCACHE_AUTO, &worlds};
    fold_rankmap_params_t off = {FOLD_RANKMAP_DENSE, FOLD_RANKCACHE_AUTO, &worlds};
    size_t bytes_on = 0, bytes_off = 0;
    int comms = 0, kinds[3] = {0, 0, 0}, world_matched = 0;
    double detect_s = 0;
    for (int d = 0; d < g->ndims; d++) {
        for (int k = 0; k < g->dims[d] - 1; k++) {
            for (int q = 0; q < n; q++) {
                all[q] = (fold_split_entry_t){q / g->stride[d] % g->dims[d] <= k, q, 0, q};
            }
            int myrank, members = fold_split_members(all, n, me / g->stride[d] % g->dims[d] <= k,
                                                     me, &world, ctx_ranks, &myrank);
            fold_rankmap_t m;
            double t0 = now_s();
            if (fold_rankmap_init(&m, members, ctx_ranks, &on) != FOLD_OK) {
                return -1;
            }
            detect_s += now_s() - t0;
            bytes_on += fold_rankmap_bytes(&m);
            kinds[m.kind]++;
            world_matched += m.world_dims != 0;
            fold_rankmap_free(&m);
            if (fold_rankmap_init(&m, members, ctx_ranks, &off) != FOLD_OK) {
                return -1;
            }
            bytes_off += fold_rankmap_bytes(&m);
            fold_rankmap_free(&m);
            comms++;
        }
    }
    for (int q = 0; q < n; q++) {
        node_of[q] = q / g->dims[0];          /* dimension 0: the ranks of a node */
    }
    fold_nodemap_t nodes;
    fold_nodemap_init(&nodes, n, node_of);
    char dims[64] = "", on_s[32], off_s[32], nodes_s[32], table_s[32];
    for (int d = 0, at = 0; d < g->ndims; d++) {
        at += snprintf(dims + at, sizeof(dims) - (size_t)at, "%s%d", d ? "x" : "", g->dims[d]);
    }
    format_bytes((double)bytes_on, on_s, sizeof(on_s));
    format_bytes((double)bytes_off, off_s, sizeof(off_s));
    format_bytes((double)fold_nodemap_bytes(&nodes), nodes_s, sizeof(nodes_s));
    format_bytes((double)n * sizeof(int), table_s, sizeof(table_s));
    printf("%10d  %-16s %5d  %10s  %10s  %8.0fx  %3d/%3d/%3d/%3d  %8.2f  %8s / %s\n", n, dims,
           comms, off_s, on_s, (double)bytes_off / (double)bytes_on, kinds[0], kinds[1],
           world_matched, kinds[2], 1e3 * detect_s / comms, nodes_s, table_s);
    fflush(stdout);
    fold_nodemap_free(&nodes);
    fold_rankmap_free(&world);
    free(all);
    free(ctx_ranks);
    free(node_of);
    return 0;
}

/* ---- lookups ------------------------------------------------------------------- */

#define BOX 16

typedef struct pattern {
    const char *name;
    int         n;
    int         peer[1024];   /* comm ranks */
} pattern_t;

static int box_rank(int x, int y, int z)
{
    return x + BOX * (y + BOX * z);
}

static void neighbours(pattern_t *p, int count)
{
    static const int offs[10][3] = {{1, 0, 0}, {-1, 0, 0}, {0, 1, 0}, {0, -1, 0}, {0, 0, 1},
                                    {0, 0, -1}, {2, 0, 0}, {-2, 0, 0}, {0, 2, 0}, {0, -2, 0}};
    p->n = count;
    for (int i = 0; i < count; i++) {
        p->peer[i] = box_rank(BOX / 2 + offs[i][0], BOX / 2 + offs[i][1], BOX / 2 + offs[i][2]);
    }
}

static void multihop(pattern_t *p, int d)
{
    p->n = 0;
    for (int z = -d; z <= d; z++) {
        for (int y = -d; y <= d; y++) {
            for (int x = -d; x <= d; x++) {
                if (x || y || z) {
                    p->peer[p->n++] = box_rank(BOX / 2 + x, BOX / 2 + y, BOX / 2 + z);
                }
            }
        }
    }
}

static volatile long sink;

/* One exchange: a receive and a send posted to every peer (two lookups each). */
static __attribute__((noinline)) long translate_loop(fold_rankmap_t *m, const pattern_t *p,
                                                     long rounds)
{
    long sum = 0;
    for (long r = 0; r < rounds; r++) {
        for (int i = 0; i < p->n; i++) {
            sum += fold_rankmap_ctx(m, p->peer[i]);
        }
        for (int i = 0; i < p->n; i++) {
            sum += fold_rankmap_ctx(m, p->peer[i]);
        }
    }
    return sum;
}

static int lookup_test(long lookups)
{
    const int world = 262144;
    fold_world_rects_t worlds;
    fold_world_rects_init(&worlds, world);
    const fold_world_rect_t *w4 = &worlds.rect[2];   /* 32 x 32 x 16 x 16 */
    int members = BOX * BOX * BOX, ranks[BOX * BOX * BOX];
    for (int i = 0; i < members; i++) {   /* corner (8, 8, 0, 5), dimensions 0-2 */
        int x = 8 + i % BOX, y = 8 + i / BOX % BOX, z = i / (BOX * BOX);
        ranks[i] = x * w4->stride[0] + y * w4->stride[1] + z * w4->stride[2] + 5 * w4->stride[3];
    }
    static pattern_t pats[7];
    const char *names[7] = {"neighbours 6", "neighbours 8", "neighbours 10", "multi-hop d=1",
                            "multi-hop d=2", "multi-hop d=3", "multi-hop d=4"};
    for (int i = 0; i < 3; i++) {
        neighbours(&pats[i], 6 + 2 * i);
    }
    for (int d = 1; d <= 4; d++) {
        multihop(&pats[2 + d], d);
    }
    static const struct {
        const char *name;
        int mode, cache;
    } maps[4] = {{"table", FOLD_RANKMAP_DENSE, FOLD_RANKCACHE_NONE},
                 {"none", FOLD_RANKMAP_COMPRESSED, FOLD_RANKCACHE_NONE},
                 {"linear", FOLD_RANKMAP_COMPRESSED, FOLD_RANKCACHE_LINEAR_KIND},
                 {"assoc", FOLD_RANKMAP_COMPRESSED, FOLD_RANKCACHE_ASSOC}};
    printf("\n# translation per lookup on a %dx%dx%d sub-box of the %dx%dx%dx%d world "
           "(%d ranks): ns, TSC cycles, hit rate\n", BOX, BOX, BOX, w4->dims[0], w4->dims[1],
           w4->dims[2], w4->dims[3], world);
    printf("# %-14s %5s", "pattern", "peers");
    for (int k = 0; k < 4; k++) {
        printf("  %8s ns %6s cyc %5s", maps[k].name, "", "hit");
    }
    printf("\n");
    for (int i = 0; i < 7; i++) {
        pats[i].name = names[i];
        long rounds = lookups / (2 * pats[i].n);
        printf("  %-14s %5d", names[i], pats[i].n);
        for (int k = 0; k < 4; k++) {
            fold_rankmap_params_t params = {maps[k].mode, maps[k].cache, &worlds};
            fold_rankmap_t m;
            if (fold_rankmap_init(&m, members, ranks, &params) != FOLD_OK) {
                return -1;
            }
            sink = translate_loop(&m, &pats[i], rounds / 10 + 1);   /* warm */
            double best_ns = 1e9, best_cyc = 1e9;
            for (int rep = 0; rep < 5; rep++) {
                uint64_t c0 = __rdtsc();
                double t0 = now_s();
                sink = translate_loop(&m, &pats[i], rounds);
                double ns = (now_s() - t0) * 1e9 / (double)(2 * pats[i].n * rounds);
                double cyc = (double)(__rdtsc() - c0) / (double)(2 * pats[i].n * rounds);
                best_ns = ns < best_ns ? ns : best_ns;
                best_cyc = cyc < best_cyc ? cyc : best_cyc;
            }
            char hit[16] = "-";
            if (m.cache != NULL) {
                snprintf(hit, sizeof(hit), "%.0f%%",
                         100.0 * (double)m.cache->hits /
                             (double)(m.cache->hits + m.cache->misses));
            }
            printf("  %8.2f ns %6.1f cyc %5s", best_ns, best_cyc, hit);
            fold_rankmap_free(&m);
        }
        printf("\n");
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"ranks", required_argument, NULL, 'n'}, {"dims", required_argument, NULL, 'd'},
        {"rank", required_argument, NULL, 'r'}, {"lookups", required_argument, NULL, 'l'},
        {"no-split", no_argument, NULL, 'S'}, {"no-lookup", no_argument, NULL, 'L'},
        {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    const char *ranks = "8192,32768,262144,1048576", *dims = NULL;
    long rank = -1, lookups = 20000000;
    int do_split = 1, do_lookup = 1, c;
    while ((c = getopt_long(argc, argv, "n:d:r:l:SLh", longopts, NULL)) != -1) {
        switch (c) {
        case 'n': ranks = optarg; break;
        case 'd': dims = optarg; break;
        case 'r': rank = atol(optarg); break;
        case 'l': lookups = atol(optarg); break;
        case 'S': do_split = 0; break;
        case 'L': do_lookup = 0; break;
        default:
            fprintf(stderr, "usage: %s [--ranks N,N,...] [--dims AxBx...] [--rank R] "
                    "[--lookups N] [--no-split] [--no-lookup]\n", argv[0]);
            return c == 'h' ? 0 : 2;
        }
    }
    if (do_split) {
        printf("# split test: mapping state of one process (rank --rank, default N/2) over "
               "its communicators\n");
        printf("# %8s  %-16s %5s  %10s  %10s  %9s  %-15s  %8s  %s\n", "ranks", "world dims",
               "comms", "table", "compressed", "ratio", "prog/pc/wld/tab", "ms/comm",
               "node layout / table");
        grid_t g;
        if (dims != NULL) {
            if (grid_parse(dims, &g) != 0) {
                fprintf(stderr, "rankmap_bench: bad --dims '%s'\n", dims);
                return 2;
            }
            if (split_test(&g, rank) != 0) {
                return 3;
            }
        } else {
            for (const char *p = ranks; *p != '\0';) {
                char *end;
                long n = strtol(p, &end, 10);
                if (*end == 'k' || *end == 'M') {
                    n <<= *end == 'k' ? 10 : 20;
                    end++;
                }
                if (end == p || n < 64 || n > (1L << 30)) {
                    fprintf(stderr, "rankmap_bench: bad --ranks entry at '%s'\n", p);
                    return 2;
                }
                grid_default(n, &g);
                if (grid_size(&g) != n || split_test(&g, rank) != 0) {
                    fprintf(stderr, "rankmap_bench: %ld ranks: no grid of 32-rank nodes\n", n);
                    return 3;
                }
                p = *end == ',' ? end + 1 : end;
            }
        }
    }
    if (do_lookup && lookup_test(lookups) != 0) {
        return 3;
    }
    return 0;
}
