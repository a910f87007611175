/*
 * FOLD_TRACE (coll/exec_trace.c): the N-th call of each context logs its timeline,
 * one row per step, beside the cost model's prediction; no other call does.
 */
#include "loopback_harness.h"
#include "stderr_capture.h"

#include <criterion/criterion.h>
#include <fold/fold.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int three_allreduces(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)size;
    int bad = fold_config_set(ctx, "TRACE", (const char *)arg) != FOLD_OK;
    enum { N = 16384 };   /* 64 KiB: a schedule, above the tiny-message path */
    int in[N], out[N];
    for (int i = 0; i < N; i++) {
        in[i] = rank + i;
    }
    for (int call = 0; call < 3; call++) {
        bad |= fold_allreduce(in, out, N, FOLD_INT32, FOLD_OP_SUM,
                              fold_comm_world(ctx)) != FOLD_OK;
        bad |= out[7] != 3 * 7 + 3;
    }
    return bad;
}

/* Every "trace: <coll> (" header's step count, summed; *headers counts them. */
static long traced_steps(const char *log, int *headers, int *with_model)
{
    long steps = 0;
    *headers = *with_model = 0;
    for (const char *p = strstr(log, "trace: allreduce ("); p != NULL;
         p = strstr(p + 1, "trace: allreduce (")) {
        const char *eol = strchr(p, '\n');
        const char *n = strstr(p, " B: ");
        if (n == NULL || (eol != NULL && n > eol)) {
            continue;
        }
        steps += strtol(n + 4, NULL, 10);
        (*headers)++;
        const char *m = strstr(p, ", model ");
        *with_model += m != NULL && (eol == NULL || m < eol);
    }
    return steps;
}

/* Rows are "trace: <index> <kind> ...": a number right after the prefix. */
static long step_rows(const char *log)
{
    long rows = 0;
    for (const char *p = strstr(log, "trace: "); p != NULL; p = strstr(p + 1, "trace: ")) {
        const char *q = p + 7;
        while (*q == ' ') {
            q++;
        }
        rows += *q >= '0' && *q <= '9';
    }
    return rows;
}

Test(exec_trace, the_second_call_of_each_rank_logs_its_steps)
{
    int result = -1;
    char *log = lh_run_logged(3, three_allreduces, "2", &result);
    cr_assert_eq(result, 0, "%s", log);
    int headers = 0, with_model = 0;
    long steps = traced_steps(log, &headers, &with_model);
    cr_expect_eq(headers, 3, "one traced call per rank: %s", log);
    cr_expect_eq(with_model, 3, "each beside the model's prediction: %s", log);
    cr_expect_gt(steps, 0);
    cr_expect_eq(step_rows(log), steps, "one row per step: %s", log);
    EXPECT_LOG_HAS(log, "start_us   end_us  took_us  model_end_us");
    EXPECT_LOG_HAS(log, "rank 2 of 3");
    free(log);
}

Test(exec_trace, off_by_default_and_beyond_the_calls_made)
{
    int result = -1;
    char *log = lh_run_logged(3, three_allreduces, "0", &result);
    cr_assert_eq(result, 0, "%s", log);
    cr_expect_null(strstr(log, "trace:"), "%s", log);
    free(log);
    log = lh_run_logged(3, three_allreduces, "4", &result);
    cr_assert_eq(result, 0, "%s", log);
    cr_expect_null(strstr(log, "trace:"), "%s", log);
    free(log);
}
