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
#include "bootstrap.h"
#include "config.h"
#include "log.h"
#include "transport/transport.h"

#include <fold/fold_status.h>
#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WAIT_TIMEOUT_SEC 60.0

#define TAG_BARRIER  UINT64_C(0x1000000)
#define TAG_SIZES    UINT64_C(0x2000000)
#define TAG_FLOOD    UINT64_C(0x3000000)
#define TAG_TRUNCATE UINT64_C(0x4000000)
#define TAG_CLOSE    UINT64_C(0x5000000)

typedef struct test_env {
    fold_bootstrap_t     bs;
    const fold_tl_ops_t *ops;
    fold_tl_t           *tl;
    int                  rank, size, left, right;
    unsigned             barrier_seq;
    const char          *provider;   /* FOLD_OFI_PROVIDER, as a context reads it */
} test_env_t;

static int test_rank = -1;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "mp_ofi rank %d: FAIL: ", test_rank);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

#define CHECK(cond, ...) do { if (!(cond)) fail(__VA_ARGS__); } while (0)

static void check_ok(int status, const char *what)
{
    if (status != FOLD_OK) {
        fail("%s: %s (%d)", what, fold_status_string(status), status);
    }
}

static double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void wait_all(test_env_t *env, fold_tl_req_t *reqs, size_t n, const char *what)
{
    double deadline = now_sec() + WAIT_TIMEOUT_SEC;
    for (;;) {
        size_t done = 0;
        for (size_t i = 0; i < n; i++) {
            done += reqs[i].status != FOLD_INPROGRESS;
        }
        if (done == n) {
            return;
        }
        if (env->ops->progress(env->tl) == 0) {
            if (now_sec() > deadline) {
                fail("timed out waiting for %s (%zu of %zu complete)", what, done, n);
            }
            sched_yield();
        }
    }
}

static void progress_for(test_env_t *env, double seconds)
{
    double end = now_sec() + seconds;
    while (now_sec() < end) {
        if (env->ops->progress(env->tl) == 0) {
            sched_yield();
        }
    }
}

static void expect_status(const fold_tl_req_t *req, int expected, const char *what)
{
    if (req->status != expected) {
        fail("%s completed with %s, expected %s", what, fold_status_string(req->status),
             fold_status_string(expected));
    }
}

static void bs_barrier(test_env_t *env)
{
    char in = 0;
    char *out = malloc((size_t)env->size);
    CHECK(out != NULL, "out of memory");
    check_ok(env->bs.allgather(&env->bs, &in, out, 1), "bootstrap barrier");
    free(out);
}

/* A ring barrier over the transport: every rank keeps progressing meanwhile, which
 * a peer's operations need with manual-progress providers. */
static void tl_barrier(test_env_t *env)
{
    uint64_t tag = TAG_BARRIER + (env->barrier_seq++ % 4096);
    char token = 0, sink = 0;
    fold_tl_req_t reqs[2];
    for (int round = 0; round < 2; round++) {
        check_ok(env->ops->tag_recv(env->tl, env->left, tag, &sink, 1, &reqs[0]), "barrier recv");
        check_ok(env->ops->tag_send(env->tl, env->right, tag, &token, 1, &reqs[1]),
                 "barrier send");
        wait_all(env, reqs, 2, "transport barrier");
        expect_status(&reqs[0], FOLD_OK, "barrier recv");
    }
}

static unsigned char pattern_byte(int sender, uint64_t tag, size_t i)
{
    return (unsigned char)(sender * 131 + (int)(tag % 251) * 17 + (int)(i % 253));
}

static void fill_pattern(void *buf, size_t len, int sender, uint64_t tag)
{
    unsigned char *p = buf;
    for (size_t i = 0; i < len; i++) {
        p[i] = pattern_byte(sender, tag, i);
    }
}

static void check_pattern(const void *buf, size_t len, int sender, uint64_t tag,
                          const char *what)
{
    const unsigned char *p = buf;
    for (size_t i = 0; i < len; i++) {
        if (p[i] != pattern_byte(sender, tag, i)) {
            fail("%s: byte %zu of %zu is %u, expected %u (from rank %d, tag 0x%" PRIx64 ")",
                 what, i, len, p[i], pattern_byte(sender, tag, i), sender, tag);
        }
    }
}

static void connect_peers(test_env_t *env)
{
    const void *addr;
    size_t addr_len;
    check_ok(env->ops->address(env->tl, &addr, &addr_len), "address");

    uint64_t my_len = addr_len, *all_lens = malloc(sizeof(uint64_t) * (size_t)env->size);
    CHECK(all_lens != NULL, "out of memory");
    check_ok(env->bs.allgather(&env->bs, &my_len, all_lens, sizeof(my_len)), "length allgather");
    size_t max_len = 0;
    for (int r = 0; r < env->size; r++) {
        max_len = all_lens[r] > max_len ? all_lens[r] : max_len;
    }
    char *padded = calloc(1, max_len), *all = malloc(max_len * (size_t)env->size);
    const void **addrs = malloc(sizeof(void *) * (size_t)env->size);
    size_t *lens = malloc(sizeof(size_t) * (size_t)env->size);
    CHECK(padded && all && addrs && lens, "out of memory");
    memcpy(padded, addr, addr_len);
    check_ok(env->bs.allgather(&env->bs, padded, all, max_len), "address allgather");
    for (int r = 0; r < env->size; r++) {
        addrs[r] = all + (size_t)r * max_len;
        lens[r] = all_lens[r];
    }
    check_ok(env->ops->set_peers(env->tl, addrs, lens), "set_peers");
    free(lens);
    free(addrs);
    free(all);
    free(padded);
    free(all_lens);
}

/* The open error is the point of this check; keep its log line out of the output. */
static void test_unknown_provider(const test_env_t *env)
{
    int saved_level = fold_log_level;
    fold_tl_params_t params = {.rank = env->rank, .size = env->size,
                               .ofi_provider = "no_such_provider"};
    fold_tl_t *tl = NULL;

    fold_log_level = -1;
    int status = env->ops->open(&params, &tl);
    fold_log_level = saved_level;
    CHECK(status == FOLD_ERR_NOT_FOUND && tl == NULL,
          "an unknown provider opened with %s, expected %s", fold_status_string(status),
          fold_status_string(FOLD_ERR_NOT_FOUND));
}

/* Each size to the right neighbour and to oneself, once with the receives posted
 * first and once arriving unexpected. */
static void test_sizes(test_env_t *env)
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
            CHECK(sbuf && rbuf[0] && rbuf[1], "out of memory");
            fill_pattern(sbuf, len, env->rank, tag);
            fold_tl_req_t reqs[4];
            if (expected) {
                for (int t = 0; t < 2; t++) {
                    check_ok(env->ops->tag_recv(env->tl, sources[t], tag, rbuf[t], len,
                                                &reqs[t]), "tag_recv");
                }
            }
            for (int t = 0; t < 2; t++) {
                check_ok(env->ops->tag_send(env->tl, targets[t], tag, sbuf, len, &reqs[2 + t]),
                         "tag_send");
            }
            if (!expected) {
                progress_for(env, 0.002);
                for (int t = 0; t < 2; t++) {
                    check_ok(env->ops->tag_recv(env->tl, sources[t], tag, rbuf[t], len,
                                                &reqs[t]), "tag_recv");
                }
            }
            wait_all(env, reqs, 4, "size sweep");
            for (int t = 0; t < 2; t++) {
                char what[64];
                snprintf(what, sizeof(what), "%zu bytes, %s, from rank %d", len,
                         expected ? "expected" : "unexpected", sources[t]);
                expect_status(&reqs[t], FOLD_OK, what);
                expect_status(&reqs[2 + t], FOLD_OK, what);
                CHECK(reqs[t].length == len, "%s: received %zu bytes", what, reqs[t].length);
                check_pattern(rbuf[t], len, sources[t], tag, what);
            }
            free(rbuf[1]);
            free(rbuf[0]);
            free(sbuf);
        }
    }
    tl_barrier(env);
}

/* N same-tag messages of varying size, all sent before any receive is posted; the
 * receives must get them in sending order. */
static void test_flood(test_env_t *env)
{
    enum { N = 3000, MAXLEN = 5000 };
    char *sbufs = malloc((size_t)N * MAXLEN), *rbufs = calloc(N, MAXLEN);
    fold_tl_req_t *sreqs = calloc(N, sizeof(*sreqs)), *rreqs = calloc(N, sizeof(*rreqs));
    CHECK(sbufs && rbufs && sreqs && rreqs, "out of memory");

    for (int i = 0; i < N; i++) {
        size_t len = 4 + (size_t)i * 7 % (MAXLEN - 4);
        char *p = sbufs + (size_t)i * MAXLEN;
        fill_pattern(p, len, env->rank, TAG_FLOOD);
        memcpy(p, &i, sizeof(i));
        check_ok(env->ops->tag_send(env->tl, env->right, TAG_FLOOD, p, len, &sreqs[i]),
                 "flood send");
    }
    for (int i = 0; i < N; i++) {
        check_ok(env->ops->tag_recv(env->tl, env->left, TAG_FLOOD, rbufs + (size_t)i * MAXLEN,
                                    MAXLEN, &rreqs[i]), "flood recv");
    }
    wait_all(env, sreqs, N, "flood sends");
    wait_all(env, rreqs, N, "flood receives");
    for (int i = 0; i < N; i++) {
        int seq;
        expect_status(&sreqs[i], FOLD_OK, "flood send");
        expect_status(&rreqs[i], FOLD_OK, "flood receive");
        memcpy(&seq, rbufs + (size_t)i * MAXLEN, sizeof(seq));
        CHECK(seq == i, "same-tag receive %d got message %d: matching order lost", i, seq);
        CHECK(rreqs[i].length == 4 + (size_t)i * 7 % (MAXLEN - 4),
              "same-tag receive %d: %zu bytes", i, rreqs[i].length);
    }
    free(rreqs);
    free(sreqs);
    free(rbufs);
    free(sbufs);
    tl_barrier(env);
}

/* Over-long messages past the providers' eager limits, each followed by a normal
 * exchange on the same pair. */
static void test_truncation(test_env_t *env)
{
    static const size_t send_lens[] = {5000, 20000, 200000};
    static const size_t recv_lens[] = {4000, 10000, 100000};

    for (int k = 0; k < 3; k++) {
        uint64_t tag = TAG_TRUNCATE + (uint64_t)(2 * k);
        char *sbuf = calloc(1, send_lens[k]), *rbuf = calloc(1, send_lens[k]);
        CHECK(sbuf && rbuf, "out of memory");
        fold_tl_req_t reqs[2];
        check_ok(env->ops->tag_recv(env->tl, env->left, tag, rbuf, recv_lens[k], &reqs[0]),
                 "tag_recv");
        check_ok(env->ops->tag_send(env->tl, env->right, tag, sbuf, send_lens[k], &reqs[1]),
                 "tag_send");
        wait_all(env, reqs, 2, "truncated message");
        if (reqs[0].status != FOLD_ERR_TRUNCATED) {
            fail("%zu bytes into %zu: receive completed with %s, expected %s", send_lens[k],
                 recv_lens[k], fold_status_string(reqs[0].status),
                 fold_status_string(FOLD_ERR_TRUNCATED));
        }

        fill_pattern(sbuf, recv_lens[k], env->rank, tag + 1);
        check_ok(env->ops->tag_recv(env->tl, env->left, tag + 1, rbuf, recv_lens[k], &reqs[0]),
                 "tag_recv");
        check_ok(env->ops->tag_send(env->tl, env->right, tag + 1, sbuf, recv_lens[k], &reqs[1]),
                 "tag_send");
        wait_all(env, reqs, 2, "exchange after a truncation");
        expect_status(&reqs[0], FOLD_OK, "receive after a truncation");
        expect_status(&reqs[1], FOLD_OK, "send after a truncation");
        check_pattern(rbuf, recv_lens[k], env->left, tag + 1, "receive after a truncation");
        free(rbuf);
        free(sbuf);
    }
    tl_barrier(env);
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

static void send_recv(test_env_t *env, int send, void *buf, size_t len, uint64_t tag)
{
    fold_tl_req_t req;
    int peer = 1 - env->rank;
    check_ok(send ? env->ops->tag_send(env->tl, peer, tag, buf, len, &req)
                  : env->ops->tag_recv(env->tl, peer, tag, buf, len, &req), "bench post");
    wait_all(env, &req, 1, "bench message");
    expect_status(&req, FOLD_OK, "bench message");
}

static void bench(test_env_t *env)
{
    enum { REPEATS = 7, WINDOW = 32 };
    const size_t max_len = 4u << 20;
    char *buf = calloc(1, max_len);
    fold_tl_req_t reqs[WINDOW];
    CHECK(buf != NULL, "out of memory");
    CHECK(env->size == 2, "--bench runs on exactly 2 ranks");
    if (env->rank == 0) {
        printf("# transport %s%s%s\n# %10s %12s %12s\n", env->ops->name,
               env->provider[0] ? ", provider " : "", env->provider, "bytes",
               "latency_us", "bw_MB/s");
    }
    for (size_t len = 8; len <= max_len; len *= 2) {
        int iters = len <= 65536 ? 2000 : (int)(64 * 65536 / len * 8) + 20;
        double lat[REPEATS], bw[REPEATS];
        for (int r = 0; r < REPEATS; r++) {
            tl_barrier(env);
            double t0 = now_sec();
            for (int i = 0; i < iters / REPEATS + 1; i++) {
                send_recv(env, env->rank == 0, buf, len, TAG_BENCH);
                send_recv(env, env->rank != 0, buf, len, TAG_BENCH);
            }
            lat[r] = (now_sec() - t0) / (2.0 * (iters / REPEATS + 1)) * 1e6;

            int windows = iters / REPEATS / WINDOW + 2;
            tl_barrier(env);
            t0 = now_sec();
            for (int w = 0; w < windows; w++) {
                for (int i = 0; i < WINDOW; i++) {
                    check_ok(env->rank == 0
                                 ? env->ops->tag_send(env->tl, 1, TAG_BENCH + 1, buf, len, &reqs[i])
                                 : env->ops->tag_recv(env->tl, 0, TAG_BENCH + 1, buf, len, &reqs[i]),
                             "bench window");
                }
                wait_all(env, reqs, WINDOW, "bench window");
                send_recv(env, env->rank != 0, buf, 1, TAG_BENCH + 2);
            }
            bw[r] = (double)len * WINDOW * windows / (now_sec() - t0) / 1e6;
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
    test_env_t env = {0};
    int bench_mode = argc > 1 && strcmp(argv[1], "--bench") == 0;

    check_ok(fold_bootstrap_pmix_init(&env.bs), "fold_bootstrap_pmix_init");
    env.rank = env.bs.rank;
    env.size = env.bs.size;
    env.right = (env.rank + 1) % env.size;
    env.left = (env.rank - 1 + env.size) % env.size;
    test_rank = env.rank;
    fold_log_set_rank(env.rank);

    const char *transport = getenv("FOLD_TRANSPORT");
    env.ops = fold_tl_find(bench_mode && transport != NULL ? transport : "ofi");
    CHECK(env.ops != NULL, "no transport '%s' in this build", bench_mode ? transport : "ofi");
    /* The provider comes from the configuration, as fold_init passes it. */
    fold_config_t config;
    check_ok(fold_config_load(&config), "fold_config_load");
    env.provider = config.ofi_provider;
    fold_tl_params_t params = {.rank = env.rank, .size = env.size,
                               .ofi_provider = env.provider};
    if (bench_mode) {
        check_ok(env.ops->open(&params, &env.tl), "open");
        connect_peers(&env);
        bench(&env);
        tl_barrier(&env);
        env.ops->close(env.tl);
        bs_barrier(&env);
        env.bs.finalize(&env.bs);
        fold_config_release(&config);
        return 0;
    }

    test_unknown_provider(&env);
    check_ok(env.ops->open(&params, &env.tl), "open");
    connect_peers(&env);

    test_sizes(&env);
    test_flood(&env);
    test_truncation(&env);

    /* A receive nobody will match: close completes it. */
    char byte;
    fold_tl_req_t pending;
    check_ok(env.ops->tag_recv(env.tl, env.left, TAG_CLOSE, &byte, 1, &pending), "tag_recv");
    tl_barrier(&env);
    env.ops->close(env.tl);
    expect_status(&pending, FOLD_ERR_CANCELED, "receive pending at close");

    bs_barrier(&env);
    if (env.rank == 0) {
        printf("mp_ofi: all checks passed over %s on %d rank(s)\n",
               env.provider[0] ? env.provider : "the default provider", env.size);
    }
    env.bs.finalize(&env.bs);
    fold_config_release(&config);
    return 0;
}
