/*
 * Every rank's schedule of one question, built by fold's own algorithm code
 * (coll/model_build.h), in one compact array for the replay: each step with its CPU
 * time as the cost model prices it (coll/model_cost.h), its successors, and for a
 * send or receive the other side's step (the k-th send from a to b carries the k-th
 * receive b posts from a, as finalize numbers them).
 */
#ifndef FOLD_SIM_PROG_H
#define FOLD_SIM_PROG_H

#include "coll/model.h"

#include <stddef.h>
#include <stdint.h>

#define SIM_NONE UINT32_MAX

/* Where a step is in the replay. */
enum { SIM_WAITING, SIM_READY, SIM_POSTED, SIM_MOVING, SIM_DONE };

/* An event of a step, for the critical path: (step << 1) | SIM_EV_POST or SIM_EV_DONE. */
enum { SIM_EV_POST = 0, SIM_EV_DONE = 1 };

typedef struct sim_step {
    double   cost;        /* seconds of its rank's CPU */
    double   t_post;      /* ready time until its CPU slot starts; then the slot's end
                             (a flag post: when the flag lands) */
    double   t_done;
    uint64_t amount;      /* bytes; shm post and wait: the flag value */
    int32_t  peer;        /* send, recv: the other rank; shm wait: the owner's local
                             index, -1 every other local rank */
    uint32_t npred;       /* predecessors not done yet */
    uint32_t succ_off;    /* successors: succ[succ_off .. succ_off + nsucc) */
    uint32_t nsucc;
    uint32_t link;        /* send, recv: the other side's step; shm wait: flags awaited */
    uint32_t cause_post;  /* the event its slot started after (SIM_NONE: the start) */
    uint32_t cause_done;  /* the event it completed after */
    uint8_t  kind;        /* fold_step_kind_t */
    uint8_t  flag;
    uint8_t  state;
} sim_step_t;

typedef struct sim_prog {
    const fold_topo_t *topo;
    int          size;
    size_t       nsteps;
    size_t      *first;     /* rank -> its first step; its steps are first[r] .. end[r] */
    size_t      *end;
    sim_step_t  *steps;
    uint32_t    *succ;
    size_t       nsucc;
    uint8_t     *has_out;   /* rank -> has an output (reduce: the root only) */
    size_t       nmsgs;     /* sends */
    uint64_t     msg_bytes; /* over all sends */
} sim_prog_t;

/* Builds every rank of topo's schedule of q and prices its steps with p. FOLD_OK, the
 * build's error, or FOLD_ERR_INVALID_ARG where the schedules do not match (logged). */
int  sim_prog_build(sim_prog_t *g, const fold_topo_t *topo, const fold_model_query_t *q,
                    const fold_model_params_t *p);
void sim_prog_free(sim_prog_t *g);

/* The rank whose steps hold global step gi. */
int  sim_prog_rank_of(const sim_prog_t *g, size_t gi);

#endif
