/*
 * DPML across several nodes inside one process: ranks are threads on the loopback
 * transport, and each rank's bootstrap names the node it plays, so every virtual
 * node gets its own segment and the leaders' exchange goes over the transport.
 * Topologies: two even nodes, uneven nodes, a node of one rank beside bigger ones,
 * one rank per node, five nodes, ranks of a node not contiguous, one node. Checked
 * against the independent reference with a segment small enough to force many
 * chunks and reuse of every stage; also forced leader counts, a split
 * communicator, several non-blocking calls in flight, and a rank that never comes.
 */
#include <criterion/criterion.h>

#include "coll_call.h"
#include "coll_reference.h"
#include "comm.h"
#include "test_reduced.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*vrank_fn)(fold_context_t *ctx, int rank, int size, void *arg);

typedef struct vworld {
    int         size;
    const int  *node_of;     /* virtual node of each rank */
    void       *fabric;
    void       *group;
    vrank_fn    fn;
    void       *arg;
} vworld_t;

typedef struct vthread {
    vworld_t *world;
    int       rank;
    int       result;
} vthread_t;

static void *vrank_main(void *p)
{
    vthread_t *t = p;
    fold_bootstrap_t bs;
    fold_context_t *ctx;
    t->result = -1;
    if (fold_bootstrap_mem_init(&bs, t->world->group, t->rank) != FOLD_OK) {
        return NULL;
    }
    snprintf(bs.node_name, sizeof(bs.node_name), "vnode-%d", t->world->node_of[t->rank]);
    if (fold_context_create(&bs, "loopback", t->world->fabric, &ctx) != FOLD_OK) {
        return NULL;
    }
    t->result = t->world->fn(ctx, t->rank, t->world->size, t->world->arg);
    if (fold_finalize(ctx) != FOLD_OK) {
        t->result = -1;
    }
    return NULL;
}

static int vrun(int size, const int *node_of, vrank_fn fn, void *arg)
{
    vworld_t w = {size, node_of, fold_loopback_fabric_create(size),
                  fold_bootstrap_mem_group_create(size), fn, arg};
    vthread_t th[64];
    pthread_t tid[64];
    cr_assert(size <= 64 && w.fabric != NULL && w.group != NULL);
    fold_loopback_fabric_set_rndv(w.fabric, 4096);
    for (int r = 0; r < size; r++) {
        th[r] = (vthread_t){&w, r, -1};
        cr_assert_eq(pthread_create(&tid[r], NULL, vrank_main, &th[r]), 0);
    }
    int failed = 0;
    for (int r = 0; r < size; r++) {
        pthread_join(tid[r], NULL);
        failed |= th[r].result != 0;
    }
    fold_loopback_fabric_destroy(w.fabric);
    fold_bootstrap_mem_group_destroy(w.group);
    return failed ? -1 : 0;
}

static void vbarrier(fold_context_t *ctx)
{
    char in = 0, out[64];
    ctx->bs.allgather(&ctx->bs, &in, out, 1);
}

/* ---- the correctness matrix ---------------------------------------------------- */

typedef struct dcase {
    const char  *alg;
    fold_coll_t  coll;
    size_t       count;
    int          root;
    int          inplace;
    const char  *leaders;
    fold_dtype_t dt;
    fold_op_t    op;
} dcase_t;

typedef struct dmatrix {
    dcase_t        *cases;
    size_t          ncases;
    const char     *shm_size;
    pthread_mutex_t lock;
    int             failures;
    char            first[400];
} dmatrix_t;

static const struct { fold_dtype_t dt; fold_op_t op; } combos[] = {
    {FOLD_INT32, FOLD_OP_SUM},  {FOLD_FLOAT64, FOLD_OP_MAX}, {FOLD_UINT8, FOLD_OP_BXOR},
    {FOLD_FLOAT32, FOLD_OP_SUM}, {FOLD_INT64, FOLD_OP_PROD}, {FOLD_FLOAT16, FOLD_OP_SUM},
    {FOLD_UINT16, FOLD_OP_MIN},
};
#define NCOMBOS (sizeof(combos) / sizeof(combos[0]))

static void build_cases(dmatrix_t *m, int size)
{
    /* The registry's node-aware algorithms that span nodes (single copy does not). */
    const char *algs[16];
    int nalgs = 0;
    for (int a = 0; fold_alg_all[a] != NULL && nalgs < 16; a++) {
        unsigned f = fold_alg_all[a]->flags;
        if ((f & FOLD_ALG_NODE_AWARE) && !(f & FOLD_ALG_SINGLE_COPY)) {
            algs[nalgs++] = fold_alg_all[a]->name;
        }
    }
    cr_assert_geq(nalgs, 3);
    static const size_t counts[] = {1, 7, 1000, 65537, 300003};
    static const char *const leaders[] = {"auto", "1", "2", "3"};
    /* FOLD_TEST_REDUCED skips the largest. */
    size_t ncounts = sizeof(counts) / sizeof(counts[0]) - fold_test_reduced();
    size_t cap = 4096, rot = 0;
    m->cases  = malloc(cap * sizeof(*m->cases));
    m->ncases = 0;
    for (int a = 0; a < nalgs; a++) {
        for (int coll = FOLD_COLL_ALLREDUCE; coll <= FOLD_COLL_REDUCE; coll++) {
            for (size_t k = 0; k < ncounts; k++) {
                int large = counts[k] > 1000;
                int roots[3] = {0, size - 1, size / 2}, nroots = coll == FOLD_COLL_REDUCE
                                                                ? (large ? 2 : 3) : 1;
                for (int ri = 0; ri < nroots; ri++) {
                    for (int inplace = 0; inplace <= 1; inplace++) {
                        size_t c = rot++;
                        cr_assert_lt(m->ncases, cap);
                        m->cases[m->ncases++] = (dcase_t){
                            algs[a], (fold_coll_t)coll, counts[k], roots[ri], inplace,
                            leaders[c % 4], combos[c % NCOMBOS].dt, combos[c % NCOMBOS].op};
                    }
                }
            }
        }
    }
}

static int run_dcase(fold_context_t *ctx, int rank, int size, dmatrix_t *m, const dcase_t *c,
                     char *expected)
{
    size_t es = fold_dtype_size(c->dt), n = c->count;
    int has_out = c->coll == FOLD_COLL_ALLREDUCE || rank == c->root;
    char *in = malloc(n * es), *keep = malloc(n * es), *out = malloc(n * es);
    ref_fill_input(c->dt, c->op, rank, n, in);
    memcpy(keep, in, n * es);
    memset(out, 0x5a, n * es);
    for (size_t i = 0; has_out && i < n; i++) {
        ref_expected(c->dt, c->op, size, i, expected);
    }
    const char *var = c->coll == FOLD_COLL_ALLREDUCE ? "ALLREDUCE_ALG" : "REDUCE_ALG";
    int st = fold_config_set(ctx, var, c->alg);
    if (st == FOLD_OK) {
        st = fold_config_set(ctx, "DPML_LEADERS", c->leaders);
    }
    coll_call_t call = {.coll = c->coll, .dt = c->dt, .op = c->op, .root = c->root,
                        .inplace = c->inplace, .count = n, .input = in, .pristine = keep,
                        .recv = out};
    if (st == FOLD_OK) {
        st = coll_call_run(&call, rank, fold_comm_world(ctx));
    }
    char detail[120];
    coll_call_check(&call, rank, st, expected, detail, sizeof(detail));
    if (detail[0]) {
        pthread_mutex_lock(&m->lock);
        if (m->failures++ == 0) {
            snprintf(m->first, sizeof(m->first), "%s %s p=%d rank=%d count=%zu root=%d "
                     "inplace=%d leaders=%s %s/%s: %s", fold_coll_name(c->coll), c->alg, size,
                     rank, n, c->root, c->inplace, c->leaders, fold_dtype_name(c->dt),
                     fold_op_name(c->op), detail);
        }
        pthread_mutex_unlock(&m->lock);
    }
    free(in);
    free(keep);
    free(out);
    return detail[0] != 0;
}

static int matrix_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    dmatrix_t *m = arg;
    int failed = 0;
    char *expected = malloc(300003 * 8);
    fold_config_set(ctx, "SHM_SIZE", m->shm_size);
    for (size_t k = 0; k < m->ncases; k++) {
        failed |= run_dcase(ctx, rank, size, m, &m->cases[k], expected);
        vbarrier(ctx);   /* the root's expected[] is its own: no sharing needed */
    }
    free(expected);
    return failed;
}

static void run_topology(int size, const int *node_of, const char *shm_size)
{
    dmatrix_t m;
    memset(&m, 0, sizeof(m));
    pthread_mutex_init(&m.lock, NULL);
    setenv("FOLD_TIMEOUT", "60", 0);
    m.shm_size = shm_size;
    build_cases(&m, size);
    int result = vrun(size, node_of, matrix_rank, &m);
    cr_expect_eq(m.failures, 0, "%d failures; first: %s", m.failures, m.first);
    cr_expect_eq(result, m.failures ? -1 : 0);
    free(m.cases);
    pthread_mutex_destroy(&m.lock);
}

Test(shm_dpml, two_nodes_of_two)
{
    static const int nodes[] = {0, 0, 1, 1};
    run_topology(4, nodes, "64k");
}

Test(shm_dpml, uneven_nodes)
{
    static const int nodes[] = {0, 0, 0, 1, 2, 2};
    run_topology(6, nodes, "64k");
}

Test(shm_dpml, one_rank_per_node)
{
    static const int nodes[] = {0, 1, 2};
    run_topology(3, nodes, "64k");
}

Test(shm_dpml, five_nodes_interleaved)
{
    /* ranks of a node are not contiguous; node 4 has one rank */
    static const int nodes[] = {0, 1, 2, 3, 0, 1, 2, 3, 4};
    run_topology(9, nodes, "64k");
}

Test(shm_dpml, one_node_small_segment)
{
    static const int nodes[] = {0, 0, 0, 0, 0};
    run_topology(5, nodes, "16k");
}

Test(shm_dpml, one_node_default_segment)
{
    static const int nodes[] = {0, 0, 0};
    run_topology(3, nodes, "4M");
}

/* ---- split communicators, non-blocking calls in flight ------------------------ */

static int split_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)arg;
    fold_comm_h w = fold_comm_world(ctx), sub;
    int bad = fold_comm_split(w, rank % 2, rank, &sub) != FOLD_OK;
    int sub_size;
    fold_comm_size(sub, &sub_size);
    fold_config_set(ctx, "ALLREDUCE_ALG", "dpml_pipelined");
    fold_config_set(ctx, "SHM_SIZE", "32k");

    /* Three non-blocking calls on each communicator, waited for in reverse. */
    enum { N = 20000, CALLS = 3 };
    int32_t *in = malloc(sizeof(int32_t) * N), *out[2][CALLS];
    fold_request_h req[2][CALLS];
    for (int i = 0; i < N; i++) {
        in[i] = rank + i;
    }
    fold_comm_h comms[2] = {w, sub};
    for (int k = 0; k < CALLS; k++) {
        for (int c = 0; c < 2; c++) {
            out[c][k] = malloc(sizeof(int32_t) * N);
            bad |= fold_iallreduce(in, out[c][k], N, FOLD_INT32, FOLD_OP_SUM, comms[c],
                                   &req[c][k]) != FOLD_OK;
        }
    }
    for (int k = CALLS - 1; k >= 0; k--) {
        for (int c = 1; c >= 0; c--) {
            bad |= fold_wait(req[c][k]) != FOLD_OK || fold_request_free(req[c][k]) != FOLD_OK;
            int64_t ranks_sum = 0, members = c == 0 ? size : sub_size;
            for (int r = rank % 2; r < size; r += 2) {
                ranks_sum += r;
            }
            if (c == 0) {
                ranks_sum = (int64_t)size * (size - 1) / 2;
            }
            for (int i = 0; i < N && !bad; i++) {
                bad |= out[c][k][i] != (int32_t)(ranks_sum + members * i);
            }
            free(out[c][k]);
        }
    }
    free(in);
    bad |= fold_comm_free(&sub) != FOLD_OK;
    return bad;
}

Test(shm_dpml, split_and_nonblocking_in_flight)
{
    static const int nodes[] = {0, 0, 0, 0, 1, 1, 1};
    cr_expect_eq(vrun(7, nodes, split_rank, NULL), 0);
}

/* ---- a rank that never comes -------------------------------------------------- */

static int absent_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)size;
    (void)arg;
    fold_comm_h w = fold_comm_world(ctx);
    float a[256], b[256];
    for (int i = 0; i < 256; i++) {
        a[i] = (float)rank;
    }
    fold_config_set(ctx, "ALLREDUCE_ALG", "dpml");
    int bad = fold_allreduce(a, b, 256, FOLD_FLOAT32, FOLD_OP_SUM, w) != FOLD_OK;
    fold_config_set(ctx, "TIMEOUT", "0.5");
    if (rank != 2) {
        /* rank 2 skips this call: the others must time out, not hang */
        int st = fold_allreduce(a, b, 256, FOLD_FLOAT32, FOLD_OP_SUM, w);
        bad |= st != FOLD_ERR_TIMEOUT;
        /* and then refuse the segment whose flags are out of step */
        st = fold_allreduce(a, b, 256, FOLD_FLOAT32, FOLD_OP_SUM, w);
        bad |= st != FOLD_ERR_PEER_FAILED;
    }
    vbarrier(ctx);
    return bad;
}

Test(shm_dpml, absent_rank_times_out)
{
    static const int nodes[] = {0, 0, 0};
    cr_expect_eq(vrun(3, nodes, absent_rank, NULL), 0);
}
