/*
 * One thread at a time per context, enforced (guard.h): threads that call into one
 * context at once get a correct result or FOLD_ERR_IN_USE, never corrupted state.
 *
 * - one rank, 4 threads, every kind of call mixed, for about a second;
 * - two loopback ranks, 4 threads each: thread 0 runs collectives (retrying a call
 *   refused with FOLD_ERR_IN_USE: a refused call did nothing, so the ranks stay in
 *   step), threads 1-3 hammer the context's local calls meanwhile;
 * - the refusal's log line names the call and says why;
 * - a user op that calls back into fold on its context is refused, and one that
 *   only reads its communicator works.
 * Run under ASan too (the sanitizer build runs every unit test).
 */
#include <criterion/criterion.h>

#include "guard.h"
#include "log.h"
#include "loopback_harness.h"
#include "stderr_capture.h"
#include "util/clock.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HAMMER_SECONDS 1.0
#define THREADS 4

/* What the hammering threads saw, over all of them. */
typedef struct tally {
    atomic_long ok, in_use, wrong;
} tally_t;

/* Counts one call's outcome: success with a right result, the refusal, or wrong. */
static void count(tally_t *t, int status, int right, const char *what)
{
    if (status == FOLD_OK && right) {
        atomic_fetch_add(&t->ok, 1);
    } else if (status == FOLD_ERR_IN_USE) {
        atomic_fetch_add(&t->in_use, 1);
    } else {
        if (atomic_fetch_add(&t->wrong, 1) < 5) {
            fprintf(stderr, "test_threads: %s: %s%s\n", what, fold_status_string(status),
                    status == FOLD_OK ? " with a wrong result" : "");
        }
    }
}

/* ---- one rank, every kind of call ------------------------------------------------ */

typedef struct solo {
    fold_context_t *ctx;
    const char     *selected;   /* fold_selected_algorithm before the threads started */
    double          until;
    tally_t         t;
} solo_t;

static void solo_call(solo_t *s, unsigned kind, unsigned i)
{
    fold_comm_h w = fold_comm_world(s->ctx);
    int64_t in[4] = {i, 2 * i, 3, -(int64_t)i}, out[4] = {0};
    int st;
    switch (kind % 11) {
    case 0:
        st = fold_allreduce(in, out, 4, FOLD_INT64, FOLD_OP_SUM, w);
        count(&s->t, st, memcmp(in, out, sizeof(in)) == 0, "fold_allreduce");
        break;
    case 1:
        st = fold_reduce(in, out, 4, FOLD_INT64, FOLD_OP_MAX, 0, w);
        count(&s->t, st, memcmp(in, out, sizeof(in)) == 0, "fold_reduce");
        break;
    case 2: {
        fold_request_h req;
        st = fold_iallreduce(in, out, 4, FOLD_INT64, FOLD_OP_SUM, w, &req);
        if (st == FOLD_OK) {
            /* The request is this thread's: wait and free until not refused. */
            while ((st = fold_wait(req)) == FOLD_ERR_IN_USE) {
                count(&s->t, st, 0, "fold_wait");
            }
            int fr;
            while ((fr = fold_request_free(req)) == FOLD_ERR_IN_USE) {
                count(&s->t, fr, 0, "fold_request_free");
            }
            count(&s->t, fr, 1, "fold_request_free");
        }
        count(&s->t, st, st != FOLD_OK || memcmp(in, out, sizeof(in)) == 0, "fold_iallreduce");
        break;
    }
    case 3: {
        fold_comm_h sub = NULL;
        st = fold_comm_split(w, (int)(i % 3), 0, &sub);
        int size = 0;
        count(&s->t, st, sub != NULL && fold_comm_size(sub, &size) == FOLD_OK && size == 1,
              "fold_comm_split");
        if (st == FOLD_OK) {
            st = fold_allreduce(in, out, 4, FOLD_INT64, FOLD_OP_SUM, sub);
            count(&s->t, st, memcmp(in, out, sizeof(in)) == 0, "fold_allreduce on a split");
            while ((st = fold_comm_free(&sub)) == FOLD_ERR_IN_USE) {
                count(&s->t, st, 0, "fold_comm_free");
            }
            count(&s->t, st, sub == NULL, "fold_comm_free");
        }
        break;
    }
    case 4:
        st = fold_bcast(in, 4, FOLD_INT64, 0, w);
        count(&s->t, st, in[2] == 3, "fold_bcast");
        break;
    case 5:
        count(&s->t, fold_barrier(w), 1, "fold_barrier");
        break;
    case 6:
        /* TIMEOUT only: selection and the transport read nothing it changes. */
        st = fold_config_set(s->ctx, "TIMEOUT", i & 1 ? "120" : "121");
        count(&s->t, st, 1, "fold_config_set");
        break;
    case 7: {
        const char *v = NULL;
        st = fold_config_get(s->ctx, "SEGMENT_SIZE", &v);   /* never set: v stays valid */
        count(&s->t, st, v != NULL && strlen(v) > 0, "fold_config_get");
        break;
    }
    case 8: {
        const char *alg = fold_selected_algorithm(w, "allreduce", 4, FOLD_INT64);
        /* NULL is the refusal here (logged); otherwise the same answer as alone. */
        count(&s->t, alg == NULL ? FOLD_ERR_IN_USE : FOLD_OK,
              alg != NULL && strcmp(alg, s->selected) == 0, "fold_selected_algorithm");
        break;
    }
    case 9: {
        int trying = -1;   /* 32 B: below what FOLD_ONLINE tries */
        st = fold_selection_trying(w, "allreduce", 4, FOLD_INT64, FOLD_OP_SUM, -1, &trying);
        count(&s->t, st, trying == 0, "fold_selection_trying");
        break;
    }
    default: {
        int serve = -1;
        st = fold_serve_advice(w, "allreduce", 32, &serve, NULL);
        count(&s->t, st, serve == 1, "fold_serve_advice");
        break;
    }
    }
}

static void *solo_thread(void *arg)
{
    solo_t *s = arg;
    unsigned seed = (unsigned)(uintptr_t)pthread_self();
    for (unsigned i = 0; fold_util_time_now() < s->until; i++) {
        solo_call(s, (unsigned)rand_r(&seed), i);
    }
    return NULL;
}

/* Thousands of refusals a second would each log a line: quiet while hammering (the
 * line itself is checked below). */
static int quiet(void)
{
    int level = fold_log_level;
    fold_log_level = -1;
    return level;
}

Test(threads, one_rank_context_four_threads_mixed_calls, .timeout = 60)
{
    void *fabric = fold_loopback_fabric_create(1), *group = fold_bootstrap_mem_group_create(1);
    fold_bootstrap_t bs;
    solo_t s;
    memset(&s, 0, sizeof(s));
    cr_assert_eq(fold_bootstrap_mem_init(&bs, group, 0), FOLD_OK);
    cr_assert_eq(fold_context_create(&bs, "loopback", fabric, &s.ctx), FOLD_OK);
    s.selected = fold_selected_algorithm(fold_comm_world(s.ctx), "allreduce", 4, FOLD_INT64);
    cr_assert_not_null(s.selected);
    int level = quiet();
    s.until = fold_util_time_now() + HAMMER_SECONDS;
    pthread_t tid[THREADS];
    for (int i = 0; i < THREADS; i++) {
        cr_assert_eq(pthread_create(&tid[i], NULL, solo_thread, &s), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(tid[i], NULL);
    }
    fold_log_level = level;
    long ok = atomic_load(&s.t.ok), in_use = atomic_load(&s.t.in_use);
    cr_expect_eq(atomic_load(&s.t.wrong), 0, "calls that neither succeeded nor were refused");
    cr_expect_gt(ok, 1000, "only %ld calls succeeded", ok);
    cr_expect_gt(in_use, 0, "no call was ever refused: the threads never met");
    cr_expect_eq(fold_finalize(s.ctx), FOLD_OK);
    fold_loopback_fabric_destroy(fabric);
    fold_bootstrap_mem_group_destroy(group);
    cr_log_info("one rank: %ld calls succeeded, %ld refused", ok, in_use);
}

/* ---- two ranks: collectives on one thread, local calls on three ------------------ */

typedef struct duo {
    fold_context_t *ctx;
    int             rank;
    atomic_int      stop;
    tally_t         t;
} duo_t;

static tally_t duo_total;
static atomic_long duo_rounds;   /* collective rounds both ranks completed, per rank */

static void *duo_local_thread(void *arg)
{
    duo_t *d = arg;
    fold_comm_h w = fold_comm_world(d->ctx);
    for (unsigned i = 0; !atomic_load(&d->stop); i++) {
        const char *v = NULL;
        int serve = -1, st;
        switch (i % 3) {
        case 0:
            count(&d->t, fold_config_set(d->ctx, "TIMEOUT", "120"), 1, "fold_config_set");
            break;
        case 1:
            st = fold_config_get(d->ctx, "ALLREDUCE_ALG", &v);
            count(&d->t, st, v != NULL, "fold_config_get");
            break;
        default:
            st = fold_serve_advice(w, "reduce", 1024, &serve, NULL);
            count(&d->t, st, serve == 0 || serve == 1, "fold_serve_advice");
            break;
        }
        /* Eight threads on this machine's two cores: without a yield the collective
         * thread of a rank can wait seconds for a turn while its peer spins. */
        sched_yield();
    }
    return NULL;
}

/* A collective call, repeated while refused (a refused call did nothing). */
#define RETRY(t, call) ({ int st_; while ((st_ = (call)) == FOLD_ERR_IN_USE) { \
                              count((t), st_, 0, #call); sched_yield(); } st_; })

static int duo_collectives(duo_t *d, int size)
{
    fold_comm_h w = fold_comm_world(d->ctx);
    double until = fold_util_time_now() + HAMMER_SECONDS;
    int bad = 0;
    for (int64_t i = 0;; i++) {
        /* The ranks stop together: each one's clock alone would leave one in a call. */
        int32_t more = fold_util_time_now() < until && !bad, all = 0;
        if (RETRY(&d->t, fold_allreduce(&more, &all, 1, FOLD_INT32, FOLD_OP_MIN, w)) !=
                FOLD_OK || !all) {
            break;
        }
        atomic_fetch_add(&duo_rounds, 1);
        int64_t in[3] = {d->rank + i, 1, i}, out[3] = {0}, sum0 = size * i + size * (size - 1) / 2;
        int st = RETRY(&d->t, fold_allreduce(in, out, 3, FOLD_INT64, FOLD_OP_SUM, w));
        bad |= st != FOLD_OK || out[0] != sum0 || out[1] != size || out[2] != size * i;
        st = RETRY(&d->t, fold_reduce(in, out, 3, FOLD_INT64, FOLD_OP_SUM, (int)(i % size), w));
        bad |= st != FOLD_OK || (d->rank == (int)(i % size) && out[0] != sum0);
        fold_request_h req;
        st = RETRY(&d->t, fold_iallreduce(in, out, 3, FOLD_INT64, FOLD_OP_MAX, w, &req));
        bad |= st != FOLD_OK;
        if (st == FOLD_OK) {
            st = RETRY(&d->t, fold_wait(req));
            bad |= st != FOLD_OK || out[0] != size - 1 + i ||
                   RETRY(&d->t, fold_request_free(req)) != FOLD_OK;
        }
        if (i % 16 == 0) {
            fold_comm_h sub = NULL;
            st = RETRY(&d->t, fold_comm_split(w, 0, -d->rank, &sub));
            bad |= st != FOLD_OK || sub == NULL;
            if (st == FOLD_OK) {
                bad |= RETRY(&d->t, fold_barrier(sub)) != FOLD_OK;
                bad |= RETRY(&d->t, fold_comm_free(&sub)) != FOLD_OK;
            }
        }
        if (bad) {
            fprintf(stderr, "test_threads: rank %d: a collective failed at iteration %lld\n",
                    d->rank, (long long)i);
        }
    }
    return bad;
}

static int duo_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)arg;
    fold_log_level = -1;   /* set by each context's creation: quiet it again */
    duo_t *d = calloc(1, sizeof(*d));
    d->ctx  = ctx;
    d->rank = rank;
    pthread_t tid[THREADS - 1];
    for (int i = 0; i < THREADS - 1; i++) {
        pthread_create(&tid[i], NULL, duo_local_thread, d);
    }
    int bad = duo_collectives(d, size);
    atomic_store(&d->stop, 1);
    for (int i = 0; i < THREADS - 1; i++) {
        pthread_join(tid[i], NULL);
    }
    atomic_fetch_add(&duo_total.ok, atomic_load(&d->t.ok));
    atomic_fetch_add(&duo_total.in_use, atomic_load(&d->t.in_use));
    atomic_fetch_add(&duo_total.wrong, atomic_load(&d->t.wrong));
    free(d);
    return bad;
}

Test(threads, two_ranks_collectives_beside_three_local_threads, .timeout = 120)
{
    int level = quiet();
    int bad = lh_run(2, duo_rank, NULL);
    fold_log_level = level;
    cr_expect_eq(bad, 0, "a collective failed or gave a wrong result");
    cr_expect_eq(atomic_load(&duo_total.wrong), 0);
    cr_expect_gt(atomic_load(&duo_total.in_use), 0, "no call was ever refused");
    cr_expect_gt(atomic_load(&duo_rounds), 2 * 10, "fewer than 10 rounds of collectives");
    cr_log_info("two ranks: %ld rounds of collectives; local calls: %ld succeeded, %ld "
                "refused", atomic_load(&duo_rounds) / 2, atomic_load(&duo_total.ok),
                atomic_load(&duo_total.in_use));
}

/* ---- the refusal's words ------------------------------------------------------------ */

typedef struct held {
    fold_context_t *ctx;
    int             status;
} held_t;

static void *call_while_held(void *arg)
{
    held_t *h = arg;
    int v = 1, out;
    h->status = fold_allreduce(&v, &out, 1, FOLD_INT32, FOLD_OP_SUM, fold_comm_world(h->ctx));
    return NULL;
}

static int refusal_logged(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)size;
    (void)arg;
    if (rank != 0) {
        return 0;
    }
    held_t h = {ctx, FOLD_OK};
    pthread_t tid;
    /* This thread holds the context as a call would; another calls meanwhile. */
    if (fold_guard_enter(ctx, "test") != FOLD_OK) {
        return 1;
    }
    pthread_create(&tid, NULL, call_while_held, &h);
    pthread_join(tid, NULL);
    fold_guard_leave(ctx);
    return h.status != FOLD_ERR_IN_USE;
}

Test(threads, refusal_names_the_call)
{
    int result = -1;
    char *log = lh_run_logged(2, refusal_logged, NULL, &result);
    cr_expect_eq(result, 0);
    EXPECT_LOG_HAS(log, "fold_allreduce: refused: another thread is using this context");
    cr_expect_str_eq(fold_status_string(FOLD_ERR_IN_USE), "another thread is using this context");
    free(log);
}

/* ---- user ops calling back into fold --------------------------------------------- */

static __thread fold_context_t *op_ctx;   /* the rank's context, for its user op */
static atomic_int op_inner_status = FOLD_OK, op_rank_status = -100, op_calls;

static void reentrant_sum(const void *in, void *inout, size_t n, fold_dtype_t dt, void *arg)
{
    (void)dt;
    (void)arg;
    for (size_t i = 0; i < n; i++) {
        ((int64_t *)inout)[i] += ((const int64_t *)in)[i];
    }
    if (op_ctx == NULL) {
        return;   /* run on a thread of the reduction's own: no context to call */
    }
    int rank = -1, v = 1, out;
    fold_comm_h w = fold_comm_world(op_ctx);
    atomic_store(&op_rank_status, fold_comm_rank(w, &rank));
    atomic_store(&op_inner_status, fold_allreduce(&v, &out, 1, FOLD_INT32, FOLD_OP_SUM, w));
    atomic_fetch_add(&op_calls, 1);
}

static int reentrant(fold_context_t *ctx, int rank, int size, void *arg)
{
    fold_op_t *op = arg;
    op_ctx = ctx;
    int64_t v = rank + 1, out = 0;
    int st = fold_allreduce(&v, &out, 1, FOLD_INT64, *op, fold_comm_world(ctx));
    op_ctx = NULL;
    return st != FOLD_OK || out != size * (size + 1) / 2;
}

Test(threads, user_op_calling_back_into_fold)
{
    fold_op_t op;
    cr_assert_eq(fold_op_create(reentrant_sum, NULL, 1, &op), FOLD_OK);
    int result = -1;
    char *log = lh_run_logged(3, reentrant, &op, &result);
    cr_expect_eq(result, 0, "the outer allreduce must still succeed");
    cr_expect_gt(atomic_load(&op_calls), 0, "the user op never ran on a rank's thread");
    cr_expect_eq(atomic_load(&op_rank_status), FOLD_OK, "fold_comm_rank inside a user op");
    cr_expect_eq(atomic_load(&op_inner_status), FOLD_ERR_IN_USE,
                 "fold_allreduce inside a user op: %s",
                 fold_status_string(atomic_load(&op_inner_status)));
    EXPECT_LOG_HAS(log, "fold_allreduce: refused: this thread is already inside a fold call");
    free(log);
    cr_expect_eq(fold_op_free(op), FOLD_OK);
}
