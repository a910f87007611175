/*
 * fold_sim's built-in platform: a SimGrid cluster of the shape's nodes, each a host
 * with a core per rank, built from the cost model's parameters. Each node has one
 * link to the cluster's crossbar, split into an outbound and an inbound direction
 * (SPLITDUPLEX) of inter_gbs x nics each, with half of inter_lat_us on each side of a
 * route; ranks of one node talk over the host's loopback at intra_lat_us and the
 * slower of intra_gbs and shm_gbs.
 */
#ifndef FOLD_SIM_PLATFORM_H
#define FOLD_SIM_PLATFORM_H

#include "coll/model.h"

#include <stdio.h>

/* Writes the platform as SimGrid XML. */
void sim_platform_write(FILE *out, const fold_model_params_t *p, int nnodes, int cores);

/* Writes it to a new temporary file, whose path goes to path (the caller removes
 * it). 0, or -1 with errno set. */
int  sim_platform_temp(const fold_model_params_t *p, int nnodes, int cores, char *path,
                       size_t len);

/* Applies "name=value,..." (cost-model parameters, fold_model_set) to p; the word
 * generic is skipped. 0, or -1 (logged by fold_model_set). */
int  sim_platform_apply_params(const char *text, fold_model_params_t *p);

#endif
