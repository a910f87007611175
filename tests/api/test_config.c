/*
 * The configuration tables built on the row engine (its own tests are
 * tests/util/test_config_table.c): the FOLD_* table (config.c): every row parses its
 * default, bad values fail with a log line naming the variable and the value and
 * change nothing, fold_config_set and fold_config_get round-trip on a context; and
 * the MPI shim's and the tools' tables.
 */
#include <criterion/criterion.h>

#include "context.h"
#include "log.h"
#ifdef FOLD_TEST_SHIM_TABLE
#include "shim_config.h"
#endif
#ifdef FOLD_TEST_PERF_TABLE
#include "perf_config.h"
#endif

#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_check.h"
#include "stderr_capture.h"

/* ---- the FOLD_* table --------------------------------------------------------- */

/* Each test runs in its own process: clearing the variables touches no other test. */
static void clear_fold_environment(void)
{
    for (size_t i = 0; i < fold_config_table.count; i++) {
        char env[128];
        snprintf(env, sizeof(env), "FOLD_%s", fold_config_table.fields[i].name);
        unsetenv(env);
    }
}

static int is_string_row(size_t i)
{
    return fold_config_table.fields[i].parser.read == fold_util_config_read_string;
}

Test(config, every_row_parses_its_default, .init = clear_fold_environment)
{
    fold_config_t cfg;
    cr_assert_eq(fold_config_load(&cfg), FOLD_OK);
    for (size_t i = 0; i < fold_config_table.count; i++) {
        const fold_util_config_field_t *f = &fold_config_table.fields[i];
        cr_expect_str_eq(cfg.values[i], f->default_value, "FOLD_%s", f->name);
        cr_expect(f->doc != NULL && f->doc[0] != '\0', "FOLD_%s has no description", f->name);
        cr_expect_eq(fold_config_update(&cfg, f->name, f->default_value), FOLD_OK,
                     "FOLD_%s=%s", f->name, f->default_value);
        cr_expect_eq(fold_config_index(f->name), (int)i, "FOLD_%s found elsewhere", f->name);
        char env[128];
        snprintf(env, sizeof(env), "fold_%s", f->name);
        cr_expect_eq(fold_config_index(env), (int)i, "%s: any case, with the prefix", env);
    }
    cr_expect_str_eq(cfg.transport, "ucp");
    cr_expect_eq(cfg.log_level, FOLD_LOG_WARN);
    cr_expect_eq(cfg.timeout_sec, 120.0);
    cr_expect_eq(cfg.spin_count, -1);
    cr_expect_str_eq(cfg.allreduce_alg, "auto");
    cr_expect_eq(cfg.segment_size, 0);
    cr_expect_eq(cfg.pipeline_depth, 4);
    cr_expect_eq(cfg.num_threads, 0);
    cr_expect_eq(cfg.thread_threshold, 256 * 1024);
    cr_expect_eq(cfg.dpml_leaders, 0);
    cr_expect_eq(cfg.shm_size, (size_t)4 << 20);
    cr_expect_neq(cfg.codec_mask, 0);
    cr_expect_str_eq(cfg.tune, "");
    cr_expect_str_eq(cfg.tune_file, "auto");
    fold_config_release(&cfg);
}

Test(config, the_environment_overrides_defaults, .init = clear_fold_environment)
{
    setenv("FOLD_PIPELINE_DEPTH", "7", 1);
    setenv("FOLD_SEGMENT_SIZE", "32k", 1);
    setenv("FOLD_ALLREDUCE_ALG", "ring", 1);
    fold_config_t cfg;
    cr_assert_eq(fold_config_load(&cfg), FOLD_OK);
    cr_expect_eq(cfg.pipeline_depth, 7);
    cr_expect_eq(cfg.segment_size, 32768);
    cr_expect_str_eq(cfg.allreduce_alg, "ring");
    cr_expect_str_eq(cfg.values[fold_config_index("SEGMENT_SIZE")], "32k");
    cr_expect_eq(fold_config_update(&cfg, "FOLD_SEGMENT_SIZE", "64k"), FOLD_OK);
    cr_expect_eq(cfg.segment_size, 65536);
    cr_expect_eq(fold_config_update(&cfg, "segment_size", "auto"), FOLD_OK);
    cr_expect_eq(cfg.segment_size, 0);
    fold_config_release(&cfg);

    setenv("FOLD_SHM_SIZE", "1k", 1);
    stderr_capture_begin();
    int status = fold_config_load(&cfg);
    char *log = stderr_capture_end();
    cr_expect_eq(status, FOLD_ERR_INVALID_ARG, "a bad value in the environment fails the load");
    EXPECT_LOG_HAS(log, "FOLD_SHM_SIZE");
    EXPECT_LOG_HAS(log, "'1k'");
    free(log);
}

Test(config, bad_values_are_logged_with_the_variable, .init = clear_fold_environment)
{
    static const struct {
        const char *name, *text;
    } bad[] = {
        {"TIMEOUT", "-3"},          {"TIMEOUT", "0"},         {"TIMEOUT", "nan"},
        {"SPIN_COUNT", "-2"},       {"SEGMENT_SIZE", "0"},    {"SEGMENT_SIZE", "12q"},
        {"PIPELINE_DEPTH", "0"},    {"NUM_THREADS", "-1"},    {"THREAD_THRESHOLD", "-1"},
        {"DPML_LEADERS", "0"},      {"SHM_SIZE", "1k"},       {"SHM_SIZE", "2048G"},
        {"CODEC", "bits,"},         {"LOG_LEVEL", "loud"},    {"LOG_LEVEL", ""},
    };
    fold_config_t cfg;
    cr_assert_eq(fold_config_load(&cfg), FOLD_OK);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int row = fold_config_index(bad[i].name);
        cr_assert_geq(row, 0, "%s", bad[i].name);
        fold_config_t before = cfg;
        const char *text_before = cfg.values[row];
        stderr_capture_begin();
        int status = fold_config_update(&cfg, bad[i].name, bad[i].text);
        char *log = stderr_capture_end();
        cr_expect_eq(status, FOLD_ERR_INVALID_ARG, "FOLD_%s=%s accepted", bad[i].name,
                     bad[i].text);
        char name[64], quoted[64];
        snprintf(name, sizeof(name), "FOLD_%s", bad[i].name);
        snprintf(quoted, sizeof(quoted), "'%s'", bad[i].text);
        EXPECT_LOG_HAS(log, name);
        EXPECT_LOG_HAS(log, quoted);
        EXPECT_LOG_HAS(log, "expected");
        cr_expect(fields_equal(&fold_config_table, &before, &cfg), "FOLD_%s=%s changed a field",
                     bad[i].name, bad[i].text);
        cr_expect_eq(cfg.values[row], text_before, "FOLD_%s=%s changed the text", bad[i].name,
                     bad[i].text);
        free(log);
    }
    /* Every row but the free-text ones refuses garbage the same way. */
    for (size_t i = 0; i < fold_config_table.count; i++) {
        if (is_string_row(i)) {
            continue;
        }
        const char *name = fold_config_table.fields[i].name;
        stderr_capture_begin();
        int status = fold_config_update(&cfg, name, "not-a-value");
        char *log = stderr_capture_end();
        cr_expect_eq(status, FOLD_ERR_INVALID_ARG, "FOLD_%s took garbage", name);
        char full[64];
        snprintf(full, sizeof(full), "FOLD_%s", name);
        EXPECT_LOG_HAS(log, full);
        EXPECT_LOG_HAS(log, "'not-a-value'");
        free(log);
    }
    stderr_capture_begin();
    int status = fold_config_update(&cfg, "BOGUS", "1");
    char *log = stderr_capture_end();
    cr_expect_eq(status, FOLD_ERR_NOT_FOUND);
    EXPECT_LOG_HAS(log, "unknown configuration variable 'BOGUS'");
    free(log);
    fold_config_release(&cfg);
}

Test(config, set_and_get_round_trip_on_a_context, .init = clear_fold_environment)
{
    int node_of[2] = {0, 0};
    fold_context_t *ctx;
    cr_assert_eq(fold_context_create_virtual(2, node_of, &ctx), FOLD_OK);
    const char *value = NULL;

    /* Every changeable row takes its default back, and reads back as set. */
    for (size_t i = 0; i < fold_config_table.count; i++) {
        const fold_util_config_field_t *f = &fold_config_table.fields[i];
        if (strcmp(f->name, "TRANSPORT") == 0 || strcmp(f->name, "OFI_PROVIDER") == 0) {
            continue;   /* fixed at fold_init */
        }
        cr_expect_eq(fold_config_set(ctx, f->name, f->default_value), FOLD_OK, "FOLD_%s",
                     f->name);
        cr_expect_eq(fold_config_get(ctx, f->name, &value), FOLD_OK);
        cr_expect_str_eq(value, f->default_value, "FOLD_%s", f->name);
    }

    cr_expect_eq(fold_config_set(ctx, "FOLD_SEGMENT_SIZE", "32k"), FOLD_OK);
    cr_expect_eq(fold_config_get(ctx, "segment_size", &value), FOLD_OK);
    cr_expect_str_eq(value, "32k");
    cr_expect_eq(ctx->config.segment_size, 32768);

    stderr_capture_begin();
    int status = fold_config_set(ctx, "SEGMENT_SIZE", "12q");
    char *log = stderr_capture_end();
    cr_expect_eq(status, FOLD_ERR_INVALID_ARG);
    EXPECT_LOG_HAS(log, "FOLD_SEGMENT_SIZE");
    EXPECT_LOG_HAS(log, "'12q'");
    free(log);
    cr_expect_eq(fold_config_get(ctx, "SEGMENT_SIZE", &value), FOLD_OK);
    cr_expect_str_eq(value, "32k", "a refused value leaves the old one");

    /* Selection refuses what the table accepts as text; the old value stays. */
    stderr_capture_begin();
    status = fold_config_set(ctx, "ALLREDUCE_ALG", "no_such_alg");
    log = stderr_capture_end();
    cr_expect_eq(status, FOLD_ERR_NOT_FOUND);
    EXPECT_LOG_HAS(log, "no_such_alg");
    free(log);
    cr_expect_eq(fold_config_get(ctx, "ALLREDUCE_ALG", &value), FOLD_OK);
    cr_expect_str_eq(value, "auto");
    cr_expect_str_eq(ctx->config.allreduce_alg, "auto");

    /* Settings the transport read at init cannot change. */
    stderr_capture_begin();
    status = fold_config_set(ctx, "TRANSPORT", "ofi");
    log = stderr_capture_end();
    cr_expect_eq(status, FOLD_ERR_INVALID_ARG);
    EXPECT_LOG_HAS(log, "FOLD_TRANSPORT cannot change after fold_init");
    free(log);
    cr_expect_eq(fold_config_get(ctx, "TRANSPORT", &value), FOLD_OK);
    cr_expect_str_eq(value, "ucp");

    /* What the context derives follows the setting. */
    cr_expect_eq(fold_config_set(ctx, "NUM_THREADS", "3"), FOLD_OK);
    cr_expect_eq(ctx->nthreads, 3);
    cr_expect_eq(fold_config_set(ctx, "SPIN_COUNT", "17"), FOLD_OK);
    cr_expect_eq(ctx->spin_count, 17);
    cr_expect_eq(fold_config_set(ctx, "LOG_LEVEL", "error"), FOLD_OK);
    cr_expect_eq(fold_log_level, FOLD_LOG_ERROR);
    cr_expect_eq(fold_config_set(ctx, "LOG_LEVEL", "warn"), FOLD_OK);

    cr_expect_eq(fold_config_get(ctx, "NO_SUCH_VARIABLE", &value), FOLD_ERR_NOT_FOUND);
    cr_expect_eq(fold_config_get(ctx, "TIMEOUT", NULL), FOLD_ERR_INVALID_ARG);
    fold_context_free_virtual(ctx);
    cr_expect_eq(fold_config_set(NULL, "TIMEOUT", "1"), FOLD_ERR_NOT_INITIALIZED);
    cr_expect_eq(fold_config_get(NULL, "TIMEOUT", &value), FOLD_ERR_NOT_INITIALIZED);
}

/* ---- the MPI shim's and the tools' tables ------------------------------------- */

#ifdef FOLD_TEST_SHIM_TABLE
Test(shim_config, rows_parse_their_defaults)
{
    shim_config_t c;
    char *values[16] = {NULL};
    char why[256];
    cr_assert_leq(shim_config_table.count, 16);
    cr_assert_eq(fold_util_config_init(&shim_config_table, &c, values, why, sizeof(why)),
                 FOLD_OK, "%s", why);
    cr_expect_eq(c.enable, 1);
    cr_expect_eq(c.verbose, 0);
    size_t lo, hi;
    for (int coll = 0; coll < SHIM_COLL_COUNT; coll++) {
        cr_expect_eq(c.min_bytes[coll], SHIM_SIZE_AUTO);
        cr_expect_eq(c.max_bytes[coll], SHIM_SIZE_AUTO);
        cr_expect_eq(shim_config_range(&c, (shim_coll_t)coll, &lo, &hi), 0);
    }
    fold_util_config_release(&shim_config_table, values);
}

static void clear_shim_environment(void)
{
    for (size_t i = 0; i < shim_config_table.count; i++) {
        char env[128];
        snprintf(env, sizeof(env), "FOLD_MPI_%s", shim_config_table.fields[i].name);
        unsetenv(env);
    }
}

Test(shim_config, bad_values_keep_the_default_and_rank_0_says_so,
     .init = clear_shim_environment)
{
    setenv("FOLD_MPI_ALLREDUCE_MIN", "64k", 1);
    setenv("FOLD_MPI_ALLREDUCE_MAX", "INF", 1);
    setenv("FOLD_MPI_REDUCE_MAX", "12q", 1);
    setenv("FOLD_MPI_VERBOSE", "7", 1);
    shim_config_t c;
    stderr_capture_begin();
    char refused[160];
    int n = shim_config_load(&c, 0, refused, sizeof(refused));
    char *log = stderr_capture_end();
    cr_expect_eq(n, 2);
    cr_expect_str_eq(refused, "FOLD_MPI_VERBOSE='7'");
    EXPECT_LOG_HAS(log, "FOLD_MPI_VERBOSE");
    EXPECT_LOG_HAS(log, "'7'");
    EXPECT_LOG_HAS(log, "an integer from 0 to 2");
    EXPECT_LOG_HAS(log, "FOLD_MPI_REDUCE_MAX");
    EXPECT_LOG_HAS(log, "'12q'");
    cr_expect_null(strstr(log, "ALLREDUCE"), "good values are not reported: %s", log);
    free(log);
    cr_expect_eq(c.verbose, 0);
    cr_expect_eq(c.enable, 1);
    size_t lo, hi;
    cr_expect_eq(shim_config_range(&c, SHIM_ALLREDUCE, &lo, &hi), 1);
    cr_expect_eq(lo, 65536);
    cr_expect_eq(hi, SIZE_MAX);
    cr_expect_eq(c.max_bytes[SHIM_REDUCE], SHIM_SIZE_AUTO);
    cr_expect_eq(shim_config_range(&c, SHIM_REDUCE, &lo, &hi), 0);

    stderr_capture_begin();
    cr_expect_eq(shim_config_load(&c, 1, NULL, 0), 2, "other ranks count what they refused");
    log = stderr_capture_end();
    cr_expect_str_eq(log, "", "only rank 0 warns here (the others in shim_start)");
    free(log);
}
#endif

#ifdef FOLD_TEST_PERF_TABLE
Test(perf_config, gnuplot_comes_from_the_table)
{
    setenv("FOLD_PERF_GNUPLOT", "/opt/gnuplot", 1);
    cr_expect_str_eq(perf_config()->gnuplot, "/opt/gnuplot");
    cr_expect_eq(fold_util_config_find(&perf_config_table, "FOLD_PERF_GNUPLOT"), 0);
}
#endif
