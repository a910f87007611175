#include "mp_tl_env.h"

#include "log.h"
#include "util/clock.h"

#include <fold/fold_status.h>
#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WAIT_TIMEOUT_SEC 60.0

/* For mp_tl_fail, which has no env to hand. */
static const char *fail_test_name = "mp";
static int         fail_rank = -1;

void mp_tl_fail(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s rank %d: FAIL: ", fail_test_name, fail_rank);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

void mp_tl_check_ok(int status, const char *what)
{
    if (status != FOLD_OK) {
        mp_tl_fail("%s: %s (%d)", what, fold_status_string(status), status);
    }
}

void mp_tl_expect_status(const fold_tl_req_t *req, int expected, const char *what)
{
    if (req->status != expected) {
        mp_tl_fail("%s completed with %s, expected %s", what, fold_status_string(req->status),
                   fold_status_string(expected));
    }
}

void mp_tl_wait_all(mp_tl_env_t *env, fold_tl_req_t *reqs, size_t n, const char *what)
{
    double deadline = fold_util_time_now() + WAIT_TIMEOUT_SEC;
    for (;;) {
        size_t done = 0;
        for (size_t i = 0; i < n; i++) {
            done += reqs[i].status != FOLD_INPROGRESS;
        }
        if (done == n) {
            return;
        }
        if (env->ops->progress(env->tl) == 0) {
            if (fold_util_time_now() > deadline) {
                mp_tl_fail("timed out waiting for %s (%zu of %zu complete)", what, done, n);
            }
            sched_yield();
        }
    }
}

void mp_tl_progress_for(mp_tl_env_t *env, double seconds)
{
    double end = fold_util_time_now() + seconds;
    while (fold_util_time_now() < end) {
        if (env->ops->progress(env->tl) == 0) {
            sched_yield();
        }
    }
}

void mp_tl_bs_barrier(mp_tl_env_t *env)
{
    char in = 0;
    char *out = malloc((size_t)env->size);
    MP_TL_CHECK(out != NULL, "out of memory");
    mp_tl_check_ok(env->bs.allgather(&env->bs, &in, out, 1), "bootstrap barrier");
    free(out);
}

void mp_tl_barrier(mp_tl_env_t *env)
{
    unsigned seq = env->barrier_seq++;
    char token = 0, sink = 0;

    for (int dist = 1, round = 0; dist < env->size; dist *= 2, round++) {
        uint64_t tag = MP_TL_TAG_BARRIER + ((uint64_t)(seq % 4096) << 5) + (uint64_t)round;
        fold_tl_req_t reqs[2];
        mp_tl_check_ok(env->ops->tag_recv(env->tl, (env->rank - dist + env->size) % env->size,
                                          tag, &sink, 1, &reqs[0]), "barrier recv");
        mp_tl_check_ok(env->ops->tag_send(env->tl, (env->rank + dist) % env->size, tag,
                                          &token, 1, &reqs[1]), "barrier send");
        mp_tl_wait_all(env, reqs, 2, "transport barrier");
        mp_tl_expect_status(&reqs[0], FOLD_OK, "barrier recv");
        mp_tl_expect_status(&reqs[1], FOLD_OK, "barrier send");
    }
}

void mp_tl_check_truncation(mp_tl_env_t *env, uint64_t tag, size_t send_len, size_t recv_len)
{
    char *sbuf = calloc(1, send_len), *rbuf = calloc(1, recv_len);
    MP_TL_CHECK(sbuf && rbuf, "out of memory");
    fold_tl_req_t reqs[2];
    mp_tl_check_ok(env->ops->tag_recv(env->tl, env->left, tag, rbuf, recv_len, &reqs[0]),
                   "tag_recv");
    mp_tl_check_ok(env->ops->tag_send(env->tl, env->right, tag, sbuf, send_len, &reqs[1]),
                   "tag_send");
    mp_tl_wait_all(env, reqs, 2, "truncated message");
    if (reqs[0].status != FOLD_ERR_TRUNCATED) {
        mp_tl_fail("%zu bytes into %zu: receive completed with %s, expected %s", send_len,
                   recv_len, fold_status_string(reqs[0].status),
                   fold_status_string(FOLD_ERR_TRUNCATED));
    }
    free(rbuf);
    free(sbuf);
}

static unsigned char pattern_byte(int sender, uint64_t tag, size_t i)
{
    return (unsigned char)(sender * 131 + (int)(tag % 251) * 17 + (int)(i % 253));
}

void mp_tl_fill_pattern(void *buf, size_t len, int sender, uint64_t tag)
{
    unsigned char *p = buf;
    for (size_t i = 0; i < len; i++) {
        p[i] = pattern_byte(sender, tag, i);
    }
}

void mp_tl_check_pattern(const void *buf, size_t len, int sender, uint64_t tag,
                         const char *what)
{
    const unsigned char *p = buf;
    for (size_t i = 0; i < len; i++) {
        if (p[i] != pattern_byte(sender, tag, i)) {
            mp_tl_fail("%s: byte %zu of %zu is %u, expected %u (from rank %d, tag 0x%" PRIx64
                       ")", what, i, len, p[i], pattern_byte(sender, tag, i), sender, tag);
        }
    }
}

/* The transport asks for a peer's address on first use: from the table below. */
static int resolve_address(void *arg, int rank, void **addr, size_t *len)
{
    mp_tl_env_t *env = arg;
    *len = env->addr_lens[rank];
    if ((*addr = malloc(*len)) == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    memcpy(*addr, env->addrs + (size_t)rank * env->addr_max, *len);
    return FOLD_OK;
}

/* Gathers every transport address (lengths first, then addresses padded to the
 * longest) and hands the transport a resolver over them. */
static void connect_peers(mp_tl_env_t *env)
{
    const void *addr;
    size_t addr_len;
    mp_tl_check_ok(env->ops->address(env->tl, &addr, &addr_len), "address");

    uint64_t my_len = addr_len;
    env->addr_lens = malloc(sizeof(uint64_t) * (size_t)env->size);
    MP_TL_CHECK(env->addr_lens != NULL, "out of memory");
    mp_tl_check_ok(env->bs.allgather(&env->bs, &my_len, env->addr_lens, sizeof(my_len)),
                   "address length allgather");

    env->addr_max = 0;
    for (int r = 0; r < env->size; r++) {
        env->addr_max = env->addr_lens[r] > env->addr_max ? env->addr_lens[r] : env->addr_max;
    }
    char *padded = calloc(1, env->addr_max);
    env->addrs = malloc(env->addr_max * (size_t)env->size);
    MP_TL_CHECK(padded != NULL && env->addrs != NULL, "out of memory");
    memcpy(padded, addr, addr_len);
    mp_tl_check_ok(env->bs.allgather(&env->bs, padded, env->addrs, env->addr_max),
                   "address allgather");
    free(padded);
    mp_tl_check_ok(env->ops->set_resolver(env->tl, resolve_address, env), "set_resolver");
}

void mp_tl_env_init(mp_tl_env_t *env, const char *test_name)
{
    memset(env, 0, sizeof(*env));
    fail_test_name = test_name;
    mp_tl_check_ok(fold_bootstrap_pmix_init(&env->bs), "fold_bootstrap_pmix_init");
    env->rank = env->bs.rank;
    env->size = env->bs.size;
    env->right = (env->rank + 1) % env->size;
    env->left = (env->rank - 1 + env->size) % env->size;
    fail_rank = env->rank;
    fold_log_set_rank(env->rank);
    mp_tl_check_ok(fold_config_load(&env->config), "fold_config_load");
}

void mp_tl_env_open(mp_tl_env_t *env, const char *transport)
{
    env->ops = fold_tl_find(transport);
    MP_TL_CHECK(env->ops != NULL, "no transport '%s' in this build", transport);
    fold_tl_params_t params = {.rank = env->rank, .size = env->size,
                               .ofi_provider = env->config.ofi_provider};
    mp_tl_check_ok(env->ops->open(&params, &env->tl), "open");
    connect_peers(env);
}

void mp_tl_env_close(mp_tl_env_t *env)
{
    mp_tl_barrier(env);
    env->ops->close(env->tl);
    env->tl = NULL;
    free(env->addrs);
    free(env->addr_lens);
    env->addrs     = NULL;
    env->addr_lens = NULL;
}

void mp_tl_env_finalize(mp_tl_env_t *env)
{
    env->bs.finalize(&env->bs);
    fold_config_release(&env->config);
}
