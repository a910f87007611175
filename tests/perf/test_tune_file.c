/*
 * The tuning file fold_tune writes (perf/tune_write.c), read back through
 * fold_tune_file_load as fold reads it: rules, parameters and serve lines round-trip,
 * rules only match the measured shape, tune_verify_file catches a file that says
 * something else, and the header tells how to use it.
 */
#include <criterion/criterion.h>

#include "tune.h"

#include <fold/fold_status.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static tune_point_t pt(fold_coll_t coll, size_t bytes, const char *alg, int leaders, double us,
                       double mpi_us)
{
    tune_point_t p;
    memset(&p, 0, sizeof(p));
    p.coll = coll;
    p.bytes = bytes;
    snprintf(p.alg, sizeof(p.alg), "%s", alg);
    snprintf(p.ran, sizeof(p.ran), "%s", alg);
    p.leaders = leaders;
    p.us = us;
    p.mpi_us = mpi_us;
    return p;
}

#define AR FOLD_COLL_ALLREDUCE
#define RD FOLD_COLL_REDUCE

typedef struct fixture {
    tune_point_t        pts[64];
    size_t              npts;
    tune_size_t         sizes[32];
    size_t              nsizes;
    tune_range_t        rules[32], serve[32];
    size_t              nrules, nserve;
    fold_shape_t        shape;
    fold_model_params_t p;
    char                path[64];
} fixture_t;

/* A measured run on 1 node x 2 ranks, sizes 8 B .. 512 KiB by 4: allreduce shm_flat
 * up to 2 KiB, then dpml; reduce binomial up to 512 B, then dpml_pipelined; MPI faster
 * for reduce at 2 and 8 KiB. */
static void build(fixture_t *f, int with_mpi)
{
    memset(f, 0, sizeof(*f));
    double m = with_mpi ? 1.0 : NAN;
    size_t n = 0;
    for (size_t bytes = 8; bytes <= ((size_t)1 << 20); bytes *= 4) {
        int small = bytes <= 4096;
        f->pts[n++] = pt(AR, bytes, "shm_flat", 0, small ? 0.5 : 3.0, m * (small ? 1 : 2));
        f->pts[n++] = pt(AR, bytes, "dpml", 2, small ? 0.9 : 2.0, m * (small ? 1 : 2));
        f->pts[n++] = pt(AR, bytes, "auto", 0, small ? 0.5 : 2.0, m * (small ? 1 : 2));
        /* reduce: binomial below 1k, dpml_pipelined above; MPI wins 1k..16k */
        int mid = bytes >= 1024 && bytes <= 16384;
        f->pts[n++] = pt(RD, bytes, "binomial", 0, bytes < 1024 ? 0.3 : 5.0, m * (mid ? 0.5 : 9));
        f->pts[n++] = pt(RD, bytes, "dpml_pipelined", 1, bytes < 1024 ? 0.6 : 1.0,
                         m * (mid ? 0.5 : 9));
    }
    f->npts = n;
    f->shape = (fold_shape_t){.size = 2, .nnodes = 1, .min_ppn = 2, .max_ppn = 2};
    for (fold_coll_t c = AR; c <= RD; c++) {
        size_t k = tune_decide_sizes(f->pts, f->npts, c, TUNE_MERGE_TOLERANCE,
                                     f->sizes + f->nsizes, 32 - f->nsizes);
        f->nrules += tune_rule_ranges(f->pts, f->sizes + f->nsizes, k, f->rules + f->nrules,
                                      32 - f->nrules);
        f->nserve += tune_serve_ranges(f->pts, f->sizes + f->nsizes, k, f->serve + f->nserve,
                                       32 - f->nserve);
        f->nsizes += k;
    }
    fold_model_defaults(&f->p);
    f->p.step_us      = 0.0123456789012345;   /* needs all 17 digits to read back */
    f->p.flag_us      = 1.0 / 3.0;
    f->p.intra_gbs    = 7.25;
    f->p.cache_bytes  = 272629760;
    f->p.eager_bytes  = 16384;
    f->p.node_mem_gbs = 21.639811480470517;
    snprintf(f->path, sizeof(f->path), "/tmp/test_tune_file_XXXXXX");
    int fd = mkstemp(f->path);
    cr_assert(fd >= 0);
    close(fd);
}

static void write_it(fixture_t *f)
{
    tune_header_t h = {.fold_version = "0.1.0", .date = "2030-01-01 00:00:00 UTC",
                       .host = "testhost", .mpi_library = "Open MPI v4.1.4",
                       .sweep = "allreduce,reduce, 8 B..1 MiB x4", .shape = f->shape};
    tune_param_note_t notes[] = {{"step_us", "fitted"}, {"intra_gbs", "solved"}};
    cr_assert_eq(tune_write_path(f->path, &h, &f->p, notes, 2, f->rules, f->nrules, f->serve,
                                 f->nserve), 0);
}

static char *slurp(const char *path)
{
    FILE *in = fopen(path, "r");
    cr_assert_not_null(in);
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof(buf) - 1, in);
    buf[n] = '\0';
    fclose(in);
    return buf;
}

Test(tune_file, rules_params_and_serve_round_trip)
{
    fixture_t f;
    build(&f, 1);
    write_it(&f);
    /* allreduce: shm_flat up to 2k, dpml from 8k; reduce: binomial, dpml_pipelined */
    cr_assert_eq(f.nrules, 4);
    cr_assert_eq(f.nserve, 4, "allreduce fold; reduce fold, mpi, fold");

    fold_tune_file_t file;
    cr_assert_eq(fold_tune_file_load(f.path, &file), FOLD_OK);
    cr_assert_eq(file.rules.nrules, 4);
    cr_assert_eq(file.nserve, 4);
    char rule[256];
    fold_tune_rule_format(&file.rules.rules[0], rule, sizeof(rule));
    cr_assert_str_eq(rule, "allreduce:0-8k:n1-1:ppn2-2:shm_flat");
    fold_tune_rule_format(&file.rules.rules[1], rule, sizeof(rule));
    cr_assert_str_eq(rule, "allreduce:8k-524289:n1-1:ppn2-2:dpml");
    fold_tune_rule_format(&file.rules.rules[2], rule, sizeof(rule));
    cr_assert_str_eq(rule, "reduce:0-2k:n1-1:ppn2-2:binomial");
    fold_tune_rule_format(&file.rules.rules[3], rule, sizeof(rule));
    cr_assert_str_eq(rule, "reduce:2k-524289:n1-1:ppn2-2:dpml_pipelined");

    /* serve: reduce hands 2k..32k to MPI */
    const fold_serve_rule_t *s = fold_tune_file_serve(&file, RD, 4096, &f.shape);
    cr_assert_not_null(s);
    cr_assert_eq(s->fold, 0);
    s = fold_tune_file_serve(&file, RD, 65536, &f.shape);
    cr_assert_not_null(s);
    cr_assert_eq(s->fold, 1);
    s = fold_tune_file_serve(&file, AR, 100, &f.shape);
    cr_assert(s != NULL && s->fold == 1);

    /* parameters, bit for bit */
    fold_model_params_t q;
    cr_assert_eq(fold_model_configure(NULL, file.params, NULL, &q), FOLD_OK);
    cr_assert_eq(q.step_us, f.p.step_us);
    cr_assert_eq(q.flag_us, f.p.flag_us);
    cr_assert_eq(q.intra_gbs, f.p.intra_gbs);
    cr_assert_eq(q.cache_bytes, f.p.cache_bytes);
    cr_assert_eq(q.eager_bytes, f.p.eager_bytes);
    cr_assert_eq(q.node_mem_gbs, f.p.node_mem_gbs);
    cr_assert_eq(q.nics, f.p.nics);

    /* the rules are for this shape only */
    fold_shape_t bigger = {.size = 4, .nnodes = 1, .min_ppn = 4, .max_ppn = 4};
    fold_shape_t two_nodes = {.size = 4, .nnodes = 2, .min_ppn = 2, .max_ppn = 2};
    cr_assert_null(fold_tune_match(&file.rules, AR, 64, &bigger, 0));
    cr_assert_null(fold_tune_match(&file.rules, AR, 64, &two_nodes, 0));
    cr_assert_null(fold_tune_file_serve(&file, AR, 64, &two_nodes));
    const fold_tune_rule_t *r = fold_tune_match(&file.rules, AR, 524288, &f.shape, 0);
    cr_assert(r != NULL && strcmp(r->algs[0]->name, "dpml") == 0,
              "the largest size measured is covered");
    cr_assert_null(fold_tune_match(&file.rules, AR, 524289, &f.shape, 0),
                   "above it the model decides, not a rule measured at smaller sizes");
    fold_tune_file_release(&file);

    char why[256];
    cr_assert_eq(tune_verify_file(f.path, &f.shape, &f.p, f.pts, f.sizes, f.nsizes, f.nrules,
                                  f.nserve, why, sizeof(why)), 0, "%s", why);
    unlink(f.path);
}

Test(tune_file, a_segment_variant_round_trips)
{
    /* The fastest reduce from 32 KiB is dpml_pipelined cut into 32 KiB segments. */
    fixture_t f;
    build(&f, 0);
    for (size_t i = 0; i < f.npts; i++) {
        if (f.pts[i].coll == RD && f.pts[i].bytes >= 32768 &&
            strcmp(f.pts[i].alg, "dpml_pipelined") == 0) {
            f.pts[f.npts] = f.pts[i];
            snprintf(f.pts[f.npts].alg, sizeof(f.pts[f.npts].alg), "dpml_pipelined@32k");
            f.pts[f.npts++].us = 0.5;
        }
    }
    f.nsizes = f.nrules = f.nserve = 0;
    for (fold_coll_t c = AR; c <= RD; c++) {
        size_t k = tune_decide_sizes(f.pts, f.npts, c, TUNE_MERGE_TOLERANCE,
                                     f.sizes + f.nsizes, 32 - f.nsizes);
        f.nrules += tune_rule_ranges(f.pts, f.sizes + f.nsizes, k, f.rules + f.nrules,
                                     32 - f.nrules);
        f.nsizes += k;
    }
    write_it(&f);
    fold_tune_file_t file;
    cr_assert_eq(fold_tune_file_load(f.path, &file), FOLD_OK);
    const fold_tune_rule_t *r = fold_tune_match(&file.rules, RD, 65536, &f.shape, 0);
    cr_assert_not_null(r);
    cr_expect_eq(r->algs[0], &fold_alg_dpml_pipelined);
    cr_expect_eq(r->segs[0], 32768);
    r = fold_tune_match(&file.rules, RD, 4096, &f.shape, 0);
    cr_assert_not_null(r);
    cr_expect_eq(r->segs[0], 0, "below 32 KiB the plain case stays");
    fold_tune_file_release(&file);
    char why[256];
    cr_expect_eq(tune_verify_file(f.path, &f.shape, &f.p, f.pts, f.sizes, f.nsizes, f.nrules,
                                  f.nserve, why, sizeof(why)), 0, "%s", why);
    /* A file whose rule lost the segment says something else. */
    f.rules[f.nrules - 1].what[strlen("dpml_pipelined")] = '\0';
    write_it(&f);
    cr_expect_neq(tune_verify_file(f.path, &f.shape, &f.p, f.pts, f.sizes, f.nsizes, f.nrules,
                                   f.nserve, why, sizeof(why)), 0);
    unlink(f.path);
}

Test(tune_file, header_and_comments)
{
    fixture_t f;
    build(&f, 1);
    write_it(&f);
    const char *text = slurp(f.path);
    cr_assert(strstr(text, "# fold tuning file, written by fold_tune (fold 0.1.0) on 2030") != NULL);
    cr_assert(strstr(text, "host testhost; shape: 2 ranks on 1 node, 2-2 ranks per node") != NULL);
    cr_assert(strstr(text, "# MPI library: Open MPI v4.1.4") != NULL);
    cr_assert(strstr(text, "export FOLD_TUNE_FILE=") != NULL);
    cr_assert(strstr(text, "<prefix>/etc/fold/tune") != NULL);
    cr_assert(strstr(text, "param step_us 0.0123456789012345") != NULL, "%s", text);
    cr_assert(strstr(text, "# fitted\n") != NULL);
    cr_assert(strstr(text, "as fold_init set it (its calibration, else the default)") != NULL);
    cr_assert(strstr(text, "leaders 2 at 8 KiB..512 KiB") != NULL, "%s", text);
    cr_assert(strstr(text, "serve reduce:2k-32k:n1-1:ppn2-2:mpi") != NULL, "%s", text);
    unlink(f.path);
}

Test(tune_file, without_mpi_no_serve_lines)
{
    fixture_t f;
    build(&f, 0);
    cr_assert_eq(f.nserve, 0);
    tune_header_t h = {.fold_version = "0.1.0", .date = "now", .host = "h", .mpi_library = "",
                       .sweep = "s", .shape = f.shape};
    cr_assert_eq(tune_write_path(f.path, &h, &f.p, NULL, 0, f.rules, f.nrules, NULL, 0), 0);
    const char *text = slurp(f.path);
    cr_assert(strstr(text, "# MPI library: not timed") != NULL);
    cr_assert(strstr(text, "# no serve lines") != NULL);
    fold_tune_file_t file;
    cr_assert_eq(fold_tune_file_load(f.path, &file), FOLD_OK);
    cr_assert_eq(file.nserve, 0);
    cr_assert_eq(file.rules.nrules, (int)f.nrules);
    fold_tune_file_release(&file);
    char why[256];
    cr_assert_eq(tune_verify_file(f.path, &f.shape, &f.p, f.pts, f.sizes, f.nsizes, f.nrules,
                                  0, why, sizeof(why)), 0, "%s", why);
    unlink(f.path);
}

Test(tune_file, verify_catches_a_different_file)
{
    fixture_t f;
    build(&f, 1);
    write_it(&f);
    char why[256];
    /* other parameters than the file's */
    fold_model_params_t other = f.p;
    other.flag_us *= 1.0000001;
    cr_assert_neq(tune_verify_file(f.path, &f.shape, &other, f.pts, f.sizes, f.nsizes,
                                   f.nrules, f.nserve, why, sizeof(why)), 0);
    cr_assert(strstr(why, "parameters") != NULL, "%s", why);
    /* another verdict at a size */
    tune_size_t sizes[32];
    memcpy(sizes, f.sizes, sizeof(sizes));
    sizes[0].fold_serves = !sizes[0].fold_serves;
    cr_assert_neq(tune_verify_file(f.path, &f.shape, &f.p, f.pts, sizes, f.nsizes, f.nrules,
                                   f.nserve, why, sizeof(why)), 0);
    cr_assert(strstr(why, "serve") != NULL, "%s", why);
    /* a file that does not parse */
    FILE *out = fopen(f.path, "a");
    fprintf(out, "rule allreduce:0-inf:no_such_algorithm\n");
    fclose(out);
    cr_assert_neq(tune_verify_file(f.path, &f.shape, &f.p, f.pts, f.sizes, f.nsizes, f.nrules,
                                   f.nserve, why, sizeof(why)), 0);
    unlink(f.path);
}

Test(tune_file, write_path_failure_leaves_nothing)
{
    fixture_t f;
    build(&f, 1);
    unlink(f.path);
    tune_header_t h = {.fold_version = "0.1.0", .date = "now", .host = "h", .mpi_library = "",
                       .sweep = "s", .shape = f.shape};
    cr_assert_neq(tune_write_path("/nonexistent-dir/fold-tune.conf", &h, &f.p, NULL, 0, f.rules,
                                  f.nrules, f.serve, f.nserve), 0);
    cr_assert_neq(access("/nonexistent-dir/fold-tune.conf", F_OK), 0);
}
