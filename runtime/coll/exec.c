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
 *
 * Node shared memory: a shm post stores a flag at once; a shm wait that is not yet
 * satisfied is polled with the transport operations, never waited for inside the
 * step. Node-aware requests take turns in start order (one segment per
 * communicator), each with the next epoch; a request whose turn has not come
 * progresses the one before it.
 */
#include "comm.h"
#include "fingerprint.h"
#include "exec_trace.h"
#include "log.h"
#include "codec/codec.h"
#include "codec/reduce_kernel.h"

#include <sched.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Tag layout (44 bits): communicator id | collective sequence | message number. */
#define TAG_SEQ_BITS  20
#define TAG_COLL_BITS 8
#define TAG_COMM_BITS 16
#define TAG_BITS      (TAG_COMM_BITS + TAG_COLL_BITS + TAG_SEQ_BITS)

/* What the executor relies on from a transport (transport.h states the rule):
 *   ordered     tags repeat once the collective sequence wraps, and a rank may run
 *               that far ahead (eager sends), so one peer's messages with one tag
 *               must meet receives in order;
 *   send reuse  a send step's successors (a reduction into the range it sent, the
 *               next use of a scratch slot, its staging buffer going back to the
 *               pool) start as soon as the send completes;
 *   truncation  a receive tells mismatched calls and encoded messages apart by the
 *               length, so an over-long message must fail, not be cut silently. */
int fold_exec_check_caps(const fold_tl_caps_t *caps)
{
    static const unsigned needed[] = {FOLD_TL_CAP_ORDERED, FOLD_TL_CAP_SEND_REUSE,
                                      FOLD_TL_CAP_TRUNCATION};
    int status = FOLD_OK;

    for (size_t i = 0; i < sizeof(needed) / sizeof(needed[0]); i++) {
        if (!(caps->flags & needed[i])) {
            fold_error("transport %s does not guarantee %s, which fold's collectives rely "
                       "on", caps->name, fold_tl_cap_name(needed[i]));
            status = FOLD_ERR_UNSUPPORTED;
        }
    }
    if (caps->tag_bits < TAG_BITS) {
        fold_error("transport %s gives callers %d tag bits; fold's collectives use %d",
                   caps->name, caps->tag_bits, TAG_BITS);
        status = FOLD_ERR_UNSUPPORTED;
    }
    return status;
}

/* ---- schedule cache --------------------------------------------------------- */

/* The same schedule but maybe for its direction (backward). */
static int same_shape(const fold_coll_args_t *a, const fold_coll_args_t *b)
{
    return a->coll == b->coll && a->rank == b->rank && a->size == b->size &&
           a->root == b->root && a->count == b->count && a->seg_count == b->seg_count &&
           a->depth == b->depth && a->inplace == b->inplace &&
           a->commutative == b->commutative && a->topo == b->topo &&
           a->leaders == b->leaders && a->root_weight == b->root_weight &&
           a->shm_count == b->shm_count && a->inter == b->inter;
}

static void entry_clear(fold_sched_entry_t *e)
{
    fold_sched_cleanup(&e->sched);
    fold_wire_plan_free(&e->plan);
    fold_exec_request_free(e->spare);
    free(e->peer_dense);
    memset(e, 0, sizeof(*e));
}

void fold_exec_cache_free(fold_comm_t *comm)
{
    for (int i = 0; i < FOLD_SCHED_CACHE_SIZE; i++) {
        entry_clear(&comm->cache[i]);
    }
}

/* Whether this call's chunks run forward and backward by turns (FOLD_ALG_ALTERNATES):
 * every other call of a shape backward, forward first. A call of at most one segment
 * per owner runs forward always: its schedules would be the same, or nearly (a
 * reduce's heavier root may have a second chunk). */
static int alternates(const fold_exec_args_t *args)
{
    const fold_coll_args_t *a = &args->cargs;
    const size_t owners = (size_t)(a->leaders > 1 ? a->leaders : 1);
    return args->alg != NULL && (args->alg->flags & FOLD_ALG_ALTERNATES) &&
           a->count > owners * a->seg_count;
}

static int sched_lookup(fold_comm_t *comm, const fold_exec_args_t *exec_args,
                        fold_sched_entry_t **entry_p)
{
    fold_exec_args_t with_direction = *exec_args;
    const fold_exec_args_t *args = &with_direction;
    fold_coll_args_t *want = &with_direction.cargs;
    const int alternate = alternates(exec_args);
    want->backward = 0;
    /* One pass: the shape's cached schedules by direction, the one used last, and the
     * least recently used free entry, to build into if the direction wanted is not
     * there. A shape that never alternates has one schedule: the first match. */
    fold_sched_entry_t *victim = NULL, *cached[2] = {NULL, NULL}, *last = NULL;
    for (int i = 0; i < FOLD_SCHED_CACHE_SIZE; i++) {
        fold_sched_entry_t *e = &comm->cache[i];
        if (e->last_use != 0 && e->alg == args->alg && same_shape(&e->args, want)) {
            cached[e->args.backward != 0] = e;
            last = last == NULL || e->last_use > last->last_use ? e : last;
            if (!alternate) {
                break;
            }
        }
        if (e->refs == 0 && (victim == NULL || e->last_use < victim->last_use)) {
            victim = e;
        }
    }
    want->backward = alternate && last != NULL && !last->args.backward;
    if (cached[want->backward] != NULL) {
        fold_sched_entry_t *e = cached[want->backward];
        e->last_use = ++comm->use_clock;
        *entry_p    = e;
        return FOLD_OK;
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
    if (status == FOLD_OK) {
        status = fold_wire_plan_build(&victim->plan, &victim->sched, comm->remote);
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
        /* Every slot is held by a call not yet released (an application may start any
         * number before waiting, as torch's async batches do): this call gets a
         * buffer of its own, freed when it is released. */
        fold_scratch_t *spare = calloc(1, sizeof(*spare));
        if (spare == NULL || posix_memalign(&spare->buf, 64, bytes) != 0) {
            free(spare);
            return FOLD_ERR_NO_MEMORY;
        }
        fold_debug("comm %u: the scratch pool is in use: %zu bytes for this call alone",
                   comm->id, bytes);
        spare->size  = bytes;
        spare->busy  = 1;
        spare->spare = 1;
        *out = spare;
        return FOLD_OK;
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

static void scratch_release(fold_scratch_t *s)
{
    if (s == NULL) {
        return;
    }
    if (s->spare) {
        free(s->buf);
        free(s);
        return;
    }
    s->busy = 0;
}

/* ---- request lifecycle ------------------------------------------------------ */

static fold_request_t *request_alloc(size_t nsteps)
{
    size_t n = nsteps ? nsteps : 1;
    size_t bytes = sizeof(fold_request_t) +
                   n * (sizeof(fold_tl_req_t) + sizeof(fold_exec_fp_t) +
                        sizeof(fold_codec_stats_t) +
                        sizeof(fold_wire_buf_t *) + 3 * sizeof(uint32_t) + 1);
    fold_request_t *req = calloc(1, bytes);
    if (req == NULL) {
        return NULL;
    }
    req->tlreq      = (fold_tl_req_t *)(req + 1);
    req->fp         = (fold_exec_fp_t *)(req->tlreq + n);
    req->stats      = (fold_codec_stats_t *)(req->fp + n);
    req->staging    = (fold_wire_buf_t **)(req->stats + n);
    req->pending    = (uint32_t *)(req->staging + n);
    req->queue      = req->pending + n;
    req->active     = req->queue + n;
    req->soft       = (uint8_t *)(req->active + n);
    req->nsteps_cap = n;
    return req;
}

void fold_exec_request_free(fold_request_t *req)
{
    if (req != NULL) {
        free(req->fp_arena);
        free(req->trace);
        free(req);
    }
}

static void queue_push(fold_request_t *req, uint32_t step)
{
    req->queue[req->qtail++] = step;
}

/* The state of an answer's soft wait (exec_plan.h). */
enum { SOFT_WAITING, SOFT_DROPPED, SOFT_MET };

/* A schedule that uses the node segment needs one big enough, not left broken. */
static int shm_check(fold_comm_t *comm, const fold_exec_args_t *args, const fold_sched_t *s,
                     size_t esize)
{
    fold_node_t *node = comm->node;
    if (node == NULL || node->seg.base == NULL) {
        fold_error("%s (%s) on comm %u: the schedule uses the node segment, which this "
                   "node does not have", fold_coll_name(args->coll), args->alg->name,
                   comm->id);
        return FOLD_ERR_INVALID_ARG;
    }
    if (node->broken) {
        fold_error("%s (%s) on comm %u: an earlier collective failed while using the node "
                   "segment; its flags are out of step, so this communicator cannot use "
                   "it again", fold_coll_name(args->coll), args->alg->name, comm->id);
        return FOLD_ERR_PEER_FAILED;
    }
    if (s->uses_peer && !node->single_copy) {
        fold_error("%s (%s) on comm %u: the schedule reads other ranks' memory (single "
                   "copy), which this communicator cannot (FOLD_SINGLE_COPY, or the kernel "
                   "refused at setup)", fold_coll_name(args->coll), args->alg->name, comm->id);
        return FOLD_ERR_INVALID_ARG;
    }
    if (s->shm_count * esize > node->seg.data_size) {
        fold_error("%s (%s) on comm %u: the schedule needs %zu bytes of node segment, it "
                   "has %zu (FOLD_SHM_SIZE)", fold_coll_name(args->coll), args->alg->name,
                   comm->id, s->shm_count * esize, node->seg.data_size);
        return FOLD_ERR_INVALID_ARG;
    }
    return FOLD_OK;
}

int fold_exec_start(fold_comm_t *comm, const fold_exec_args_t *args, fold_request_t **req_p)
{
    fold_sched_entry_t *entry;
    int status = sched_lookup(comm, args, &entry);
    if (status != FOLD_OK) {
        return status;
    }
    const fold_sched_t *s = &entry->sched;
    if (s->uses_shm &&
        (status = shm_check(comm, args, s, fold_dtype_size(args->dtype))) != FOLD_OK) {
        return status;
    }

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
        fold_exec_request_free(req);
        return status;
    }

    req->magic    = FOLD_REQUEST_MAGIC;
    req->comm     = comm;
    req->entry    = entry;
    req->sched    = s;
    req->plan     = &entry->plan;
    req->scratch  = scratch;
    req->buf[FOLD_BUF_IN]  = (char *)(args->cargs.inplace ? args->out : args->in);
    req->buf[FOLD_BUF_OUT] = args->out;
    req->buf[FOLD_BUF_TMP] = scratch ? scratch->buf : NULL;
    req->buf[FOLD_BUF_SHM] = s->uses_shm ? comm->node->seg.data : NULL;
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
    req->turn       = (fold_node_turn_t){0};
    req->peer_published = 0;
    req->view        = NULL;
    req->view_step   = FOLD_STEP_NONE;
    req->along_made  = FOLD_STEP_NONE;
    req->single_copy = args->alg != NULL && (args->alg->flags & FOLD_ALG_SINGLE_COPY);
    req->memory      = args->memory;
    req->adopt_passes = args->adopt_passes;
    req->adopt_steps  = args->adopt_steps;
    req->stream_out = args->cargs.count * esize >= comm->ctx->stream_min;
    fold_exec_trace_begin(req);
    fold_wire_request_init(req, args);
    if ((status = fold_exec_fp_init(req)) != FOLD_OK) {
        scratch_release(scratch);
        fold_exec_request_free(req);
        return status;
    }
    const fold_wire_plan_t *plan = req->plan;
    req->soft_left = plan->nsoft;
    if (plan->nsoft != 0) {
        memset(req->soft, SOFT_WAITING, s->nsteps);
    }
    for (size_t i = 0; i < s->nsteps; i++) {
        /* A soft wait counts as one more predecessor until it is met or dropped. */
        req->pending[i] = s->steps[i].npred + (plan->steps[i].soft != FOLD_STEP_NONE);
        if (req->pending[i] == 0) {
            queue_push(req, (uint32_t)i);
        }
    }
    entry->refs++;
    comm->active_requests++;
    req->last_progress = 0;   /* read the clock only once the request idles */
    if (s->nsteps == 0) {
        req->status = FOLD_OK;
    } else if (args->alg != NULL && (args->alg->flags & FOLD_ALG_NODE_AWARE)) {
        /* Every node-aware call takes its turn, also where this rank's schedule
         * needs no segment: a rank that ran them out of order could wait for a peer
         * whose earlier call waits for this rank's earlier one. */
        fold_node_turn_take(comm->node, &req->turn);
    }
    *req_p = req;
    return FOLD_OK;
}

/* A request leaves the node's queue when it finishes, successfully or not. */
static void request_finish(fold_request_t *req, int status)
{
    req->status = status;
    fold_exec_trace_end(req, status);
    if (req->turn.epoch != 0) {
        /* A mismatch lets the node's ranks resync, unless a transport operation that
         * would not finish may still write into the segment. */
        fold_node_turn_leave(req->comm->node, &req->turn,
                             status == FOLD_OK || req->nactive == 0 ? status
                                                                    : FOLD_ERR_TRANSPORT);
    }
}

void fold_exec_release(fold_request_t *req)
{
    fold_comm_t *comm = req->comm;
    if (req->turn.epoch != 0) {
        request_finish(req, FOLD_ERR_CANCELED);   /* released before it finished */
    }
    scratch_release(req->scratch);
    req->scratch = NULL;
    comm->active_requests--;
    if (req->nactive == 0) {
        for (size_t i = 0; i < req->sched->nsteps; i++) {
            fold_wire_send_done(req, (uint32_t)i);   /* sends a failure left behind */
        }
    }
    req->entry->refs--;
    req->magic = 0;
    fold_exec_trace_free(req);
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
        fold_exec_request_free(req);
    }
}

/* ---- running steps ---------------------------------------------------------- */

/* The flag value a shm step of this request means. */
static uint64_t shm_value(const fold_request_t *req, const fold_step_t *st)
{
    return ((req->turn.epoch - 1) << 32) + st->value;
}

/* On a communicator other than the world, " (context rank R)" after a rank of it:
 * communicator ranks are renumbered, and the process an operator looks for is the
 * context's rank (fold_comm_context_rank). Empty on the world. */
static void context_rank_note(fold_comm_t *comm, int r, char *buf, size_t len)
{
    int ctx_rank = fold_comm_ctx_rank(comm, r);
    if (comm == comm->ctx->world) {
        buf[0] = '\0';
    } else {
        snprintf(buf, len, " (context rank %d)", ctx_rank);
    }
}

static void describe_step(const fold_request_t *req, size_t i, char *buf, size_t len)
{
    const fold_step_t *st = &req->sched->steps[i];
    char note[32];
    if (st->kind == FOLD_STEP_SHM_WAIT) {
        const fold_shm_seg_t *seg = &req->comm->node->seg;
        int local = st->local;
        for (int l = 0; local < 0 && l < seg->local_size; l++) {
            if (l != req->comm->node->local_rank &&
                !fold_shm_flag_reached(seg, l, st->flag, shm_value(req, st))) {
                local = l;   /* the first local rank still behind */
            }
        }
        local = local < 0 ? 0 : local;
        uint64_t now = fold_shm_flag_read(seg, local, st->flag);
        int peer = fold_topo_rank(req->comm->node->topo,
                                  req->comm->node->topo->node_of[req->comm->rank], local);
        context_rank_note(req->comm, peer, note, sizeof(note));
        snprintf(buf, len, "shm wait for rank %d%s (local rank %d) to reach %s %llu of call "
                 "%llu; it is at %llu of call %llu (step %zu of %zu)",
                 peer, note, local, fold_flag_name(st->flag), (unsigned long long)st->value,
                 (unsigned long long)req->turn.epoch, (unsigned long long)(now & 0xffffffffu),
                 (unsigned long long)(now >> 32) + 1, i + 1, req->sched->nsteps);
    } else if (st->kind == FOLD_STEP_SEND || st->kind == FOLD_STEP_RECV) {
        context_rank_note(req->comm, st->peer, note, sizeof(note));
        snprintf(buf, len, "%s %s rank %d%s (message %u, %zu bytes, step %zu of %zu)",
                 fold_step_kind_name(st->kind), st->kind == FOLD_STEP_SEND ? "to" : "from",
                 st->peer, note, st->seq, st->count * req->esize, i + 1, req->sched->nsteps);
    } else {
        snprintf(buf, len, "%s of %zu elements (step %zu of %zu)",
                 fold_step_kind_name(st->kind), st->count, i + 1, req->sched->nsteps);
    }
}

static int request_fail(fold_request_t *req, int status, size_t step, const char *why)
{
    char what[224], note[32];
    describe_step(req, step, what, sizeof(what));
    context_rank_note(req->comm, req->comm->rank, note, sizeof(note));
    fold_error("%s (%s) on comm %u, rank %d of %d%s: %s while on %s",
               fold_coll_name(req->coll), req->alg_name, req->comm->id, req->comm->rank,
               req->comm->size, note, why, what);

    fold_context_t *ctx = req->comm->ctx;
    for (size_t k = 0; k < req->nactive;) {
        if (req->sched->steps[req->active[k]].kind == FOLD_STEP_SHM_WAIT) {
            req->active[k] = req->active[--req->nactive];   /* nothing to cancel */
        } else {
            if (req->tlreq[req->active[k]].status == FOLD_INPROGRESS) {
                ctx->tl_ops->cancel(ctx->tl, &req->tlreq[req->active[k]]);
            }
            fold_exec_fp_cancel(req, req->active[k]);
            k++;
        }
    }
    /* Give canceled operations a moment to report back, so nothing writes later: a
     * second, or a quarter of FOLD_TIMEOUT if less, so that a call that timed out
     * returns well within twice FOLD_TIMEOUT (UCX 1.13 cannot cancel a rendezvous
     * send to a dead peer, which holds the drain to its end; such a request is
     * leaked, not reused: fold_exec_release). */
    double drain = ctx->config.timeout_sec / 4;
    double deadline = fold_util_time_now() + (drain < 1.0 ? drain : 1.0);
    while (req->nactive > 0 && fold_util_time_now() < deadline) {
        ctx->tl_ops->progress(ctx->tl);
        for (size_t k = 0; k < req->nactive;) {
            uint32_t a = req->active[k];
            if (req->tlreq[a].status != FOLD_INPROGRESS &&
                (req->fp[a].mode == FOLD_EXEC_FP_NONE ||
                 req->fp[a].beside.status != FOLD_INPROGRESS)) {
                req->active[k] = req->active[--req->nactive];
            } else {
                k++;
            }
        }
    }
    request_finish(req, status);
    return status;
}

static char *step_ptr(const fold_request_t *req, fold_ref_t ref)
{
    return req->buf[ref.buf] + ref.off * req->esize;
}

/* Operand k (0: src, 1: src2) of reduction i: a peer's bytes where they lie, if the
 * reduction took its peer read over (exec_plan.h), else its buffer. */
static const char *operand_ptr(const fold_request_t *req, uint32_t i, int k)
{
    const fold_step_t *st = &req->sched->steps[i];
    if (req->view_step == i && req->plan->steps[i].view_operand == k + 1) {
        return req->view;
    }
    return step_ptr(req, k ? st->src2 : st->src);
}

/* Whether step st's reduction is split among the context's threads. */
static int reduce_threaded(const fold_request_t *req, const fold_step_t *st)
{
    const fold_context_t *ctx = req->comm->ctx;
    return ctx->nthreads > 1 && st->count * req->esize >= ctx->config.thread_threshold;
}

/* Whether reduction i streams its result (exec_plan.h, final results): a result no
 * later step reads, or one that is once the operand a peer read fills in its range is
 * read where it lies (its view is open now). */
static int result_streams(const fold_request_t *req, uint32_t i)
{
    const fold_plan_step_t *ps = &req->plan->steps[i];
    return req->stream_out &&
           (ps->final_out || (ps->final_viewed && ps->writes_along == 0 && req->view_step == i));
}

int fold_exec_reduce_dense(const fold_request_t *req, uint32_t i)
{
    const fold_step_t *st = &req->sched->steps[i];
    const fold_context_t *ctx = req->comm->ctx;
    int threaded = reduce_threaded(req, st);
    if (!threaded && result_streams(req, i)) {
        /* A large call's result, which nothing in the call reads again. */
        return fold_reduce_local_stream(req->op, req->dtype, operand_ptr(req, i, 0),
                                        operand_ptr(req, i, 1), step_ptr(req, st->dst),
                                        st->count);
    }
    if (st->dst.buf == FOLD_BUF_SHM && !threaded) {
        /* Lines another core read last and reads next (reduce_kernel.h). Threaded
         * reductions keep their split. */
        return fold_reduce_local_shared(req->op, req->dtype, operand_ptr(req, i, 0),
                                        operand_ptr(req, i, 1), step_ptr(req, st->dst),
                                        st->count);
    }
    return fold_reduce_local(req->op, req->dtype, operand_ptr(req, i, 0),
                             operand_ptr(req, i, 1), step_ptr(req, st->dst), st->count,
                             ctx->nthreads, ctx->config.thread_threshold);
}

/* Reduction i's copy made along (exec_plan.h), where the plan has one: the copy's
 * destination gets the result now, and the copy step has nothing left to do. */
static void copy_along(const fold_request_t *req, uint32_t i)
{
    uint32_t c = req->plan->steps[i].copy_along;
    if (c != FOLD_STEP_NONE) {
        const fold_step_t *cp = &req->sched->steps[c];
        memcpy(step_ptr(req, cp->dst), step_ptr(req, cp->src), cp->count * req->esize);
    }
}

/* A dense reduction and its copy made along: in one pass through the L1 block where
 * the segment's path takes one (single-threaded), else one after the other. */
static int reduce_dense_along(const fold_request_t *req, uint32_t i)
{
    const fold_step_t *st = &req->sched->steps[i];
    uint32_t c = req->plan->steps[i].copy_along;
    if (c != FOLD_STEP_NONE && st->dst.buf == FOLD_BUF_SHM && !reduce_threaded(req, st)) {
        return fold_reduce_local_shared_also(req->op, req->dtype, operand_ptr(req, i, 0),
                                             operand_ptr(req, i, 1), step_ptr(req, st->dst),
                                             step_ptr(req, req->sched->steps[c].dst),
                                             st->count);
    }
    int status = fold_exec_reduce_dense(req, i);
    if (status == FOLD_OK) {
        copy_along(req, i);
    }
    return status;
}

/* Reduction i streams its result into its destination and, through mappings, into
 * the OUT of every rank its writes along go to (exec_plan.h), in one pass: where the
 * call streams its results, the pair has a streaming kernel, a peer read it took over
 * is read where it lies, its destination is the call's result then (or nothing reads
 * it), and every one of those OUT lies mapped here. *made says whether it did; its
 * writes then have nothing left to do: each line of the result leaves the core once
 * per destination, not read for ownership first nor read back for the copy, which
 * about halves a large allreduce's time in fold memory. */
static int reduce_stream_along(fold_request_t *req, uint32_t i, int *made, char *why,
                               size_t whylen)
{
    const fold_plan_step_t *ps = &req->plan->steps[i];
    const fold_step_t *st = &req->sched->steps[i];
    const int n = ps->writes_along;
    const int keep_dst = st->dst.buf == FOLD_BUF_OUT ||
                         (st->dst.buf == FOLD_BUF_IN && req->sched->inplace);
    *made = 0;
    if (n == 0 || !req->stream_out || reduce_threaded(req, st) ||
        !fold_reduce_stream_available(req->op, req->dtype) ||
        (ps->view_of != FOLD_STEP_NONE && req->view_step != i) ||
        !(keep_dst ? ps->final_viewed : ps->dst_dead)) {
        return FOLD_OK;
    }
    void *at[1 + FOLD_PLAN_ALONG_MAX];
    int locals[FOLD_PLAN_ALONG_MAX];
    size_t offs[FOLD_PLAN_ALONG_MAX];
    for (int k = 0; k < n; k++) {
        const fold_step_t *w = &req->sched->steps[i + 1 + (uint32_t)k];
        locals[k] = w->local;
        offs[k]   = w->dst.off * req->esize;
    }
    const int held = req->view_step == i ? req->sched->steps[ps->view_of].local : -1;
    const fold_node_t *node = req->comm->node;
    int status = fold_node_peer_targets_begin(node, req->turn.epoch, held, locals, offs, n,
                                              st->count * req->esize, at + keep_dst, why,
                                              whylen);
    if (status != FOLD_OK || at[keep_dst] == NULL) {
        return status;
    }
    at[0] = keep_dst ? step_ptr(req, st->dst) : at[0];
    status = fold_reduce_local_stream_to(req->op, req->dtype, operand_ptr(req, i, 0),
                                         operand_ptr(req, i, 1), at, n + keep_dst, st->count);
    fold_node_peer_targets_end(node, n);
    req->along_made = i;
    *made = status == FOLD_OK;
    return status;
}

/* A fold of many rows (sched.h, fold_sched_reduce_rows), in groups of at most
 * ROWS_AT_ONCE operands, each group after the first folding onto the result so far:
 * left to right still, and no allocation whatever the node's size. One thread: a
 * node whose ranks each fold their share has no core idle. */
#define ROWS_AT_ONCE 128

static int reduce_rows(const fold_request_t *req, uint32_t i)
{
    const fold_sched_t *s = req->sched;
    const fold_step_t *st = &s->steps[i];
    const void *rows[ROWS_AT_ONCE];
    void *dst = step_ptr(req, st->dst);
    const int stream = req->stream_out && req->plan->steps[i].final_out;
    const uint32_t along = req->plan->steps[i].copy_along;
    void *also = along != FOLD_STEP_NONE ? step_ptr(req, s->steps[along].dst) : NULL;
    uint32_t k = 0;
    int status = FOLD_OK;
    while (k < st->nops && status == FOLD_OK) {
        int n = 0;
        if (k > 0) {
            rows[n++] = dst;   /* the groups before */
        }
        while (n < ROWS_AT_ONCE && k < st->nops) {
            rows[n++] = step_ptr(req, s->ops[st->ops_off + k++]);
        }
        const int last = k == st->nops;
        const int how = stream && last ? FOLD_ROWS_STREAM
                      : st->dst.buf == FOLD_BUF_SHM ? FOLD_ROWS_SHARED : FOLD_ROWS_PRIVATE;
        status = fold_reduce_local_rows(req->op, req->dtype, rows, n, dst, last ? also : NULL,
                                        st->count, how);
    }
    return status;
}

static void step_done(fold_request_t *req, uint32_t i);

/* Reduction i takes over the peer read the plan gave it (exec_plan.h): it folds the
 * peer's bytes where they lie, through a mapping of the peer's fold memory (req->view
 * until view_end), or, where none holds them, the read's copy is made now. */
static int view_begin(fold_request_t *req, uint32_t i, char *why, size_t whylen)
{
    const uint32_t r = req->plan->steps[i].view_of;
    if (r == FOLD_STEP_NONE) {
        return FOLD_OK;
    }
    const fold_step_t *rd = &req->sched->steps[r];
    const fold_node_t *node = req->comm->node;
    const int from_out = rd->flag == FOLD_BUF_OUT;
    const size_t off = rd->src.off * req->esize, len = rd->count * req->esize;
    const void *view;
    int status = fold_node_peer_view_begin(node, rd->local, req->turn.epoch, from_out, off,
                                           len, &view, why, whylen);
    if (status == FOLD_OK && view == NULL) {
        return fold_node_peer_read(node, rd->local, req->turn.epoch, from_out, off,
                                   step_ptr(req, rd->dst), len, why, whylen);
    }
    req->view      = view;
    req->view_step = status == FOLD_OK ? i : FOLD_STEP_NONE;
    return status;
}

static void view_end(fold_request_t *req)
{
    if (req->view_step != FOLD_STEP_NONE) {
        fold_node_peer_view_end(req->comm->node);
        req->view      = NULL;
        req->view_step = FOLD_STEP_NONE;
    }
}

/* A flag post runs as soon as it is ready instead of joining the queue: it costs a
 * store, and the rank that waits on it should not wait behind the copies and
 * reductions queued before it (queued, the flag saying a reduce's chunk 0 was copied
 * in would go up after every other chunk's copy, and the peer's fold of it wait that
 * long). Any order the dependencies allow is valid, and posts to one flag depend on
 * each other (sched.c). */
static void run_post(fold_request_t *req, uint32_t i)
{
    const fold_step_t *st = &req->sched->steps[i];
    fold_shm_flag_post(&req->comm->node->seg, req->comm->node->local_rank, st->flag,
                       shm_value(req, st));
    step_done(req, i);
}

static void step_ready(fold_request_t *req, uint32_t j)
{
    if (req->sched->steps[j].kind == FOLD_STEP_SHM_POST) {
        run_post(req, j);
    } else {
        queue_push(req, j);
    }
}

static void step_done(fold_request_t *req, uint32_t i)
{
    fold_exec_trace_step(req, i, 1);
    const fold_sched_t *s = req->sched;
    const fold_plan_step_t *ps = req->plan->steps;
    const fold_step_t *st = &s->steps[i];
    const uint32_t *succ = &s->succ[st->succ_off];
    for (uint32_t k = 0; k < st->nsucc; k++) {
        uint32_t j = succ[k];
        if (--req->pending[j] == 0) {
            step_ready(req, j);
        }
    }
    /* The answers waiting softly for this send (exec_plan.h). */
    for (uint32_t j = ps[i].soft_first; j != FOLD_STEP_NONE; j = ps[j].soft_next) {
        if (req->soft[j] == SOFT_DROPPED) {
            continue;   /* the wait was dropped: already counted down */
        }
        req->soft[j] = SOFT_MET;
        req->soft_left--;
        req->comm->ctx->wire.held += req->pending[j] == 1;
        if (--req->pending[j] == 0) {
            queue_push(req, j);
        }
    }
    req->ndone++;
}

/* Receive `recv` brought a dense message: its sender was not ahead of this rank, so
 * the answers derived from it need not wait for this rank's own sends (exec_plan.h). */
static void drop_soft_waits(fold_request_t *req, uint32_t recv)
{
    const fold_wire_plan_t *plan = req->plan;
    for (size_t k = 0; k < plan->nsoft && req->soft_left != 0; k++) {
        uint32_t j = plan->soft_steps[k];
        if (plan->steps[j].soft_src == recv && req->soft[j] == SOFT_WAITING) {
            req->soft[j] = SOFT_DROPPED;
            req->soft_left--;
            if (--req->pending[j] == 0) {
                queue_push(req, (uint32_t)j);
            }
        }
    }
}

/* Fails step i with FOLD_ERR_MISMATCH where a local rank's published call differs
 * from this one: the rank the wait is on (every other one where it waits on all), or
 * every other one where `every`. */
static int shm_compare_calls(fold_request_t *req, uint32_t i, int every)
{
    const fold_step_t *st = &req->sched->steps[i];
    const fold_node_t *node = req->comm->node;
    const int one = !every && st->local >= 0;
    char why[256];
    for (int l = one ? st->local : 0; l < node->seg.local_size; l++) {
        if (l != node->local_rank &&
            fold_node_peer_check(node, l, req->turn.epoch, why, sizeof(why)) != FOLD_OK) {
            return request_fail(req, FOLD_ERR_MISMATCH, i, why);
        }
        if (one) {
            break;
        }
    }
    return FOLD_OK;
}

/* A flag another local rank posted for this call: it runs the same call. */
static int shm_wait_check(fold_request_t *req, uint32_t i)
{
    return shm_compare_calls(req, i, 0);
}

/* A receive that failed (status, why): where the peer's fingerprint shows that the
 * calls differ, that is the error to report. */
static int recv_failure(fold_request_t *req, uint32_t i, int status, char *why, size_t whylen)
{
    if (req->sched->steps[i].kind != FOLD_STEP_RECV || status == FOLD_ERR_CANCELED) {
        return status;
    }
    char text[256];
    if (fold_exec_fp_explain(req, i, text, sizeof(text)) == FOLD_ERR_MISMATCH) {
        snprintf(why, whylen, "%s", text);
        return FOLD_ERR_MISMATCH;
    }
    return status;
}

/* A rank this one waits on posted a tiny-message call this rank has not made (on
 * the node's fast path, which never takes a turn): it will not reach this call's
 * flag. Read its slot first, then its flag again: a rank that posted the flag
 * before going on to that call is not caught (others may still be behind). */
static int shm_wait_other_path(fold_request_t *req, uint32_t i)
{
    const fold_step_t *st = &req->sched->steps[i];
    fold_node_t *node = req->comm->node;
    char given_up[192];
    int status = fold_node_resync_poll(node, req->turn.pos, given_up, sizeof(given_up));
    if (status == FOLD_INPROGRESS) {
        return FOLD_OK;   /* the paths' counters are being brought into step */
    }
    /* Told by the rank that met the difference: where a rank's published call shows
     * it, this rank names it too (fold_mismatch_fields). */
    int seen;
    if (status == FOLD_ERR_MISMATCH && (seen = shm_compare_calls(req, i, 1)) != FOLD_OK) {
        return seen;
    }
    if (status != FOLD_OK) {
        return request_fail(req, status, i, given_up);   /* node/resync.c */
    }
    for (int l = st->local >= 0 ? st->local : 0; l < node->seg.local_size; l++) {
        fold_fingerprint_t theirs;
        if (l != node->local_rank && fold_node_fast_peer_ahead(node, l, &theirs) &&
            theirs.call == (req->turn.pos & 0xff) &&   /* this very call (node/resync.c) */
            !fold_shm_flag_reached(&node->seg, l, st->flag, shm_value(req, st))) {
            fold_fingerprint_t mine = fold_exec_fingerprint(req);
            int peer = fold_topo_rank(node->topo, node->topo->node_of[req->comm->rank], l);
            char why[320] = "";
            theirs.call    = mine.call;
            theirs.inplace = mine.inplace;   /* the tiny path does not record it */
            if (fold_fingerprint_diff(&theirs, peer, &mine, req->comm->rank, why,
                                      sizeof(why)) == 0) {
                snprintf(why, sizeof(why), "rank %d runs a blocking call, rank %d a "
                         "nonblocking one", peer, req->comm->rank);
            }
            size_t at = strlen(why);
            snprintf(why + at, sizeof(why) - at, " (rank %d on the node's tiny-message path, "
                     "rank %d on its schedules)", peer, req->comm->rank);
            return request_fail(req, FOLD_ERR_MISMATCH, i, why);
        }
        if (st->local >= 0) {
            break;
        }
    }
    return FOLD_OK;
}

static int check_transfer(fold_request_t *req, uint32_t i)
{
    const fold_step_t *st = &req->sched->steps[i];
    fold_tl_req_t *t = &req->tlreq[i];
    if (st->kind == FOLD_STEP_SHM_WAIT) {
        return shm_wait_check(req, i);
    }
    if (req->fp[i].mode != FOLD_EXEC_FP_NONE) {
        char why[256];
        int status = fold_exec_fp_check(req, i, why, sizeof(why));
        if (status != FOLD_OK) {
            return request_fail(req, status, i, why);
        }
    }
    if (t->status != FOLD_OK) {
        char why[256];
        snprintf(why, sizeof(why), "the transport reported '%s'", fold_status_string(t->status));
        return request_fail(req, recv_failure(req, i, t->status, why, sizeof(why)), i, why);
    }
    if (st->kind == FOLD_STEP_SEND) {
        fold_wire_send_done(req, i);
        return FOLD_OK;
    }
    if (!fold_wire_length_ok(req, i, t->length)) {
        char why[256];
        snprintf(why, sizeof(why), "rank %d sent %zu bytes where %zu were expected "
                 "(mismatched calls?)", st->peer, t->length, st->count * req->esize);
        return request_fail(req, recv_failure(req, i, FOLD_ERR_TRUNCATED, why, sizeof(why)), i,
                            why);
    }
    if (st->kind == FOLD_STEP_RECV) {
        char why[256];
        int status = fold_wire_recv_done(req, i, why, sizeof(why));
        if (status != FOLD_OK) {
            return request_fail(req, recv_failure(req, i, status, why, sizeof(why)), i, why);
        }
        if (req->soft_left != 0 && t->length == st->count * req->esize) {
            drop_soft_waits(req, i);
        }
    }
    return FOLD_OK;
}

static int shm_wait_done(const fold_request_t *req, const fold_step_t *st)
{
    const fold_node_t *node = req->comm->node;
    uint64_t value = shm_value(req, st);
    if (st->local >= 0) {
        return fold_shm_flag_reached(&node->seg, st->local, st->flag, value);
    }
    for (int l = 0; l < node->seg.local_size; l++) {
        if (l != node->local_rank && !fold_shm_flag_reached(&node->seg, l, st->flag, value)) {
            return 0;
        }
    }
    return 1;
}

/* A posted step (transport operation or shm wait) that has finished. */
static int active_step_done(const fold_request_t *req, uint32_t i)
{
    const fold_step_t *st = &req->sched->steps[i];
    if (st->kind == FOLD_STEP_SHM_WAIT) {
        return shm_wait_done(req, st);
    }
    return __atomic_load_n(&req->tlreq[i].status, __ATOMIC_ACQUIRE) != FOLD_INPROGRESS &&
           (req->fp[i].mode == FOLD_EXEC_FP_NONE || fold_exec_fp_done(req, i));
}

static int start_step(fold_request_t *req, uint32_t i)
{
    fold_exec_trace_step(req, i, 0);
    const fold_step_t *st = &req->sched->steps[i];
    fold_comm_t *comm = req->comm;
    fold_context_t *ctx = comm->ctx;
    int status;

    switch (st->kind) {
    case FOLD_STEP_SEND:
    case FOLD_STEP_RECV: {
        int peer = fold_comm_ctx_rank(comm, st->peer);
        uint64_t tag = req->tag_base | (st->seq & ((1u << TAG_SEQ_BITS) - 1));
        fold_tl_req_t *t = &req->tlreq[i];
        t->status = FOLD_INPROGRESS;
        t->length = 0;
        int fp = req->fp[i].mode != FOLD_EXEC_FP_NONE;
        if (st->kind == FOLD_STEP_SEND) {
            const void *p;
            size_t len;
            fold_wire_send_data(req, i, &p, &len);
            status = fp ? fold_exec_fp_send(req, i, peer, tag, p, len)
                        : ctx->tl_ops->tag_send(ctx->tl, peer, tag, p, len, t);
        } else {
            void *p = st->count ? step_ptr(req, st->dst) : NULL;
            size_t len = st->count * req->esize;
            status = fp ? fold_exec_fp_recv(req, i, peer, tag, p, len)
                        : ctx->tl_ops->tag_recv(ctx->tl, peer, tag, p, len, t);
        }
        if (status < 0) {
            if (fp) {
                fold_exec_fp_cancel(req, i);   /* a fingerprint message may be under way */
                req->active[req->nactive++] = i;
                req->tlreq[i].status = status;
            }
            return request_fail(req, status, i, "the transport refused the operation");
        }
        if (!active_step_done(req, i)) {
            req->active[req->nactive++] = i;
            return FOLD_OK;
        }
        status = check_transfer(req, i);
        if (status == FOLD_OK) {
            step_done(req, i);
        }
        return status;
    }
    case FOLD_STEP_REDUCE: {
        char why[256] = "the local reduction failed";
        uint32_t wire_recv = req->plan->steps[i].link;
        if ((status = view_begin(req, i, why, sizeof(why))) != FOLD_OK) {
            return request_fail(req, status, i, why);
        }
        int made = 0;
        if ((status = reduce_stream_along(req, i, &made, why, sizeof(why))) != FOLD_OK ||
            made) {
            /* streamed along (no codec rides on a reduction with writes along), or failed */
        } else if (req->codec_accept) {
            status = fold_wire_reduce(req, i, why, sizeof(why));
        } else {
            status = reduce_dense_along(req, i);
        }
        view_end(req);
        if (status != FOLD_OK && req->codec_accept && wire_recv != FOLD_STEP_NONE) {
            /* It decoded a received message: the sender's call may differ. */
            status = recv_failure(req, wire_recv, status, why, sizeof(why));
        }
        if (status != FOLD_OK) {
            return request_fail(req, status, i, why);
        }
        if (req->codec_accept) {
            copy_along(req, i);
        }
        step_done(req, i);
        return FOLD_OK;
    }
    case FOLD_STEP_REDUCE_ROWS:
        if ((status = reduce_rows(req, i)) != FOLD_OK) {
            return request_fail(req, status, i, "the local reduction failed");
        }
        step_done(req, i);
        return FOLD_OK;
    case FOLD_STEP_COPY:
        if (req->plan->steps[i].copied) {
            /* its reduction made it along */
        } else if (req->stream_out && req->plan->steps[i].final_out) {
            fold_copy_stream(step_ptr(req, st->dst), step_ptr(req, st->src),
                             st->count * req->esize);
        } else if (st->dst.buf == FOLD_BUF_SHM) {
            fold_copy_shared(step_ptr(req, st->dst), step_ptr(req, st->src),
                             st->count * req->esize);
        } else {
            memcpy(step_ptr(req, st->dst), step_ptr(req, st->src), st->count * req->esize);
        }
        step_done(req, i);
        return FOLD_OK;
    case FOLD_STEP_SHM_POST:
        run_post(req, i);
        return FOLD_OK;
    case FOLD_STEP_SHM_WAIT:
        if (shm_wait_done(req, st)) {
            if ((status = shm_wait_check(req, i)) != FOLD_OK) {
                return status;
            }
            step_done(req, i);
        } else {
            req->active[req->nactive++] = i;
        }
        return FOLD_OK;
    case FOLD_STEP_PEER_READ:
    case FOLD_STEP_PEER_WRITE: {
        char why[160];
        if (req->plan->steps[i].viewed_by != FOLD_STEP_NONE ||
            (req->plan->steps[i].written_by == req->along_made &&
             req->along_made != FOLD_STEP_NONE)) {
            step_done(req, i);   /* the reduction that takes its bytes reads them, or made
                                    this write along */
            return FOLD_OK;
        }
        size_t off = st->kind == FOLD_STEP_PEER_READ ? st->src.off : st->dst.off;
        status = st->kind == FOLD_STEP_PEER_READ
                     ? fold_node_peer_read(comm->node, st->local, req->turn.epoch,
                                           st->flag == FOLD_BUF_OUT, off * req->esize,
                                           step_ptr(req, st->dst), st->count * req->esize,
                                           why, sizeof(why))
                     : fold_node_peer_write(comm->node, st->local, req->turn.epoch,
                                            off * req->esize, step_ptr(req, st->src),
                                            st->count * req->esize, why, sizeof(why));
        if (status != FOLD_OK) {
            return request_fail(req, status, i, why);
        }
        step_done(req, i);
        return FOLD_OK;
    }
    }
    return request_fail(req, FOLD_ERR_INVALID_ARG, i, "unknown step kind");
}

/* FOLD_INPROGRESS while within FOLD_TIMEOUT, else fails the request. */
static int check_timeout(fold_request_t *req, int turn)
{
    double now = fold_util_time_now();
    double limit = req->comm->ctx->config.timeout_sec;
    if (req->last_progress == 0) {
        req->last_progress = now;   /* the idle period starts here */
    }
    if (now - req->last_progress < limit) {
        return FOLD_INPROGRESS;
    }
    if (!turn) {
        char why[160];
        snprintf(why, sizeof(why), "no progress for %.1f s (FOLD_TIMEOUT=%g) waiting for an "
                 "earlier collective on this communicator to finish with the node segment",
                 now - req->last_progress, limit);
        return request_fail(req, FOLD_ERR_TIMEOUT, 0, why);
    }
    /* Name a receive or shm wait if one is outstanding: that is what a stuck
     * collective waits for. */
    size_t step = req->nactive ? req->active[0] : (req->qhead < req->qtail ? req->queue[req->qhead] : 0);
    for (size_t k = 0; k < req->nactive; k++) {
        int kind = req->sched->steps[req->active[k]].kind;
        if (kind == FOLD_STEP_RECV || kind == FOLD_STEP_SHM_WAIT) {
            step = req->active[k];
            break;
        }
    }
    char why[96];
    snprintf(why, sizeof(why), "no progress for %.1f s (FOLD_TIMEOUT=%g)",
             now - req->last_progress, limit);
    return request_fail(req, FOLD_ERR_TIMEOUT, step, why);
}

/* Whether a segment user's turn has come; drives the requests ahead of it. */
static int shm_turn(fold_request_t *req)
{
    if (req->turn.epoch == 0) {
        return 1;
    }
    fold_node_t *node = req->comm->node;
    if (req->peer_published) {
        return 1;
    }
    while (!fold_node_turn_is_mine(node, &req->turn)) {
        fold_node_turn_t *head_turn = node->head;
        fold_request_t *head = (fold_request_t *)((char *)head_turn -
                                                  offsetof(fold_request_t, turn));
        if (fold_exec_progress(head) == FOLD_INPROGRESS) {
            return 0;
        }
        if (node->head == head_turn) {
            fold_node_turn_leave(node, head_turn, 0);   /* finished: must not hold the turn */
        }
    }
    if (node->seg.base != NULL) {
        /* Where this call's buffers are (single copy reads them) and what it was asked
         * to do (every wait on another rank's flag compares it: shm_wait_check). */
        fold_fingerprint_t call = fold_exec_fingerprint(req);
        call.call = req->turn.pos;   /* its place among the node's calls (node/resync.c) */
        fold_node_peer_publish(node, req->turn.epoch, req->buf[FOLD_BUF_IN],
                               req->buf[FOLD_BUF_OUT], &call, req->single_copy,
                               req->adopt_passes, req->adopt_steps);
        req->peer_published = 1;
    }
    return 1;
}

int fold_exec_progress(fold_request_t *req)
{
    if (req->status != FOLD_INPROGRESS) {
        return req->status;
    }
    fold_context_t *ctx = req->comm->ctx;
    size_t done_before = req->ndone;
    int status;

    /* The clock is read every 64 idle polls, and at every one once the waiting rank
     * yields (fold_exec_wait): on a loaded node a yield may cost milliseconds, and 64
     * of them would push the timeout well past FOLD_TIMEOUT. */
    const unsigned yield_after = (unsigned)ctx->spin_count;
    if (!shm_turn(req)) {
        if ((++req->idle_polls & 63) == 0 || req->idle_polls > yield_after) {
            return check_timeout(req, 0);
        }
        return FOLD_INPROGRESS;
    }
    /* A schedule without transport steps (node shared memory only) need not drive
     * the transport on every poll: that would cost more than the flags it polls. */
    if (req->sched->uses_tl || (req->idle_polls & 63) == 0) {
        ctx->tl_ops->progress(ctx->tl);
    }
    for (;;) {
        for (size_t k = 0; k < req->nactive;) {
            uint32_t i = req->active[k];
            if (!active_step_done(req, i)) {
                /* A rank that waits on another's flag need not wait for a call that
                 * rank was never asked: its fingerprint is there since its turn. */
                if (req->sched->steps[i].kind == FOLD_STEP_SHM_WAIT &&
                    ((status = shm_wait_check(req, i)) != FOLD_OK ||
                     ((req->idle_polls & 15) == 15 &&
                      (status = shm_wait_other_path(req, i)) != FOLD_OK))) {
                    return status;
                }
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
        request_finish(req, FOLD_OK);
        return FOLD_OK;
    }
    if (req->ndone != done_before) {
        req->idle_polls    = 0;
        req->last_progress = 0;
    } else if ((++req->idle_polls & 63) == 0 || req->idle_polls > yield_after) {
        return check_timeout(req, 1);
    }
    return FOLD_INPROGRESS;
}

int fold_exec_tiny(fold_comm_t *comm, const fold_call_t *call)
{
    const fold_config_t *cfg = &comm->ctx->config;
    fold_node_call_t node_call = {
        .allreduce = call->coll == FOLD_COLL_ALLREDUCE, .coll_name = fold_coll_name(call->coll),
        .in = call->in, .out = call->out, .count = call->count, .dtype = call->dtype,
        .op = call->op, .root = call->root, .timeout_sec = cfg->timeout_sec,
        .spin_count = comm->ctx->spin_count, .thread_threshold = cfg->thread_threshold};
    comm->coll_seq++;   /* as a schedule would: the tags agree whatever path each took */
    return fold_node_fast_reduction(comm->node, &node_call);
}

int fold_exec_run(fold_comm_t *comm, const fold_exec_args_t *args)
{
    if (args->fast) {
        const fold_call_t call = {.coll = args->coll, .in = args->in, .out = args->out,
                                  .count = args->cargs.count, .dtype = args->dtype,
                                  .op = args->op, .root = args->cargs.root, .blocking = 1};
        return fold_exec_tiny(comm, &call);
    }
    fold_request_t *req;
    int status = fold_exec_start(comm, args, &req);
    if (status != FOLD_OK) {
        return status;
    }
    status = fold_exec_wait(req);
    fold_exec_release(req);
    return status;
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
