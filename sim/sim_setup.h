/*
 * What fold_sim replays, as fold_info -S would decide it: a virtual communicator of
 * the shape, the cost model's parameters (this node's calibration, the tuning file,
 * the platform's, FOLD_MODEL), the choice of algorithm, leaders and segment, and the
 * cost model's question for it.
 */
#ifndef FOLD_SIM_SETUP_H
#define FOLD_SIM_SETUP_H

#include "comm.h"

typedef struct sim_setup {
    fold_context_t     *ctx;
    fold_comm_t        *w;
    fold_model_params_t call;       /* the parameters the call is priced with */
    fold_choice_t       choice;
    fold_model_query_t  query;
    size_t              bytes;      /* count x 4 */
    char                alg[96];    /* "dpml@128k": the algorithm and its segments */
} sim_setup_t;

/* The virtual communicator of shape `text`; its parameters measured here unless
 * FOLD_MODEL starts with generic. 0, 2 for a bad shape, or 1 (all reported). */
int  sim_setup_context(sim_setup_t *s, const char *text);
/* The platform's parameters (NULL: none) over the context's, FOLD_MODEL's over
 * those: the machine selection decides for and the replay prices. 0 or -1. */
int  sim_setup_params(sim_setup_t *s, const char *platform_params);
/* The choice for coll of `bytes` (alg NULL: fold's; else alg or alg@SIZE with the
 * model's best leaders and segment for it) and its question. 0, or -1 (reported). */
int  sim_setup_choice(sim_setup_t *s, fold_coll_t coll, size_t bytes, const char *alg);
void sim_setup_free(sim_setup_t *s);

#endif
