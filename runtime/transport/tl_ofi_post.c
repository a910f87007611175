/*
 * libfabric transport, operations: the pool of tl_ofi_op_t, handing them to the
 * provider or queueing them per peer, and the tagged sends and receives built on
 * them. Kept apart from the instance (tl_ofi.c) and from completions (tl_ofi_cq.c)
 * because this is where the provider's quirks are worked around.
 *
 * Operations: each carries a tl_ofi_op_t whose first member is the fi_context2 the
 * provider may write to (FI_CONTEXT / FI_CONTEXT2 modes); the op points at the
 * caller's fold_tl_req_t. progress() reads the completion queue, which is also what
 * drives providers with manual data progress, and stores each final status. An
 * operation the provider refuses for now (-FI_EAGAIN; shm says -FI_ENOMEM when its
 * receive pool is used up) waits in a FIFO that progress() posts from, one per peer
 * and direction: while it is not empty every new operation of that peer and
 * direction joins it, so the posting order, and with FI_ORDER_SAS the matching
 * order, is kept, and operations with one peer never wait behind another's.
 *
 * Truncation: a receive is posted with a second, discard iov behind the caller's
 * buffer (a large reserved mapping whose pages only exist once written), so the
 * provider receives an over-long message whole and fold reports FOLD_ERR_TRUNCATED
 * from the received length. Providers' own truncation paths are fragile in
 * libfabric 1.17: tcp;ofi_rxm drops the connection (ofiwg/libfabric#8274) and shm
 * hangs for messages over 4 KiB. Without room for the second iov (FI_MR_LOCAL,
 * iov_limit 1, or a message longer than the tail) the provider truncates.
 *
 * Send completion order: shm (libfabric 1.17) reports the completion of every send
 * over its inject size (4 KiB) in posting order, once the receiver has taken it
 * (smr_progress_resp stops at the first send not yet received). A schedule that
 * needs a later send to finish before an earlier one is received, e.g. an
 * in-place reduce that reuses a buffer once its send is done, would then wait
 * forever. With shm, such sends are therefore copied into a bounce buffer and
 * complete at once, as eager sends do elsewhere, up to TL_OFI_BOUNCE_LIMIT bytes in
 * flight; past that they wait for the provider. Bounce buffers are kept for reuse
 * (fresh pages would cost a page fault each).
 */
#include "transport/tl_ofi_impl.h"
#include "log.h"

#include <fold/fold_status.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <sys/uio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const tl_ofi_op_names[] = {
    [TL_OFI_SEND] = "tag send", [TL_OFI_RECV] = "tag receive",
};

/* ---- the operation pool --------------------------------------------------------- */

static tl_ofi_op_t *tl_ofi_op_get(fold_tl_t *tl)
{
    tl_ofi_op_t *op = tl->free_ops;
    if (op != NULL) {
        tl->free_ops = op->next;
    } else if ((op = malloc(sizeof(*op))) == NULL) {
        fold_error("ofi: out of memory for an operation");
        return NULL;
    }
    memset(op, 0, sizeof(*op));
    return op;
}

/* An idle bounce buffer of at least len bytes: the smallest cached one that fits,
 * or a new one of the next power of two. */
static tl_ofi_bounce_t *tl_ofi_bounce_get(fold_tl_t *tl, size_t len)
{
    tl_ofi_bounce_t **best = NULL;
    for (tl_ofi_bounce_t **b = &tl->bounce_cache; *b != NULL; b = &(*b)->next) {
        if ((*b)->capacity >= len && (best == NULL || (*b)->capacity < (*best)->capacity)) {
            best = b;
        }
    }
    if (best != NULL) {
        tl_ofi_bounce_t *bounce = *best;
        *best = bounce->next;
        tl->bounce_cached -= bounce->capacity;
        return bounce;
    }
    size_t capacity = TL_OFI_BOUNCE_MIN;
    while (capacity < len) {
        capacity *= 2;
    }
    tl_ofi_bounce_t *bounce = aligned_alloc(TL_OFI_BOUNCE_HEADER, TL_OFI_BOUNCE_HEADER + capacity);
    if (bounce != NULL) {
        bounce->capacity = capacity;
    }
    return bounce;
}

static void tl_ofi_bounce_put(fold_tl_t *tl, tl_ofi_bounce_t *bounce)
{
    if (tl->bounce_cached + bounce->capacity > TL_OFI_BOUNCE_CACHE) {
        free(bounce);
        return;
    }
    bounce->next = tl->bounce_cache;
    tl->bounce_cache = bounce;
    tl->bounce_cached += bounce->capacity;
}

static inline void *tl_ofi_bounce_data(tl_ofi_bounce_t *bounce)
{
    return (char *)bounce + TL_OFI_BOUNCE_HEADER;
}

void tl_ofi_op_put(fold_tl_t *tl, tl_ofi_op_t *op)
{
    if (op->local_mr != NULL) {
        fi_close(&op->local_mr->fid);
        op->local_mr = NULL;
    }
    if (op->bounce != NULL) {
        tl->bounce_bytes -= op->len;
        tl_ofi_bounce_put(tl, op->bounce);
        op->bounce = NULL;
    }
    op->next = tl->free_ops;
    tl->free_ops = op;
}

static int tl_ofi_check_tag(uint64_t tag)
{
    if (tag & ~TL_OFI_USER_TAG_MASK) {
        fold_error("ofi: tag 0x%llx uses more than %d bits", (unsigned long long)tag,
                   FOLD_TL_TAG_BITS);
        return FOLD_ERR_INVALID_ARG;
    }
    return FOLD_OK;
}

static int tl_ofi_check_length(fold_tl_t *tl, int peer, size_t len)
{
    if (len > tl->max_msg_size) {
        fold_error("ofi: tag send of %zu bytes to peer %d exceeds the provider's max_msg_size "
                   "(%zu bytes)", len, peer, tl->max_msg_size);
        return FOLD_ERR_UNSUPPORTED;
    }
    return FOLD_OK;
}

/* A new operation towards peer, with its buffer registered if the provider needs
 * local registration. */
static int tl_ofi_op_new(fold_tl_t *tl, tl_ofi_op_kind_t kind, int peer, void *buf,
                         size_t len, tl_ofi_op_t **op_p)
{
    static const uint64_t local_access[] = {[TL_OFI_SEND] = FI_SEND, [TL_OFI_RECV] = FI_RECV};
    tl_ofi_op_t *op = tl_ofi_op_get(tl);
    if (op == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    op->kind = kind;
    op->peer = peer;
    op->buf  = buf;
    op->len  = len;
    if ((tl->mr_mode & FI_MR_LOCAL) && len > 0) {
        int status = tl_ofi_register(tl, buf, len, local_access[kind], &op->local_mr);
        if (status != FOLD_OK) {
            tl_ofi_op_put(tl, op);
            return status;
        }
    }
    *op_p = op;
    return FOLD_OK;
}

/* ---- posting -------------------------------------------------------------------- */

/* Whether a post refused with ret may succeed once operations in flight complete. */
static int tl_ofi_post_busy(const fold_tl_t *tl, ssize_t ret)
{
    return ret == -FI_EAGAIN || (ret == -FI_ENOMEM && tl->posted.head != NULL);
}

/* Hands op to the provider: 0, -FI_EAGAIN (try again after progress) or an error. */
static ssize_t tl_ofi_post(fold_tl_t *tl, tl_ofi_op_t *op)
{
    void *desc = op->local_mr != NULL ? fi_mr_desc(op->local_mr) : NULL;
    fi_addr_t dest = tl_ofi_peer_of(tl, op->peer)->fi_addr;

    switch (op->kind) {
    case TL_OFI_SEND:
        return fi_tsend(tl->ep, op->buf, op->len, desc, dest, op->wire_tag, &op->fi_context);
    case TL_OFI_RECV: {
        if (tl->discard == NULL || op->len >= tl->max_msg_size) {
            return fi_trecv(tl->ep, op->buf, op->len, desc, FI_ADDR_UNSPEC, op->wire_tag, 0,
                            &op->fi_context);
        }
        size_t room = tl->max_msg_size - op->len;
        struct iovec iov[2] = {
            {.iov_base = op->buf, .iov_len = op->len},
            {.iov_base = tl->discard, .iov_len = room < tl->discard_len ? room : tl->discard_len},
        };
        void *descs[2] = {desc, NULL};
        /* An empty caller buffer leaves just the discard iov. */
        int first = op->len == 0 ? 1 : 0;
        struct fi_msg_tagged msg = {
            .msg_iov = iov + first, .desc = descs + first, .iov_count = (size_t)(2 - first),
            .addr = FI_ADDR_UNSPEC, .tag = op->wire_tag, .ignore = 0,
            .context = &op->fi_context,
        };
        return fi_trecvmsg(tl->ep, &msg, FI_COMPLETION);
    }
    default:
        return -FI_EINVAL;
    }
}

/* An operation the provider refused for good: logs why and returns its status.
 * ofi_rxm starts reading a matched rendezvous message from its sender while the
 * receive is posted, so a receive that fails to start with an unspecific error
 * (FI_EOTHER, FI_EIO) failed on the connection to that peer: the peer is gone, and
 * why says so for tl_ofi_peer_failed, which the caller runs once op left its queue. */
static int tl_ofi_post_failed(fold_tl_t *tl, const tl_ofi_op_t *op, int err,
                              const char *queued, char *why, size_t why_size)
{
    const char *what = tl_ofi_op_names[op->kind];
    int status = tl_ofi_status(err);
    why[0] = '\0';
    if (status == FOLD_ERR_TRANSPORT && op->kind == TL_OFI_RECV &&
        (err == FI_EOTHER || err == FI_EIO) &&
        strstr(tl->info->fabric_attr->prov_name, "ofi_rxm") != NULL) {
        snprintf(why, why_size, "%s%s of %zu bytes failed to start: %s (the provider "
                 "could not read the matched message from its sender)", queued, what,
                 op->len, fi_strerror(err));
        return FOLD_ERR_PEER_FAILED;
    }
    fold_error("ofi: %s%s of %zu bytes with peer %d failed to start: %s", queued, what,
               op->len, op->peer, fi_strerror(err));
    return status;
}

/* Posts a new operation, or queues it behind earlier ones; fills req once started.
 * On failure op is recycled and req untouched. */
static int tl_ofi_start(fold_tl_t *tl, tl_ofi_op_t *op, fold_tl_req_t *req)
{
    tl_ofi_list_t *queue = tl_ofi_queue_of(tl, op);
    op->req = op->bounce != NULL ? NULL : req;
    if (queue->head == NULL) {
        ssize_t ret = tl_ofi_post(tl, op);
        if (ret == 0) {
            op->state = TL_OFI_OP_POSTED;
            tl_ofi_list_push(&tl->posted, op);
            goto started;
        }
        if (!tl_ofi_post_busy(tl, ret)) {
            char why[256];
            int peer = op->peer;
            int status = tl_ofi_post_failed(tl, op, (int)-ret, "", why, sizeof(why));
            tl_ofi_op_put(tl, op);
            if (why[0] != '\0') {
                tl_ofi_peer_failed(tl, peer, why);
            }
            return status;
        }
    }
    op->state = TL_OFI_OP_QUEUED;
    tl_ofi_list_push(queue, op);
    tl_ofi_peer_t *peer = tl_ofi_peer_of(tl, op->peer);
    if (!peer->waiting) {
        peer->waiting = 1;
        tl->waiting[tl->nwaiting++] = peer;   /* room for every peer (tl_ofi_connect) */
    }
started:
    req->handle = op->req != NULL ? op : NULL;
    req->status = op->req != NULL ? FOLD_INPROGRESS : FOLD_OK;
    return FOLD_OK;
}

/* Posts one queue's operations in order until the provider pushes back again. */
static int tl_ofi_post_queue(fold_tl_t *tl, tl_ofi_list_t *queue)
{
    int events = 0;
    tl_ofi_op_t *op;

    while ((op = queue->head) != NULL) {
        ssize_t ret = tl_ofi_post(tl, op);
        if (tl_ofi_post_busy(tl, ret)) {
            break;
        }
        events++;
        if (ret == 0) {
            tl_ofi_list_remove(queue, op);
            op->state = TL_OFI_OP_POSTED;
            tl_ofi_list_push(&tl->posted, op);
        } else {
            char why[256];
            int peer = op->peer;
            int status = tl_ofi_post_failed(tl, op, (int)-ret, "queued ", why, sizeof(why));
            tl_ofi_complete(tl, op, status, 0);
            if (why[0] != '\0') {
                tl_ofi_peer_failed(tl, peer, why);   /* empties this queue */
            }
        }
    }
    return events;
}

/* Posts what waits in the peers' queues; forgets peers whose queues emptied. */
static int tl_ofi_post_queued(fold_tl_t *tl)
{
    int events = 0;

    for (int i = 0; i < tl->nwaiting;) {
        tl_ofi_peer_t *peer = tl->waiting[i];
        events += tl_ofi_post_queue(tl, &peer->queued_tx);
        events += tl_ofi_post_queue(tl, &peer->queued_rx);
        if (peer->queued_tx.head == NULL && peer->queued_rx.head == NULL) {
            peer->waiting = 0;
            tl->waiting[i] = tl->waiting[--tl->nwaiting];
        } else {
            i++;
        }
    }
    return events;
}

int tl_ofi_progress(fold_tl_t *tl)
{
    int events = tl_ofi_read_cq(tl);
    if (tl->nwaiting > 0) {
        events += tl_ofi_post_queued(tl);
    }
    return events;
}

/* ---- tagged messages ------------------------------------------------------------ */

int tl_ofi_tag_send(fold_tl_t *tl, int peer, uint64_t tag, const void *buf, size_t len,
                    fold_tl_req_t *req)
{
    tl_ofi_op_t *op;
    int status = tl_ofi_check_tag(tag);
    if (status == FOLD_OK) {
        status = tl_ofi_connect(tl, peer);
    }
    if (status == FOLD_OK) {
        status = tl_ofi_check_length(tl, peer, len);
    }
    if (status != FOLD_OK) {
        return status;
    }

    uint64_t wire_tag = tl_ofi_wire_tag(tl->rank, tag);
    tl_ofi_peer_t *to = tl_ofi_peer_of(tl, peer);
    if (len <= tl->inject_size && to->queued_tx.head == NULL) {
        /* The provider copies the data: complete now, no completion entry follows. */
        ssize_t ret = fi_tinject(tl->ep, buf, len, to->fi_addr, wire_tag);
        if (ret == 0) {
            req->handle = NULL;
            req->status = FOLD_OK;
            return FOLD_OK;
        }
        if (ret != -FI_EAGAIN) {
            fold_error("ofi: tag send of %zu bytes to peer %d failed to start: %s", len, peer,
                       fi_strerror((int)-ret));
            return tl_ofi_status((int)-ret);
        }
    }

    /* See "Send completion order" at the top; without memory, send in place. */
    tl_ofi_bounce_t *bounce = NULL;
    if (len > tl->inject_size && len <= tl->bounce_limit - tl->bounce_bytes &&
        (bounce = tl_ofi_bounce_get(tl, len)) != NULL) {
        memcpy(tl_ofi_bounce_data(bounce), buf, len);
    }
    status = tl_ofi_op_new(tl, TL_OFI_SEND, peer,
                           bounce != NULL ? tl_ofi_bounce_data(bounce) : (void *)buf, len, &op);
    if (status != FOLD_OK) {
        if (bounce != NULL) {
            tl_ofi_bounce_put(tl, bounce);
        }
        return status;
    }
    if (bounce != NULL) {
        op->bounce = bounce;
        tl->bounce_bytes += len;
    }
    op->wire_tag = wire_tag;
    return tl_ofi_start(tl, op, req);
}

int tl_ofi_tag_recv(fold_tl_t *tl, int peer, uint64_t tag, void *buf, size_t len,
                    fold_tl_req_t *req)
{
    tl_ofi_op_t *op;
    int status = tl_ofi_check_tag(tag);
    if (status == FOLD_OK) {
        /* Not needed to receive, but some providers look senders up in the vector. */
        status = tl_ofi_connect(tl, peer);
    }
    if (status != FOLD_OK) {
        return status;
    }

    /* No message is longer than max_msg_size, so a larger buffer loses nothing. */
    size_t post_len = len < tl->max_msg_size ? len : tl->max_msg_size;
    status = tl_ofi_op_new(tl, TL_OFI_RECV, peer, buf, post_len, &op);
    if (status != FOLD_OK) {
        return status;
    }
    op->wire_tag = tl_ofi_wire_tag(peer, tag);
    return tl_ofi_start(tl, op, req);
}

/* A receive not yet matched is canceled; most providers let a send, or a receive
 * already matched, run to its normal completion. */
void tl_ofi_cancel(fold_tl_t *tl, fold_tl_req_t *req)
{
    if (req->status != FOLD_INPROGRESS || req->handle == NULL) {
        return;
    }
    tl_ofi_op_t *op = req->handle;
    if (op->state != TL_OFI_OP_POSTED) {
        /* Never reached the provider. */
        tl_ofi_complete(tl, op, FOLD_ERR_CANCELED, 0);
        return;
    }
    op->canceled = 1;
    int ret = fi_cancel(&tl->ep->fid, &op->fi_context);
    if (ret != 0) {
        fold_debug("ofi: fi_cancel of a %s with peer %d: %s", tl_ofi_op_names[op->kind],
                   op->peer, fi_strerror(-ret));
    }
}
