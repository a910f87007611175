/* fold_sim's results (sim_output.h). */
#include "sim_output.h"

#include "coll/sched.h"

#include <math.h>

void sim_output_text(FILE *out, const sim_setup_t *s, const sim_prog_t *g,
                     const sim_result_t *r, const sim_path_elem_t *path, size_t npath,
                     size_t limit)
{
    const fold_choice_t *c = &s->choice;
    const fold_shape_t *sh = &s->w->shape;
    fprintf(out, "# fold_sim: %s of %zu B (float32 sum) on %d ranks over %d nodes (%d-%d per "
            "node), platform %s\n", fold_coll_name(s->query.proto.coll), s->bytes, sh->size,
            sh->nnodes, sh->min_ppn, sh->max_ppn, r->platform);
    fprintf(out, "# algorithm %s (%s), %d leaders, between nodes %s%s\n", s->alg,
            r->requested, c->leaders, c->inter ? c->inter->name : "-",
            c->fast ? ", the node's tiny-message path" : "");
    fprintf(out, "# %zu steps, %zu messages of %llu B in all; built in %.2f s, replayed in "
            "%.2f s\n", g->nsteps, g->nmsgs, (unsigned long long)g->msg_bytes, r->build_s,
            r->replay_s);
    fprintf(out, "simulated_us %.3f\n", r->sim_us);
    if (s->query.proto.coll == FOLD_COLL_REDUCE) {
        fprintf(out, "root_us      %.3f\n", r->root_us);
    }
    if (!isnan(r->model_us)) {
        fprintf(out, "model_us     %.3f  (fold's model of the same schedules; simulated %+.1f%%)"
                "\n", r->model_us, (r->sim_us / r->model_us - 1) * 100);
    }
    fprintf(out, "select_us    %.3f  (what selection predicts for the choice)\n", r->select_us);
    sim_path_print(out, g, path, npath, limit);
}

static void number(FILE *out, double v)
{
    fputc(',', out);
    if (!isnan(v)) {
        fprintf(out, "%.3f", v);
    }
}

void sim_output_csv(FILE *out, const sim_setup_t *s, const sim_result_t *r)
{
    const fold_choice_t *c = &s->choice;
    const size_t count = s->bytes / 4;
    const int ranks = s->w->size;
    const double algbw = (double)s->bytes / (r->sim_us * 1e3);
    const double busbw = s->query.proto.coll == FOLD_COLL_ALLREDUCE
                             ? algbw * 2 * (ranks - 1) / ranks : algbw;
    fprintf(out, "collective,algorithm,requested,bytes,count,iterations,avg_us,min_us,max_us,"
                 "median_us,p99_us,algbw_gbs,busbw_gbs,bound_us,check,ranks,dtype,op,"
                 "first_us,worst2-10_us,first_calls,segment_bytes,"
                 "nodes,leaders,between_nodes,model_us,select_us,platform\n");
    fprintf(out, "%s,%s,%s,%zu,%zu,1", fold_coll_name(s->query.proto.coll), s->alg,
            r->requested, s->bytes, count);
    for (int i = 0; i < 5; i++) {
        number(out, r->sim_us);
    }
    fprintf(out, ",%.6f,%.6f,,simulated,%d,float32,sum,,,0,%zu", algbw, busbw, ranks,
            s->query.proto.seg_count * 4);
    fprintf(out, ",%d,%d,%s", s->w->shape.nnodes, c->leaders, c->inter ? c->inter->name : "");
    number(out, r->model_us);
    number(out, r->select_us);
    fprintf(out, ",%s\n", r->platform);
}
