/*
 * The call's fingerprint on the first message to each peer, so that ranks whose
 * calls differ fail with FOLD_ERR_MISMATCH where their messages meet, instead of
 * reducing float bits as integers or a sum into a max (coll/check.c gathers every
 * rank's for FOLD_CHECK=1; the node's paths compare theirs in the segment).
 *
 * Only the first message of a call between two ranks in each direction carries
 * one (message number 0: both ranks number their messages alike, sched.h), and
 * only in allreduce and reduce:
 *
 *   payload <= FP_TINY_MAX     8 bytes (fold_fingerprint_pack) ride behind the
 *                              data: a transport's cheapest message holds a few
 *                              dozen bytes (UCX over shared memory: a payload
 *                              past 28 bytes costs a third more), and a tiny
 *                              call's message should stay in it
 *   payload <= FP_INLINE_MAX   24 bytes (with a magic word) ride behind the data:
 *                              the sender copies both into the request's arena, the
 *                              receiver takes them into the arena and copies the
 *                              data on (a few KiB each way, cheaper than a message)
 *   larger                     a 24-byte message beside the data (message number
 *                              FP_SEQ), so the data still moves without a copy
 *
 * Both ranks choose by their own count. Where the counts differ across that
 * border, the receiver of a longer message sees it truncated (FOLD_ERR_TRUNCATED),
 * and one expecting a message beside gets a short message whose tail is the
 * sender's fingerprint: it fails at once instead of waiting for the message beside.
 */
#include "comm.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FP_TINY_MAX   64
#define FP_TINY_BYTES 8
#define FP_INLINE_MAX 4096
#define FP_MAGIC      UINT64_C(0x46504c4446504c44)   /* "DLPFDLPF" little-endian */
#define FP_BYTES      24

/* Message number of the message beside: the largest, which no schedule reaches. */
#define FP_SEQ ((1u << 20) - 1)

typedef struct fp_wire {
    uint64_t magic;    /* FP_MAGIC ^ rest: a tail of data is not read as one */
    uint64_t rest;     /* fold_fingerprint_pack of all but the count */
    uint64_t count;
} fp_wire_t;
_Static_assert(sizeof(fp_wire_t) == FP_BYTES, "fingerprint on the wire");

enum { FP_NONE = FOLD_EXEC_FP_NONE, FP_TINY, FP_INLINE, FP_BESIDE };

/* Bytes of fingerprint behind the data (0: none, or beside it). */
static size_t trailer_bytes(int mode)
{
    return mode == FP_TINY ? FP_TINY_BYTES : mode == FP_INLINE ? FP_BYTES : 0;
}

static fold_fingerprint_t own(const fold_request_t *req)
{
    const fold_coll_args_t *a = &req->entry->args;
    int allreduce = req->coll == FOLD_COLL_ALLREDUCE;
    return (fold_fingerprint_t){.allreduce = allreduce, .count = a->count, .dtype = req->dtype,
                                .op = req->op, .root = allreduce ? 0 : a->root,
                                .inplace = allreduce ? a->inplace : 0,
                                .memory = req->memory};
}

fold_fingerprint_t fold_exec_fingerprint(const fold_request_t *req)
{
    return own(req);
}

static fp_wire_t to_wire(const fold_fingerprint_t *f)
{
    fold_fingerprint_t rest = *f;
    rest.count = 0;
    uint64_t packed = fold_fingerprint_pack(&rest);
    return (fp_wire_t){FP_MAGIC ^ packed, packed, f->count};
}

/* The bytes this request's messages carry in the mode. */
static const void *trailer_of(const fold_request_t *req, int mode)
{
    return mode == FP_TINY ? (const void *)&req->fp_wire[3] : (const void *)req->fp_wire;
}

/* Whether a fingerprint in the mode is this request's own: the common case, one
 * comparison of the bytes, nothing unpacked. */
static int same_as_mine(const fold_request_t *req, int mode, const void *bytes)
{
    return memcmp(bytes, trailer_of(req, mode), mode == FP_TINY ? FP_TINY_BYTES : FP_BYTES) == 0;
}

/* 1 and *f when the bytes are a fingerprint in the mode (a tiny one has no magic
 * word: any 8 bytes read as one). */
static int read_fp(int mode, const void *bytes, fold_fingerprint_t *f);

/* 1 and *f when the bytes are a fingerprint. */
static int from_wire(const void *bytes, fold_fingerprint_t *f)
{
    fp_wire_t w;
    memcpy(&w, bytes, sizeof(w));
    if ((w.magic ^ w.rest) != FP_MAGIC) {
        return 0;
    }
    *f = fold_fingerprint_unpack(w.rest);
    f->count = (size_t)w.count;
    return 1;
}

static int read_fp(int mode, const void *bytes, fold_fingerprint_t *f)
{
    if (mode != FP_TINY) {
        return from_wire(bytes, f);
    }
    uint64_t packed;
    memcpy(&packed, bytes, sizeof(packed));
    *f = fold_fingerprint_unpack(packed);
    return 1;
}

int fold_exec_fp_init(fold_request_t *req)
{
    const fold_sched_t *s = req->sched;
    fold_fingerprint_t f = own(req);
    fp_wire_t w = to_wire(&f);
    memcpy(req->fp_wire, &w, sizeof(w));
    req->fp_wire[3] = fold_fingerprint_pack(&f);   /* FP_TINY: counts below 2^20 */
    int reduction = req->coll == FOLD_COLL_ALLREDUCE || req->coll == FOLD_COLL_REDUCE;
    size_t need = 0;
    uint32_t last_seq = 0;
    for (size_t i = 0; i < s->nsteps; i++) {
        const fold_step_t *st = &s->steps[i];
        fold_exec_fp_t *fp = &req->fp[i];
        fp->mode = FP_NONE;
        fp->beside.status = FOLD_ERR_CANCELED;   /* not posted (yet) in this call */
        last_seq = st->seq > last_seq && st->seq != FOLD_STEP_NONE ? st->seq : last_seq;
        if (!reduction || st->seq != 0 ||
            (st->kind != FOLD_STEP_SEND && st->kind != FOLD_STEP_RECV)) {
            continue;
        }
        size_t payload = st->count * req->esize;
        fp->mode = payload <= FP_TINY_MAX     ? FP_TINY
                   : payload <= FP_INLINE_MAX ? FP_INLINE
                                              : FP_BESIDE;
        fp->off  = need;
        need += fp->mode == FP_BESIDE ? FP_BYTES : payload + trailer_bytes(fp->mode);
        need = (need + 7) & ~(size_t)7;
    }
    for (size_t i = 0; last_seq >= FP_SEQ && i < s->nsteps; i++) {
        if (req->fp[i].mode == FP_BESIDE) {
            req->fp[i].mode = FP_NONE;   /* a data message would take its number */
        }
    }
    if (need > req->fp_arena_size) {
        void *p = realloc(req->fp_arena, need);
        if (p == NULL) {
            return FOLD_ERR_NO_MEMORY;
        }
        req->fp_arena      = p;
        req->fp_arena_size = need;
    }
    return FOLD_OK;
}

int fold_exec_fp_send(fold_request_t *req, uint32_t i, int peer, uint64_t tag, const void *data,
                      size_t len)
{
    fold_context_t *ctx = req->comm->ctx;
    fold_exec_fp_t *fp = &req->fp[i];
    fold_tl_req_t *t = &req->tlreq[i];
    char *mine = req->fp_arena + fp->off;
    size_t trailer = trailer_bytes(fp->mode);
    if (trailer != 0) {
        memcpy(mine, data, len);
        memcpy(mine + len, trailer_of(req, fp->mode), trailer);
        return ctx->tl_ops->tag_send(ctx->tl, peer, tag, mine, len + trailer, t);
    }
    memcpy(mine, req->fp_wire, FP_BYTES);
    fp->beside.status = FOLD_INPROGRESS;
    uint64_t beside_tag = (tag & ~(uint64_t)FP_SEQ) | FP_SEQ;
    int status = ctx->tl_ops->tag_send(ctx->tl, peer, beside_tag, mine, FP_BYTES, &fp->beside);
    if (status < 0) {
        fp->beside.status = status;
        return status;
    }
    return ctx->tl_ops->tag_send(ctx->tl, peer, tag, data, len, t);
}

int fold_exec_fp_recv(fold_request_t *req, uint32_t i, int peer, uint64_t tag, void *data,
                      size_t len)
{
    fold_context_t *ctx = req->comm->ctx;
    fold_exec_fp_t *fp = &req->fp[i];
    fold_tl_req_t *t = &req->tlreq[i];
    char *mine = req->fp_arena + fp->off;
    if (fp->mode != FP_BESIDE) {
        return ctx->tl_ops->tag_recv(ctx->tl, peer, tag, mine, len + trailer_bytes(fp->mode), t);
    }
    fp->beside.status = FOLD_INPROGRESS;
    uint64_t beside_tag = (tag & ~(uint64_t)FP_SEQ) | FP_SEQ;
    int status = ctx->tl_ops->tag_recv(ctx->tl, peer, beside_tag, mine, FP_BYTES, &fp->beside);
    if (status < 0) {
        fp->beside.status = status;
        return status;
    }
    return ctx->tl_ops->tag_recv(ctx->tl, peer, tag, data, len, t);
}

/* A receive expecting a message beside got a short one that ends in a fingerprint
 * unlike this rank's: the sender's count put it on the other side of the border. */
static int short_with_other_fp(const fold_request_t *req, uint32_t i, fold_fingerprint_t *theirs)
{
    const fold_step_t *st = &req->sched->steps[i];
    const fold_tl_req_t *t = &req->tlreq[i];
    if (t->status != FOLD_OK || t->length < FP_BYTES || t->length == st->count * req->esize) {
        return 0;
    }
    const char *tail = req->buf[st->dst.buf] + st->dst.off * req->esize + t->length - FP_BYTES;
    return !same_as_mine(req, FP_INLINE, tail) && from_wire(tail, theirs);
}

int fold_exec_fp_done(const fold_request_t *req, uint32_t i)
{
    const fold_exec_fp_t *fp = &req->fp[i];
    if (fp->mode != FP_BESIDE ||
        __atomic_load_n(&fp->beside.status, __ATOMIC_ACQUIRE) != FOLD_INPROGRESS) {
        return 1;
    }
    fold_fingerprint_t theirs;
    return req->sched->steps[i].kind == FOLD_STEP_RECV && short_with_other_fp(req, i, &theirs);
}

void fold_exec_fp_cancel(fold_request_t *req, uint32_t i)
{
    fold_exec_fp_t *fp = &req->fp[i];
    if (fp->mode == FP_BESIDE && fp->beside.status == FOLD_INPROGRESS) {
        fold_context_t *ctx = req->comm->ctx;
        ctx->tl_ops->cancel(ctx->tl, &fp->beside);
    }
}

/* The calls differ where the fingerprints do: says how. */
static int mismatch(const fold_request_t *req, const fold_fingerprint_t *theirs, int peer,
                    char *why, size_t whylen)
{
    fold_fingerprint_t mine = own(req);
    why[0] = '\0';
    return fold_fingerprint_diff(theirs, peer, &mine, req->comm->rank, why, whylen) == 0
               ? FOLD_OK
               : FOLD_ERR_MISMATCH;
}

int fold_exec_fp_check(fold_request_t *req, uint32_t i, char *why, size_t whylen)
{
    const fold_step_t *st = &req->sched->steps[i];
    fold_exec_fp_t *fp = &req->fp[i];
    fold_tl_req_t *t = &req->tlreq[i];
    const char *got = req->fp_arena + fp->off;
    fold_fingerprint_t theirs;

    if (fp->mode == FP_BESIDE) {
        if (st->kind == FOLD_STEP_SEND) {
            if (fp->beside.status != FOLD_OK) {
                snprintf(why, whylen, "sending the call's fingerprint failed: %s",
                         fold_status_string(fp->beside.status));
                return fp->beside.status;
            }
            return FOLD_OK;
        }
        if (fp->beside.status == FOLD_INPROGRESS && short_with_other_fp(req, i, &theirs)) {
            fold_exec_fp_cancel(req, i);
            return mismatch(req, &theirs, st->peer, why, whylen);
        }
        if (fp->beside.status == FOLD_INPROGRESS) {
            return FOLD_OK;   /* canceled with the data's failure: the caller reports it */
        }
        if (fp->beside.status == FOLD_OK && fp->beside.length == FP_BYTES &&
            same_as_mine(req, FP_BESIDE, got)) {
            return FOLD_OK;
        }
        if (fp->beside.status != FOLD_OK || fp->beside.length != FP_BYTES ||
            !from_wire(got, &theirs)) {
            snprintf(why, whylen, "rank %d's call fingerprint did not arrive whole (%s): it "
                     "runs another collective", st->peer,
                     fp->beside.status != FOLD_OK ? fold_status_string(fp->beside.status)
                                                  : "malformed");
            return fp->beside.status != FOLD_OK ? fp->beside.status : FOLD_ERR_MISMATCH;
        }
        return mismatch(req, &theirs, st->peer, why, whylen);
    }
    if (st->kind == FOLD_STEP_SEND || t->status != FOLD_OK) {
        return FOLD_OK;   /* the caller reports a failed transfer */
    }
    /* Behind the data: the fingerprint is the message's tail; the data goes where
     * the schedule wanted it, and the length is the data's. */
    size_t trailer = trailer_bytes(fp->mode);
    if (t->length < trailer || !same_as_mine(req, fp->mode, got + t->length - trailer)) {
        if (t->length < trailer || !read_fp(fp->mode, got + t->length - trailer, &theirs)) {
            snprintf(why, whylen, "rank %d's message carries no call fingerprint (%zu bytes): "
                     "it runs another collective, or another count", st->peer, t->length);
            return FOLD_ERR_MISMATCH;
        }
        if (mismatch(req, &theirs, st->peer, why, whylen) != FOLD_OK) {
            return FOLD_ERR_MISMATCH;
        }
    }
    t->length -= trailer;
    if (t->length != 0) {
        memcpy(req->buf[st->dst.buf] + st->dst.off * req->esize, got, t->length);
    }
    return FOLD_OK;
}

/* A message from a peer failed the length or format checks: if the peer's
 * fingerprint, carried by its first message of this call (or beside the failed
 * message itself), is here or arrives soon, say how the calls differ instead (a
 * later segment can overtake the first). */
int fold_exec_fp_explain(fold_request_t *req, uint32_t i, char *why, size_t whylen)
{
    const fold_sched_t *s = req->sched;
    const fold_step_t *st = &s->steps[i];
    fold_context_t *ctx = req->comm->ctx;
    for (size_t j = 0; j < s->nsteps; j++) {
        const fold_step_t *first = &s->steps[j];
        fold_exec_fp_t *fp = &req->fp[j];
        /* The failed message itself counts when its fingerprint travels beside it:
         * under load the data can arrive and fail before the fingerprint does. */
        if (first->kind != FOLD_STEP_RECV || first->peer != st->peer || first->seq != 0 ||
            fp->mode == FP_NONE || (j == i && fp->mode != FP_BESIDE)) {
            continue;
        }
        const char *got = req->fp_arena + fp->off;
        fold_fingerprint_t theirs;
        if (fp->mode != FP_BESIDE) {
            return FOLD_OK;   /* behind the data: checked when it arrived */
        }
        double until = fold_util_time_now() + 1.0;   /* sent before the data: it is here */
        while (fp->beside.status == FOLD_INPROGRESS && fold_util_time_now() < until) {
            ctx->tl_ops->progress(ctx->tl);
        }
        if (fp->beside.status == FOLD_OK && fp->beside.length == FP_BYTES &&
            from_wire(got, &theirs)) {
            return mismatch(req, &theirs, st->peer, why, whylen);
        }
        return FOLD_OK;
    }
    return FOLD_OK;
}
