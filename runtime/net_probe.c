/*
 * What fold_init measures of the network between nodes for the cost model: a small
 * message's latency (inter_lat_us) and one link's bandwidth (inter_gbs), between the
 * leaders (first ranks) of nodes 2k and 2k + 1 over the context's own transport, all
 * pairs at once. Without it the model prices every network as its generic 100 Gb/s one
 * with 2 us messages: over TCP (tens of microseconds and a few GB/s, or far less on
 * a 1 Gbit/s link) that misjudges where segments and leaders pay.
 *
 * Each pair first exchanges WARM_TRIPS round trips, which also set up the connection
 * (a TCP transport connects on the first message, in milliseconds) so that the job's
 * first call across nodes does not; then LAT_TRIPS round trips of 8 bytes, whose
 * quickest half is the latency (a trip can only be slowed: on a node with more ranks
 * than cores, by the partner waiting for a core), and BW_TRIPS streams of BW_MSGS
 * messages of BW_BYTES one way, answered once all arrived, whose best time less two
 * latencies is theirs on the link. Every rank then takes the medians of what the
 * pairs measured (the bootstrap's allgather), so that all decide alike. It
 * costs milliseconds over TCP, about ten times more on a 1 Gbit/s link.
 */
#include "net_probe.h"
#include "log.h"
#include "util/clock.h"
#include "util/median.h"

#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define WARM_TRIPS 2
#define LAT_TRIPS  10
#define BW_TRIPS   2
#define BW_MSGS    4
#define BW_BYTES   ((size_t)256 << 10)
/* Above any collective's: comm id, collective and sequence bits all ones. */
#define PROBE_TAG  ((UINT64_C(1) << FOLD_TL_TAG_BITS) - 1)
/* A peer that does not answer within this long leaves the pair unmeasured. */
#define PROBE_DEADLINE_S 30.0
/* Polls without progress before a waiting rank yields its core at each further one. A
 * job with more ranks than cores (a container, a CI machine) has the pair's partner
 * waiting for this core: spinning on, the probe would time the scheduler's slices
 * (milliseconds) instead of the network. On a core of its own, a yield returns at
 * once. */
#define PROBE_SPIN_POLLS 64

typedef struct probe_result {
    double lat_us;   /* 0: not measured */
    double gbs;
} probe_result_t;

/* Waits for req; FOLD_ERR_TIMEOUT past the deadline (the request is then canceled). */
static int wait_for(fold_context_t *ctx, fold_tl_req_t *req, double deadline)
{
    unsigned idle = 0;
    while (req->status == FOLD_INPROGRESS) {
        if (ctx->tl_ops->progress(ctx->tl) != 0) {
            idle = 0;
            continue;
        }
        if (++idle > PROBE_SPIN_POLLS) {
            sched_yield();
        }
        if (fold_util_time_now() > deadline) {
            ctx->tl_ops->cancel(ctx->tl, req);
            while (req->status == FOLD_INPROGRESS) {
                ctx->tl_ops->progress(ctx->tl);
            }
            return FOLD_ERR_TIMEOUT;
        }
    }
    return req->status;
}

/* One round trip of `len` bytes with `peer`: the pinger sends first. */
static int round_trip(fold_context_t *ctx, int peer, int pinger, char *buf, size_t len,
                      double deadline)
{
    fold_tl_req_t send = {0}, recv = {0};
    int status;
    if (pinger) {
        if ((status = ctx->tl_ops->tag_recv(ctx->tl, peer, PROBE_TAG, buf + len, len, &recv)) !=
                FOLD_OK ||
            (status = ctx->tl_ops->tag_send(ctx->tl, peer, PROBE_TAG, buf, len, &send)) !=
                FOLD_OK) {
            return status;
        }
        status = wait_for(ctx, &send, deadline);
        int got = wait_for(ctx, &recv, deadline);
        return status != FOLD_OK ? status : got;
    }
    if ((status = ctx->tl_ops->tag_recv(ctx->tl, peer, PROBE_TAG, buf + len, len, &recv)) !=
        FOLD_OK) {
        return status;
    }
    if ((status = wait_for(ctx, &recv, deadline)) != FOLD_OK ||
        (status = ctx->tl_ops->tag_send(ctx->tl, peer, PROBE_TAG, buf, len, &send)) != FOLD_OK) {
        return status;
    }
    return wait_for(ctx, &send, deadline);
}

/* Times `trips` round trips of len bytes: the quickest, in us. */
static int time_trips(fold_context_t *ctx, int peer, int pinger, char *buf, size_t len,
                      int trips, double deadline, double *us)
{
    for (int i = 0; i < trips; i++) {
        const double t0 = fold_util_time_now();
        int status = round_trip(ctx, peer, pinger, buf, len, deadline);
        if (status != FOLD_OK) {
            return status;
        }
        const double t = (fold_util_time_now() - t0) * 1e6;
        *us = i == 0 || t < *us ? t : *us;
    }
    return FOLD_OK;
}

/* The first context rank on node k. */
static int leader_of(const fold_context_t *ctx, int k)
{
    for (int r = 0; r < ctx->bs.size; r++) {
        if (fold_context_node_of(ctx, r) == k) {
            return r;
        }
    }
    return -1;
}

/* BW_MSGS messages of BW_BYTES from the pinger, answered by 8 bytes once all arrived:
 * the pinger's time for it, in us (the peer's: 0). One message alone would be timed
 * inside a rate limiter's burst, or TCP's first window. */
static int stream(fold_context_t *ctx, int peer, int pinger, char *buf, double deadline,
                  double *us)
{
    fold_tl_req_t req[BW_MSGS], ack = {0};
    memset(req, 0, sizeof(req));
    const double t0 = fold_util_time_now();
    int status = FOLD_OK;
    int posted = 0;
    for (; posted < BW_MSGS && status == FOLD_OK; posted++) {
        status = pinger ? ctx->tl_ops->tag_send(ctx->tl, peer, PROBE_TAG, buf, BW_BYTES,
                                                &req[posted])
                        : ctx->tl_ops->tag_recv(ctx->tl, peer, PROBE_TAG, buf, BW_BYTES,
                                                &req[posted]);
    }
    for (int i = 0; i < posted - (status != FOLD_OK); i++) {
        int done = wait_for(ctx, &req[i], deadline);
        status = status != FOLD_OK ? status : done;
    }
    if (status == FOLD_OK) {
        status = pinger ? ctx->tl_ops->tag_recv(ctx->tl, peer, PROBE_TAG, buf + BW_BYTES, 8, &ack)
                        : ctx->tl_ops->tag_send(ctx->tl, peer, PROBE_TAG, buf + BW_BYTES, 8,
                                                &ack);
        status = status == FOLD_OK ? wait_for(ctx, &ack, deadline) : status;
    }
    *us = pinger ? (fold_util_time_now() - t0) * 1e6 : 0;
    return status;
}

/* What this rank measures: a pair's figures on its leaders (the bandwidth on the
 * pinger's), nothing elsewhere. */
static probe_result_t measure(fold_context_t *ctx)
{
    probe_result_t res = {0, 0};
    const int me = ctx->bs.rank, node = fold_context_node_of(ctx, me);
    const int other = node ^ 1, peer = other < ctx->nnodes ? leader_of(ctx, other) : -1;
    if (leader_of(ctx, node) != me || peer < 0) {
        return res;
    }
    char *buf = calloc(1, BW_BYTES + 16);
    if (buf == NULL) {
        return res;
    }
    const int pinger = node < other;
    const double deadline = fold_util_time_now() + PROBE_DEADLINE_S;
    double warm, small, large = 0;
    int status = time_trips(ctx, peer, pinger, buf, 8, WARM_TRIPS, deadline, &warm);
    if (status == FOLD_OK) {
        status = time_trips(ctx, peer, pinger, buf, 8, LAT_TRIPS, deadline, &small);
    }
    for (int i = 0; i < BW_TRIPS && status == FOLD_OK; i++) {
        double us;
        status = stream(ctx, peer, pinger, buf, deadline, &us);
        large = i == 0 || us < large ? us : large;
    }
    free(buf);
    if (status != FOLD_OK) {
        fold_warn("network probe with rank %d (node %d): %s; the model keeps its network "
                  "parameters", peer, other, fold_status_string(status));
        return res;
    }
    res.lat_us = small / 2;
    const double on_link_us = large - 2 * res.lat_us;
    res.gbs = pinger && on_link_us > 0 ? (double)(BW_MSGS * BW_BYTES) / (on_link_us * 1e3) : 0;
    if (pinger) {
        fold_debug("network probe with rank %d (node %d): %.1f us a small message, %.3g GB/s "
                   "(%d x %zu KiB in %.0f us)", peer, other, res.lat_us, res.gbs, BW_MSGS,
                   BW_BYTES >> 10, large);
    } else {
        fold_debug("network probe with rank %d (node %d): %.1f us a small message", peer,
                   other, res.lat_us);
    }
    return res;
}

/* The median of the positive values at field `offset` of all[0..n), or 0. */
static double median_of(const probe_result_t *all, int n, size_t offset, double *scratch)
{
    int m = 0;
    for (int r = 0; r < n; r++) {
        double v;
        memcpy(&v, (const char *)&all[r] + offset, sizeof(v));
        if (v > 0) {
            scratch[m++] = v;
        }
    }
    return m > 0 ? fold_util_median(scratch, m) : 0;
}

int fold_net_probe(fold_context_t *ctx, double *lat_us, double *gbs)
{
    *lat_us = *gbs = 0;
    if (ctx->nnodes < 2) {
        return FOLD_OK;
    }
    probe_result_t mine = measure(ctx);
    const int n = ctx->bs.size;
    probe_result_t *all = malloc((size_t)n * sizeof(*all));
    double *scratch = malloc((size_t)n * sizeof(*scratch));
    int status = FOLD_ERR_NO_MEMORY;
    /* Without room for the answers this rank cannot take part: the others wait for
     * it until the launcher ends the job, as at the address exchange. */
    if (all != NULL && scratch != NULL) {
        status = ctx->bs.allgather(&ctx->bs, &mine, all, sizeof(mine)) == FOLD_OK
                     ? FOLD_OK
                     : FOLD_ERR_BOOTSTRAP;
    }
    if (status == FOLD_OK) {
        *lat_us = median_of(all, n, offsetof(probe_result_t, lat_us), scratch);
        *gbs    = median_of(all, n, offsetof(probe_result_t, gbs), scratch);
    }
    free(all);
    free(scratch);
    return status;
}
