/*
 * fold_tune's pure planning (perf/tune.h): the cases a shape calls for, the verdict at
 * every size (fastest case, hysteresis, MPI median, serve), the merging of per-size
 * winners into size ranges, and how a range is written in the rule language.
 */
#include <criterion/criterion.h>

#include "tune.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

static fold_shape_t shape_of(int nodes, int min_ppn, int max_ppn, int size)
{
    return (fold_shape_t){.size = size, .nnodes = nodes, .min_ppn = min_ppn,
                          .max_ppn = max_ppn};
}

/* "alg/leaders alg/leaders ..." of the planned cases. */
static void cases_text(fold_coll_t coll, fold_shape_t shape, char *buf, size_t len)
{
    tune_case_t cases[TUNE_MAX_CASES];
    int n = tune_plan_cases(coll, &shape, cases, TUNE_MAX_CASES);
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        char item[96];
        snprintf(item, sizeof(item), "%s%.63s/%d", i ? " " : "", cases[i].alg, cases[i].leaders);
        strncat(buf, item, len - strlen(buf) - 1);
    }
}

Test(tune_plan, cases_one_node_two_ranks)
{
    char text[1024];
    cases_text(FOLD_COLL_ALLREDUCE, shape_of(1, 2, 2, 2), text, sizeof(text));
    cr_assert_str_eq(text, "recursive_doubling/0 rabenseifner/0 ring/0 dpml/1 dpml/2 "
                           "dpml_pipelined/1 dpml_pipelined/2 shm_flat/0 cma/1 cma/2 auto/0");
    cases_text(FOLD_COLL_REDUCE, shape_of(1, 2, 2, 2), text, sizeof(text));
    cr_assert_str_eq(text, "rabenseifner/0 ring/0 binomial/0 chain/0 bintree/0 greedy/0 "
                           "dpml/1 dpml/2 dpml_pipelined/1 dpml_pipelined/2 shm_flat/0 cma/1 cma/2 auto/0");
}

Test(tune_plan, cases_leader_counts_up_to_the_fewest_ranks)
{
    char text[1024];
    /* 8 per node: 1, 2, 4, 8; 6 per node: 1, 2, 4, 6 */
    cases_text(FOLD_COLL_ALLREDUCE, shape_of(1, 8, 8, 8), text, sizeof(text));
    cr_assert(strstr(text, "dpml/1 dpml/2 dpml/4 dpml/8 dpml_pipelined/1") != NULL, "%s", text);
    cases_text(FOLD_COLL_ALLREDUCE, shape_of(2, 6, 6, 12), text, sizeof(text));
    cr_assert(strstr(text, "dpml/1 dpml/2 dpml/4 dpml/6 dpml_pipelined/1") != NULL, "%s", text);
    cr_assert(strstr(text, "shm_flat") == NULL, "shm_flat is for one node only: %s", text);
    cr_assert(strstr(text, "cma") == NULL, "cma is for one node only: %s", text);
}

Test(tune_plan, cases_flat_shapes)
{
    char text[1024];
    /* every rank alone on its node: no node-aware algorithm */
    cases_text(FOLD_COLL_ALLREDUCE, shape_of(4, 1, 1, 4), text, sizeof(text));
    cr_assert_str_eq(text, "recursive_doubling/0 rabenseifner/0 ring/0 auto/0");
    /* 2,1,1: a node holds two ranks, the fewest is one: leaders 1 only */
    cases_text(FOLD_COLL_REDUCE, shape_of(3, 1, 2, 4), text, sizeof(text));
    cr_assert(strstr(text, "dpml/1 dpml_pipelined/1 auto/0") != NULL, "%s", text);
    cr_assert(strstr(text, "dpml/2") == NULL && strstr(text, "shm_flat") == NULL, "%s", text);
}

Test(tune_plan, case_labels)
{
    char buf[64];
    tune_case_label("dpml", "dpml", 2, buf, sizeof(buf));
    cr_assert_str_eq(buf, "dpml(2)");
    tune_case_label("ring", "ring", 0, buf, sizeof(buf));
    cr_assert_str_eq(buf, "ring");
    tune_case_label("auto", "shm_flat", 0, buf, sizeof(buf));
    cr_assert_str_eq(buf, "auto:shm_flat");
    tune_case_label("dpml@32k", "dpml", 2, buf, sizeof(buf));
    cr_assert_str_eq(buf, "dpml@32k(2)");
}

Test(tune_plan, segment_variants_of_the_fastest_case)
{
    tune_case_t out[FOLD_SELECT_SEG_TRIES];
    const tune_case_t dpml = {"dpml", 2}, autoc = {"auto", 0}, variant = {"ring@32k", 0},
                      ring = {"ring", 0};
    cr_assert_eq(tune_segment_variants(&dpml, 65536, out, FOLD_SELECT_SEG_TRIES),
                 FOLD_SELECT_SEG_TRIES);
    for (int g = 0; g < FOLD_SELECT_SEG_TRIES; g++) {
        const fold_alg_t *alg;
        size_t seg;
        cr_assert_eq(fold_select_parse_alg(out[g].alg, &alg, &seg), FOLD_OK, "%s", out[g].alg);
        cr_expect_eq(alg, &fold_alg_dpml);
        cr_expect_eq(seg, fold_select_seg_tries[g], "%s", out[g].alg);
        cr_expect_eq(out[g].leaders, 2, "the fastest case's leaders");
    }
    cr_expect_str_eq(out[1].alg, "dpml@32k");
    cr_expect_eq(tune_segment_variants(&dpml, 32768, out, FOLD_SELECT_SEG_TRIES), 0,
                 "32 KiB is one segment whichever size is tried");
    cr_expect_eq(tune_segment_tries(32768), 0);
    cr_expect_eq(tune_segment_tries(32772), FOLD_SELECT_SEG_TRIES);
    cr_expect_eq(tune_segment_variants(&autoc, 1 << 20, out, FOLD_SELECT_SEG_TRIES), 0);
    cr_expect_eq(tune_segment_variants(&variant, 1 << 20, out, FOLD_SELECT_SEG_TRIES), 0,
                 "a variant has its segment already");
    cr_expect_eq(tune_segment_variants(&ring, 1 << 20, out, 2), 2, "at most cap");
}

/* ---- verdicts ------------------------------------------------------------------ */

static tune_point_t pt(fold_coll_t coll, size_t bytes, const char *alg, int leaders, double us,
                       double mpi_us)
{
    tune_point_t p;
    memset(&p, 0, sizeof(p));
    p.coll = coll;
    p.bytes = bytes;
    snprintf(p.alg, sizeof(p.alg), "%s", alg);
    snprintf(p.ran, sizeof(p.ran), "%s", strcmp(alg, "auto") == 0 ? "ring" : alg);
    p.leaders = leaders;
    p.us = us;
    p.mpi_us = mpi_us;
    return p;
}

#define AR FOLD_COLL_ALLREDUCE
#define RD FOLD_COLL_REDUCE

Test(tune_plan, decide_fastest_and_mpi_median)
{
    tune_point_t pts[] = {
        pt(AR, 64, "ring", 0, 3.0, 2.0),
        pt(AR, 64, "dpml", 1, 2.5, 2.2),
        pt(AR, 64, "dpml", 2, 1.5, 2.4),
        pt(AR, 64, "auto", 0, 1.0, 2.6),     /* auto never wins a rule */
        pt(RD, 64, "binomial", 0, 0.5, NAN), /* another collective */
        pt(AR, 8, "ring", 0, 1.0, 0.5),      /* out of order on purpose */
    };
    tune_size_t v[4];
    size_t n = tune_decide_sizes(pts, 6, AR, 0.03, v, 4);
    cr_assert_eq(n, 2);
    cr_assert_eq(v[0].bytes, 8);
    cr_assert_eq(v[0].best, 5);
    cr_assert_eq(v[0].fold_serves, 0, "1.0 us against MPI's 0.5");
    cr_assert_eq(v[1].bytes, 64);
    cr_assert_eq(v[1].best, 2);
    cr_assert_eq(v[1].chosen, 2);
    cr_assert_eq(v[1].auto_case, 3);
    cr_assert_float_eq(v[1].fold_us, 1.5, 1e-12);
    cr_assert_float_eq(v[1].mpi_us, 2.3, 1e-12, "median of 2.0 2.2 2.4 2.6");
    cr_assert_eq(v[1].fold_serves, 1);
}

Test(tune_plan, decide_keeps_the_previous_algorithm_within_tolerance)
{
    tune_point_t pts[] = {
        pt(AR, 8, "shm_flat", 0, 1.00, NAN),  pt(AR, 8, "dpml", 1, 1.50, NAN),
        pt(AR, 16, "shm_flat", 0, 1.02, NAN), pt(AR, 16, "dpml", 1, 1.00, NAN),  /* 2% */
        pt(AR, 32, "shm_flat", 0, 1.10, NAN), pt(AR, 32, "dpml", 1, 1.00, NAN),  /* 10% */
        pt(AR, 64, "shm_flat", 0, 1.00, NAN), pt(AR, 64, "dpml", 1, 0.99, NAN),  /* back */
    };
    tune_size_t v[4];
    size_t n = tune_decide_sizes(pts, 8, AR, 0.03, v, 4);
    cr_assert_eq(n, 4);
    cr_assert_str_eq(pts[v[1].chosen].alg, "shm_flat", "within 3%% of the fastest: kept");
    cr_assert_str_eq(pts[v[1].best].alg, "dpml");
    cr_assert_str_eq(pts[v[2].chosen].alg, "dpml", "10%% slower: switched");
    cr_assert_str_eq(pts[v[3].chosen].alg, "dpml", "dpml now is the one kept");
    cr_assert_eq(v[0].fold_serves, -1, "no MPI times");
    /* without tolerance every size takes its fastest */
    n = tune_decide_sizes(pts, 8, AR, 0, v, 4);
    cr_assert_str_eq(pts[v[1].chosen].alg, "dpml");
    cr_assert_str_eq(pts[v[3].chosen].alg, "dpml");
}

Test(tune_plan, decide_widens_the_tolerance_by_the_noise)
{
    tune_point_t pts[] = {
        pt(AR, 8, "shm_flat", 0, 1.00, NAN),  pt(AR, 8, "dpml", 1, 1.50, NAN),
        pt(AR, 16, "shm_flat", 0, 1.12, NAN), pt(AR, 16, "dpml", 1, 1.00, NAN),
        pt(AR, 16, "auto", 0, 0.95, NAN),
    };
    snprintf(pts[4].ran, sizeof(pts[4].ran), "shm_flat");
    tune_size_t v[2];
    /* auto ran shm_flat in 0.95 us, shm_flat alone took 1.12: an 18% spread, so a 12%
     * lead of dpml does not displace shm_flat */
    cr_assert_eq(tune_decide_sizes(pts, 5, AR, 0.03, v, 2), 2);
    cr_assert_str_eq(pts[v[1].chosen].alg, "shm_flat");
    cr_assert_float_eq(v[1].tolerance, 1.12 / 0.95 - 1, 1e-9);
    cr_assert_float_eq(v[0].tolerance, 0.03, 1e-12, "no auto at 8 B: the base tolerance");
    /* without that auto timing, dpml takes over */
    cr_assert_eq(tune_decide_sizes(pts, 4, AR, 0.03, v, 2), 2);
    cr_assert_str_eq(pts[v[1].chosen].alg, "dpml");
    /* the spread counts up to 25% */
    pts[4].us = 0.5;
    pts[2].us = 1.4;
    cr_assert_eq(tune_decide_sizes(pts, 5, AR, 0.03, v, 2), 2);
    cr_assert_float_eq(v[1].tolerance, TUNE_MAX_TOLERANCE, 1e-12);
    cr_assert_str_eq(pts[v[1].chosen].alg, "dpml", "1.4 is beyond 1.25");
}

Test(tune_plan, decide_skips_sizes_with_only_auto)
{
    tune_point_t pts[] = {pt(AR, 8, "auto", 0, 1.0, 2.0), pt(AR, 16, "ring", 0, 1.0, 2.0)};
    tune_size_t v[2];
    cr_assert_eq(tune_decide_sizes(pts, 2, AR, 0.03, v, 2), 1);
    cr_assert_eq(v[0].bytes, 16);
}

/* ---- ranges ---------------------------------------------------------------------- */

/* Sizes 8 .. 8k by factor 4 with the winners given, one character per size:
 * s shm_flat, d dpml (leaders from `leaders`), r ring; MPI at 1 us. */
static size_t winners(const char *who, const char *leaders, const double *fold_us,
                      tune_point_t *pts, tune_size_t *sizes)
{
    size_t n = strlen(who), np = 0;
    for (size_t i = 0; i < n; i++) {
        size_t bytes = (size_t)8 << (2 * i);
        const char *alg = who[i] == 's' ? "shm_flat" : who[i] == 'd' ? "dpml" : "ring";
        int l = who[i] == 'd' ? leaders[i] - '0' : 0;
        pts[np++] = pt(AR, bytes, alg, l, fold_us[i], 1.0);
        pts[np++] = pt(AR, bytes, "recursive_doubling", 0, 100.0, 1.0);
    }
    return tune_decide_sizes(pts, np, AR, 0, sizes, 16);
}

Test(tune_plan, rule_ranges_merge_contiguous_winners)
{
    tune_point_t pts[32];
    tune_size_t sizes[16];
    tune_range_t r[16];
    double us[] = {0.5, 0.5, 0.5, 0.9, 2, 3, 4};
    size_t ns = winners("ssddddr", "0012220", us, pts, sizes);
    cr_assert_eq(ns, 7);
    size_t n = tune_rule_ranges(pts, sizes, ns, r, 16);
    cr_assert_eq(n, 3);
    cr_assert_str_eq(r[0].what, "shm_flat");
    cr_assert_eq(r[0].lo, 0, "the first range starts at 0");
    cr_assert_eq(r[0].hi, 128, "and ends at the next range's first size");
    cr_assert_eq(r[0].first, 8);
    cr_assert_eq(r[0].last, 32);
    cr_assert_str_eq(r[0].note, "measured 8 B..32 B");
    cr_assert_str_eq(r[1].what, "dpml");
    cr_assert_eq(r[1].lo, 128);
    cr_assert_eq(r[1].hi, 32768);
    cr_assert_str_eq(r[1].note, "measured 128 B..8 KiB; leaders 1 at 128 B, 2 at 512 B..8 KiB");
    cr_assert_str_eq(r[2].what, "ring");
    cr_assert_eq(r[2].lo, 32768);
    cr_assert_eq(r[2].hi, 32768 + 1, "the last range ends after the largest size measured");
    cr_assert_str_eq(r[2].note, "measured 32 KiB");
}

Test(tune_plan, rule_ranges_single_winner_covers_the_measured_sizes)
{
    tune_point_t pts[32];
    tune_size_t sizes[16];
    tune_range_t r[4];
    double us[] = {0.5, 0.5, 0.5};
    size_t ns = winners("sss", "000", us, pts, sizes);
    cr_assert_eq(tune_rule_ranges(pts, sizes, ns, r, 4), 1);
    cr_assert_eq(r[0].lo, 0);
    cr_assert_eq(r[0].hi, 128 + 1, "up to the largest size measured (128 B), the model above");
}

Test(tune_plan, serve_ranges_require_fold_at_most_mpi)
{
    tune_point_t pts[32];
    tune_size_t sizes[16];
    tune_range_t r[8];
    /* MPI takes 1 us everywhere: fold serves where it takes at most that (a tie too) */
    double us[] = {0.5, 1.0, 1.5, 2.0, 0.9};
    size_t ns = winners("sssss", "00000", us, pts, sizes);
    size_t n = tune_serve_ranges(pts, sizes, ns, r, 8);
    cr_assert_eq(n, 3);
    cr_assert_str_eq(r[0].what, "fold");
    cr_assert_eq(r[0].lo, 0);
    cr_assert_eq(r[0].hi, 128);
    cr_assert_str_eq(r[0].note, "measured 8 B..32 B; MPI time / fold time 1.00..2.00");
    cr_assert_str_eq(r[1].what, "mpi");
    cr_assert_eq(r[1].lo, 128);
    cr_assert_eq(r[1].hi, 2048);
    cr_assert_str_eq(r[2].what, "fold");
    cr_assert_eq(r[2].hi, 2048 + 1);
}

Test(tune_plan, serve_ranges_none_without_mpi)
{
    tune_point_t pts[] = {pt(AR, 8, "ring", 0, 1.0, NAN), pt(AR, 16, "ring", 0, 1.0, NAN)};
    tune_size_t sizes[2];
    tune_range_t r[2];
    size_t ns = tune_decide_sizes(pts, 2, AR, 0.03, sizes, 2);
    cr_assert_eq(tune_serve_ranges(pts, sizes, ns, r, 2), 0);
}

Test(tune_plan, range_where_keys_the_measured_shape)
{
    char buf[256];
    fold_shape_t shape = shape_of(2, 4, 4, 8);
    tune_range_t r = {.coll = FOLD_COLL_REDUCE, .lo = 0, .hi = 4096};
    tune_range_where(&r, &shape, buf, sizeof(buf));
    cr_assert_str_eq(buf, "reduce:0-4k:n2-2:ppn4-4");
    r = (tune_range_t){.coll = FOLD_COLL_ALLREDUCE, .lo = (size_t)1 << 20, .hi = SIZE_MAX};
    shape = shape_of(1, 2, 2, 2);
    tune_range_where(&r, &shape, buf, sizeof(buf));
    cr_assert_str_eq(buf, "allreduce:1M-inf:n1-1:ppn2-2");
    r.lo = 96;
    r.hi = 1536;
    tune_range_where(&r, &shape, buf, sizeof(buf));
    cr_assert_str_eq(buf, "allreduce:96-1536:n1-1:ppn2-2");
}

Test(tune_plan, format_bytes)
{
    char buf[32];
    tune_format_bytes(8, buf, sizeof(buf));
    cr_assert_str_eq(buf, "8 B");
    tune_format_bytes(4096, buf, sizeof(buf));
    cr_assert_str_eq(buf, "4 KiB");
    tune_format_bytes((size_t)64 << 20, buf, sizeof(buf));
    cr_assert_str_eq(buf, "64 MiB");
    tune_format_bytes((size_t)3 << 29, buf, sizeof(buf));
    cr_assert_str_eq(buf, "1536 MiB");
    tune_format_bytes(1536, buf, sizeof(buf));
    cr_assert_str_eq(buf, "1.5 KiB");
}

Test(tune_plan, decide_takes_a_segment_variant_that_is_fastest)
{
    tune_point_t pts[] = {
        pt(FOLD_COLL_REDUCE, 131072, "shm_flat", 0, 12.0, NAN),
        pt(FOLD_COLL_REDUCE, 131072, "dpml", 2, 13.0, NAN),
        pt(FOLD_COLL_REDUCE, 131072, "shm_flat@128k", 0, 12.1, NAN),
        pt(FOLD_COLL_REDUCE, 131072, "shm_flat@32k", 0, 8.0, NAN),
        pt(FOLD_COLL_REDUCE, 131072, "shm_flat@512k", 0, 12.2, NAN),
    };
    tune_size_t v;
    cr_assert_eq(tune_decide_sizes(pts, 5, FOLD_COLL_REDUCE, TUNE_MERGE_TOLERANCE, &v, 1), 1);
    cr_expect_str_eq(pts[v.chosen].alg, "shm_flat@32k");
}
