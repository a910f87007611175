/* What fold_sim replays (sim_setup.h). */
#include "sim_setup.h"

#include "sim_platform.h"

#include "coll/select.h"
#include "../tools/fold_shape.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Float32, as fold_info -S decides. */
#define SIM_ESIZE 4

static int generic_model(const fold_context_t *ctx)
{
    const char *m = ctx->config.model;
    return m != NULL && strncmp(m, "generic", 7) == 0 && (m[7] == '\0' || m[7] == ',');
}

int sim_setup_context(sim_setup_t *s, const char *text)
{
    memset(s, 0, sizeof(*s));
    int *node_of, size;
    if (fold_parse_shape(text, &node_of, &size) != 0) {
        fprintf(stderr, "fold_sim: bad shape '%s': expected NODESxPPN (8x64) or the ranks of "
                "each node (2,1,1)\n", text);
        return 2;
    }
    int status = fold_context_create_virtual(size, node_of, &s->ctx);
    free(node_of);
    if (status != FOLD_OK) {
        fprintf(stderr, "fold_sim: %s\n", fold_status_string(status));
        return 1;
    }
    if (!generic_model(s->ctx)) {   /* as fold_init would measure this node */
        fold_node_calib_t calib;
        fold_node_calibrate(&calib);
        fold_context_set_measured(s->ctx, &calib);
        s->ctx->calib = calib;
        if (fold_select_configure(s->ctx) != FOLD_OK) {
            return 1;
        }
    }
    s->w = s->ctx->world;
    return fold_select_topos(s->w) == FOLD_OK ? 0 : 1;
}

int sim_setup_params(sim_setup_t *s, const char *platform_params)
{
    if (platform_params == NULL) {
        return 0;
    }
    fold_model_params_t p = s->ctx->model;
    if (sim_platform_apply_params(platform_params, &p) != 0) {
        fprintf(stderr, "fold_sim: the platform's fold_model property is not valid\n");
        return -1;
    }
    if (s->ctx->config.model != NULL && sim_platform_apply_params(s->ctx->config.model, &p)) {
        return -1;
    }
    s->ctx->model = p;
    fold_select_cache_clear(s->w);   /* decisions were made with the other parameters */
    return 0;
}

/* The cost model's question for the choice, as selection asks it (select.c): the
 * context's depth and node segment, the count and segment for `bytes`. */
static void question(sim_setup_t *s, fold_coll_t coll)
{
    const fold_context_t *ctx = s->ctx;
    const fold_choice_t *c = &s->choice;
    const size_t count = s->bytes / SIM_ESIZE;
    size_t seg = fold_select_seg_count(ctx, c->seg_bytes, s->bytes, SIM_ESIZE);
    s->query = (fold_model_query_t){
        .alg   = c->alg,
        .esize = SIM_ESIZE,
        .proto = {.coll = coll, .size = s->w->size, .root = 0, .count = count,
                  .seg_count = seg < count ? seg : count,
                  .depth = (int)ctx->config.pipeline_depth, .commutative = 1,
                  .leaders = c->leaders, .shm_count = ctx->config.shm_size / SIM_ESIZE,
                  .inter = c->inter, .root_weight = c->root_weight},
    };
    s->call = ctx->model;
    if (c->memory) {
        fold_model_mapped(&ctx->model, &s->call);
    }
    if (c->fast) {
        fold_model_params_t p = s->call;
        fold_model_tiny(&p, &s->call);
    }
    size_t seg_bytes = fold_select_seg_count(ctx, c->seg_bytes, s->bytes, 1);
    fold_select_format_alg(c->alg, s->bytes > seg_bytes ? seg_bytes : 0, s->alg,
                           sizeof(s->alg));
}

int sim_setup_choice(sim_setup_t *s, fold_coll_t coll, size_t bytes, const char *alg)
{
    s->bytes = bytes / SIM_ESIZE * SIM_ESIZE;
    fold_select_space_enter(s->w);
    int status = FOLD_OK;
    if (alg == NULL) {
        status = fold_select(s->w, coll, s->bytes / SIM_ESIZE, FOLD_FLOAT32, FOLD_OP_SUM,
                             &s->choice);
    } else {
        const fold_alg_t *a;
        size_t seg = 0;
        status = fold_select_parse_alg(alg, &a, &seg);
        if (status != FOLD_OK) {
            fprintf(stderr, "fold_sim: -A %s: %s (fold_info -a lists the algorithms)\n", alg,
                    status == FOLD_ERR_NOT_FOUND ? "no such algorithm" : "bad segment size");
        } else if (fold_alg_builder(a, coll) == NULL) {
            fprintf(stderr, "fold_sim: %s does not implement %s\n", a->name,
                    fold_coll_name(coll));
            status = FOLD_ERR_INVALID_ARG;
        } else {
            fold_select_evaluate_below(s->w, coll, a, seg, s->bytes, INFINITY, &s->choice);
        }
    }
    fold_select_space_leave(s->w);
    if (status != FOLD_OK) {
        if (alg == NULL) {
            fprintf(stderr, "fold_sim: selection failed: %s\n", fold_status_string(status));
        }
        return -1;
    }
    question(s, coll);
    return 0;
}

void sim_setup_free(sim_setup_t *s)
{
    if (s->ctx != NULL) {
        fold_context_free_virtual(s->ctx);
    }
    memset(s, 0, sizeof(*s));
}
