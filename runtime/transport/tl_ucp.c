/*
 * UCP transport: tagged messages over one UCP worker.
 *
 * Endpoints are created lazily, on the first operation towards a peer (receives
 * included, so that a dead sender is noticed), with peer error handling: the error
 * callback marks the peer failed, later operations towards it fail with
 * FOLD_ERR_PEER_FAILED, and receives already posted from it complete with that
 * status. FOLD_UCX_ERR_MODE=none opens them without: UCX may then pick transports
 * that cannot report a failure (cross-memory attach for rendezvous), and a dead peer
 * is noticed by the executor's FOLD_TIMEOUT at best: UCX's cma transport aborts the
 * process when the peer it reads from is gone (tests/fault/run.sh, ucp+errnone). Within
 * a node none is markedly slower, since its process_vm_readv runs at a fraction of
 * the rate of UCX's shared-memory copies.
 *
 * Tags on the wire: the caller's FOLD_TL_TAG_BITS-bit tag in the low bits and the
 * sender's rank in the bits above; receives use a full mask, so a receive matches
 * exactly (peer, tag).
 *
 * Requests: every UCP request carries a tl_ucp_op_t (ucp_params.request_size).
 * op->req is NULL until the posting call has returned and recorded the request, so
 * a callback that sees NULL knows UCP completed the operation inside the posting
 * call; it then stores the status and leaves freeing to the poster. Otherwise the
 * callback stores the status and frees the request itself.
 */
#include "transport/transport.h"
#include "transport/peer_table.h"
#include "transport/tl_ucp_start.h"
#include "log.h"
#include "util/clock.h"

#include <fold/fold_status.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>

#define TL_UCP_RANK_BITS     (64 - FOLD_TL_TAG_BITS)
#define TL_UCP_MAX_RANKS     (1L << TL_UCP_RANK_BITS)
#define TL_UCP_USER_TAG_MASK ((UINT64_C(1) << FOLD_TL_TAG_BITS) - 1)
#define TL_UCP_SENDER_MASK   (~TL_UCP_USER_TAG_MASK)
/* How long close() waits for endpoints to flush before giving up on them. */
#define TL_UCP_CLOSE_TIMEOUT_SEC 10.0

typedef struct tl_ucp_op tl_ucp_op_t;

/* Private part of every UCP request. */
struct tl_ucp_op {
    fold_tl_req_t *req;          /* caller's request; NULL while not recorded */
    fold_tl_t     *tl;
    int            peer;
    int            is_recv;
    int            peer_failed;  /* canceled because the peer failed */
    tl_ucp_op_t   *prev, *next;  /* the peer's operations in flight */
};

typedef struct tl_ucp_peer {
    fold_tl_t   *tl;
    int          rank;
    void        *addr;          /* the peer's worker address (owned) */
    ucp_ep_h     ep;            /* NULL until the first operation */
    int          failed;
    tl_ucp_op_t *ops;           /* operations in flight with this peer */
    void        *close_req;     /* endpoint close in progress (close() only) */
} tl_ucp_peer_t;

struct fold_tl {
    int            rank;
    int            size;
    int            closing;     /* peer errors during close are expected */
    int            err_none;    /* endpoints without peer error handling (FOLD_UCX_ERR_MODE) */
    ucp_context_h  context;
    ucp_worker_h   worker;
    char           tls[128];       /* UCX transports in use (caps.provider) */
    char           fallback[1024]; /* why without shared memory (caps.fallback) */
    ucp_address_t *address;
    size_t         address_len;
    fold_tl_resolve_fn resolve; /* NULL until set_resolver */
    void              *resolve_arg;
    fold_peer_table_t  peers;   /* tl_ucp_peer_t records, made on first use */
};

static int tl_ucp_status(ucs_status_t status)
{
    switch (status) {
    case UCS_OK:
        return FOLD_OK;
    case UCS_ERR_MESSAGE_TRUNCATED:
        return FOLD_ERR_TRUNCATED;
    case UCS_ERR_CANCELED:
        return FOLD_ERR_CANCELED;
    case UCS_ERR_NO_MEMORY:
        return FOLD_ERR_NO_MEMORY;
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_REJECTED:
        return FOLD_ERR_PEER_FAILED;
    default:
        return FOLD_ERR_TRANSPORT;
    }
}

static inline ucp_tag_t tl_ucp_wire_tag(int sender, uint64_t tag)
{
    return ((ucp_tag_t)sender << FOLD_TL_TAG_BITS) | tag;
}

static void tl_ucp_request_init(void *request)
{
    memset(request, 0, sizeof(tl_ucp_op_t));
}

static void tl_ucp_op_link(tl_ucp_peer_t *peer, tl_ucp_op_t *op)
{
    op->prev = NULL;
    op->next = peer->ops;
    if (peer->ops != NULL) {
        peer->ops->prev = op;
    }
    peer->ops = op;
}

static void tl_ucp_op_unlink(tl_ucp_peer_t *peer, tl_ucp_op_t *op)
{
    if (op->prev != NULL) {
        op->prev->next = op->next;
    } else {
        peer->ops = op->next;
    }
    if (op->next != NULL) {
        op->next->prev = op->prev;
    }
}

/* Stores the final status of an operation; see the comment at the top. */
static void tl_ucp_complete(void *request, ucs_status_t ucs_status, fold_tl_req_t *req,
                            const size_t *recv_length)
{
    tl_ucp_op_t *op = request;
    int status = tl_ucp_status(ucs_status);

    if (op->req == NULL) {
        if (status == FOLD_OK && recv_length != NULL) {
            req->length = *recv_length;
        }
        req->status = status;
        return;
    }

    tl_ucp_peer_t *peer = fold_peer_table_find(&op->tl->peers, op->peer);
    tl_ucp_op_unlink(peer, op);
    if (status != FOLD_OK && status != FOLD_ERR_TRUNCATED && (op->peer_failed || peer->failed)) {
        status = FOLD_ERR_PEER_FAILED;
    }
    if (status != FOLD_OK) {
        fold_debug("operation with peer %d completed with %s", op->peer,
                   ucs_status_string(ucs_status));
    }
    op->req = NULL;
    req->handle = NULL;
    ucp_request_free(request);
    if (status == FOLD_OK && recv_length != NULL) {
        req->length = *recv_length;
    }
    req->status = status;
}

static void tl_ucp_send_done(void *request, ucs_status_t status, void *user_data)
{
    tl_ucp_complete(request, status, user_data, NULL);
}

static void tl_ucp_recv_done(void *request, ucs_status_t status,
                             const ucp_tag_recv_info_t *info, void *user_data)
{
    tl_ucp_complete(request, status, user_data, &info->length);
}

/* Error callback of a peer's endpoint: the peer is gone for good. */
static void tl_ucp_peer_failed(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    (void)ep;
    tl_ucp_peer_t *peer = arg;
    fold_tl_t *tl = peer->tl;

    if (tl->closing) {
        fold_debug("peer %d endpoint error while closing: %s", peer->rank,
                   ucs_status_string(status));
    } else {
        fold_error("peer %d failed: %s", peer->rank, ucs_status_string(status));
    }
    peer->failed = 1;

    /* UCX has already failed the endpoint's own operations; receives are not tied
     * to an endpoint, so cancel them. Cancelation completes each receive (and
     * unlinks it) from inside the call. */
    tl_ucp_op_t *next;
    for (tl_ucp_op_t *op = peer->ops; op != NULL; op = next) {
        next = op->next;
        op->peer_failed = 1;
        if (op->is_recv) {
            ucp_request_cancel(tl->worker, op);
        }
    }
}

/* The record of a peer, made (with its address from the resolver) on first use. */
static int tl_ucp_peer(fold_tl_t *tl, int rank, tl_ucp_peer_t **peer_p)
{
    tl_ucp_peer_t *peer = fold_peer_table_find(&tl->peers, rank);
    if (peer != NULL) {
        *peer_p = peer;
        return FOLD_OK;
    }
    if (tl->resolve == NULL) {
        fold_error("ucp: operation before set_resolver");
        return FOLD_ERR_INVALID_ARG;
    }
    if (rank < 0 || rank >= tl->size) {
        fold_error("ucp: peer %d out of range [0, %d)", rank, tl->size);
        return FOLD_ERR_INVALID_ARG;
    }
    void *addr = NULL;
    size_t len = 0;
    int status = tl->resolve(tl->resolve_arg, rank, &addr, &len);
    if (status != FOLD_OK || addr == NULL || len == 0) {
        fold_error("ucp: no address for peer %d", rank);
        free(addr);
        return status != FOLD_OK ? status : FOLD_ERR_TRANSPORT;
    }
    peer = calloc(1, sizeof(*peer));
    if (peer == NULL || fold_peer_table_add(&tl->peers, rank, peer) != FOLD_OK) {
        fold_error("ucp: out of memory for peer %d", rank);
        free(peer);
        free(addr);
        return FOLD_ERR_NO_MEMORY;
    }
    *peer = (tl_ucp_peer_t){.tl = tl, .rank = rank, .addr = addr};
    *peer_p = peer;
    return FOLD_OK;
}

/* The peer's endpoint, created on first use. */
static int tl_ucp_connect(fold_tl_t *tl, int rank, ucp_ep_h *ep)
{
    tl_ucp_peer_t *peer;
    int status = tl_ucp_peer(tl, rank, &peer);
    if (status != FOLD_OK) {
        return status;
    }
    if (peer->failed) {
        return FOLD_ERR_PEER_FAILED;
    }
    if (peer->ep == NULL) {
        ucp_ep_params_t params = {
            .field_mask      = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                               UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                               UCP_EP_PARAM_FIELD_ERR_HANDLER,
            .address         = peer->addr,
            .err_mode        = UCP_ERR_HANDLING_MODE_PEER,
            .err_handler.cb  = tl_ucp_peer_failed,
            .err_handler.arg = peer,
        };
        if (tl->err_none) {
            params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                                UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
            params.err_mode   = UCP_ERR_HANDLING_MODE_NONE;
        }
        ucs_status_t ucs_status = ucp_ep_create(tl->worker, &params, &peer->ep);
        if (ucs_status != UCS_OK) {
            /* Usually UCX_TLS leaves no transport that reaches the peer and can
             * report its failure (UCX_MM_ERROR_HANDLING=y enables shared memory). */
            fold_error("ucp: cannot connect to peer %d: %s (no transport in UCX_TLS reaches "
                       "it with peer error handling?)", rank, ucs_status_string(ucs_status));
            return ucs_status == UCS_ERR_NO_MEMORY ? FOLD_ERR_NO_MEMORY : FOLD_ERR_TRANSPORT;
        }
    }
    *ep = peer->ep;
    return FOLD_OK;
}

static int tl_ucp_check_tag(uint64_t tag)
{
    if (tag & ~TL_UCP_USER_TAG_MASK) {
        fold_error("ucp: tag 0x%llx uses more than %d bits", (unsigned long long)tag,
                   FOLD_TL_TAG_BITS);
        return FOLD_ERR_INVALID_ARG;
    }
    return FOLD_OK;
}

/* The endpoint of a tagged operation with peer, once the tag fits. */
static int tl_ucp_tag_ep(fold_tl_t *tl, int peer, uint64_t tag, ucp_ep_h *ep)
{
    int status = tl_ucp_check_tag(tag);
    return status == FOLD_OK ? tl_ucp_connect(tl, peer, ep) : status;
}

static ucp_request_param_t tl_ucp_send_param(fold_tl_req_t *req)
{
    return (ucp_request_param_t){
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                        UCP_OP_ATTR_FIELD_MEMORY_TYPE,
        .cb.send      = tl_ucp_send_done,
        .user_data    = req,
        .memory_type  = UCS_MEMORY_TYPE_HOST,
    };
}

/* Records what a posting call returned: immediate completion, a request still in
 * flight, a request UCP already completed, or a failure to start. */
static int tl_ucp_posted(fold_tl_t *tl, int rank, int is_recv, ucs_status_ptr_t ptr,
                         fold_tl_req_t *req, const char *what)
{
    if (ptr == NULL) {
        req->handle = NULL;
        req->status = FOLD_OK;
        return FOLD_OK;
    }
    if (UCS_PTR_IS_ERR(ptr)) {
        ucs_status_t ucs_status = UCS_PTR_STATUS(ptr);
        tl_ucp_peer_t *peer = fold_peer_table_find(&tl->peers, rank);
        if (peer != NULL && peer->failed) {
            return FOLD_ERR_PEER_FAILED;
        }
        fold_error("ucp: %s with peer %d failed: %s", what, rank,
                   ucs_status_string(ucs_status));
        return tl_ucp_status(ucs_status);
    }
    if (ucp_request_check_status(ptr) != UCS_INPROGRESS) {
        /* The callback already ran and stored the final status. */
        req->handle = NULL;
        ucp_request_free(ptr);
        return FOLD_OK;
    }

    tl_ucp_op_t *op = ptr;
    op->tl          = tl;
    op->peer        = rank;
    op->is_recv     = is_recv;
    op->peer_failed = 0;
    tl_ucp_op_link(fold_peer_table_find(&tl->peers, rank), op);
    req->handle = ptr;
    req->status = FOLD_INPROGRESS;
    op->req     = req;
    return FOLD_OK;
}

static int tl_ucp_open(const fold_tl_params_t *params, fold_tl_t **tl_p)
{
    ucs_status_t ucs_status;
    int status;

    if (params->size <= 0 || params->size > TL_UCP_MAX_RANKS || params->rank < 0 ||
        params->rank >= params->size) {
        fold_error("ucp: rank %d of %d is out of range (at most %ld ranks)", params->rank,
                   params->size, TL_UCP_MAX_RANKS);
        return FOLD_ERR_INVALID_ARG;
    }

    fold_tl_t *tl = calloc(1, sizeof(*tl));
    if (tl == NULL) {
        fold_error("ucp: out of memory");
        return FOLD_ERR_NO_MEMORY;
    }
    tl->rank     = params->rank;
    tl->size     = params->size;
    tl->err_none = params->ucx_err_none;
    fold_peer_table_init(&tl->peers);

    ucp_params_t ucp_params = {
        .field_mask        = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_REQUEST_SIZE |
                             UCP_PARAM_FIELD_REQUEST_INIT | UCP_PARAM_FIELD_TAG_SENDER_MASK |
                             UCP_PARAM_FIELD_ESTIMATED_NUM_EPS | UCP_PARAM_FIELD_NAME,
        .features          = UCP_FEATURE_TAG,
        .request_size      = sizeof(tl_ucp_op_t),
        .request_init      = tl_ucp_request_init,
        .tag_sender_mask   = TL_UCP_SENDER_MASK,
        .estimated_num_eps = (size_t)params->size,
        .name              = "fold",
    };
    /* Reads UCX_* variables (UCX_TLS, ...); logs why when it fails. */
    tl_ucp_started_t started;
    if ((status = tl_ucp_start(&ucp_params, &started)) != FOLD_OK) {
        goto err_free;
    }
    tl->context = started.context;
    tl->worker  = started.worker;
    memcpy(tl->tls, started.tls, sizeof(tl->tls));
    memcpy(tl->fallback, started.fallback, sizeof(tl->fallback));

    ucs_status = ucp_worker_get_address(tl->worker, &tl->address, &tl->address_len);
    if (ucs_status != UCS_OK) {
        fold_error("ucp: ucp_worker_get_address failed: %s", ucs_status_string(ucs_status));
        status = FOLD_ERR_TRANSPORT;
        goto err_destroy_worker;
    }

    *tl_p = tl;
    return FOLD_OK;

err_destroy_worker:
    ucp_worker_destroy(tl->worker);
    ucp_cleanup(tl->context);
err_free:
    free(tl);
    return status;
}

/* Closes every endpoint at once and progresses until all closes complete or the
 * timeout passes. Endpoints are flushed, except when the peer failed or operations
 * are still in flight with it (abandoned by the caller, e.g. a rendezvous send
 * nobody receives): a flush does not wait for those, and UCX 1.13 then asserts in
 * ucp_worker_destroy, so such endpoints are closed by force. */
static void tl_ucp_close_endpoints(fold_tl_t *tl)
{
    int pending = 0;

    for (size_t i = 0; i < tl->peers.cap; i++) {
        tl_ucp_peer_t *peer = fold_peer_table_slot(&tl->peers, i);
        if (peer == NULL || peer->ep == NULL) {
            continue;
        }
        ucp_request_param_t param = {
            .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
            .flags        = (peer->failed || peer->ops != NULL) ? UCP_EP_CLOSE_FLAG_FORCE : 0,
        };
        ucs_status_ptr_t ptr = ucp_ep_close_nbx(peer->ep, &param);
        peer->ep = NULL;
        if (UCS_PTR_IS_PTR(ptr)) {
            peer->close_req = ptr;
            pending++;
        } else if (UCS_PTR_IS_ERR(ptr)) {
            fold_debug("ucp: closing endpoint to peer %d: %s", peer->rank,
                       ucs_status_string(UCS_PTR_STATUS(ptr)));
        }
    }

    double deadline = fold_util_time_now() + TL_UCP_CLOSE_TIMEOUT_SEC;
    while (pending > 0) {
        if (ucp_worker_progress(tl->worker) == 0) {
            if (fold_util_time_now() > deadline) {
                break;
            }
            sched_yield();
        }
        for (size_t i = 0; i < tl->peers.cap; i++) {
            tl_ucp_peer_t *peer = fold_peer_table_slot(&tl->peers, i);
            if (peer != NULL && peer->close_req != NULL &&
                ucp_request_check_status(peer->close_req) != UCS_INPROGRESS) {
                ucp_request_free(peer->close_req);
                peer->close_req = NULL;
                pending--;
            }
        }
    }

    if (pending > 0) {
        fold_warn("ucp: %d endpoint(s) did not close within %.0f s", pending,
                  TL_UCP_CLOSE_TIMEOUT_SEC);
        for (size_t i = 0; i < tl->peers.cap; i++) {
            tl_ucp_peer_t *peer = fold_peer_table_slot(&tl->peers, i);
            if (peer != NULL && peer->close_req != NULL) {
                ucp_request_free(peer->close_req);
                peer->close_req = NULL;
            }
        }
    }
}

/* UCX 1.13 neither cancels nor purges a rendezvous send whose receive was never
 * posted. Complete what is left as canceled, and release the UCP requests so that
 * no callback can fire once the caller has moved on. */
static void tl_ucp_abandon_ops(fold_tl_t *tl)
{
    int abandoned = 0;

    for (size_t i = 0; i < tl->peers.cap; i++) {
        tl_ucp_peer_t *peer = fold_peer_table_slot(&tl->peers, i);
        if (peer == NULL) {
            continue;
        }
        tl_ucp_op_t *next;
        for (tl_ucp_op_t *op = peer->ops; op != NULL; op = next) {
            fold_tl_req_t *req = op->req;
            next = op->next;
            op->req = NULL;
            ucp_request_free(op);
            req->handle = NULL;
            req->status = FOLD_ERR_CANCELED;
            abandoned++;
        }
        peer->ops = NULL;
    }
    if (abandoned > 0) {
        fold_warn("ucp: %d operation(s) were still in flight at close; completed them as "
                  "canceled", abandoned);
    }
}

static void tl_ucp_close(fold_tl_t *tl)
{
    tl->closing = 1;
    /* Receives nobody will match: complete them as canceled. */
    for (size_t i = 0; i < tl->peers.cap; i++) {
        tl_ucp_peer_t *peer = fold_peer_table_slot(&tl->peers, i);
        tl_ucp_op_t *next;
        for (tl_ucp_op_t *op = peer ? peer->ops : NULL; op != NULL; op = next) {
            next = op->next;
            if (op->is_recv) {
                ucp_request_cancel(tl->worker, op);
            }
        }
    }
    tl_ucp_close_endpoints(tl);
    tl_ucp_abandon_ops(tl);
    for (size_t i = 0; i < tl->peers.cap; i++) {
        tl_ucp_peer_t *peer = fold_peer_table_slot(&tl->peers, i);
        if (peer != NULL) {
            free(peer->addr);
            free(peer);
        }
    }
    fold_peer_table_release(&tl->peers);
    ucp_worker_release_address(tl->worker, tl->address);
    ucp_worker_destroy(tl->worker);
    ucp_cleanup(tl->context);
    free(tl);
}

/* UCP matches one sender's messages of one tag in order, calls a send's callback
 * once its buffer is free, and reports an over-long message as truncated. */
static int tl_ucp_query(fold_tl_t *tl, fold_tl_caps_t *caps)
{
    *caps = (fold_tl_caps_t){
        .name     = fold_tl_ucp_ops.name,
        .provider = tl->tls[0] ? tl->tls : NULL,
        .fallback = tl->fallback[0] ? tl->fallback : NULL,
        .flags    = FOLD_TL_CAP_ORDERED | FOLD_TL_CAP_SEND_REUSE | FOLD_TL_CAP_TRUNCATION,
        .tag_bits = FOLD_TL_TAG_BITS,   /* the bits above carry the sender's rank */
        .peers    = tl->peers.count,
    };
    return FOLD_OK;
}

static int tl_ucp_address(fold_tl_t *tl, const void **addr, size_t *len)
{
    *addr = tl->address;
    *len  = tl->address_len;
    return FOLD_OK;
}

static int tl_ucp_set_resolver(fold_tl_t *tl, fold_tl_resolve_fn resolve, void *arg)
{
    if (resolve == NULL) {
        fold_error("ucp: set_resolver without a resolver");
        return FOLD_ERR_INVALID_ARG;
    }
    tl->resolve     = resolve;
    tl->resolve_arg = arg;
    return FOLD_OK;
}

static int tl_ucp_tag_send(fold_tl_t *tl, int peer, uint64_t tag, const void *buf, size_t len,
                           fold_tl_req_t *req)
{
    ucp_ep_h ep;
    int status = tl_ucp_tag_ep(tl, peer, tag, &ep);
    if (status != FOLD_OK) {
        return status;
    }

    ucp_request_param_t param = tl_ucp_send_param(req);
    ucs_status_ptr_t ptr = ucp_tag_send_nbx(ep, buf, len, tl_ucp_wire_tag(tl->rank, tag), &param);
    return tl_ucp_posted(tl, peer, 0, ptr, req, "tag send");
}

static int tl_ucp_tag_recv(fold_tl_t *tl, int peer, uint64_t tag, void *buf, size_t len,
                           fold_tl_req_t *req)
{
    /* The endpoint is not needed to receive, but it is what reports the sender's
     * failure. */
    ucp_ep_h ep;
    int status = tl_ucp_tag_ep(tl, peer, tag, &ep);
    if (status != FOLD_OK) {
        return status;
    }

    /* No immediate completion: the callback always reports the length and a
     * truncation, and tl_ucp_posted handles the request it returns. */
    ucp_request_param_t param = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                        UCP_OP_ATTR_FIELD_MEMORY_TYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL,
        .cb.recv      = tl_ucp_recv_done,
        .user_data    = req,
        .memory_type  = UCS_MEMORY_TYPE_HOST,
    };
    ucs_status_ptr_t ptr = ucp_tag_recv_nbx(tl->worker, buf, len, tl_ucp_wire_tag(peer, tag),
                                            UINT64_MAX, &param);
    return tl_ucp_posted(tl, peer, 1, ptr, req, "tag receive");
}

/* UCX 1.13 cancels a receive that has not matched yet; a send, or a receive
 * already matched to a rendezvous, runs to its normal completion. */
static void tl_ucp_cancel(fold_tl_t *tl, fold_tl_req_t *req)
{
    if (req->status == FOLD_INPROGRESS && req->handle != NULL) {
        ucp_request_cancel(tl->worker, req->handle);
    }
}

static int tl_ucp_progress(fold_tl_t *tl)
{
    return (int)ucp_worker_progress(tl->worker);
}

const fold_tl_ops_t fold_tl_ucp_ops = {
    .name         = "ucp",
    .description  = "UCX UCP: tagged messages over one worker (UCX_TLS selects transports)",
    .open         = tl_ucp_open,
    .close        = tl_ucp_close,
    .query        = tl_ucp_query,
    .address      = tl_ucp_address,
    .set_resolver = tl_ucp_set_resolver,
    .tag_send     = tl_ucp_tag_send,
    .tag_recv     = tl_ucp_tag_recv,
    .cancel       = tl_ucp_cancel,
    .progress     = tl_ucp_progress,
};
