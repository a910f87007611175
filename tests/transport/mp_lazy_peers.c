/*
 * Peers are made on first use (issue 15): after fold_init no transport peer exists,
 * and a collective makes exactly the peers its algorithm talks to. Run on 4 ranks
 * (or more), under PMIx, where addresses are fetched from the launcher on first use
 * (a bootstrap with a directory) and the context keeps no table of them.
 */
#include <fold/fold.h>

#include "context.h"

#include <stdio.h>
#include <stdlib.h>

static int failed;

static size_t peers_of(fold_context_h ctx)
{
    fold_tl_caps_t caps;
    return ctx->tl_ops->query(ctx->tl, &caps) == FOLD_OK ? caps.peers : (size_t)-1;
}

static void expect(int rank, int ok, const char *what, size_t got, size_t want)
{
    if (!ok) {
        fprintf(stderr, "mp_lazy_peers rank %d: FAILED %s: %zu peers, expected %zu\n", rank,
                what, got, want);
        failed = 1;
    }
}

static void allreduce_with(fold_context_h ctx, const char *alg, int size)
{
    int in = 1, out = 0;
    if (fold_config_set(ctx, "FOLD_ALLREDUCE_ALG", alg) != FOLD_OK ||
        fold_allreduce(&in, &out, 1, FOLD_INT32, FOLD_OP_SUM, fold_comm_world(ctx)) != FOLD_OK ||
        out != size) {
        fprintf(stderr, "mp_lazy_peers: allreduce over %s failed (%d)\n", alg, out);
        failed = 1;
    }
}

int main(void)
{
    fold_context_h ctx;
    if (fold_init(NULL, &ctx) != FOLD_OK) {
        fprintf(stderr, "mp_lazy_peers: fold_init failed\n");
        return 1;
    }
    int rank = ctx->bs.rank, size = ctx->bs.size;
    if (size < 4 || (size & (size - 1)) != 0) {
        fprintf(stderr, "mp_lazy_peers: run on a power of two of at least 4 ranks\n");
        fold_finalize(ctx);
        return 1;
    }
    size_t n = peers_of(ctx);
    expect(rank, n == 0, "after fold_init", n, 0);
    expect(rank, ctx->addr_table == NULL, "an address table kept under PMIx", 1, 0);

    /* A ring talks to its two neighbours only. */
    allreduce_with(ctx, "ring", size);
    n = peers_of(ctx);
    expect(rank, n == 2, "after a ring allreduce", n, 2);

    /* Recursive doubling adds the partners at distance 2, 4, ... (distance 1 is a
     * ring neighbour already): log2(size) partners, the ring's other one besides. */
    allreduce_with(ctx, "recursive_doubling", size);
    size_t log2p = 0;
    while (((size_t)1 << log2p) < (size_t)size) {
        log2p++;
    }
    size_t want = log2p + (size > 2 ? 1 : 0);   /* rank^1 is a ring neighbour only sometimes */
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    int other = (rank ^ 1) == left ? right : left;   /* the ring neighbour that is not rank^1 */
    int other_is_partner = 0;
    for (int d = 2; d < size; d <<= 1) {
        other_is_partner |= (rank ^ d) == other;
    }
    want -= other_is_partner;
    n = peers_of(ctx);
    expect(rank, n == want, "after a recursive-doubling allreduce", n, want);

    fold_finalize(ctx);
    if (rank == 0 && !failed) {
        printf("mp_lazy_peers: %d ranks: no peer after init, 2 after a ring, %zu after "
               "recursive doubling\n", size, want);
    }
    return failed;
}
