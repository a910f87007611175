/*
 * Multi-process checks of what is particular to the libfabric (ofi) transport, over
 * the PMIx bootstrap; mp_transport covers the transport contract itself:
 *
 *     mpirun -x FOLD_OFI_PROVIDER=shm -n 3 ./mp_ofi
 *
 * - an unknown provider fails to open with FOLD_ERR_NOT_FOUND;
 * - message sizes on both sides of the inject, eager and rendezvous limits of the
 *   providers here (tcp;ofi_rxm: 64 B inject, 16 KiB eager, 128 KiB SAR; shm: 4 KiB),
 *   received expected and unexpected, to the right neighbour and to oneself;
 * - thousands of same-tag sends in flight at once (beyond the providers' queue
 *   sizes, so -FI_EAGAIN and the transport's own queue are exercised) still match
 *   receives in posting order;
 * - truncation over 4 KiB (which libfabric 1.17 providers handle badly themselves)
 *   is reported and leaves the connection usable;
 * - close completes a receive nobody matched as canceled.
 * Exits 0 when every check passes.
 *
 * With --bench it measures instead, between ranks 0 and 1 of a 2-rank job, over the
 * transport FOLD_TRANSPORT names (ofi when unset, so ucp can be compared): tag
 * ping-pong latency (half the round trip) and streaming bandwidth (a window of 32
 * sends, one 1-byte acknowledgement per window), 8 B to 4 MiB:
 *
 *     mpirun -n 2 -x FOLD_TRANSPORT=ofi -x FOLD_OFI_PROVIDER=shm ./mp_ofi --bench
 */
#include "mp_tl_env.h"
#include "log.h"
#include "util/clock.h"

#include <fold/fold_status.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Out of the barrier's range (MP_TL_TAG_BARRIER). */
#define TAG_SIZES    UINT64_C(0x2000000)
#define TAG_FLOOD    UINT64_C(0x3000000)
#define TAG_TRUNCATE UINT64_C(0x4000000)
#define TAG_CLOSE    UINT64_C(0x5000000)

/* The open error is the point of this check; keep its log line out of the output. */
static void test_unknown_provider(const mp_tl_env_t *env)
{
    const fold_tl_ops_t *ofi = fold_tl_find("ofi");
    int saved_level = fold_log_level;
    fold_tl_params_t params = {.rank = env->rank, .size = env->size,
                               .ofi_provider = "no_such_provider"};
    fold_tl_t *tl = NULL;

    MP_TL_CHECK(ofi != NULL, "no transport 'ofi' in this build");
    fold_log_level = -1;
    int status = ofi->open(&params, &tl);
    fold_log_level = saved_level;
    MP_TL_CHECK(status == FOLD_ERR_NOT_FOUND && tl == NULL,
                "an unknown provider opened with %s, expected %s", fold_status_string(status),
                fold_status_string(FOLD_ERR_NOT_FOUND));
}

/* Each size to the right neighbour and to oneself, once with the receives posted
 * first and once arriving unexpected. */
static void test_sizes(mp_tl_env_t *env)
{
    static const size_t sizes[] = {0,     1,     63,    64,    65,     4095,    4096,
                                   4097,  16383, 16384, 16385, 131073, 1048577};
    enum { NSIZES = sizeof(sizes) / sizeof(sizes[0]) };
    int targets[2] = {env->right, env->rank};
    int sources[2] = {env->left, env->rank};

    for (int expected = 1; expected >= 0; expected--) {
        for (size_t k = 0; k < NSIZES; k++) {
            size_t len = sizes[k];
            uint64_t tag = TAG_SIZES + (uint64_t)(expected * NSIZES + k);
            char *sbuf = malloc(len + 1), *rbuf[2] = {calloc(1, len + 1), calloc(1, len + 1)};
            MP_TL_CHECK(sbuf && rbuf[0] && rbuf[1], "out of memory");
            mp_tl_fill_pattern(sbuf, len, env->rank, tag);
            fold_tl_req_t reqs[4];
            if (expected) {
                for (int t = 0; t < 2; t++) {
                    mp_tl_check_ok(env->ops->tag_recv(env->tl, sources[t], tag, rbuf[t], len,
                                                      &reqs[t]), "tag_recv");
                }
            }
            for (int t = 0; t < 2; t++) {
                mp_tl_check_ok(env->ops->tag_send(env->tl, targets[t], tag, sbuf, len,
                                                  &reqs[2 + t]), "tag_send");
            }
            if (!expected) {
                mp_tl_progress_for(env, 0.002);
                for (int t = 0; t < 2; t++) {
                    mp_tl_check_ok(env->ops->tag_recv(env->tl, sources[t], tag, rbuf[t], len,
                                                      &reqs[t]), "tag_recv");
                }
            }
            mp_tl_wait_all(env, reqs, 4, "size sweep");
            for (int t = 0; t < 2; t++) {
                char what[64];
                snprintf(what, sizeof(what), "%zu bytes, %s, from rank %d", len,
                         expected ? "expected" : "unexpected", sources[t]);
                mp_tl_expect_status(&reqs[t], FOLD_OK, what);
                mp_tl_expect_status(&reqs[2 + t], FOLD_OK, what);
                MP_TL_CHECK(reqs[t].length == len, "%s: received %zu bytes", what, reqs[t].length);
                mp_tl_check_pattern(rbuf[t], len, sources[t], tag, what);
            }
            free(rbuf[1]);
            free(rbuf[0]);
            free(sbuf);
        }
    }
    mp_tl_barrier(env);
}

/* N same-tag messages of varying size, all sent before any receive is posted; the
 * receives must get them in sending order. */
static void test_flood(mp_tl_env_t *env)
{
    enum { N = 3000, MAXLEN = 5000 };
    char *sbufs = malloc((size_t)N * MAXLEN), *rbufs = calloc(N, MAXLEN);
    fold_tl_req_t *sreqs = calloc(N, sizeof(*sreqs)), *rreqs = calloc(N, sizeof(*rreqs));
    MP_TL_CHECK(sbufs && rbufs && sreqs && rreqs, "out of memory");

    for (int i = 0; i < N; i++) {
        size_t len = 4 + (size_t)i * 7 % (MAXLEN - 4);
        char *p = sbufs + (size_t)i * MAXLEN;
        mp_tl_fill_pattern(p, len, env->rank, TAG_FLOOD);
        memcpy(p, &i, sizeof(i));
        mp_tl_check_ok(env->ops->tag_send(env->tl, env->right, TAG_FLOOD, p, len, &sreqs[i]),
                       "flood send");
    }
    for (int i = 0; i < N; i++) {
        mp_tl_check_ok(env->ops->tag_recv(env->tl, env->left, TAG_FLOOD, rbufs + (size_t)i * MAXLEN,
                                          MAXLEN, &rreqs[i]), "flood recv");
    }
    mp_tl_wait_all(env, sreqs, N, "flood sends");
    mp_tl_wait_all(env, rreqs, N, "flood receives");
    for (int i = 0; i < N; i++) {
        int seq;
        mp_tl_expect_status(&sreqs[i], FOLD_OK, "flood send");
        mp_tl_expect_status(&rreqs[i], FOLD_OK, "flood receive");
        memcpy(&seq, rbufs + (size_t)i * MAXLEN, sizeof(seq));
        MP_TL_CHECK(seq == i, "same-tag receive %d got message %d: matching order lost", i, seq);
        MP_TL_CHECK(rreqs[i].length == 4 + (size_t)i * 7 % (MAXLEN - 4),
                    "same-tag receive %d: %zu bytes", i, rreqs[i].length);
    }
    free(rreqs);
    free(sreqs);
    free(rbufs);
    free(sbufs);
    mp_tl_barrier(env);
}

/* Over-long messages past the providers' eager limits, each followed by a normal
 * exchange on the same pair. */
static void test_truncation(mp_tl_env_t *env)
{
    static const size_t send_lens[] = {5000, 20000, 200000};
    static const size_t recv_lens[] = {4000, 10000, 100000};

    for (int k = 0; k < 3; k++) {
        uint64_t tag = TAG_TRUNCATE + (uint64_t)(2 * k);
        mp_tl_check_truncation(env, tag, send_lens[k], recv_lens[k]);

        char *sbuf = malloc(recv_lens[k]), *rbuf = calloc(1, recv_lens[k]);
        MP_TL_CHECK(sbuf && rbuf, "out of memory");
        fold_tl_req_t reqs[2];
        mp_tl_fill_pattern(sbuf, recv_lens[k], env->rank, tag + 1);
        mp_tl_check_ok(env->ops->tag_recv(env->tl, env->left, tag + 1, rbuf, recv_lens[k],
                                          &reqs[0]), "tag_recv");
        mp_tl_check_ok(env->ops->tag_send(env->tl, env->right, tag + 1, sbuf, recv_lens[k],
                                          &reqs[1]), "tag_send");
        mp_tl_wait_all(env, reqs, 2, "exchange after a truncation");
        mp_tl_expect_status(&reqs[0], FOLD_OK, "receive after a truncation");
        mp_tl_expect_status(&reqs[1], FOLD_OK, "send after a truncation");
        mp_tl_check_pattern(rbuf, recv_lens[k], env->left, tag + 1, "receive after a truncation");
        free(rbuf);
        free(sbuf);
    }
    mp_tl_barrier(env);
}

#define TAG_BENCH UINT64_C(0x6000000)

/* Median of n doubles (sorts them). */
static double median(double *v, int n)
{
    for (int i = 1; i < n; i++) {
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    }
    return v[n / 2];
}

static void send_recv(mp_tl_env_t *env, int send, void *buf, size_t len, uint64_t tag)
{
    fold_tl_req_t req;
    int peer = 1 - env->rank;
    mp_tl_check_ok(send ? env->ops->tag_send(env->tl, peer, tag, buf, len, &req)
                        : env->ops->tag_recv(env->tl, peer, tag, buf, len, &req), "bench post");
    mp_tl_wait_all(env, &req, 1, "bench message");
    mp_tl_expect_status(&req, FOLD_OK, "bench message");
}

static void bench(mp_tl_env_t *env)
{
    enum { REPEATS = 7, WINDOW = 32 };
    const size_t max_len = 4u << 20;
    char *buf = calloc(1, max_len);
    fold_tl_req_t reqs[WINDOW];
    MP_TL_CHECK(buf != NULL, "out of memory");
    MP_TL_CHECK(env->size == 2, "--bench runs on exactly 2 ranks");
    if (env->rank == 0) {
        printf("# transport %s%s%s\n# %10s %12s %12s\n", env->ops->name,
               env->config.ofi_provider[0] ? ", provider " : "", env->config.ofi_provider, "bytes",
               "latency_us", "bw_MB/s");
    }
    for (size_t len = 8; len <= max_len; len *= 2) {
        int iters = len <= 65536 ? 2000 : (int)(64 * 65536 / len * 8) + 20;
        double lat[REPEATS], bw[REPEATS];
        for (int r = 0; r < REPEATS; r++) {
            mp_tl_barrier(env);
            double t0 = fold_util_time_now();
            for (int i = 0; i < iters / REPEATS + 1; i++) {
                send_recv(env, env->rank == 0, buf, len, TAG_BENCH);
                send_recv(env, env->rank != 0, buf, len, TAG_BENCH);
            }
            lat[r] = (fold_util_time_now() - t0) / (2.0 * (iters / REPEATS + 1)) * 1e6;

            int windows = iters / REPEATS / WINDOW + 2;
            mp_tl_barrier(env);
            t0 = fold_util_time_now();
            for (int w = 0; w < windows; w++) {
                for (int i = 0; i < WINDOW; i++) {
                    int posted = env->rank == 0
                        ? env->ops->tag_send(env->tl, 1, TAG_BENCH + 1, buf, len, &reqs[i])
                        : env->ops->tag_recv(env->tl, 0, TAG_BENCH + 1, buf, len, &reqs[i]);
                    mp_tl_check_ok(posted, "bench window");
                }
                mp_tl_wait_all(env, reqs, WINDOW, "bench window");
                send_recv(env, env->rank != 0, buf, 1, TAG_BENCH + 2);
            }
            bw[r] = (double)len * WINDOW * windows / (fold_util_time_now() - t0) / 1e6;
        }
        if (env->rank == 0) {
            printf("  %10zu %12.2f %12.1f\n", len, median(lat, REPEATS), median(bw, REPEATS));
            fflush(stdout);
        }
    }
    free(buf);
}

int main(int argc, char **argv)
{
    mp_tl_env_t env;
    int bench_mode = argc > 1 && strcmp(argv[1], "--bench") == 0;

    mp_tl_env_init(&env, "mp_ofi");
    const char *provider = env.config.ofi_provider;
    if (bench_mode) {
        const char *transport = getenv("FOLD_TRANSPORT");
        mp_tl_env_open(&env, transport != NULL ? transport : "ofi");
        bench(&env);
        mp_tl_env_close(&env);
        mp_tl_bs_barrier(&env);
        mp_tl_env_finalize(&env);
        return 0;
    }

    test_unknown_provider(&env);
    mp_tl_env_open(&env, "ofi");

    test_sizes(&env);
    test_flood(&env);
    test_truncation(&env);

    /* A receive nobody will match: close completes it. */
    char byte;
    fold_tl_req_t pending;
    mp_tl_check_ok(env.ops->tag_recv(env.tl, env.left, TAG_CLOSE, &byte, 1, &pending),
                         "tag_recv");
    mp_tl_env_close(&env);
    mp_tl_expect_status(&pending, FOLD_ERR_CANCELED, "receive pending at close");

    mp_tl_bs_barrier(&env);
    if (env.rank == 0) {
        printf("mp_ofi: all checks passed over %s on %d rank(s)\n",
               provider[0] ? provider : "the default provider", env.size);
    }
    mp_tl_env_finalize(&env);
    return 0;
}
