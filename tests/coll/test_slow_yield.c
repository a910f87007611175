/*
 * Timeouts on a loaded node: this executable replaces sched_yield with a 10 ms sleep,
 * as when a waiting rank that yields loses its core to many others, and a rank that
 * never comes must still fail the others within twice FOLD_TIMEOUT, on the executor's
 * path (ring) and on shm_flat's tiny-message path. Before, the clock was read every 64
 * (executor) or 4096 (fast path) polls, each a yield: 1.3 s and 41 s for a 0.5 s
 * timeout here; the fault harness (tests/fault) saw 7.5 s for a 2 s one.
 */
#include <criterion/criterion.h>

#include "loopback_harness.h"
#include "util/clock.h"

#include <sched.h>
#include <stdio.h>
#include <time.h>

int sched_yield(void)
{
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
    return 0;
}

static int absent_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)size;
    fold_comm_h w = fold_comm_world(ctx);
    int v = rank + 1, sum = 0, bad = 0;
    bad |= fold_config_set(ctx, "ALLREDUCE_ALG", arg) != FOLD_OK;
    bad |= fold_config_set(ctx, "SPIN_COUNT", "0") != FOLD_OK;
    bad |= fold_config_set(ctx, "TIMEOUT", "0.5") != FOLD_OK;
    bad |= fold_allreduce(&v, &sum, 1, FOLD_INT32, FOLD_OP_SUM, w) != FOLD_OK || sum != 3;
    if (rank == 0) {
        double t0 = fold_util_time_now();
        int st = fold_allreduce(&v, &sum, 1, FOLD_INT32, FOLD_OP_SUM, w);
        double dt = fold_util_time_now() - t0;
        if (st != FOLD_ERR_TIMEOUT || dt > 1.0) {
            fprintf(stderr, "%s: %s after %.2f s (FOLD_TIMEOUT=0.5)\n", (const char *)arg,
                    fold_status_string(st), dt);
            bad = 1;
        }
    }
    return bad;
}

Test(slow_yield, executor_times_out_within_twice_the_timeout, .timeout = 60)
{
    cr_expect_eq(lh_run(2, absent_rank, "ring"), 0);
}

Test(slow_yield, fast_path_times_out_within_twice_the_timeout, .timeout = 120)
{
    cr_expect_eq(lh_run(2, absent_rank, "shm_flat"), 0);
}
