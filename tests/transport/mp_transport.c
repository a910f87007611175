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

/* Tag bases, one range per check so that no check can match another's message. */
#define TAG_BARRIER    UINT64_C(0x100000)
#define TAG_ORDER      UINT64_C(0x200000)
#define TAG_UNEXPECTED UINT64_C(0x300000)
#define TAG_MANY       UINT64_C(0x400000)
#define TAG_LARGE      UINT64_C(0x500000)
#define TAG_TRUNCATE   UINT64_C(0x600000)
#define TAG_CANCEL     UINT64_C(0x700000)

typedef struct test_env {
    fold_bootstrap_t     bs;
    const fold_tl_ops_t *ops;
    fold_tl_t           *tl;
    int                  rank;
    int                  size;
    int                  left;
    int                  right;
    unsigned             barrier_seq;
} test_env_t;

static int test_rank = -1;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "mp_transport rank %d: FAIL: ", test_rank);
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

/* Progresses until every request completes; yields when idle (2 cores, maybe
 * more ranks). */
static void wait_all(test_env_t *env, fold_tl_req_t *reqs, int n, const char *what)
{
    double deadline = now_sec() + WAIT_TIMEOUT_SEC;
    for (;;) {
        int done = 0;
        for (int i = 0; i < n; i++) {
            done += reqs[i].status != FOLD_INPROGRESS;
        }
        if (done == n) {
            return;
        }
        if (env->ops->progress(env->tl) == 0) {
            if (now_sec() > deadline) {
                fail("timed out waiting for %s (%d of %d complete)", what, done, n);
            }
            sched_yield();
        }
    }
}

/* Runs progress for a while, so that messages in flight reach the unexpected queue. */
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

/* A dissemination barrier over the transport itself. Unlike the bootstrap barrier
 * it keeps every rank progressing until all have arrived: a peer's operations may
 * need this rank's progress to complete (UCX over TCP), and no rank may close its
 * endpoints while a neighbour still needs them. */
static void tl_barrier(test_env_t *env)
{
    unsigned seq = env->barrier_seq++;
    char token = 0, sink = 0;

    for (int dist = 1, round = 0; dist < env->size; dist *= 2, round++) {
        uint64_t tag = TAG_BARRIER + ((uint64_t)(seq % 4096) << 5) + (uint64_t)round;
        fold_tl_req_t reqs[2];
        check_ok(env->ops->tag_recv(env->tl, (env->rank - dist + env->size) % env->size, tag,
                                    &sink, 1, &reqs[0]), "barrier recv");
        check_ok(env->ops->tag_send(env->tl, (env->rank + dist) % env->size, tag, &token, 1,
                                    &reqs[1]), "barrier send");
        wait_all(env, reqs, 2, "transport barrier");
        expect_status(&reqs[0], FOLD_OK, "barrier recv");
        expect_status(&reqs[1], FOLD_OK, "barrier send");
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

static void test_bootstrap_allgather(test_env_t *env)
{
    static const size_t lens[] = {1, 13, 4099};

    for (int call = 0; call < 3; call++) {
        size_t len = lens[call];
        unsigned char *in = malloc(len);
        unsigned char *out = malloc(len * (size_t)env->size);
        CHECK(in != NULL && out != NULL, "out of memory");
        fill_pattern(in, len, env->rank, (uint64_t)call);
        check_ok(env->bs.allgather(&env->bs, in, out, len), "bootstrap allgather");
        for (int r = 0; r < env->size; r++) {
            check_pattern(out + (size_t)r * len, len, r, (uint64_t)call,
                          "bootstrap allgather");
        }
        free(out);
        free(in);
    }
}

/* Exchanges transport addresses: lengths first, then addresses padded to the
 * longest. */
static void connect_peers(test_env_t *env)
{
    const void *addr;
    size_t addr_len;
    check_ok(env->ops->address(env->tl, &addr, &addr_len), "address");

    uint64_t my_len = addr_len;
    uint64_t *all_lens = malloc(sizeof(uint64_t) * (size_t)env->size);
    CHECK(all_lens != NULL, "out of memory");
    check_ok(env->bs.allgather(&env->bs, &my_len, all_lens, sizeof(my_len)),
             "address length allgather");

    size_t max_len = 0;
    for (int r = 0; r < env->size; r++) {
        max_len = all_lens[r] > max_len ? all_lens[r] : max_len;
    }
    char *padded = calloc(1, max_len);
    char *all = malloc(max_len * (size_t)env->size);
    const void **addrs = malloc(sizeof(void *) * (size_t)env->size);
    size_t *lens = malloc(sizeof(size_t) * (size_t)env->size);
    CHECK(padded != NULL && all != NULL && addrs != NULL && lens != NULL, "out of memory");
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

/* The argument checks log an error by design; keep the test output clean. */
static void test_invalid_args(test_env_t *env)
{
    fold_tl_req_t req = {.status = 1234, .handle = &req};
    char byte = 0;
    int saved_level = fold_log_level;

    fold_log_level = -1;
    int over_wide = env->ops->tag_send(env->tl, env->right, UINT64_C(1) << FOLD_TL_TAG_BITS,
                                       &byte, 1, &req);
    int bad_peer = env->ops->tag_recv(env->tl, env->size, 0, &byte, 1, &req);
    fold_log_level = saved_level;

    CHECK(over_wide == FOLD_ERR_INVALID_ARG, "tag wider than %d bits accepted (%s)",
          FOLD_TL_TAG_BITS, fold_status_string(over_wide));
    CHECK(bad_peer == FOLD_ERR_INVALID_ARG, "peer out of range accepted (%s)",
          fold_status_string(bad_peer));
    CHECK(req.status == 1234 && req.handle == &req, "a failed call touched its request");
}

/* Every rank sends four messages of different sizes and tags to every rank
 * (itself included); receives are posted in reverse tag and peer order, once
 * before the sends and once after, and must each match exactly (peer, tag). */
static void test_tag_matching(test_env_t *env, int post_recvs_first, uint64_t base)
{
    enum { NTAGS = 4 };
    static const size_t sizes[NTAGS] = {8, 100, 1000, 6000};
    int n = env->size * NTAGS;
    char **sbufs = calloc((size_t)n, sizeof(char *));
    char **rbufs = calloc((size_t)n, sizeof(char *));
    fold_tl_req_t *sreqs = calloc((size_t)n, sizeof(fold_tl_req_t));
    fold_tl_req_t *rreqs = calloc((size_t)n, sizeof(fold_tl_req_t));
    CHECK(sbufs && rbufs && sreqs && rreqs, "out of memory");

    for (int p = 0; p < env->size; p++) {
        for (int t = 0; t < NTAGS; t++) {
            int i = p * NTAGS + t;
            sbufs[i] = malloc(sizes[t]);
            rbufs[i] = calloc(1, sizes[t]);
            CHECK(sbufs[i] && rbufs[i], "out of memory");
            fill_pattern(sbufs[i], sizes[t], env->rank, base + (uint64_t)t);
        }
    }

    for (int pass = 0; pass < 2; pass++) {
        if (pass == (post_recvs_first ? 0 : 1)) {
            for (int p = env->size - 1; p >= 0; p--) {
                for (int t = NTAGS - 1; t >= 0; t--) {
                    int i = p * NTAGS + t;
                    check_ok(env->ops->tag_recv(env->tl, p, base + (uint64_t)t, rbufs[i],
                                                sizes[t], &rreqs[i]), "tag_recv");
                }
            }
        } else {
            for (int p = 0; p < env->size; p++) {
                for (int t = 0; t < NTAGS; t++) {
                    int i = p * NTAGS + t;
                    check_ok(env->ops->tag_send(env->tl, p, base + (uint64_t)t, sbufs[i],
                                                sizes[t], &sreqs[i]), "tag_send");
                }
            }
            if (!post_recvs_first) {
                progress_for(env, 0.01);
            }
        }
    }

    wait_all(env, sreqs, n, "tag matching sends");
    wait_all(env, rreqs, n, "tag matching receives");
    for (int p = 0; p < env->size; p++) {
        for (int t = 0; t < NTAGS; t++) {
            int i = p * NTAGS + t;
            expect_status(&sreqs[i], FOLD_OK, "tag matching send");
            expect_status(&rreqs[i], FOLD_OK, "tag matching receive");
            CHECK(rreqs[i].length == sizes[t], "receive from %d tag %d: length %zu, expected %zu",
                  p, t, rreqs[i].length, sizes[t]);
            check_pattern(rbufs[i], sizes[t], p, base + (uint64_t)t, "tag matching");
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
static void test_unexpected(test_env_t *env)
{
    static const size_t sizes[] = {8, 1024};

    for (int k = 0; k < 2; k++) {
        uint64_t tag = TAG_UNEXPECTED + (uint64_t)k;
        size_t len = sizes[k];
        char *sbuf = malloc(len), *rbuf = calloc(1, len);
        CHECK(sbuf && rbuf, "out of memory");
        fill_pattern(sbuf, len, env->rank, tag);

        fold_tl_req_t sreq, rreq;
        check_ok(env->ops->tag_send(env->tl, env->right, tag, sbuf, len, &sreq), "tag_send");
        wait_all(env, &sreq, 1, "unexpected send");
        expect_status(&sreq, FOLD_OK, "unexpected send");
        tl_barrier(env);
        bs_barrier(env);
        progress_for(env, 0.005);

        check_ok(env->ops->tag_recv(env->tl, env->left, tag, rbuf, len, &rreq), "tag_recv");
        wait_all(env, &rreq, 1, "unexpected receive");
        expect_status(&rreq, FOLD_OK, "unexpected receive");
        CHECK(rreq.length == len, "unexpected receive length %zu, expected %zu", rreq.length, len);
        check_pattern(rbuf, len, env->left, tag, "unexpected receive");
        free(rbuf);
        free(sbuf);
    }

    /* A rendezvous message whose announcement waits unexpected for the receive. */
    uint64_t tag = TAG_UNEXPECTED + 2;
    size_t len = 256 * 1024;
    char *sbuf = malloc(len), *rbuf = calloc(1, len);
    CHECK(sbuf && rbuf, "out of memory");
    fill_pattern(sbuf, len, env->rank, tag);
    fold_tl_req_t reqs[2];
    check_ok(env->ops->tag_send(env->tl, env->right, tag, sbuf, len, &reqs[0]), "tag_send");
    bs_barrier(env);
    progress_for(env, 0.005);
    check_ok(env->ops->tag_recv(env->tl, env->left, tag, rbuf, len, &reqs[1]), "tag_recv");
    wait_all(env, reqs, 2, "unexpected rendezvous");
    expect_status(&reqs[0], FOLD_OK, "unexpected rendezvous send");
    expect_status(&reqs[1], FOLD_OK, "unexpected rendezvous receive");
    check_pattern(rbuf, len, env->left, tag, "unexpected rendezvous");
    free(rbuf);
    free(sbuf);
}

static void test_many_outstanding(test_env_t *env)
{
    enum { N = 256, MAXLEN = 64 };
    static char sbufs[N][MAXLEN], rbufs[N][MAXLEN];
    static fold_tl_req_t sreqs[N], rreqs[N];

    for (int i = 0; i < N; i++) {
        fill_pattern(sbufs[i], 1 + i % MAXLEN, env->rank, TAG_MANY + (uint64_t)i);
        check_ok(env->ops->tag_recv(env->tl, env->left, TAG_MANY + (uint64_t)i, rbufs[i],
                                    MAXLEN, &rreqs[i]), "tag_recv");
    }
    for (int i = 0; i < N; i++) {
        check_ok(env->ops->tag_send(env->tl, env->right, TAG_MANY + (uint64_t)i, sbufs[i],
                                    1 + i % MAXLEN, &sreqs[i]), "tag_send");
    }
    wait_all(env, sreqs, N, "256 sends");
    wait_all(env, rreqs, N, "256 receives");
    for (int i = 0; i < N; i++) {
        expect_status(&sreqs[i], FOLD_OK, "one of 256 sends");
        expect_status(&rreqs[i], FOLD_OK, "one of 256 receives");
        CHECK(rreqs[i].length == (size_t)(1 + i % MAXLEN), "receive %d length %zu", i,
              rreqs[i].length);
        check_pattern(rbufs[i], rreqs[i].length, env->left, TAG_MANY + (uint64_t)i,
                      "256 outstanding");
    }
}

static void test_large(test_env_t *env)
{
    size_t len = 16u << 20;
    uint32_t *sbuf = malloc(len), *rbuf = calloc(1, len);
    CHECK(sbuf && rbuf, "out of memory");
    for (size_t i = 0; i < len / 4; i++) {
        sbuf[i] = (uint32_t)env->rank * 0x9E3779B9u + (uint32_t)i;
    }

    fold_tl_req_t reqs[2];
    check_ok(env->ops->tag_recv(env->tl, env->left, TAG_LARGE, rbuf, len, &reqs[0]), "tag_recv");
    check_ok(env->ops->tag_send(env->tl, env->right, TAG_LARGE, sbuf, len, &reqs[1]), "tag_send");
    wait_all(env, reqs, 2, "16 MiB message");
    expect_status(&reqs[0], FOLD_OK, "16 MiB receive");
    expect_status(&reqs[1], FOLD_OK, "16 MiB send");
    CHECK(reqs[0].length == len, "16 MiB receive length %zu", reqs[0].length);
    for (size_t i = 0; i < len / 4; i++) {
        uint32_t expected = (uint32_t)env->left * 0x9E3779B9u + (uint32_t)i;
        CHECK(rbuf[i] == expected, "16 MiB message: word %zu is 0x%08x, expected 0x%08x", i,
              rbuf[i], expected);
    }
    free(rbuf);
    free(sbuf);
}

/* A receive buffer smaller than the message, for an eager and a rendezvous size.
 * The sender's outcome is not part of the contract; it only has to finish. */
static void test_truncated(test_env_t *env)
{
    static const size_t send_lens[] = {100, 1u << 20};
    static const size_t recv_lens[] = {50, 64u << 10};

    for (int k = 0; k < 2; k++) {
        uint64_t tag = TAG_TRUNCATE + (uint64_t)k;
        char *sbuf = calloc(1, send_lens[k]), *rbuf = calloc(1, recv_lens[k]);
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
        free(rbuf);
        free(sbuf);
    }
    tl_barrier(env);
}

static void test_cancel(test_env_t *env)
{
    char buf[16];
    fold_tl_req_t req;
    check_ok(env->ops->tag_recv(env->tl, env->left, TAG_CANCEL, buf, sizeof(buf), &req),
             "tag_recv");
    progress_for(env, 0.001);
    CHECK(req.status == FOLD_INPROGRESS, "a receive nobody sends to completed with %s",
          fold_status_string(req.status));
    env->ops->cancel(env->tl, &req);
    wait_all(env, &req, 1, "canceled receive");
    expect_status(&req, FOLD_ERR_CANCELED, "canceled receive");
}

int main(void)
{
    test_env_t env = {0};

    check_ok(fold_bootstrap_pmix_init(&env.bs), "fold_bootstrap_pmix_init");
    env.rank = env.bs.rank;
    env.size = env.bs.size;
    env.right = (env.rank + 1) % env.size;
    env.left = (env.rank - 1 + env.size) % env.size;
    test_rank = env.rank;
    fold_log_set_rank(env.rank);

    test_bootstrap_allgather(&env);

    const char *transport = getenv("FOLD_TRANSPORT");
    env.ops = fold_tl_find(transport != NULL ? transport : "ucp");
    CHECK(env.ops != NULL, "unknown transport '%s'", transport);
    /* The transport's settings come from the configuration, as fold_init passes them. */
    fold_config_t config;
    check_ok(fold_config_load(&config), "fold_config_load");
    fold_tl_params_t params = {.rank = env.rank, .size = env.size,
                               .ofi_provider = config.ofi_provider};
    check_ok(env.ops->open(&params, &env.tl), "open");
    fold_config_release(&config);
    connect_peers(&env);

    test_invalid_args(&env);
    test_tag_matching(&env, 1, TAG_ORDER);
    test_tag_matching(&env, 0, TAG_ORDER + 0x100);
    test_unexpected(&env);
    test_many_outstanding(&env);
    test_large(&env);
    test_truncated(&env);
    test_cancel(&env);

    /* Nobody closes an endpoint a neighbour still needs. */
    tl_barrier(&env);
    env.ops->close(env.tl);
    bs_barrier(&env);
    if (env.rank == 0) {
        printf("mp_transport: all checks passed over %s on %d rank(s) (node %s, job %s)\n",
               env.ops->name, env.size, env.bs.node_name, env.bs.job_id);
    }
    env.bs.finalize(&env.bs);
    return 0;
}
