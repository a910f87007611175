/*
 * /dev/shm as a budget (issue 24): what a new segment may take (runtime/node/
 * budget.c); segments reserved for real, so a tmpfs that cannot hold one fails its
 * creation instead of a later SIGBUS (segment.c, on a small tmpfs in a private
 * mount namespace: root only, skipped elsewhere); communicators that cannot have a
 * segment run the node-unaware algorithms, correctly, every rank agreeing, said
 * once at warn level; and a freed communicator gives its segment back.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include "coll_reference.h"
#include "dir_entries.h"
#include "loopback_harness.h"
#include "stderr_capture.h"

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#define KIB ((size_t)1024)
#define MIB (KIB * KIB)

/* ---- the grant ---------------------------------------------------------------- */

static fold_shm_budget_t budget(size_t free, size_t reserve)
{
    return (fold_shm_budget_t){.page = 4 * KIB, .cap = 4 * MIB, .floor = 64 * KIB,
                               .fixed = 32 * KIB, .free = free, .total = 64 * MIB,
                               .reserve = reserve};
}

Test(shm_budget, grant_is_the_cap_what_fits_or_nothing)
{
    fold_shm_budget_t b = budget(64 * MIB, 8 * MIB);
    cr_expect_eq(fold_shm_budget_grant(&b), 4 * MIB, "room for it all: the cap");
    cr_expect_eq(fold_shm_budget_need(&b, 4 * MIB), 4 * MIB + 32 * KIB);

    b = budget(8 * MIB + 32 * KIB + 100 * KIB + 123, 8 * MIB);
    cr_expect_eq(fold_shm_budget_grant(&b), 100 * KIB, "what fits, in whole pages");

    b = budget(8 * MIB + 32 * KIB + 60 * KIB, 8 * MIB);
    cr_expect_eq(fold_shm_budget_grant(&b), 0, "below the floor: nothing");
    b = budget(7 * MIB, 8 * MIB);
    cr_expect_eq(fold_shm_budget_grant(&b), 0, "less free than the reserve: nothing");
    b = budget(0, 0);
    cr_expect_eq(fold_shm_budget_grant(&b), 0);

    /* A cap that is no page multiple is granted exactly when it fits ... */
    b = budget(64 * MIB, 0);
    b.cap = 5000;
    b.floor = 5000;
    cr_expect_eq(fold_shm_budget_grant(&b), 5000);
    /* ... and never more than it when it does not quite. */
    b.free = b.fixed + 4 * KIB + 100;
    b.floor = 4 * KIB;
    cr_expect_eq(fold_shm_budget_grant(&b), 4 * KIB);
}

Test(shm_budget, floor_fits_dpml_and_never_exceeds_the_cap)
{
    cr_expect_eq(fold_shm_budget_floor(4 * MIB, 2, 4), 64 * KIB);
    /* 4 stages x 64 rows x 64 leaders x one float64 */
    cr_expect_eq(fold_shm_budget_floor(4 * MIB, 64, 4), 128 * KIB);
    cr_expect_eq(fold_shm_budget_floor(4 * MIB, 64, 1), 64 * KIB, "two stages at least");
    cr_expect_eq(fold_shm_budget_floor(8 * KIB, 2, 4), 8 * KIB, "a small FOLD_SHM_SIZE stands");
}

Test(shm_budget, measure_reads_dev_shm)
{
    fold_shm_budget_t b = {0};
    cr_assert_eq(fold_shm_budget_measure(&b, SIZE_MAX), FOLD_OK);
    cr_expect_gt(b.total, 0);
    cr_expect_leq(b.free, b.total);
    cr_expect_eq(b.reserve, b.total / 8, "auto: an eighth of the tmpfs");
    cr_expect_gt(b.page, 0);
    cr_assert_eq(fold_shm_budget_measure(&b, 12345), FOLD_OK);
    cr_expect_eq(b.reserve, 12345);
}

/* ---- on a small tmpfs ------------------------------------------------------------ */

/* Runs fn in a child process with a private tmpfs of `size` on /dev/shm: the child's
 * exit status is fn's (0 passed, 77 cannot mount here). A child killed by a signal
 * (SIGBUS) fails the test. */
static void in_small_shm(const char *size, int (*fn)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        char opts[64];
        snprintf(opts, sizeof(opts), "size=%s,mode=1777", size);
        if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
            mount("tmpfs", FOLD_SHM_DIR, "tmpfs", 0, opts) != 0) {
            _exit(77);
        }
        _exit(fn());
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(!WIFSIGNALED(status), "the child died of signal %d", WTERMSIG(status));
    if (WEXITSTATUS(status) == 77) {
        cr_skip_test("no private tmpfs on " FOLD_SHM_DIR " here (needs root and unshare)");
    }
    cr_expect_eq(WEXITSTATUS(status), 0, "a check failed in the child (its stderr says which)");
}

/* In the child: says which check failed and returns 1. */
#define CHILD_CHECK(cond)                                                         \
    do {                                                                          \
        if (!(cond)) {                                                            \
            fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond);   \
            return 1;                                                             \
        }                                                                         \
    } while (0)

static size_t shm_free(void)
{
    struct statvfs st;
    return statvfs(FOLD_SHM_DIR, &st) == 0 ? (size_t)st.f_bavail * st.f_frsize : 0;
}

/* Two segments of 600 KiB on 1 MiB: with ftruncate both "succeed" and the second
 * dies of SIGBUS when written; reserved, the second fails with ENOSPC at once. */
static int reserve_child(void)
{
    char a_name[FOLD_SHM_NAME_MAX], b_name[FOLD_SHM_NAME_MAX];
    fold_shm_make_name(a_name, sizeof(a_name), "budget", "node", 1, 1);
    fold_shm_make_name(b_name, sizeof(b_name), "budget", "node", 2, 2);
    fold_shm_seg_t a, b;
    size_t before = shm_free();
    CHILD_CHECK(fold_shm_create(&a, a_name, 2, 600 * KIB) == FOLD_OK);
    CHILD_CHECK(before - shm_free() >= fold_shm_footprint(2, 600 * KIB));
    errno = 0;
    CHILD_CHECK(fold_shm_create(&b, b_name, 2, 600 * KIB) == FOLD_ERR_NO_MEMORY);
    CHILD_CHECK(errno == ENOSPC);
    CHILD_CHECK(b.base == NULL);
    CHILD_CHECK(dir_entries(FOLD_SHM_DIR) == 1);   /* the failed one left nothing */
    memset(a.data, 0x5a, a.data_size);   /* every page is there */
    fold_shm_unlink(a_name);
    fold_shm_detach(&a);
    CHILD_CHECK(dir_entries(FOLD_SHM_DIR) == 0);
    CHILD_CHECK(shm_free() == before);
    return 0;
}

Test(shm_budget, segments_are_reserved_at_creation)
{
    in_small_shm("1m", reserve_child);
}

/* ---- communicators without node shared memory ----------------------------------- */

/* Whether the registry (coll/alg_table.c) says alg needs the node. */
static int node_aware(const char *alg)
{
    const fold_alg_t *a = fold_alg_find(alg);
    return a != NULL && (a->flags & FOLD_ALG_NODE_AWARE);
}

/* One allreduce and one reduce (root size-1) of count elements, checked. */
static int reduce_checked(fold_comm_h comm, int rank, int size, size_t count, fold_dtype_t dt)
{
    size_t es = fold_dtype_size(dt);
    char *in = malloc(count * es), *out = malloc(count * es), *want = malloc(count * es);
    int bad = in == NULL || out == NULL || want == NULL;
    if (!bad) {
        ref_fill_input(dt, FOLD_OP_SUM, rank, count, in);
        for (size_t i = 0; i < count; i++) {
            ref_expected(dt, FOLD_OP_SUM, size, i, want);
        }
        bad |= fold_allreduce(in, out, count, dt, FOLD_OP_SUM, comm) != FOLD_OK ||
               memcmp(out, want, count * es) != 0;
        bad |= fold_reduce(in, out, count, dt, FOLD_OP_SUM, size - 1, comm) != FOLD_OK ||
               (rank == size - 1 && memcmp(out, want, count * es) != 0);
    }
    free(in);
    free(out);
    free(want);
    return bad;
}

typedef struct flat_run {
    char why[8][256];
} flat_run_t;

static int flat_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    flat_run_t *run = arg;
    fold_comm_t *w = fold_comm_world(ctx);
    static const size_t counts[] = {1, 1000, 70000};
    int bad = 0;
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
        bad |= reduce_checked(w, rank, size, counts[i], FOLD_FLOAT32);
        bad |= reduce_checked(w, rank, size, counts[i], FOLD_FLOAT64);
        bad |= node_aware(fold_selected_algorithm(w, "allreduce", counts[i], FOLD_FLOAT32));
        bad |= node_aware(fold_selected_algorithm(w, "reduce", counts[i], FOLD_FLOAT64));
    }
    bad |= !w->node_none || w->node != NULL;
    snprintf(run->why[rank], sizeof(run->why[rank]), "%s", w->node_why);
    /* A forced node-aware algorithm gives way too. */
    bad |= fold_config_set(ctx, "ALLREDUCE_ALG", "dpml") != FOLD_OK;
    bad |= reduce_checked(w, rank, size, 5000, FOLD_INT32);
    bad |= node_aware(fold_selected_algorithm(w, "allreduce", 5000, FOLD_INT32));
    /* So does a communicator split from it (it asks for its own node state). */
    fold_comm_h sub;
    bad |= fold_comm_split(w, 0, size - rank, &sub) != FOLD_OK;
    bad |= reduce_checked(sub, size - 1 - rank, size, 3000, FOLD_FLOAT32);
    bad |= !sub->node_none;
    fold_comm_free(&sub);
    if (bad) {
        fprintf(stderr, "rank %d: wrong result, or node-aware without node shared memory\n",
                rank);
    }
    return bad;
}

Test(shm_budget, communicator_without_room_runs_flat_and_says_so_once)
{
    setenv("FOLD_SHM_RESERVE", "1024G", 1);   /* no /dev/shm has room beyond that */
    flat_run_t run;
    memset(&run, 0, sizeof(run));
    int result;
    char *log = lh_run_logged(3, flat_rank, &run, &result);
    unsetenv("FOLD_SHM_RESERVE");
    cr_expect_eq(result, 0, "%s", log);
    cr_expect_eq(stderr_count(log, "warn "), 1, "one warning in all: %s", log);
    cr_expect_eq(stderr_count(log, "runs the node-unaware algorithms"), 1, "%s", log);
    cr_expect_not_null(strstr(log, "FOLD_SHM_RESERVE"), "%s", log);
    cr_expect_not_null(strstr(run.why[0], FOLD_SHM_DIR), "why: %s", run.why[0]);
    cr_expect_not_null(strstr(run.why[0], "bytes"), "why: %s", run.why[0]);
    cr_expect_str_eq(run.why[1], run.why[0], "every rank says the same");
    cr_expect_str_eq(run.why[2], run.why[0], "every rank says the same");
    free(log);
}

/* ---- the segment comes back ------------------------------------------------------ */

/* Communicators split and kept until one goes without a segment, then all freed:
 * the next one has a segment again; then many created and freed, each with one. */
static int comeback_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)arg;
    fold_comm_h w = fold_comm_world(ctx), kept[16];
    int n = 0, bad = 0;
    while (n < 16) {
        bad |= fold_comm_split(w, 0, rank, &kept[n]) != FOLD_OK;
        bad |= reduce_checked(kept[n], rank, size, 1000, FOLD_FLOAT32);
        if (kept[n++]->node_none) {
            break;
        }
    }
    bad |= n < 2 || n == 16 || !kept[n - 1]->node_none || kept[0]->node_none;
    for (int k = 0; k < n; k++) {
        fold_comm_free(&kept[k]);
    }
    for (int k = 0; k < 200; k++) {
        fold_comm_h c;
        bad |= fold_comm_split(w, 0, rank, &c) != FOLD_OK;
        bad |= reduce_checked(c, rank, size, 100, FOLD_FLOAT32);
        bad |= c->node_none || c->node == NULL;
        fold_comm_free(&c);
    }
    if (bad) {
        fprintf(stderr, "rank %d: %d kept; a segment did not come back\n", rank, n);
    }
    return bad;
}

static int comeback_child(void)
{
    /* 1 MiB segments on 3 MiB, nothing reserved for others: two fit, a third gets
     * what is left, the next none. */
    setenv("FOLD_SHM_SIZE", "1M", 1);
    setenv("FOLD_SHM_RESERVE", "0", 1);
    CHILD_CHECK(lh_run(2, comeback_rank, NULL) == 0);
    CHILD_CHECK(dir_entries(FOLD_SHM_DIR) == 0);
    return 0;
}

Test(shm_budget, freed_communicators_give_their_segment_back)
{
    in_small_shm("3m", comeback_child);
}
