/*
 * The traced call's timeline (exec_trace.h). Times are in us from the call's start
 * on this rank; ranks start at different moments, so compare a rank's steps with
 * each other and with the model's column, not across ranks.
 */
#include "exec_trace.h"
#include "comm.h"
#include "context.h"
#include "exec.h"
#include "log.h"
#include "model.h"
#include "util/clock.h"

#include <fold/fold_status.h>
#include <stdlib.h>

void fold_exec_trace_begin(fold_request_t *req)
{
    fold_context_t *ctx = req->comm->ctx;
    long want = ctx->config.trace;
    req->trace = NULL;
    /* The internal collectives (node setup's allgathers, bcast, barrier) are not
     * the calls a user counts. */
    if (want <= 0 || req->entry->alg == NULL || ++ctx->calls_run != want) {
        return;
    }
    req->trace = calloc(2 * req->sched->nsteps + 1, sizeof(double));
    if (req->trace == NULL) {
        fold_warn("FOLD_TRACE: no memory to trace call %ld", want);
        return;
    }
    req->trace[2 * req->sched->nsteps] = fold_util_time_now();
}

void fold_exec_trace_step(fold_request_t *req, size_t i, int done)
{
    if (req->trace == NULL) {
        return;
    }
    double t = fold_util_time_now() - req->trace[2 * req->sched->nsteps];
    req->trace[2 * i + (size_t)done] = t;
    if (done && req->trace[2 * i] == 0) {
        req->trace[2 * i] = t;   /* started and done in one go (a flag post) */
    }
}

static const char *const buf_names[FOLD_BUF_COUNT] = {"in", "out", "tmp", "shm", "peer"};

static const char *buf_name(uint8_t buf)
{
    return buf < FOLD_BUF_COUNT ? buf_names[buf] : "?";
}

/* What a step moves, and between what, in a few words. */
static void describe(const fold_step_t *st, size_t esize, char *buf, size_t len)
{
    size_t bytes = st->count * esize;
    switch (st->kind) {
    case FOLD_STEP_SEND:
        snprintf(buf, len, "%zu B %s -> rank %d", bytes, buf_name(st->src.buf), st->peer);
        break;
    case FOLD_STEP_RECV:
        snprintf(buf, len, "%zu B rank %d -> %s", bytes, st->peer, buf_name(st->dst.buf));
        break;
    case FOLD_STEP_REDUCE:
        snprintf(buf, len, "%zu B %s + %s -> %s", bytes, buf_name(st->src.buf),
                 buf_name(st->src2.buf), buf_name(st->dst.buf));
        break;
    case FOLD_STEP_REDUCE_ROWS:
        snprintf(buf, len, "%u x %zu B -> %s", st->nops, bytes, buf_name(st->dst.buf));
        break;
    case FOLD_STEP_COPY:
        snprintf(buf, len, "%zu B %s -> %s", bytes, buf_name(st->src.buf),
                 buf_name(st->dst.buf));
        break;
    case FOLD_STEP_SHM_POST:
        snprintf(buf, len, "%s = %llu", fold_flag_name(st->flag),
                 (unsigned long long)st->value);
        break;
    case FOLD_STEP_SHM_WAIT:
        snprintf(buf, len, "%s of local %d >= %llu", fold_flag_name(st->flag), st->local,
                 (unsigned long long)st->value);
        break;
    default:
        snprintf(buf, len, "%zu B, local rank %d", bytes, st->local);
    }
}

/* The model's end time of each of this rank's steps, NULL where it has none for
 * this schedule (an internal collective, or a schedule laid out otherwise). */
static double *predicted(const fold_request_t *req, double *total_us)
{
    const fold_comm_t *comm = req->comm;
    const fold_sched_entry_t *e = req->entry;
    const fold_topo_t *topo = comm->select.topo;
    if (e->alg == NULL || topo == NULL || topo->size != comm->size) {
        return NULL;
    }
    size_t n = req->sched->nsteps, nsteps = 0;
    double *done = calloc(n ? n : 1, sizeof(double));
    fold_model_query_t q = {.alg = e->alg, .proto = e->args, .esize = req->esize};
    fold_model_result_t res;
    fold_model_params_t mapped;   /* a call chosen for buffers in fold memory: their prices */
    const fold_model_params_t *params = &comm->ctx->model;
    if (req->memory) {
        fold_model_mapped(params, &mapped);
        params = &mapped;
    }
    if (done == NULL ||
        fold_model_predict_steps(params, topo, &q, comm->rank, done, n, &nsteps, &res) !=
            FOLD_OK || nsteps != n) {
        free(done);
        return NULL;
    }
    *total_us = res.time_us;
    return done;
}

void fold_exec_trace_end(fold_request_t *req, int status)
{
    if (req->trace == NULL) {
        return;
    }
    const fold_sched_t *s = req->sched;
    double total = fold_util_time_now() - req->trace[2 * s->nsteps];
    double model_total = 0;
    double *model = predicted(req, &model_total);
    char head[64];
    if (model != NULL) {
        snprintf(head, sizeof(head), ", model %.2f us", model_total);
    } else {
        snprintf(head, sizeof(head), ", no model timeline");
    }
    fold_log_emit(FOLD_LOG_INFO, __FILE__, __LINE__,
                  "trace: %s (%s) on comm %u, rank %d of %d, %zu elements of %zu B: %zu "
                  "steps, %.2f us%s, %s", fold_coll_name(req->coll),
                  req->alg_name ? req->alg_name : "internal", req->comm->id, req->comm->rank,
                  req->comm->size, req->entry->args.count, req->esize, s->nsteps, total * 1e6, head,
                  fold_status_string(status));
    fold_log_emit(FOLD_LOG_INFO, __FILE__, __LINE__,
                  "trace:  step kind    start_us   end_us  took_us  model_end_us  what");
    for (size_t i = 0; i < s->nsteps; i++) {
        const fold_step_t *st = &s->steps[i];
        char what[96], model_end[16] = "-";
        describe(st, req->esize, what, sizeof(what));
        if (model != NULL) {
            snprintf(model_end, sizeof(model_end), "%.2f", model[i]);
        }
        double t0 = req->trace[2 * i] * 1e6, t1 = req->trace[2 * i + 1] * 1e6;
        fold_log_emit(FOLD_LOG_INFO, __FILE__, __LINE__,
                      "trace: %5zu %-7s %9.2f %8.2f %8.2f %13s  %s", i,
                      fold_step_kind_name(st->kind), t0, t1, t1 - t0, model_end, what);
    }
    free(model);
    fold_exec_trace_free(req);
}

void fold_exec_trace_free(fold_request_t *req)
{
    free(req->trace);
    req->trace = NULL;
}
