/*
 * The executor: the only code that touches both the transport and the reduce
 * kernels. It runs one schedule per request as a dataflow: a step starts when the
 * steps it depends on are done; sends and receives are posted non-blocking and
 * polled, reductions and copies run inline. The same path serves blocking calls
 * (start + wait) and non-blocking ones (start + test).
 *
 * Every wait is bounded: a request that makes no progress for FOLD_TIMEOUT seconds
 * fails with FOLD_ERR_TIMEOUT and a message naming the collective, the algorithm,
 * the peer and the step it was stuck on.
 */
#include "core.h"
#include "log.h"
#include "codec/reduce_kernel.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Tag layout (44 bits): communicator id | collective sequence | message number. */
#define TAG_SEQ_BITS  20
#define TAG_COLL_BITS 8
#define TAG_COMM_BITS 16

double fold_time_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- schedule cache --------------------------------------------------------- */

static int args_equal(const fold_coll_args_t *a, const fold_coll_args_t *b)
{
    return a->coll == b->coll && a->rank == b->rank && a->size == b->size &&
           a->root == b->root && a->count == b->count && a->seg_count == b->seg_count &&
           a->depth == b->depth && a->inplace == b->inplace &&
           a->commutative == b->commutative;
}

static void entry_clear(fold_sched_entry_t *e)
{
    fold_sched_cleanup(&e->sched);
    free(e->spare);
    memset(e, 0, sizeof(*e));
}

static int sched_lookup(fold_comm_t *comm, const fold_exec_args_t *args,
                        fold_sched_entry_t **entry_p)
{
    fold_sched_entry_t *victim = NULL;
    for (int i = 0; i < FOLD_SCHED_CACHE_SIZE; i++) {
        fold_sched_entry_t *e = &comm->cache[i];
        if (e->last_use != 0 && e->alg == args->alg && args_equal(&e->args, &args->cargs)) {
            e->last_use = ++comm->use_clock;
            *entry_p    = e;
            return FOLD_OK;
        }
        if (e->refs == 0 && (victim == NULL || e->last_use < victim->last_use)) {
            victim = e;
        }
    }
    if (victim == NULL) {
        fold_error("comm %u: more than %d collectives of different shapes in flight",
                   comm->id, FOLD_SCHED_CACHE_SIZE);
        return FOLD_ERR_BUSY;
    }

    entry_clear(victim);
    fold_sched_init(&victim->sched, &args->cargs);
    int status = args->build(&args->cargs, &victim->sched);
    if (status == FOLD_OK) {
        status = fold_sched_finalize(&victim->sched);
    }
    if (status != FOLD_OK) {
        fold_error("%s (%s): building the schedule for rank %d of %d, count %zu failed: %s",
                   fold_coll_name(args->coll), args->alg ? args->alg->name : "internal",
                   args->cargs.rank, args->cargs.size, args->cargs.count,
                   fold_status_string(status));
        entry_clear(victim);
        return status;
    }
    victim->args     = args->cargs;
    victim->alg      = args->alg;
    victim->last_use = ++comm->use_clock;
    *entry_p         = victim;
    return FOLD_OK;
}

/* ---- scratch ---------------------------------------------------------------- */

static int scratch_acquire(fold_comm_t *comm, size_t bytes, fold_scratch_t **out)
{
    fold_scratch_t *best = NULL;
    *out = NULL;
    if (bytes == 0) {
        return FOLD_OK;
    }
    for (size_t i = 0; i < sizeof(comm->scratch) / sizeof(comm->scratch[0]); i++) {
        fold_scratch_t *s = &comm->scratch[i];
        if (s->busy) {
            continue;
        }
        if (s->size >= bytes) {
            best = s;
            break;
        }
        if (best == NULL || s->size > best->size) {
            best = s;
        }
    }
    if (best == NULL) {
        fold_error("comm %u: too many collectives in flight for the scratch pool", comm->id);
        return FOLD_ERR_BUSY;
    }
    if (best->size < bytes) {
        /* Grow to the largest size seen: later calls reuse it without allocating. */
        void *buf = NULL;
        if (posix_memalign(&buf, 64, bytes) != 0) {
            return FOLD_ERR_NO_MEMORY;
        }
        free(best->buf);
        best->buf  = buf;
        best->size = bytes;
    }
    best->busy = 1;
    *out = best;
    return FOLD_OK;
}

/* ---- request lifecycle ------------------------------------------------------ */

static fold_request_t *request_alloc(size_t nsteps)
{
    size_t n = nsteps ? nsteps : 1;
    size_t bytes = sizeof(fold_request_t) + n * (3 * sizeof(uint32_t) + sizeof(fold_tl_req_t));
    fold_request_t *req = calloc(1, bytes);
    if (req == NULL) {
        return NULL;
    }
    req->tlreq      = (fold_tl_req_t *)(req + 1);
    req->pending    = (uint32_t *)(req->tlreq + n);
    req->queue      = req->pending + n;
    req->active     = req->queue + n;
    req->nsteps_cap = n;
    return req;
}

static void queue_push(fold_request_t *req, uint32_t step)
{
    req->queue[req->qtail++] = step;
}

int fold_exec_start(fold_comm_t *comm, const fold_exec_args_t *args, fold_request_t **req_p)
{
    fold_sched_entry_t *entry;
    int status = sched_lookup(comm, args, &entry);
    if (status != FOLD_OK) {
        return status;
    }
    const fold_sched_t *s = &entry->sched;

    fold_request_t *req = entry->spare;
    if (req != NULL) {
        entry->spare = NULL;
    } else {
        req = request_alloc(s->nsteps);
        if (req == NULL) {
            return FOLD_ERR_NO_MEMORY;
        }
    }

    size_t esize = fold_dtype_size(args->dtype);
    fold_scratch_t *scratch;
    status = scratch_acquire(comm, s->tmp_count * esize, &scratch);
    if (status != FOLD_OK) {
        free(req);
        return status;
    }

    req->magic    = FOLD_REQUEST_MAGIC;
    req->comm     = comm;
    req->entry    = entry;
    req->sched    = s;
    req->scratch  = scratch;
    req->buf[FOLD_BUF_IN]  = (char *)(args->cargs.inplace ? args->out : args->in);
    req->buf[FOLD_BUF_OUT] = args->out;
    req->buf[FOLD_BUF_TMP] = scratch ? scratch->buf : NULL;
    req->dtype    = args->dtype;
    req->op       = args->op;
    req->esize    = esize;
    req->tag_base = ((uint64_t)(comm->id & ((1u << TAG_COMM_BITS) - 1))
                     << (TAG_SEQ_BITS + TAG_COLL_BITS)) |
                    ((uint64_t)comm->coll_seq << TAG_SEQ_BITS);
    comm->coll_seq++;
    req->qhead = req->qtail = 0;
    req->nactive    = 0;
    req->ndone      = 0;
    req->status     = FOLD_INPROGRESS;
    req->idle_polls = 0;
    req->alg_name   = args->alg ? args->alg->name : "internal";
    req->coll       = args->coll;
    req->user_owned = 0;
    for (size_t i = 0; i < s->nsteps; i++) {
        req->pending[i] = s->steps[i].npred;
        if (s->steps[i].npred == 0) {
            queue_push(req, (uint32_t)i);
        }
    }
    entry->refs++;
    comm->active_requests++;
    req->last_progress = 0;   /* read the clock only once the request idles */
    if (s->nsteps == 0) {
        req->status = FOLD_OK;
    }
    *req_p = req;
    return FOLD_OK;
}

void fold_exec_release(fold_request_t *req)
{
    fold_comm_t *comm = req->comm;
    if (req->scratch != NULL) {
        req->scratch->busy = 0;
    }
    comm->active_requests--;
    req->entry->refs--;
    req->magic = 0;
    if (req->nactive != 0) {
        /* A transport operation that would not finish even when canceled may still
         * write into this request: leaking it is the only safe choice. */
        fold_warn("comm %u: dropping a request with %zu unfinished transport operations",
                  comm->id, req->nactive);
        return;
    }
    if (req->entry->spare == NULL) {
        req->entry->spare = req;
    } else {
        free(req);
    }
}

/* ---- running steps ---------------------------------------------------------- */

static void describe_step(const fold_request_t *req, size_t i, char *buf, size_t len)
{
    const fold_step_t *st = &req->sched->steps[i];
    if (st->kind == FOLD_STEP_SEND || st->kind == FOLD_STEP_RECV) {
        snprintf(buf, len, "%s %s rank %d (message %u, %zu bytes, step %zu of %zu)",
                 fold_step_kind_name(st->kind), st->kind == FOLD_STEP_SEND ? "to" : "from",
                 st->peer, st->seq, st->count * req->esize, i + 1, req->sched->nsteps);
    } else {
        snprintf(buf, len, "%s of %zu elements (step %zu of %zu)",
                 fold_step_kind_name(st->kind), st->count, i + 1, req->sched->nsteps);
    }
}

static int request_fail(fold_request_t *req, int status, size_t step, const char *why)
{
    char what[160];
    describe_step(req, step, what, sizeof(what));
    fold_error("%s (%s) on comm %u, rank %d of %d: %s while on %s",
               fold_coll_name(req->coll), req->alg_name, req->comm->id, req->comm->rank,
               req->comm->size, why, what);

    fold_context_t *ctx = req->comm->ctx;
    for (size_t k = 0; k < req->nactive; k++) {
        ctx->tl_ops->cancel(ctx->tl, &req->tlreq[req->active[k]]);
    }
    /* Give canceled operations a moment to report back, so nothing writes later. */
    double deadline = fold_time_now() + 1.0;
    while (req->nactive > 0 && fold_time_now() < deadline) {
        ctx->tl_ops->progress(ctx->tl);
        for (size_t k = 0; k < req->nactive;) {
            if (req->tlreq[req->active[k]].status != FOLD_INPROGRESS) {
                req->active[k] = req->active[--req->nactive];
            } else {
                k++;
            }
        }
    }
    req->status = status;
    return status;
}

static char *step_ptr(const fold_request_t *req, fold_ref_t ref)
{
    return req->buf[ref.buf] + ref.off * req->esize;
}

static void step_done(fold_request_t *req, uint32_t i)
{
    const fold_step_t *st = &req->sched->steps[i];
    const uint32_t *succ = &req->sched->succ[st->succ_off];
    for (uint32_t k = 0; k < st->nsucc; k++) {
        if (--req->pending[succ[k]] == 0) {
            queue_push(req, succ[k]);
        }
    }
    req->ndone++;
}

static int check_transfer(fold_request_t *req, uint32_t i)
{
    const fold_step_t *st = &req->sched->steps[i];
    fold_tl_req_t *t = &req->tlreq[i];
    if (t->status != FOLD_OK) {
        char why[96];
        snprintf(why, sizeof(why), "the transport reported '%s'", fold_status_string(t->status));
        return request_fail(req, t->status, i, why);
    }
    if (st->kind == FOLD_STEP_RECV && t->length != st->count * req->esize) {
        char why[128];
        snprintf(why, sizeof(why), "rank %d sent %zu bytes where %zu were expected "
                 "(mismatched calls?)", st->peer, t->length, st->count * req->esize);
        return request_fail(req, FOLD_ERR_TRUNCATED, i, why);
    }
    return FOLD_OK;
}

static int start_step(fold_request_t *req, uint32_t i)
{
    const fold_step_t *st = &req->sched->steps[i];
    fold_comm_t *comm = req->comm;
    fold_context_t *ctx = comm->ctx;
    int status;

    switch (st->kind) {
    case FOLD_STEP_SEND:
    case FOLD_STEP_RECV: {
        int peer = fold_rank_map_get(&comm->map, st->peer);
        uint64_t tag = req->tag_base | (st->seq & ((1u << TAG_SEQ_BITS) - 1));
        fold_tl_req_t *t = &req->tlreq[i];
        t->status = FOLD_INPROGRESS;
        t->length = 0;
        if (st->kind == FOLD_STEP_SEND) {
            void *p = st->count ? step_ptr(req, st->src) : NULL;
            status = ctx->tl_ops->tag_send(ctx->tl, peer, tag, p, st->count * req->esize, t);
        } else {
            void *p = st->count ? step_ptr(req, st->dst) : NULL;
            status = ctx->tl_ops->tag_recv(ctx->tl, peer, tag, p, st->count * req->esize, t);
        }
        if (status < 0) {
            return request_fail(req, status, i, "the transport refused the operation");
        }
        if (t->status == FOLD_INPROGRESS) {
            req->active[req->nactive++] = i;
            return FOLD_OK;
        }
        status = check_transfer(req, i);
        if (status == FOLD_OK) {
            step_done(req, i);
        }
        return status;
    }
    case FOLD_STEP_REDUCE:
        status = fold_reduce_local(req->op, req->dtype, step_ptr(req, st->src),
                                   step_ptr(req, st->src2), step_ptr(req, st->dst), st->count,
                                   ctx->nthreads, ctx->config.thread_threshold);
        if (status != FOLD_OK) {
            return request_fail(req, status, i, "the local reduction failed");
        }
        step_done(req, i);
        return FOLD_OK;
    case FOLD_STEP_COPY:
        memcpy(step_ptr(req, st->dst), step_ptr(req, st->src), st->count * req->esize);
        step_done(req, i);
        return FOLD_OK;
    }
    return request_fail(req, FOLD_ERR_INVALID_ARG, i, "unknown step kind");
}

/* FOLD_INPROGRESS while within FOLD_TIMEOUT, else fails the request. */
static int check_timeout(fold_request_t *req)
{
    double now = fold_time_now();
    double limit = req->comm->ctx->config.timeout_sec;
    if (req->last_progress == 0) {
        req->last_progress = now;   /* the idle period starts here */
    }
    if (now - req->last_progress < limit) {
        return FOLD_INPROGRESS;
    }
    /* Name a receive if one is outstanding: that is what a stuck collective waits for. */
    size_t step = req->nactive ? req->active[0] : (req->qhead < req->qtail ? req->queue[req->qhead] : 0);
    for (size_t k = 0; k < req->nactive; k++) {
        if (req->sched->steps[req->active[k]].kind == FOLD_STEP_RECV) {
            step = req->active[k];
            break;
        }
    }
    char why[96];
    snprintf(why, sizeof(why), "no progress for %.1f s (FOLD_TIMEOUT=%g)",
             now - req->last_progress, limit);
    return request_fail(req, FOLD_ERR_TIMEOUT, step, why);
}

int fold_exec_progress(fold_request_t *req)
{
    if (req->status != FOLD_INPROGRESS) {
        return req->status;
    }
    fold_context_t *ctx = req->comm->ctx;
    size_t done_before = req->ndone;
    int status;

    ctx->tl_ops->progress(ctx->tl);
    for (;;) {
        for (size_t k = 0; k < req->nactive;) {
            uint32_t i = req->active[k];
            if (__atomic_load_n(&req->tlreq[i].status, __ATOMIC_ACQUIRE) == FOLD_INPROGRESS) {
                k++;
                continue;
            }
            req->active[k] = req->active[--req->nactive];
            if ((status = check_transfer(req, i)) != FOLD_OK) {
                return status;
            }
            step_done(req, i);
        }
        if (req->qhead == req->qtail) {
            break;
        }
        while (req->qhead < req->qtail) {
            if ((status = start_step(req, req->queue[req->qhead++])) != FOLD_OK) {
                return status;
            }
        }
    }

    if (req->ndone == req->sched->nsteps) {
        return req->status = FOLD_OK;
    }
    if (req->ndone != done_before) {
        req->idle_polls    = 0;
        req->last_progress = 0;
    } else if ((++req->idle_polls & 63) == 0) {
        return check_timeout(req);
    }
    return FOLD_INPROGRESS;
}

int fold_exec_wait(fold_request_t *req)
{
    long spin_limit = req->comm->ctx->spin_count;
    int status;
    while ((status = fold_exec_progress(req)) == FOLD_INPROGRESS) {
        if (req->idle_polls > (unsigned)spin_limit) {
            sched_yield();   /* let a co-located rank run: oversubscribed runs move */
        }
    }
    return status;
}
