/*
 * fold_sim: fold's own schedules of one call replayed in SimGrid (docs/design/sim.md).
 * Decides as fold_info -S does, builds every rank's schedule with fold's algorithm
 * code, and replays them with one SimGrid actor per rank on a platform's hosts.
 */
#include "sim_engine.h"
#include "sim_options.h"
#include "sim_output.h"
#include "sim_platform.h"
#include "sim_setup.h"

#include "coll/select.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* SimGrid's settings for replays that add up as the cost model does: latency plus
 * bytes over the bandwidth (CM02, no correction factors, no TCP window, no reverse
 * traffic), quiet, on small stacks (one per rank). The user's --cfg= come after. */
static const char *const simgrid_defaults[] = {
    "--log=root.thresh:warning",
    "--cfg=network/model:CM02",
    "--cfg=network/latency-factor:1",
    "--cfg=network/bandwidth-factor:1",
    "--cfg=network/weight-S:0",
    "--cfg=network/crosstraffic:0",
    "--cfg=network/TCP-gamma:0",
    "--cfg=surf/precision:1e-12",
    "--cfg=contexts/stack-size:128",
};
#define NDEFAULTS (sizeof(simgrid_defaults) / sizeof(simgrid_defaults[0]))

static int load_platform(const sim_options_t *o, const sim_setup_t *s, char *temp, size_t len)
{
    char *argv[NDEFAULTS + SIM_MAX_SIMGRID_ARGS + 1];
    int argc = 0;
    argv[argc++] = o->simgrid[0];
    for (size_t i = 0; i < NDEFAULTS; i++) {
        argv[argc++] = (char *)simgrid_defaults[i];
    }
    for (int i = 1; i < o->nsimgrid; i++) {
        argv[argc++] = o->simgrid[i];
    }
    argv[argc] = NULL;
    const char *path = o->platform;
    if (path == NULL) {
        if (sim_platform_temp(&s->ctx->model, s->w->shape.nnodes, s->w->shape.max_ppn, temp,
                              len) != 0) {
            perror("fold_sim: writing the built-in platform");
            return -1;
        }
        path = temp;
    }
    char why[512];
    int status = sim_engine_load(argc, argv, path, why, sizeof(why));
    if (status == 0) {
        status = sim_engine_map_nodes(s->w->shape.nnodes, why, sizeof(why));
    }
    if (status != 0) {
        fprintf(stderr, "fold_sim: %s\n", why);
    }
    return status;
}

/* The replay and the model's prediction of the same question. */
static int simulate(const sim_options_t *o, sim_setup_t *s, sim_result_t *res)
{
    const double t0 = wall_now();
    sim_prog_t g;
    fold_topo_t *topo = s->w->select.topo;
    if (sim_prog_build(&g, topo, &s->query, &s->call) != FOLD_OK) {
        sim_prog_free(&g);
        return -1;
    }
    const double t1 = wall_now();
    char why[512];
    int status = sim_engine_run(&g, &s->call, why, sizeof(why));
    if (status != 0) {
        fprintf(stderr, "fold_sim: %s\n", why);
        sim_prog_free(&g);
        return -1;
    }
    res->build_s  = t1 - t0;
    res->replay_s = wall_now() - t1;
    double last = 0, last_out = 0;
    int any_out = 0, all_out = 1;
    for (int r = 0; r < g.size; r++) {
        double finish = 0;
        for (size_t i = g.first[r]; i < g.end[r]; i++) {
            finish = g.steps[i].t_done > finish ? g.steps[i].t_done : finish;
        }
        last = finish > last ? finish : last;
        if (g.has_out[r]) {
            last_out = finish > last_out ? finish : last_out;
            any_out  = 1;
        } else {
            all_out = 0;
        }
    }
    res->sim_us  = last * 1e6;
    res->root_us = (!all_out && any_out ? last_out : last) * 1e6;
    fold_model_result_t mr;
    res->model_us = fold_model_predict(&s->call, topo, &s->query, &mr) == FOLD_OK
                        ? mr.time_us : NAN;
    res->select_us = fold_select_predict(s->w, topo, s->query.proto.coll, &s->choice,
                                         s->bytes);
    if (o->csv) {
        sim_output_csv(stdout, s, res);
    } else {
        size_t npath;
        sim_path_elem_t *path = sim_path_find(&g, &npath);
        sim_output_text(stdout, s, &g, res, path, npath, o->path_limit);
        free(path);
    }
    sim_prog_free(&g);
    return 0;
}

int main(int argc, char **argv)
{
    sim_options_t o;
    int status = sim_options_parse(argc, argv, &o);
    if (status != 0) {
        return status == 1 ? 0 : 2;
    }
    sim_setup_t s;
    if ((status = sim_setup_context(&s, o.shape)) != 0) {
        sim_setup_free(&s);
        return status;
    }
    if (o.print_platform) {
        sim_platform_write(stdout, &s.ctx->model, s.w->shape.nnodes, s.w->shape.max_ppn);
        sim_setup_free(&s);
        return 0;
    }
    char temp[4096] = "";
    status = load_platform(&o, &s, temp, sizeof(temp)) == 0 ? 0 : 1;
    if (temp[0] != '\0') {
        unlink(temp);
    }
    if (status == 0 && o.platform != NULL) {
        status = sim_setup_params(&s, sim_engine_host_prop(0, "fold_model")) == 0 ? 0 : 1;
    }
    if (status == 0 && sim_engine_host_cores(0) < s.w->shape.max_ppn) {
        fprintf(stderr, "fold_sim: warning: host %s has %d cores for %d ranks: they share "
                "them\n", sim_engine_host_name(0), sim_engine_host_cores(0),
                s.w->shape.max_ppn);
    }
    if (status == 0) {
        status = sim_setup_choice(&s, o.coll, o.bytes, o.alg) == 0 ? 0 : 1;
    }
    sim_result_t res = {.requested = o.alg ? o.alg : "auto",
                        .platform  = o.platform ? o.platform : "built-in"};
    if (status == 0) {
        status = simulate(&o, &s, &res) == 0 ? 0 : 1;
    }
    sim_setup_free(&s);
    return status;
}
