#include "loopback_harness.h"
#include "stderr_capture.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct lh_world {
    int        size;
    int        nnodes;     /* 0: every rank on this machine's node */
    void      *fabric;
    void      *group;
    lh_rank_fn fn;
    void      *arg;
} lh_world_t;

typedef struct lh_thread {
    lh_world_t *world;
    int         rank;
    int         result;
} lh_thread_t;

static void *rank_main(void *p)
{
    lh_thread_t *t = p;
    fold_bootstrap_t bs;
    fold_context_t *ctx;
    t->result = -1;
    if (fold_bootstrap_mem_init(&bs, t->world->group, t->rank) != FOLD_OK) {
        fprintf(stderr, "rank %d: bootstrap failed\n", t->rank);
        return NULL;
    }
    if (t->world->nnodes > 0) {
        snprintf(bs.node_name, sizeof(bs.node_name), "lh-node-%d", t->rank % t->world->nnodes);
    }
    if (fold_context_create(&bs, "loopback", t->world->fabric, &ctx) != FOLD_OK) {
        fprintf(stderr, "rank %d: context creation failed\n", t->rank);
        return NULL;
    }
    t->result = t->world->fn(ctx, t->rank, t->world->size, t->world->arg);
    if (fold_finalize(ctx) != FOLD_OK) {
        t->result = -1;
    }
    return NULL;
}

int lh_run(int nranks, lh_rank_fn fn, void *arg)
{
    return lh_run_nodes(nranks, 0, fn, arg);
}

int lh_run_nodes(int nranks, int nnodes, lh_rank_fn fn, void *arg)
{
    /* A test's many short worlds set up at their first call: deciding every size
     * class in each fold_init made test_coll_loopback 1.5x slower. The default
     * (init) is test_select_warm's, and every multi-process test's. A test may ask
     * for it. */
    setenv("FOLD_WORLD_SETUP", "lazy", 0);
    lh_world_t world = {nranks, nnodes, fold_loopback_fabric_create(nranks),
                        fold_bootstrap_mem_group_create(nranks), fn, arg};
    lh_thread_t *threads = calloc((size_t)nranks, sizeof(*threads));
    pthread_t *tids = calloc((size_t)nranks, sizeof(*tids));
    int failed = world.fabric == NULL || world.group == NULL || !threads || !tids;
    if (!failed) {
        /* Large sends wait for their receiver, as over UCX, so tests catch the
         * deadlocks that eager-only delivery would hide. */
        fold_loopback_fabric_set_rndv(world.fabric, 4096);
    }

    for (int r = 0; r < nranks && !failed; r++) {
        threads[r] = (lh_thread_t){&world, r, -1};
        failed = pthread_create(&tids[r], NULL, rank_main, &threads[r]) != 0;
    }
    for (int r = 0; r < nranks && !failed; r++) {
        pthread_join(tids[r], NULL);
        failed |= threads[r].result != 0;
    }
    fold_loopback_fabric_destroy(world.fabric);
    fold_bootstrap_mem_group_destroy(world.group);
    free(threads);
    free(tids);
    return failed ? -1 : 0;
}

char *lh_run_logged(int nranks, lh_rank_fn fn, void *arg, int *result)
{
    stderr_capture_begin();
    *result = lh_run(nranks, fn, arg);
    return stderr_capture_end();
}

void lh_barrier(fold_context_t *ctx)
{
    char in = 0, out[1024];
    ctx->bs.allgather(&ctx->bs, &in, out, 1);
}
