/*
 * Multi-process test of a network transport over the PMIx bootstrap:
 *
 *     mpirun -n 2 ./mp_transport        (any size; --oversubscribe beyond the cores)
 *
 * FOLD_TRANSPORT picks the transport (ucp when unset), e.g.
 * mpirun -x FOLD_TRANSPORT=ofi -x FOLD_OFI_PROVIDER=shm -n 3 ./mp_transport.
 * Every rank runs every check; exits 0 when all pass, otherwise prints what failed
 * and exits 1 (mpirun then stops the other ranks). Works under any UCX_TLS, e.g.
 * UCX_TLS=tcp,self.
 */
#include "mp_tl_env.h"
#include "log.h"

#include <fold/fold_status.h>
#include <stdio.h>
#include <stdlib.h>

/* Tag bases, one range per check so that no check can match another's message (nor
 * the barrier's, MP_TL_TAG_BARRIER). */
#define TAG_ORDER      UINT64_C(0x200000)
#define TAG_UNEXPECTED UINT64_C(0x300000)
#define TAG_MANY       UINT64_C(0x400000)
#define TAG_LARGE      UINT64_C(0x500000)
#define TAG_TRUNCATE   UINT64_C(0x600000)
#define TAG_CANCEL     UINT64_C(0x700000)

static void test_bootstrap_allgather(mp_tl_env_t *env)
{
    static const size_t lens[] = {1, 13, 4099};

    for (int call = 0; call < 3; call++) {
        size_t len = lens[call];
        unsigned char *in = malloc(len);
        unsigned char *out = malloc(len * (size_t)env->size);
        MP_TL_CHECK(in != NULL && out != NULL, "out of memory");
        mp_tl_fill_pattern(in, len, env->rank, (uint64_t)call);
        mp_tl_check_ok(env->bs.allgather(&env->bs, in, out, len), "bootstrap allgather");
        for (int r = 0; r < env->size; r++) {
            mp_tl_check_pattern(out + (size_t)r * len, len, r, (uint64_t)call,
                                "bootstrap allgather");
        }
        free(out);
        free(in);
    }
}

/* The argument checks log an error by design; keep the test output clean. */
static void test_invalid_args(mp_tl_env_t *env)
{
    fold_tl_req_t req = {.status = 1234, .handle = &req};
    char byte = 0;
    int saved_level = fold_log_level;

    fold_log_level = -1;
    int over_wide = env->ops->tag_send(env->tl, env->right, UINT64_C(1) << FOLD_TL_TAG_BITS,
                                       &byte, 1, &req);
    int bad_peer = env->ops->tag_recv(env->tl, env->size, 0, &byte, 1, &req);
    fold_log_level = saved_level;

    MP_TL_CHECK(over_wide == FOLD_ERR_INVALID_ARG, "tag wider than %d bits accepted (%s)",
                FOLD_TL_TAG_BITS, fold_status_string(over_wide));
    MP_TL_CHECK(bad_peer == FOLD_ERR_INVALID_ARG, "peer out of range accepted (%s)",
                fold_status_string(bad_peer));
    MP_TL_CHECK(req.status == 1234 && req.handle == &req, "a failed call touched its request");
}

/* Every rank sends four messages of different sizes and tags to every rank
 * (itself included); receives are posted in reverse tag and peer order, once
 * before the sends and once after, and must each match exactly (peer, tag). */
static void test_tag_matching(mp_tl_env_t *env, int post_recvs_first, uint64_t base)
{
    enum { NTAGS = 4 };
    static const size_t sizes[NTAGS] = {8, 100, 1000, 6000};
    int n = env->size * NTAGS;
    char **sbufs = calloc((size_t)n, sizeof(char *));
    char **rbufs = calloc((size_t)n, sizeof(char *));
    fold_tl_req_t *sreqs = calloc((size_t)n, sizeof(fold_tl_req_t));
    fold_tl_req_t *rreqs = calloc((size_t)n, sizeof(fold_tl_req_t));
    MP_TL_CHECK(sbufs && rbufs && sreqs && rreqs, "out of memory");

    for (int p = 0; p < env->size; p++) {
        for (int t = 0; t < NTAGS; t++) {
            int i = p * NTAGS + t;
            sbufs[i] = malloc(sizes[t]);
            rbufs[i] = calloc(1, sizes[t]);
            MP_TL_CHECK(sbufs[i] && rbufs[i], "out of memory");
            mp_tl_fill_pattern(sbufs[i], sizes[t], env->rank, base + (uint64_t)t);
        }
    }

    for (int pass = 0; pass < 2; pass++) {
        if (pass == (post_recvs_first ? 0 : 1)) {
            for (int p = env->size - 1; p >= 0; p--) {
                for (int t = NTAGS - 1; t >= 0; t--) {
                    int i = p * NTAGS + t;
                    mp_tl_check_ok(env->ops->tag_recv(env->tl, p, base + (uint64_t)t, rbufs[i],
                                                      sizes[t], &rreqs[i]), "tag_recv");
                }
            }
        } else {
            for (int p = 0; p < env->size; p++) {
                for (int t = 0; t < NTAGS; t++) {
                    int i = p * NTAGS + t;
                    mp_tl_check_ok(env->ops->tag_send(env->tl, p, base + (uint64_t)t, sbufs[i],
                                                      sizes[t], &sreqs[i]), "tag_send");
                }
            }
            if (!post_recvs_first) {
                mp_tl_progress_for(env, 0.01);
            }
        }
    }

    mp_tl_wait_all(env, sreqs, n, "tag matching sends");
    mp_tl_wait_all(env, rreqs, n, "tag matching receives");
    for (int p = 0; p < env->size; p++) {
        for (int t = 0; t < NTAGS; t++) {
            int i = p * NTAGS + t;
            mp_tl_expect_status(&sreqs[i], FOLD_OK, "tag matching send");
            mp_tl_expect_status(&rreqs[i], FOLD_OK, "tag matching receive");
            MP_TL_CHECK(rreqs[i].length == sizes[t],
                        "receive from %d tag %d: length %zu, expected %zu", p, t,
                        rreqs[i].length, sizes[t]);
            mp_tl_check_pattern(rbufs[i], sizes[t], p, base + (uint64_t)t, "tag matching");
            free(sbufs[i]);
            free(rbufs[i]);
        }
    }
    free(rreqs);
    free(sreqs);
    free(rbufs);
    free(sbufs);
}

/* The send completes (eager) before the receive is even posted. */
static void test_unexpected(mp_tl_env_t *env)
{
    static const size_t sizes[] = {8, 1024};

    for (int k = 0; k < 2; k++) {
        uint64_t tag = TAG_UNEXPECTED + (uint64_t)k;
        size_t len = sizes[k];
        char *sbuf = malloc(len), *rbuf = calloc(1, len);
        MP_TL_CHECK(sbuf && rbuf, "out of memory");
        mp_tl_fill_pattern(sbuf, len, env->rank, tag);

        fold_tl_req_t sreq, rreq;
        mp_tl_check_ok(env->ops->tag_send(env->tl, env->right, tag, sbuf, len, &sreq), "tag_send");
        mp_tl_wait_all(env, &sreq, 1, "unexpected send");
        mp_tl_expect_status(&sreq, FOLD_OK, "unexpected send");
        mp_tl_barrier(env);
        mp_tl_bs_barrier(env);
        mp_tl_progress_for(env, 0.005);

        mp_tl_check_ok(env->ops->tag_recv(env->tl, env->left, tag, rbuf, len, &rreq), "tag_recv");
        mp_tl_wait_all(env, &rreq, 1, "unexpected receive");
        mp_tl_expect_status(&rreq, FOLD_OK, "unexpected receive");
        MP_TL_CHECK(rreq.length == len, "unexpected receive length %zu, expected %zu",
                    rreq.length, len);
        mp_tl_check_pattern(rbuf, len, env->left, tag, "unexpected receive");
        free(rbuf);
        free(sbuf);
    }

    /* A rendezvous message whose announcement waits unexpected for the receive. */
    uint64_t tag = TAG_UNEXPECTED + 2;
    size_t len = 256 * 1024;
    char *sbuf = malloc(len), *rbuf = calloc(1, len);
    MP_TL_CHECK(sbuf && rbuf, "out of memory");
    mp_tl_fill_pattern(sbuf, len, env->rank, tag);
    fold_tl_req_t reqs[2];
    mp_tl_check_ok(env->ops->tag_send(env->tl, env->right, tag, sbuf, len, &reqs[0]), "tag_send");
    mp_tl_bs_barrier(env);
    mp_tl_progress_for(env, 0.005);
    mp_tl_check_ok(env->ops->tag_recv(env->tl, env->left, tag, rbuf, len, &reqs[1]), "tag_recv");
    mp_tl_wait_all(env, reqs, 2, "unexpected rendezvous");
    mp_tl_expect_status(&reqs[0], FOLD_OK, "unexpected rendezvous send");
    mp_tl_expect_status(&reqs[1], FOLD_OK, "unexpected rendezvous receive");
    mp_tl_check_pattern(rbuf, len, env->left, tag, "unexpected rendezvous");
    free(rbuf);
    free(sbuf);
}

static void test_many_outstanding(mp_tl_env_t *env)
{
    enum { N = 256, MAXLEN = 64 };
    static char sbufs[N][MAXLEN], rbufs[N][MAXLEN];
    static fold_tl_req_t sreqs[N], rreqs[N];

    for (int i = 0; i < N; i++) {
        mp_tl_fill_pattern(sbufs[i], 1 + i % MAXLEN, env->rank, TAG_MANY + (uint64_t)i);
        mp_tl_check_ok(env->ops->tag_recv(env->tl, env->left, TAG_MANY + (uint64_t)i, rbufs[i],
                                          MAXLEN, &rreqs[i]), "tag_recv");
    }
    for (int i = 0; i < N; i++) {
        mp_tl_check_ok(env->ops->tag_send(env->tl, env->right, TAG_MANY + (uint64_t)i, sbufs[i],
                                          1 + i % MAXLEN, &sreqs[i]), "tag_send");
    }
    mp_tl_wait_all(env, sreqs, N, "256 sends");
    mp_tl_wait_all(env, rreqs, N, "256 receives");
    for (int i = 0; i < N; i++) {
        mp_tl_expect_status(&sreqs[i], FOLD_OK, "one of 256 sends");
        mp_tl_expect_status(&rreqs[i], FOLD_OK, "one of 256 receives");
        MP_TL_CHECK(rreqs[i].length == (size_t)(1 + i % MAXLEN), "receive %d length %zu", i,
                    rreqs[i].length);
        mp_tl_check_pattern(rbufs[i], rreqs[i].length, env->left, TAG_MANY + (uint64_t)i,
                            "256 outstanding");
    }
}

static void test_large(mp_tl_env_t *env)
{
    size_t len = 16u << 20;
    uint32_t *sbuf = malloc(len), *rbuf = calloc(1, len);
    MP_TL_CHECK(sbuf && rbuf, "out of memory");
    for (size_t i = 0; i < len / 4; i++) {
        sbuf[i] = (uint32_t)env->rank * 0x9E3779B9u + (uint32_t)i;
    }

    fold_tl_req_t reqs[2];
    mp_tl_check_ok(env->ops->tag_recv(env->tl, env->left, TAG_LARGE, rbuf, len, &reqs[0]),
                   "tag_recv");
    mp_tl_check_ok(env->ops->tag_send(env->tl, env->right, TAG_LARGE, sbuf, len, &reqs[1]),
                   "tag_send");
    mp_tl_wait_all(env, reqs, 2, "16 MiB message");
    mp_tl_expect_status(&reqs[0], FOLD_OK, "16 MiB receive");
    mp_tl_expect_status(&reqs[1], FOLD_OK, "16 MiB send");
    MP_TL_CHECK(reqs[0].length == len, "16 MiB receive length %zu", reqs[0].length);
    for (size_t i = 0; i < len / 4; i++) {
        uint32_t expected = (uint32_t)env->left * 0x9E3779B9u + (uint32_t)i;
        MP_TL_CHECK(rbuf[i] == expected, "16 MiB message: word %zu is 0x%08x, expected 0x%08x", i,
                    rbuf[i], expected);
    }
    free(rbuf);
    free(sbuf);
}

/* A receive buffer smaller than the message, for an eager and a rendezvous size. */
static void test_truncated(mp_tl_env_t *env)
{
    mp_tl_check_truncation(env, TAG_TRUNCATE, 100, 50);
    mp_tl_check_truncation(env, TAG_TRUNCATE + 1, 1u << 20, 64u << 10);
    mp_tl_barrier(env);
}

static void test_cancel(mp_tl_env_t *env)
{
    char buf[16];
    fold_tl_req_t req;
    mp_tl_check_ok(env->ops->tag_recv(env->tl, env->left, TAG_CANCEL, buf, sizeof(buf), &req),
                   "tag_recv");
    mp_tl_progress_for(env, 0.001);
    MP_TL_CHECK(req.status == FOLD_INPROGRESS, "a receive nobody sends to completed with %s",
                fold_status_string(req.status));
    env->ops->cancel(env->tl, &req);
    mp_tl_wait_all(env, &req, 1, "canceled receive");
    mp_tl_expect_status(&req, FOLD_ERR_CANCELED, "canceled receive");
}

int main(void)
{
    mp_tl_env_t env;

    mp_tl_env_init(&env, "mp_transport");
    test_bootstrap_allgather(&env);

    const char *transport = getenv("FOLD_TRANSPORT");
    mp_tl_env_open(&env, transport != NULL ? transport : "ucp");

    test_invalid_args(&env);
    test_tag_matching(&env, 1, TAG_ORDER);
    test_tag_matching(&env, 0, TAG_ORDER + 0x100);
    test_unexpected(&env);
    test_many_outstanding(&env);
    test_large(&env);
    test_truncated(&env);
    test_cancel(&env);

    mp_tl_env_close(&env);
    mp_tl_bs_barrier(&env);
    if (env.rank == 0) {
        printf("mp_transport: all checks passed over %s on %d rank(s) (node %s, job %s)\n",
               env.ops->name, env.size, env.bs.node_name, env.bs.job_id);
    }
    mp_tl_env_finalize(&env);
    return 0;
}
