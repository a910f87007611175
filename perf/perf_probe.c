#include "perf_probe.h"
#include "perf_stats.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { PROBE_REPEATS = 5 };

/* A timed sample streams at least this many bytes per rank (passes over a footprint
 * smaller than that), so that the clock's resolution does not decide a small one. */
#define PROBE_SAMPLE_BYTES ((size_t)1 << 20)

/* 12 bytes per element of c[i] += a[i]: read a, read c, write c. */
#define PROBE_BYTES_PER_ELEMENT 12.0

/* Allgather of one value per rank through fold: a sum where only your own slot is set. */
static int allgather_u64(fold_comm_h comm, int rank, int ranks, uint64_t mine, uint64_t *all)
{
    memset(all, 0, (size_t)ranks * sizeof(*all));
    all[rank] = mine;
    return fold_allreduce(FOLD_IN_PLACE, all, (size_t)ranks, FOLD_UINT64, FOLD_OP_SUM, comm);
}

static int allgather_doubles(fold_comm_h comm, int rank, int ranks, const double *mine,
                             size_t n, double *all)
{
    memset(all, 0, (size_t)ranks * n * sizeof(*all));
    memcpy(all + (size_t)rank * n, mine, n * sizeof(*mine));
    return fold_allreduce(FOLD_IN_PLACE, all, (size_t)ranks * n, FOLD_FLOAT64, FOLD_OP_SUM,
                          comm);
}

static uint64_t host_hash(void)
{
    char host[256] = "";
    if (gethostname(host, sizeof(host)) != 0) {
        host[0] = '\0';
    }
    host[sizeof(host) - 1] = '\0';
    uint64_t h = 0xcbf29ce484222325ULL;   /* FNV-1a */
    for (const char *c = host; *c != '\0'; c++) {
        h = (h ^ (unsigned char)*c) * 0x100000001b3ULL;
    }
    return h;
}

int perf_node_layout_init(perf_node_layout_t *layout, fold_comm_h comm)
{
    int rank, ranks;
    memset(layout, 0, sizeof(*layout));
    fold_comm_rank(comm, &rank);
    fold_comm_size(comm, &ranks);
    uint64_t *hosts = malloc((size_t)ranks * sizeof(*hosts));
    layout->node_of     = malloc((size_t)ranks * sizeof(int));
    layout->local_ranks = calloc((size_t)ranks, sizeof(int));
    layout->node_bw_gbs = malloc((size_t)ranks * sizeof(double));
    if (hosts == NULL || layout->node_of == NULL || layout->local_ranks == NULL ||
        layout->node_bw_gbs == NULL) {
        free(hosts);
        perf_node_layout_release(layout);
        return FOLD_ERR_NO_MEMORY;
    }
    int status = allgather_u64(comm, rank, ranks, host_hash(), hosts);
    if (status != FOLD_OK) {
        free(hosts);
        perf_node_layout_release(layout);
        return status;
    }
    layout->ranks = ranks;
    for (int r = 0; r < ranks; r++) {
        int node = -1;
        for (int q = 0; q < r && node < 0; q++) {
            node = hosts[q] == hosts[r] ? layout->node_of[q] : -1;
        }
        layout->node_of[r] = node >= 0 ? node : layout->nnodes++;
        layout->local_ranks[layout->node_of[r]]++;
    }
    for (int n = 0; n < ranks; n++) {
        layout->node_bw_gbs[n] = NAN;
    }
    free(hosts);
    return FOLD_OK;
}

void perf_node_layout_release(perf_node_layout_t *layout)
{
    free(layout->node_of);
    free(layout->local_ranks);
    free(layout->node_bw_gbs);
    memset(layout, 0, sizeof(*layout));
}

int perf_node_layout_max_local(const perf_node_layout_t *layout)
{
    int max = 0;
    for (int n = 0; n < layout->nnodes; n++) {
        max = layout->local_ranks[n] > max ? layout->local_ranks[n] : max;
    }
    return max;
}

/* Out of line, so the compiler keeps the loop as written and vectorises it. */
__attribute__((noinline)) static void stream_add(float *restrict c, const float *restrict a,
                                                 size_t n)
{
    for (size_t i = 0; i < n; i++) {
        c[i] += a[i];
    }
}

int perf_probe_bandwidth(perf_node_layout_t *layout, fold_comm_h comm, size_t probe_bytes)
{
    size_t n = probe_bytes / (2 * sizeof(float));
    int rank;
    fold_comm_rank(comm, &rank);
    if (n == 0) {
        return FOLD_OK;
    }
    float *a = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    float *c = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    double *all = malloc((size_t)layout->ranks * PROBE_REPEATS * sizeof(double));
    int status = FOLD_ERR_NO_MEMORY;
    if (a == NULL || c == NULL || all == NULL) {
        goto out;
    }
    for (size_t i = 0; i < n; i++) {   /* first touch, outside the timing */
        a[i] = 1.0f;
        c[i] = 0.0f;
    }
    const size_t passes = (PROBE_SAMPLE_BYTES + probe_bytes - 1) / probe_bytes;
    double mine[PROBE_REPEATS];
    for (int rep = 0; rep < PROBE_REPEATS; rep++) {
        status = fold_barrier(comm);
        if (status != FOLD_OK) {
            goto out;
        }
        double start = perf_now_us();
        for (size_t k = 0; k < passes; k++) {
            stream_add(c, a, n);
        }
        mine[rep] = perf_now_us() - start;
    }
    volatile float keep = c[n / 2];   /* the sums are used, so the loop stays */
    (void)keep;
    status = allgather_doubles(comm, rank, layout->ranks, mine, PROBE_REPEATS, all);
    if (status != FOLD_OK) {
        goto out;
    }
    for (int node = 0; node < layout->nnodes; node++) {
        double best = 0;
        for (int rep = 0; rep < PROBE_REPEATS; rep++) {
            double slowest = 0;
            for (int r = 0; r < layout->ranks; r++) {
                double t = all[(size_t)r * PROBE_REPEATS + rep];
                slowest = layout->node_of[r] == node && t > slowest ? t : slowest;
            }
            double bytes = PROBE_BYTES_PER_ELEMENT * (double)n * (double)passes *
                           layout->local_ranks[node];
            double gbs = slowest > 0 ? bytes / slowest * 1e-3 : 0;
            best = gbs > best ? gbs : best;
        }
        layout->node_bw_gbs[node] = best;
    }
out:
    free(all);
    free(c);
    free(a);
    return status;
}

double perf_probe_slowest_node(const perf_node_layout_t *layout)
{
    double slowest = NAN;
    for (int n = 0; n < layout->nnodes; n++) {
        if (isnan(slowest) || layout->node_bw_gbs[n] < slowest) {
            slowest = layout->node_bw_gbs[n];
        }
    }
    return slowest;
}

double perf_bound_traffic_bytes(const perf_node_layout_t *layout, int node, perf_coll_t coll,
                                size_t bytes, int root)
{
    double local = layout->local_ranks[node];
    if (coll == PERF_COLL_ALLREDUCE) {
        return 2.0 * (double)bytes * local;   /* read every input, write every output */
    }
    int root_here = root >= 0 && root < layout->ranks && layout->node_of[root] == node;
    return (double)bytes * local + (root_here ? (double)bytes : 0.0);
}

size_t perf_probe_footprint(const perf_node_layout_t *layout, int rank, perf_coll_t coll,
                            size_t bytes, int root)
{
    const int node = layout->node_of[rank];
    return (size_t)(perf_bound_traffic_bytes(layout, node, coll, bytes, root) /
                    layout->local_ranks[node]);
}

double perf_bound_us(const perf_node_layout_t *layout, perf_coll_t coll, size_t bytes,
                     int root)
{
    double bound = NAN;
    for (int node = 0; node < layout->nnodes; node++) {
        double bw = layout->node_bw_gbs[node];
        if (isnan(bw) || bw <= 0) {
            return NAN;
        }
        double us = perf_bound_traffic_bytes(layout, node, coll, bytes, root) / (bw * 1e3);
        bound = isnan(bound) || us > bound ? us : bound;
    }
    return bound;
}
