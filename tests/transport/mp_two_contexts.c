/*
 * Two fold contexts in one process, both bootstrapped through PMIx: each publishes
 * its transport address and gathers through the launcher, and the keys must not
 * collide. The second context is made before the first makes any peer, so a shared
 * key would hand the first context the second's addresses (its messages would land
 * in the other context and the collective would time out) or stale allgather data.
 * Run on 2 ranks or more.
 */
#include <fold/fold.h>

#include "context.h"

#include <stdio.h>
#include <stdlib.h>

static int failed;

/* Sums (rank + 1) * scale over every rank with a flat algorithm, so that the
 * transport's peers carry it, and checks the total. */
static void allreduce_on(fold_context_h ctx, const char *name, int scale)
{
    int rank = ctx->bs.rank, size = ctx->bs.size;
    int in[1024], out[1024];
    for (int i = 0; i < 1024; i++) {
        in[i] = (rank + 1) * scale + i;
    }
    int want_base = scale * size * (size + 1) / 2;
    int status = fold_config_set(ctx, "FOLD_ALLREDUCE_ALG", "ring");
    if (status == FOLD_OK) {
        status = fold_allreduce(in, out, 1024, FOLD_INT32, FOLD_OP_SUM, fold_comm_world(ctx));
    }
    if (status != FOLD_OK) {
        fprintf(stderr, "mp_two_contexts rank %d: FAILED allreduce on %s: %s\n", rank, name,
                fold_status_string(status));
        failed = 1;
        return;
    }
    for (int i = 0; i < 1024; i++) {
        if (out[i] != want_base + size * i) {
            fprintf(stderr, "mp_two_contexts rank %d: FAILED %s element %d is %d, expected %d\n",
                    rank, name, i, out[i], want_base + size * i);
            failed = 1;
            return;
        }
    }
}

int main(void)
{
    fold_context_h first, second;
    if (fold_init(NULL, &first) != FOLD_OK) {
        fprintf(stderr, "mp_two_contexts: fold_init of the first context failed\n");
        return 1;
    }
    if (fold_init(NULL, &second) != FOLD_OK) {
        fprintf(stderr, "mp_two_contexts: fold_init of the second context failed\n");
        fold_finalize(first);
        return 1;
    }
    if (first->addr_table != NULL || second->addr_table != NULL) {
        fprintf(stderr, "mp_two_contexts: not bootstrapped through PMIx's directory\n");
        failed = 1;
    }
    /* The first context meets its peers only now, after the second published. */
    allreduce_on(first, "the first context", 1);
    allreduce_on(second, "the second context", 1000);
    allreduce_on(first, "the first context again", 3);
    int rank = first->bs.rank;
    fold_finalize(second);
    fold_finalize(first);
    if (!failed) {
        printf("mp_two_contexts rank %d: two PMIx contexts kept apart\n", rank);
    }
    return failed;
}
