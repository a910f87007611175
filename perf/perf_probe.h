/*
 * Which ranks share a node, the start-up streaming-bandwidth probe of every node,
 * and from both the memory-traffic lower bound of a collective (bound_us).
 */
#ifndef FOLD_PERF_PROBE_H
#define FOLD_PERF_PROBE_H

#include "perf_options.h"

#include <fold/fold.h>

typedef struct perf_node_layout {
    int     ranks;
    int     nnodes;
    int    *node_of;       /* node index of every rank */
    int    *local_ranks;   /* ranks on every node */
    double *node_bw_gbs;   /* streaming bandwidth of every node; NAN until probed */
} perf_node_layout_t;

/* Collective: groups ranks by host name. Returns a fold status. */
int perf_node_layout_init(perf_node_layout_t *layout, fold_comm_h comm);
void perf_node_layout_release(perf_node_layout_t *layout);
int perf_node_layout_max_local(const perf_node_layout_t *layout);

/* Collective: every rank streams c[i] += a[i] over float32 arrays of probe_bytes in
 * total, a node's ranks at once, a few times (each time over at least 1 MiB: several
 * passes over a smaller footprint, as a loop of calls makes); fills node_bw_gbs. */
int perf_probe_bandwidth(perf_node_layout_t *layout, fold_comm_h comm, size_t probe_bytes);

/* The slowest node's bandwidth, NAN when not probed. */
double perf_probe_slowest_node(const perf_node_layout_t *layout);

/* Bytes the ranks of `node` must at least read and write for one collective. */
double perf_bound_traffic_bytes(const perf_node_layout_t *layout, int node, perf_coll_t coll,
                                size_t bytes, int root);

/* The bytes per rank that traffic spreads over on this rank's node: the footprint a
 * probe of a collective's size streams (--probe-size each). */
size_t perf_probe_footprint(const perf_node_layout_t *layout, int rank, perf_coll_t coll,
                            size_t bytes, int root);

/* The largest, over nodes, of that traffic over the node's bandwidth; NAN if not probed. */
double perf_bound_us(const perf_node_layout_t *layout, perf_coll_t coll, size_t bytes,
                     int root);

#endif
