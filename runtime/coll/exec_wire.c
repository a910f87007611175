/*
 * Sparse codecs in the executor: which messages go out encoded, and how encoded
 * messages are read back. The schedule never knows.
 *
 * A message is dense when its length is the step's count x element size, encoded
 * (runtime/codec/codec.h, header first) when it is shorter. So a receiver needs no
 * agreement with the sender beyond the collective's op and datatype, and each send
 * decides alone, per segment and per hop, from its own data:
 *
 *   - the reduction that produced the data counted its density (the plan's counts,
 *     exec_plan.h), or a few samples rule the data out as too dense, or one
 *     counting pass measures it;
 *   - the codec with the fewest bytes wins if it saves enough for the path
 *     (wire_path below: across nodes 1/8 of the bytes; within a node more, the
 *     larger the collective, and never to a peer that sends this rank dense data);
 *   - the message is encoded into a staging buffer from the communicator's pool;
 *     with no buffer free it goes dense.
 *
 * An encoded message that lands in a TMP slot read by exactly one reduction stays
 * there, and that reduction decodes it while reducing (the plan's wire); anywhere
 * else it is decoded in place of the dense data as soon as it arrives.
 */
#include "comm.h"
#include "log.h"
#include "codec/codec.h"
#include "codec/reduce_kernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Below this a message is latency-bound: not worth a look. */
#define WIRE_MIN_BYTES 1024
/* Cache lines a send samples before deciding to count: one per 4 KiB, 4 to 32.
 * Each is likely a miss (the data streams through memory): few, or they cost dense
 * data its speed; a small message is cheap to count anyway. Out of cache the 32
 * lines (512 float32s) are what tells 1% from 0.1% non-zero. */
static size_t wire_samples(const fold_request_t *req, size_t count)
{
    size_t lines = count * req->esize / 4096;
    return lines < 4 ? 4 : lines > 32 ? 32 : lines;
}

static char *ref_ptr(const fold_request_t *req, fold_ref_t ref)
{
    return req->buf[ref.buf] + ref.off * req->esize;
}

void fold_wire_request_init(fold_request_t *req, const fold_exec_args_t *args)
{
    const fold_context_t *ctx = req->comm->ctx;
    int reduction = args->coll == FOLD_COLL_ALLREDUCE || args->coll == FOLD_COLL_REDUCE;

    req->codec_accept = reduction && fold_codec_supported(args->op, args->dtype);
    req->codec_mask   = req->codec_accept
                            ? ctx->config.codec_mask & fold_codec_valid_mask(args->dtype)
                            : 0;
}

/* ---- staging buffers ---------------------------------------------------------- */

static fold_wire_buf_t *pool_acquire(fold_comm_t *comm, size_t bytes)
{
    fold_wire_buf_t *best = NULL;
    for (int i = 0; i < FOLD_WIRE_POOL; i++) {
        fold_wire_buf_t *b = &comm->wire_pool[i];
        if (b->busy) {
            continue;
        }
        if (b->size >= bytes) {
            best = b;
            break;
        }
        if (best == NULL || b->size > best->size) {
            best = b;
        }
    }
    if (best == NULL) {
        return NULL;
    }
    if (best->size < bytes) {
        void *buf = NULL;
        if (posix_memalign(&buf, 64, bytes) != 0) {
            return NULL;
        }
        free(best->buf);
        best->buf  = buf;
        best->size = bytes;
    }
    best->busy = 1;
    return best;
}

void fold_wire_pool_free(fold_comm_t *comm)
{

    for (int i = 0; i < FOLD_WIRE_POOL; i++) {
        free(comm->wire_pool[i].buf);
        comm->wire_pool[i].buf  = NULL;
        comm->wire_pool[i].size = 0;
    }
}

void fold_wire_send_done(fold_request_t *req, uint32_t i)
{
    if (req->staging[i] != NULL) {
        req->staging[i]->busy = 0;
        req->staging[i] = NULL;
    }
}

/* ---- sending ---------------------------------------------------------------- */

static int peer_is_remote(const fold_request_t *req, int peer)
{
    return fold_comm_peer_remote(req->comm, peer);
}

/* What a message's path makes an encoding worth. Across nodes the link is the
 * bottleneck and any saving counts. Within a node a dense message costs one copy,
 * while encoding reads the data once more on the sender and the fused decode is no
 * faster than a reduction: that pays while the data sits in cache, and the less
 * the further out of cache the collective's buffers are. And a rank whose peer on
 * the node sends it dense data only moves work onto itself by encoding for it (the
 * peer is the one that gains, and the slower one is this rank, which also copies
 * the peer's dense message): so it sends dense too. */
typedef enum wire_path {
    WIRE_REMOTE,
    WIRE_LOCAL_SMALL,        /* collective below WIRE_LOCAL_SMALL_BYTES */
    WIRE_LOCAL_MEDIUM,       /* below WIRE_LOCAL_MEDIUM_BYTES */
    WIRE_LOCAL_LARGE,
    WIRE_LOCAL_PEER_DENSE
} wire_path_t;

/* Within a node the codecs gain only on very sparse data, the sparser the larger
 * the message, since a dense copy is cheap there (docs/design/codecs.md). */
#define WIRE_LOCAL_SMALL_BYTES  (1024 * 1024)
#define WIRE_LOCAL_MEDIUM_BYTES (8 * 1024 * 1024)

static wire_path_t wire_path(const fold_request_t *req, int peer)
{
    if (peer_is_remote(req, peer)) {
        return WIRE_REMOTE;
    }
    const uint8_t *peer_dense = req->entry->peer_dense;
    if (peer_dense != NULL && peer_dense[peer]) {
        return WIRE_LOCAL_PEER_DENSE;
    }
    size_t bytes = req->entry->args.count * req->esize;
    return bytes < WIRE_LOCAL_SMALL_BYTES    ? WIRE_LOCAL_SMALL
           : bytes < WIRE_LOCAL_MEDIUM_BYTES ? WIRE_LOCAL_MEDIUM
                                             : WIRE_LOCAL_LARGE;
}

/* Largest encoded size worth sending instead of `dense` bytes. */
static size_t worth(size_t dense, wire_path_t path)
{
    switch (path) {
    case WIRE_REMOTE:       return dense - dense / 8;
    case WIRE_LOCAL_SMALL:  return dense / 2;
    case WIRE_LOCAL_MEDIUM: return dense / 16;
    case WIRE_LOCAL_LARGE:  return dense / 64;
    default:                return 0;
    }
}

/* Above this sampled non-zero fraction the data is sent dense without a counting
 * pass. Near the cache it is where no codec can get under worth() (bits costs the
 * fraction plus 1/32 for float32, idx twice the fraction); out of cache, where a
 * counting pass costs a good part of the copy it might save, the samples must show
 * the data well under that. */
static double dense_above(wire_path_t path)
{
    switch (path) {
    case WIRE_REMOTE:       return 0.85;
    case WIRE_LOCAL_SMALL:  return 0.45;
    case WIRE_LOCAL_MEDIUM: return 0.03;
    case WIRE_LOCAL_LARGE:  return 0.004;
    default:                return -1.0;
    }
}

/* Remembers whether a peer's latest message of codec-worthy size in this schedule
 * (the same call repeated) carried dense data: sent dense, and dense by its samples
 * (a message sent dense because of this very rule may hold sparse data, and two
 * ranks must not talk each other into dense messages for good). */
static void note_peer_density(fold_request_t *req, const fold_step_t *st, size_t len)
{
    fold_sched_entry_t *entry = req->entry;
    int peer = st->peer;
    int dense = len == st->count * req->esize &&
                fold_codec_sample_density(req->dtype, ref_ptr(req, st->dst), st->count, 4) > 0.5;
    if (entry->peer_dense == NULL) {
        if (!dense || (entry->peer_dense = calloc((size_t)req->comm->size, 1)) == NULL) {
            return;   /* without the table every peer counts as sparse: still correct */
        }
    }
    entry->peer_dense[peer] = (uint8_t)dense;
}

void fold_wire_send_data(fold_request_t *req, uint32_t i, const void **data, size_t *len)
{
    const fold_step_t *st = &req->sched->steps[i];
    size_t dense = st->count * req->esize;

    if (req->staging[i] != NULL) {
        *data = req->staging[i]->buf;   /* the reduction wrote it encoded */
        *len  = req->staging[i]->len;
        return;
    }
    *data = st->count ? ref_ptr(req, st->src) : NULL;
    *len  = dense;
    if (req->codec_mask == 0 || dense < WIRE_MIN_BYTES) {
        return;
    }

    fold_wire_counters_t *counters = &req->comm->ctx->wire;
    counters->msgs[FOLD_CODEC_DENSE]++;   /* until it is encoded below */
    counters->dense_bytes += dense;
    counters->sent_bytes  += dense;
    wire_path_t path = wire_path(req, st->peer);
    size_t limit = worth(dense, path);
    if (limit == 0) {
        return;   /* nothing would be worth it: not even a look */
    }
    fold_codec_stats_t counted, *stats = NULL;
    uint32_t link = req->plan->steps[i].link;
    if (link != FOLD_STEP_NONE && req->stats[link].count == st->count) {
        stats = &req->stats[link];
    } else {
        /* Dense data must cost next to nothing: a handful of loads rule it out. */
        double density = fold_codec_sample_density(req->dtype, *data, st->count,
                                                   wire_samples(req, st->count));
        if (density > dense_above(path)) {
            return;
        }
        fold_codec_count(req->dtype, *data, st->count, &counted);
        stats = &counted;
    }
    fold_codec_id_t codec = fold_codec_choose(req->dtype, stats, req->codec_mask);
    if (codec == FOLD_CODEC_DENSE || fold_codec_size(codec, req->dtype, stats) > limit) {
        return;
    }

    fold_wire_buf_t *buf = pool_acquire(req->comm, limit);
    if (buf == NULL) {
        return;
    }
    size_t n = fold_codec_encode(codec, req->dtype, *data, st->count, buf->buf, limit);
    if (n == 0) {
        buf->busy = 0;   /* the counts were stale: send it dense */
        return;
    }
    req->staging[i] = buf;
    *data = buf->buf;
    *len  = n;
    counters->msgs[FOLD_CODEC_DENSE]--;
    counters->msgs[codec]++;
    counters->sent_bytes -= dense - n;
}

/* ---- receiving -------------------------------------------------------------- */

int fold_wire_recv_done(fold_request_t *req, uint32_t i, char *why, size_t whylen)
{
    const fold_step_t *st = &req->sched->steps[i];
    size_t dense = st->count * req->esize;
    size_t len = req->tlreq[i].length;

    if (req->codec_accept && dense >= WIRE_MIN_BYTES && !peer_is_remote(req, st->peer)) {
        note_peer_density(req, st, len);
    }
    if (len == dense || req->plan->steps[i].wire) {
        return FOLD_OK;   /* dense, or decoded by the reduction that reads it */
    }
    /* The encoded bytes sit at the start of the destination: move them aside. */
    fold_wire_buf_t *buf = pool_acquire(req->comm, len);
    void *copy = buf ? buf->buf : malloc(len);
    if (copy == NULL) {
        snprintf(why, whylen, "no memory to decode %zu bytes from rank %d", len, st->peer);
        return FOLD_ERR_NO_MEMORY;
    }
    char *dst = ref_ptr(req, st->dst);
    memcpy(copy, dst, len);
    int status = fold_codec_decode(req->dtype, copy, len, dst, st->count);
    if (buf != NULL) {
        buf->busy = 0;
    } else {
        free(copy);
    }
    if (status != FOLD_OK) {
        snprintf(why, whylen, "rank %d sent a malformed encoded message (%zu bytes for %zu "
                 "elements; mismatched calls?): %s", st->peer, len, st->count,
                 fold_codec_error_detail());
    }
    return status;
}

/* Whether an arrived message of this length is acceptable for the step. */
int fold_wire_length_ok(const fold_request_t *req, uint32_t i, size_t len)
{
    const fold_step_t *st = &req->sched->steps[i];
    size_t dense = st->count * req->esize;
    return len == dense || (req->codec_accept && len < dense && len > 0);
}

/* ---- reducing --------------------------------------------------------------- */

/* The codec to encode a op b with, before it exists: the operands' densities
 * (sampled, or the encoded operand's bytes per dense byte) bound the result's; bits
 * serves everything up to ~97% non-zero, idx is smaller below ~3%. DENSE when the
 * result will not be worth encoding. */
static fold_codec_id_t guess_codec(const fold_request_t *req, double density,
                                   wire_path_t path)
{
    int mask = req->codec_mask;
    if (density > dense_above(path)) {
        return FOLD_CODEC_DENSE;
    }
    if ((mask & (1 << FOLD_CODEC_IDX)) && (density < 0.02 || !(mask & (1 << FOLD_CODEC_BITS)))) {
        return FOLD_CODEC_IDX;
    }
    if (mask & (1 << FOLD_CODEC_BITS)) {
        return FOLD_CODEC_BITS;
    }
    return (mask & (1 << FOLD_CODEC_RLE)) ? FOLD_CODEC_RLE : FOLD_CODEC_DENSE;
}

/* a op b (a possibly the encoded message of the step's wire operand) written
 * encoded into a staging buffer for the send that forwards it, instead of dense
 * into dst. 1 when done; 0 when the reduction must run the ordinary way (guessed
 * dense, no buffer, or the result did not shrink enough). */
static int reduce_encoded(fold_request_t *req, uint32_t i, int *status, char *why,
                          size_t whylen)
{
    const fold_step_t *st = &req->sched->steps[i];
    const fold_plan_step_t *ps = &req->plan->steps[i];
    const fold_step_t *snd = &req->sched->steps[ps->fwd];
    size_t dense = st->count * req->esize;
    wire_path_t path = wire_path(req, snd->peer);
    if (worth(dense, path) == 0) {
        return 0;
    }
    const void *a = ref_ptr(req, ps->wire == 2 ? st->src2 : st->src);
    const void *b = ref_ptr(req, ps->wire == 2 ? st->src : st->src2);
    size_t wire_len = ps->wire ? req->tlreq[ps->link].length : dense;

    double da = wire_len != dense ? (double)wire_len / (double)dense
                                  : fold_codec_sample_density(req->dtype, a, st->count,
                                                              wire_samples(req, st->count));
    double db = fold_codec_sample_density(req->dtype, b, st->count,
                                          wire_samples(req, st->count));
    fold_codec_id_t codec = guess_codec(req, da + db, path);
    if (codec == FOLD_CODEC_DENSE) {
        return 0;
    }
    size_t limit = worth(dense, path);
    fold_wire_buf_t *buf = pool_acquire(req->comm, limit);
    if (buf == NULL) {
        return 0;
    }
    size_t n = 0;
    if (wire_len != dense) {
        *status = fold_codec_reduce_wire_encode(req->op, req->dtype, codec, a, wire_len, b,
                                                st->count, buf->buf, limit, &n);
        if (*status != FOLD_OK) {
            buf->busy = 0;
            snprintf(why, whylen, "rank %d sent a malformed encoded message (%zu bytes for "
                     "%zu elements): %s", req->sched->steps[ps->link].peer, wire_len,
                     st->count, fold_codec_error_detail());
            return 1;
        }
    } else {
        n = fold_codec_reduce_encode(req->op, req->dtype, codec, a, b, st->count, buf->buf,
                                     limit);
    }
    if (n == 0) {
        buf->busy = 0;   /* guessed wrong: denser than it looked */
        return 0;
    }
    buf->len = n;
    req->staging[ps->fwd] = buf;
    fold_wire_counters_t *counters = &req->comm->ctx->wire;
    counters->msgs[codec]++;
    counters->dense_bytes += dense;
    counters->sent_bytes  += n;
    counters->fused       += wire_len != dense;
    counters->direct++;
    *status = FOLD_OK;
    return 1;
}

int fold_wire_reduce(fold_request_t *req, uint32_t i, char *why, size_t whylen)
{
    const fold_step_t *st = &req->sched->steps[i];
    const fold_plan_step_t *ps = &req->plan->steps[i];
    const fold_context_t *ctx = req->comm->ctx;
    fold_codec_stats_t *stats = ps->counts ? &req->stats[i] : NULL;
    size_t dense = st->count * req->esize;

    if (stats != NULL) {
        stats->count = 0;   /* not counted unless this pass counts */
    }
    int status;
    if (ps->counts == 2 && req->codec_mask != 0 && dense >= WIRE_MIN_BYTES &&
        reduce_encoded(req, i, &status, why, whylen)) {
        return status;
    }
    if (ps->wire != 0) {
        size_t len = req->tlreq[ps->link].length;
        if (len != dense) {
            const void *wire  = ref_ptr(req, ps->wire == 1 ? st->src : st->src2);
            const void *other = ref_ptr(req, ps->wire == 1 ? st->src2 : st->src);
            status = fold_codec_reduce_wire(req->op, req->dtype, wire, len, other,
                                            ref_ptr(req, st->dst), st->count, stats);
            req->comm->ctx->wire.fused++;
            if (status != FOLD_OK) {
                snprintf(why, whylen, "rank %d sent a malformed encoded message (%zu bytes "
                         "for %zu elements): %s", req->sched->steps[ps->link].peer, len,
                         st->count, fold_codec_error_detail());
            }
            return status;
        }
    }
    /* Counting costs the reduction some speed: only where the samples of the
     * operands say the result may be sparse enough to encode. */
    if (stats != NULL && req->codec_mask != 0 && dense < ctx->config.thread_threshold &&
        dense >= WIRE_MIN_BYTES) {
        wire_path_t path = wire_path(req, req->sched->steps[ps->fwd].peer);
        double da = 1.0, db = 1.0;
        if (worth(dense, path) != 0) {
            size_t samples = wire_samples(req, st->count);
            da = fold_codec_sample_density(req->dtype, ref_ptr(req, st->src), st->count,
                                           samples);
            db = fold_codec_sample_density(req->dtype, ref_ptr(req, st->src2), st->count,
                                           samples);
        }
        if (da + db - da * db > dense_above(path)) {
            /* Tell the send it is dense, so that it does not look again. */
            stats->count = stats->nnz = st->count;
            stats->runs  = stats->nans = 0;
            stats = NULL;
        }
    }
    if (stats != NULL && req->codec_mask != 0 && dense < ctx->config.thread_threshold) {
        fold_codec_reduce_count(req->op, req->dtype, ref_ptr(req, st->src),
                                ref_ptr(req, st->src2), ref_ptr(req, st->dst), st->count,
                                stats);
        return FOLD_OK;
    }
    status = fold_exec_reduce_dense(req, i);
    if (status != FOLD_OK) {
        snprintf(why, whylen, "the local reduction failed");
    }
    return status;
}
