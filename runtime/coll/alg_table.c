#include "alg.h"

#include <string.h>

/* Every algorithm, in the order fold_info prints them. */
const fold_alg_t *const fold_alg_all[] = {
    &fold_alg_recursive_doubling,
    &fold_alg_rabenseifner,
    &fold_alg_ring,
    &fold_alg_binomial,
    &fold_alg_chain,
    &fold_alg_bintree,
    &fold_alg_greedy,
    &fold_alg_dpml,
    &fold_alg_dpml_pipelined,
    &fold_alg_shm_flat,
    &fold_alg_cma,
    NULL,
};

const fold_alg_t *fold_alg_find(const char *name)
{
    for (int i = 0; name != NULL && fold_alg_all[i] != NULL; i++) {
        if (strcmp(fold_alg_all[i]->name, name) == 0) {
            return fold_alg_all[i];
        }
    }
    return NULL;
}

fold_alg_build_fn fold_alg_builder(const fold_alg_t *alg, fold_coll_t coll)
{
    switch (coll) {
    case FOLD_COLL_ALLREDUCE: return alg->allreduce;
    case FOLD_COLL_REDUCE:    return alg->reduce;
    default:                  return NULL;
    }
}
