/*
 * What fold_init measures of the network between nodes (net_probe.c): the cost
 * model's inter_lat_us and inter_gbs, the same on every rank.
 */
#ifndef FOLD_NET_PROBE_H
#define FOLD_NET_PROBE_H

#include "context.h"

/* Measures between the leaders of node pairs over the context's transport and takes
 * the medians on every rank (a bootstrap allgather, which every rank joins). *lat_us
 * and *gbs are 0 where the job runs on one node or no pair could measure (a peer that
 * did not answer is logged). FOLD_OK, or the bootstrap's failure. */
int fold_net_probe(fold_context_t *ctx, double *lat_us, double *gbs);

#endif
