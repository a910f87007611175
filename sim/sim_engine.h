/*
 * SimGrid under the replay (sim_engine.cpp): its engine and platform, one actor per
 * rank on its node's host, CPU slots as executions on the host's cores and messages
 * as communications between the hosts over the platform's routes.
 */
#ifndef FOLD_SIM_ENGINE_H
#define FOLD_SIM_ENGINE_H

#include "sim_prog.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Starts SimGrid with these arguments (its --cfg= and --log= options; argv[0] first)
 * and loads the platform file. 0, or -1 with the reason in why. Once per process. */
int sim_engine_load(int argc, char **argv, const char *platform, char *why, size_t len);

/* The hosts the nodes run on: node k on the k-th host in the order of their names
 * (numbers in names compared as numbers). 0, or -1 where there are fewer hosts than
 * nodes (why says so). */
int sim_engine_map_nodes(int nnodes, char *why, size_t len);

/* Node k's host: its name, its cores, and one of its properties, or its zone's
 * (NULL: none). */
const char *sim_engine_host_name(int node);
int         sim_engine_host_cores(int node);
const char *sim_engine_host_prop(int node, const char *name);

/* Replays g with one actor per rank; every step's times end up in g->steps.
 * 0, or -1 (why: a step never completed, or the simulator failed). */
int sim_engine_run(sim_prog_t *g, const fold_model_params_t *p, char *why, size_t len);

#ifdef __cplusplus
}
#endif

#endif
