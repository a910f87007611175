/*
 * fold_tune's fit (perf/tune_fit.c) on synthetic "measurements" made by the cost model
 * itself with known parameters: the fit must find those parameters again (step_us,
 * flag_us, a latency through an anchor, a bandwidth, cache_bytes, eager_bytes), and
 * leave alone a parameter the measurements do not depend on.
 */
#include <criterion/criterion.h>

#include "tune_fit.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static void no_tuning_file(void)
{
    setenv("FOLD_TUNE_FILE", "none", 1);
    unsetenv("FOLD_MODEL");
}

TestSuite(tune_fit, .init = no_tuning_file);

#define MAX_OBS 512

typedef struct synth {
    tune_obs_t obs[MAX_OBS];
    size_t     n;
} synth_t;

/* Adds alg (with each of the leader counts, 0: none) at sizes lo..hi (x4), timed by
 * the model with the true parameters. */
static void add(synth_t *s, tune_model_t *m, const fold_model_params_t *truth, fold_coll_t coll,
                const char *name, const int *leaders, int nleaders, size_t lo, size_t hi)
{
    const fold_alg_t *alg = fold_alg_find(name);
    cr_assert_not_null(alg, "%s", name);
    for (int l = 0; l < nleaders; l++) {
        for (size_t bytes = lo; bytes <= hi; bytes *= 4) {
            cr_assert_lt(s->n, MAX_OBS);
            tune_obs_t *o = &s->obs[s->n++];
            *o = (tune_obs_t){.model = m, .coll = coll, .alg = alg, .leaders = leaders[l],
                              .bytes = bytes};
            o->us = tune_obs_predict(o, truth);
            cr_assert(isfinite(o->us) && o->us > 0, "%s %zu: %f", name, bytes, o->us);
        }
    }
}

static int node_of_one[8] = {0, 0, 0, 0, 0, 0, 0, 0};
static int node_of_flat[8] = {0, 1, 2, 3, 4, 5, 6, 7};
static const int none[1] = {0};
static const int dpml_leaders[3] = {1, 2, 4};

static void close_enough(double got, double want, double rel, const char *what)
{
    cr_assert(fabs(got - want) <= rel * want, "%s: fitted %.6g, true %.6g", what, got, want);
}

/* The small-message families of one node of 4 ranks. */
static void small_messages(synth_t *s, tune_model_t *m, const fold_model_params_t *truth)
{
    add(s, m, truth, FOLD_COLL_ALLREDUCE, "recursive_doubling", none, 1, 8, 4096);
    add(s, m, truth, FOLD_COLL_ALLREDUCE, "ring", none, 1, 8, 4096);
    add(s, m, truth, FOLD_COLL_ALLREDUCE, "shm_flat", none, 1, 8, 4096);
    add(s, m, truth, FOLD_COLL_ALLREDUCE, "dpml", dpml_leaders, 3, 8, 4096);
    add(s, m, truth, FOLD_COLL_REDUCE, "binomial", none, 1, 8, 4096);
    add(s, m, truth, FOLD_COLL_REDUCE, "dpml_pipelined", dpml_leaders, 3, 8, 4096);
}

Test(tune_fit, recovers_step_and_flag)
{
    tune_model_t m;
    cr_assert_eq(tune_model_open(&m, 4, node_of_one), FOLD_OK);
    fold_model_params_t truth, p;
    fold_model_defaults(&truth);
    truth.step_us = 0.08;
    truth.flag_us = 0.3;
    synth_t s = {.n = 0};
    small_messages(&s, &m, &truth);

    fold_model_defaults(&p);   /* step 0.05, flag 0.15: both wrong */
    tune_fit_report_t rep;
    cr_assert_eq(tune_fit_overheads(&p, s.obs, s.n, NULL, 0, &rep), 0);
    close_enough(p.step_us, truth.step_us, 0.02, "step_us");
    close_enough(p.flag_us, truth.flag_us, 0.02, "flag_us");
    cr_assert_gt(rep.rms_before, 0.01);
    cr_assert_lt(rep.rms_after, 0.01, "rms %f", rep.rms_after);
    cr_assert_eq(rep.nobs, s.n);
    cr_assert_gt(rep.evaluations, 50);
    tune_model_close(&m);
}

Test(tune_fit, recovers_them_from_any_start)
{
    tune_model_t m;
    cr_assert_eq(tune_model_open(&m, 4, node_of_one), FOLD_OK);
    fold_model_params_t truth, p;
    fold_model_defaults(&truth);
    truth.step_us = 0.012;
    truth.flag_us = 0.9;
    synth_t s = {.n = 0};
    small_messages(&s, &m, &truth);
    fold_model_defaults(&p);
    p.step_us = 3;
    p.flag_us = 0.001;
    tune_fit_report_t rep;
    tune_fit_overheads(&p, s.obs, s.n, NULL, 0, &rep);
    close_enough(p.step_us, truth.step_us, 0.02, "step_us");
    close_enough(p.flag_us, truth.flag_us, 0.02, "flag_us");
    tune_model_close(&m);
}

/* The latency of a 2-rank pair anchors intra_lat_us while step_us and flag_us move. */
Test(tune_fit, anchored_latency_stays_consistent)
{
    tune_model_t m, pair;
    static const int same_node[2] = {0, 0};
    cr_assert_eq(tune_model_open(&m, 4, node_of_one), FOLD_OK);
    cr_assert_eq(tune_model_open(&pair, 2, same_node), FOLD_OK);
    fold_model_params_t truth, p;
    fold_model_defaults(&truth);
    truth.step_us      = 0.07;
    truth.flag_us      = 0.25;
    truth.intra_lat_us = 0.9;
    synth_t s = {.n = 0};
    small_messages(&s, &m, &truth);
    tune_anchor_t anchor = {
        .obs = {.model = &pair, .coll = FOLD_COLL_ALLREDUCE,
                .alg = fold_alg_find("recursive_doubling"), .bytes = 8},
        .offset = offsetof(fold_model_params_t, intra_lat_us)};
    anchor.obs.us = tune_obs_predict(&anchor.obs, &truth);

    fold_model_defaults(&p);   /* intra_lat_us 0.5 */
    tune_fit_report_t rep;
    tune_fit_overheads(&p, s.obs, s.n, &anchor, 1, &rep);
    close_enough(p.step_us, truth.step_us, 0.02, "step_us");
    close_enough(p.flag_us, truth.flag_us, 0.02, "flag_us");
    close_enough(p.intra_lat_us, truth.intra_lat_us, 0.02, "intra_lat_us");
    /* the anchor's own time is reproduced exactly */
    close_enough(tune_obs_predict(&anchor.obs, &p), anchor.obs.us, 1e-6, "anchor time");
    tune_model_close(&m);
    tune_model_close(&pair);
}

Test(tune_fit, solve_anchor_alone)
{
    tune_model_t pair;
    static const int two_nodes[2] = {0, 1};
    cr_assert_eq(tune_model_open(&pair, 2, two_nodes), FOLD_OK);
    fold_model_params_t truth, p;
    fold_model_defaults(&truth);
    truth.inter_lat_us = 3.7;
    tune_anchor_t anchor = {
        .obs = {.model = &pair, .coll = FOLD_COLL_ALLREDUCE,
                .alg = fold_alg_find("recursive_doubling"), .bytes = 8},
        .offset = offsetof(fold_model_params_t, inter_lat_us)};
    anchor.obs.us = tune_obs_predict(&anchor.obs, &truth);
    fold_model_defaults(&p);
    tune_solve_anchors(&p, &anchor, 1);
    close_enough(p.inter_lat_us, 3.7, 1e-6, "inter_lat_us");
    /* a time below what the rest already costs: the latency stops at 0 */
    anchor.obs.us = 1e-3;
    tune_solve_anchors(&p, &anchor, 1);
    cr_assert_eq(p.inter_lat_us, 0);
    tune_model_close(&pair);
}

Test(tune_fit, solve_rate_recovers_bandwidth)
{
    tune_model_t pair;
    static const int same_node[2] = {0, 0};
    cr_assert_eq(tune_model_open(&pair, 2, same_node), FOLD_OK);
    fold_model_params_t truth, p;
    fold_model_defaults(&truth);
    truth.intra_gbs = 6.5;
    synth_t s = {.n = 0};
    add(&s, &pair, &truth, FOLD_COLL_ALLREDUCE, "recursive_doubling", none, 1, 1 << 20, 4 << 20);
    cr_assert_eq(s.n, 2);
    fold_model_defaults(&p);   /* 10 GB/s */
    cr_assert_eq(tune_solve_rate(&p, s.obs, s.n, NULL, 0, offsetof(fold_model_params_t, intra_gbs),
                                 0.05, 2000), 0);
    close_enough(p.intra_gbs, 6.5, 1e-4, "intra_gbs");
    /* no observations: unchanged */
    cr_assert_eq(tune_solve_rate(&p, s.obs, 0, NULL, 0, offsetof(fold_model_params_t, intra_gbs),
                                 0.05, 2000), -1);
    close_enough(p.intra_gbs, 6.5, 1e-4, "intra_gbs");
    tune_model_close(&pair);
}

Test(tune_fit, flag_left_alone_without_shared_memory)
{
    tune_model_t m;
    cr_assert_eq(tune_model_open(&m, 4, node_of_flat), FOLD_OK);
    fold_model_params_t truth, p;
    fold_model_defaults(&truth);
    truth.step_us = 0.2;
    synth_t s = {.n = 0};
    add(&s, &m, &truth, FOLD_COLL_ALLREDUCE, "recursive_doubling", none, 1, 8, 4096);
    add(&s, &m, &truth, FOLD_COLL_REDUCE, "binomial", none, 1, 8, 4096);
    fold_model_defaults(&p);
    p.flag_us = 0.123;
    tune_fit_report_t rep;
    tune_fit_overheads(&p, s.obs, s.n, NULL, 0, &rep);
    close_enough(p.step_us, 0.2, 0.02, "step_us");
    cr_assert_eq(p.flag_us, 0.123, "no flag in any schedule: flag_us kept");
    tune_model_close(&m);
}

Test(tune_fit, no_observations_changes_nothing)
{
    fold_model_params_t p, q;
    fold_model_defaults(&p);
    q = p;
    tune_fit_report_t rep;
    cr_assert_eq(tune_fit_overheads(&p, NULL, 0, NULL, 0, &rep), -1);
    cr_assert_eq(p.step_us, q.step_us);
    cr_assert_eq(p.flag_us, q.flag_us);
    cr_assert_eq(tune_fit_eager(&p, NULL, 0, NULL, 0, 0.05, &rep), 0);
    cr_assert_eq(tune_fit_cache(&p, NULL, 0, NULL, 0, NULL, 0, 0.05, &rep), 0);
}

Test(tune_fit, recovers_cache_bytes)
{
    tune_model_t m;
    cr_assert_eq(tune_model_open(&m, 4, node_of_one), FOLD_OK);
    fold_model_params_t truth, p;
    fold_model_defaults(&truth);
    truth.cache_bytes = 8 << 20;
    synth_t s = {.n = 0};
    add(&s, &m, &truth, FOLD_COLL_ALLREDUCE, "shm_flat", none, 1, 4096, 16 << 20);
    add(&s, &m, &truth, FOLD_COLL_ALLREDUCE, "ring", none, 1, 4096, 16 << 20);
    fold_model_defaults(&p);   /* 32 MiB */
    tune_fit_report_t rep;
    cr_assert_eq(tune_fit_cache(&p, s.obs, s.n, NULL, 0, NULL, 0, 0.05, &rep), 1);
    cr_assert_eq(p.cache_bytes, truth.cache_bytes, "fitted %.0f (rms %g -> %g)", p.cache_bytes,
                 rep.rms_before, rep.rms_after);
    cr_assert_lt(rep.rms_after, 1e-9);
    /* already right: kept */
    cr_assert_eq(tune_fit_cache(&p, s.obs, s.n, NULL, 0, NULL, 0, 0.05, &rep), 0);
    cr_assert_eq(p.cache_bytes, truth.cache_bytes);
    tune_model_close(&m);
}

Test(tune_fit, eager_bytes_only_when_it_matters)
{
    tune_model_t m;
    cr_assert_eq(tune_model_open(&m, 8, node_of_flat), FOLD_OK);
    fold_model_params_t truth, p;
    fold_model_defaults(&truth);
    truth.eager_bytes = 32768;
    synth_t s = {.n = 0};
    add(&s, &m, &truth, FOLD_COLL_REDUCE, "binomial", none, 1, 4096, 1 << 20);
    add(&s, &m, &truth, FOLD_COLL_REDUCE, "chain", none, 1, 4096, 1 << 20);
    add(&s, &m, &truth, FOLD_COLL_ALLREDUCE, "ring", none, 1, 4096, 1 << 20);
    fold_model_defaults(&p);   /* 8192 */
    double before = tune_log_rms(&p, s.obs, s.n, NULL, 0);
    tune_fit_report_t rep;
    int changed = tune_fit_eager(&p, s.obs, s.n, NULL, 0, 0.05, &rep);
    if (before > 1e-9) {
        cr_assert_eq(changed, 1);
        cr_assert_eq(p.eager_bytes, 32768);
        cr_assert_lt(rep.rms_after, 1e-9);
    } else {
        cr_assert_eq(changed, 0, "the times do not depend on it: kept");
        cr_assert_eq(p.eager_bytes, 8192);
    }
    tune_model_close(&m);
}

Test(tune_fit, predictions_follow_leaders)
{
    tune_model_t m;
    cr_assert_eq(tune_model_open(&m, 8, node_of_one), FOLD_OK);
    fold_model_params_t p;
    fold_model_defaults(&p);
    const fold_alg_t *dpml = fold_alg_find("dpml");
    double one = tune_model_predict(&m, &p, FOLD_COLL_ALLREDUCE, dpml, 0, 1, 1 << 20);
    double eight = tune_model_predict(&m, &p, FOLD_COLL_ALLREDUCE, dpml, 0, 8, 1 << 20);
    double best = tune_model_predict(&m, &p, FOLD_COLL_ALLREDUCE, dpml, 0, 0, 1 << 20);
    cr_assert(isfinite(one) && isfinite(eight) && isfinite(best));
    cr_assert_neq(one, eight, "the leader count reaches the model");
    cr_assert_leq(best, fmin(one, eight) + 1e-9, "0: the model's own pick is the best");
    cr_assert(isinf(tune_model_predict(&m, &p, FOLD_COLL_ALLREDUCE, fold_alg_find("binomial"), 0, 0,
                                       64)),
              "binomial is not an allreduce");
    tune_model_close(&m);
}
