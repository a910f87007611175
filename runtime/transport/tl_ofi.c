/*
 * libfabric transport: tagged messages and RMA over one reliable-datagram endpoint
 * (FI_EP_RDM) with one completion queue and one address vector.
 *
 * Provider: FOLD_OFI_PROVIDER (e.g. "tcp;ofi_rxm", "shm"), read when the transport
 * opens. Unset or empty takes the first provider fi_getinfo offers for what fold
 * asks, which is libfabric's own order of preference (FI_PROVIDER filters it too).
 *
 * Peers: set_peers keeps every address; a peer enters the address vector on the
 * first operation towards it. Receives take any source (FI_ADDR_UNSPEC): the
 * caller's FOLD_TL_TAG_BITS-bit tag travels in the low bits and the sender's rank in
 * the bits above, and a receive ignores no bit, so it matches exactly (peer, tag)
 * without needing FI_DIRECTED_RECV.
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
 * Limits come from fi_info: the tag width (mem_tag_format) bounds the number of
 * ranks; sends, puts and gets longer than max_msg_size are refused; sends up to
 * inject_size are injected and complete at once; the MR mode bits decide local
 * registration (FI_MR_LOCAL), who picks keys (FI_MR_PROV_KEY), whether RMA
 * addresses are virtual or offsets (FI_MR_VIRT_ADDR) and endpoint binding
 * (FI_MR_ENDPOINT).
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
 *
 * RMA: puts ask for FI_DELIVERY_COMPLETE, so a completed put is visible at the
 * target; flush only waits for the peer's earlier puts and gets, kept per peer in
 * posting order.
 */
#include "transport/transport.h"
#include "log.h"
#include "util/clock.h"

#include <fold/fold_status.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <sched.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <stdlib.h>
#include <string.h>

#define TL_OFI_API_VERSION   FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION)
#define TL_OFI_USER_TAG_MASK ((UINT64_C(1) << FOLD_TL_TAG_BITS) - 1)
/* The MR requirements this backend knows how to meet. */
#define TL_OFI_MR_MODES      (FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | \
                              FI_MR_PROV_KEY | FI_MR_ENDPOINT)
#define TL_OFI_CQ_BATCH      16
#define TL_OFI_NAME_GUESS    256
/* Address space reserved behind receives for the excess of over-long messages. */
#define TL_OFI_DISCARD_LEN   ((size_t)1 << 30)
/* Bytes of bounce-buffered sends in flight at most (providers completing in order),
 * and of idle bounce buffers kept for reuse. */
#define TL_OFI_BOUNCE_LIMIT  ((size_t)64 << 20)
#define TL_OFI_BOUNCE_CACHE  ((size_t)32 << 20)
#define TL_OFI_BOUNCE_MIN    ((size_t)8 << 10)
/* Room before a bounce buffer's data for its header, keeping the data aligned. */
#define TL_OFI_BOUNCE_HEADER 64
/* How long close() waits for operations in flight after canceling them. */
#define TL_OFI_CLOSE_TIMEOUT_SEC 5.0

typedef struct tl_ofi_op tl_ofi_op_t;

/* The header of a bounce buffer; the data follows at TL_OFI_BOUNCE_HEADER. */
typedef struct tl_ofi_bounce {
    struct tl_ofi_bounce *next;      /* in tl->bounce_cache while idle */
    size_t                capacity;  /* data bytes */
} tl_ofi_bounce_t;

typedef enum tl_ofi_op_kind {
    TL_OFI_SEND, TL_OFI_RECV, TL_OFI_PUT, TL_OFI_GET, TL_OFI_FLUSH
} tl_ofi_op_kind_t;

static const char *const tl_ofi_op_names[] = {
    [TL_OFI_SEND] = "tag send", [TL_OFI_RECV] = "tag receive", [TL_OFI_PUT] = "put",
    [TL_OFI_GET] = "get", [TL_OFI_FLUSH] = "flush",
};

typedef enum tl_ofi_op_state {
    TL_OFI_OP_QUEUED,   /* in its peer's queue, not yet accepted by the provider */
    TL_OFI_OP_POSTED,   /* in tl->posted, owned by the provider until it completes */
    TL_OFI_OP_MARKER,   /* a flush waiting in its peer's RMA list only */
} tl_ofi_op_state_t;

/* An op sits in up to two lists: its peer's queue or tl->posted, and its peer's RMA
 * list. */
enum { TL_OFI_LINK_QUEUE, TL_OFI_LINK_RMA, TL_OFI_NUM_LINKS };

typedef struct tl_ofi_link {
    tl_ofi_op_t *prev, *next;
} tl_ofi_link_t;

typedef struct tl_ofi_list {
    tl_ofi_op_t *head, *tail;
    int          link;   /* which of the op's links this list uses */
} tl_ofi_list_t;

struct tl_ofi_op {
    struct fi_context2 fi_context;    /* first: libfabric hands back its address */
    fold_tl_req_t     *req;           /* NULL: a bounce-buffered send, already complete */
    tl_ofi_op_kind_t   kind;
    tl_ofi_op_state_t  state;
    int                peer;
    int                peer_failed;   /* canceled because the peer failed */
    void              *buf;
    size_t             len;
    uint64_t           wire_tag;      /* send, recv */
    uint64_t           remote_addr;   /* put, get: as the provider addresses it */
    uint64_t           remote_key;
    struct fid_mr     *local_mr;      /* FI_MR_LOCAL only */
    tl_ofi_bounce_t   *bounce;        /* owned copy of a send's data */
    tl_ofi_link_t      links[TL_OFI_NUM_LINKS];
};

typedef struct tl_ofi_peer {
    const void   *addr;
    fi_addr_t     fi_addr;      /* FI_ADDR_NOTAVAIL until the first operation */
    int           failed;
    int           waiting;      /* listed in tl->waiting_peers */
    tl_ofi_list_t queued_tx;    /* sends, puts and gets refused with -FI_EAGAIN */
    tl_ofi_list_t queued_rx;    /* receives refused with -FI_EAGAIN */
    tl_ofi_list_t rma;          /* puts, gets and flushes in posting order */
} tl_ofi_peer_t;

struct fold_tl {
    int                rank;
    int                size;
    int                closing;     /* peer errors during close are expected */
    struct fi_info    *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_cq     *cq;
    struct fid_av     *av;
    struct fid_ep     *ep;
    void              *address;
    size_t             address_len;
    uint64_t           mr_mode;
    size_t             inject_size;
    size_t             max_msg_size;
    uint64_t           mr_key_mask;
    uint64_t           next_mr_key; /* without FI_MR_PROV_KEY, keys are ours to pick */
    size_t             bounce_limit;  /* 0: sends complete when the provider says */
    size_t             bounce_bytes;  /* in flight */
    tl_ofi_bounce_t   *bounce_cache;  /* idle bounce buffers */
    size_t             bounce_cached;
    void              *discard;     /* receives' second iov; NULL: none */
    size_t             discard_len;
    tl_ofi_peer_t     *peers;       /* NULL until set_peers */
    char              *peer_addrs;  /* one block holding every peer's address */
    int               *waiting_peers; /* peers with queued operations, for progress() */
    int                nwaiting;
    tl_ofi_list_t      posted;
    tl_ofi_op_t       *free_ops;    /* recycled ops, chained through links[0].next */
};

struct fold_tl_mem {
    struct fid_mr *mr;
    void          *base;
    size_t         len;
};

/* What rkey_pack hands out and rkey_unpack reads back. */
typedef struct tl_ofi_packed_rkey {
    uint64_t key;
    uint64_t base;
    uint64_t len;
} tl_ofi_packed_rkey_t;

struct fold_tl_rkey {
    tl_ofi_packed_rkey_t remote;
};

/* ---- lists -------------------------------------------------------------------- */

static void tl_ofi_list_init(tl_ofi_list_t *list, int link)
{
    list->head = list->tail = NULL;
    list->link = link;
}

static void tl_ofi_list_push(tl_ofi_list_t *list, tl_ofi_op_t *op)
{
    tl_ofi_link_t *l = &op->links[list->link];
    l->prev = list->tail;
    l->next = NULL;
    if (list->tail != NULL) {
        list->tail->links[list->link].next = op;
    } else {
        list->head = op;
    }
    list->tail = op;
}

static void tl_ofi_list_remove(tl_ofi_list_t *list, tl_ofi_op_t *op)
{
    tl_ofi_link_t *l = &op->links[list->link];
    if (l->prev != NULL) {
        l->prev->links[list->link].next = l->next;
    } else {
        list->head = l->next;
    }
    if (l->next != NULL) {
        l->next->links[list->link].prev = l->prev;
    } else {
        list->tail = l->prev;
    }
    l->prev = l->next = NULL;
}

/* ---- helpers ------------------------------------------------------------------ */

static int tl_ofi_is_peer_error(int fi_err)
{
    switch (fi_err) {
    case FI_ECONNREFUSED:
    case FI_ECONNRESET:
    case FI_ECONNABORTED:
    case FI_ENOTCONN:
    case FI_EHOSTUNREACH:
    case FI_EHOSTDOWN:
    case FI_ENETUNREACH:
    case FI_ENETDOWN:
    case FI_ETIMEDOUT:
        return 1;
    default:
        return 0;
    }
}

/* A positive libfabric error number as a fold status. */
static int tl_ofi_status(int fi_err)
{
    if (tl_ofi_is_peer_error(fi_err)) {
        return FOLD_ERR_PEER_FAILED;
    }
    switch (fi_err) {
    case 0:
        return FOLD_OK;
    case FI_ETRUNC:
        return FOLD_ERR_TRUNCATED;
    case FI_ECANCELED:
        return FOLD_ERR_CANCELED;
    case FI_ENOMEM:
        return FOLD_ERR_NO_MEMORY;
    case FI_ENOSYS:
    case FI_EOPNOTSUPP:
        return FOLD_ERR_UNSUPPORTED;
    default:
        return FOLD_ERR_TRANSPORT;
    }
}

static inline uint64_t tl_ofi_wire_tag(int sender, uint64_t tag)
{
    return ((uint64_t)sender << FOLD_TL_TAG_BITS) | tag;
}

static inline int tl_ofi_is_rma(const tl_ofi_op_t *op)
{
    return op->kind == TL_OFI_PUT || op->kind == TL_OFI_GET || op->kind == TL_OFI_FLUSH;
}

/* Where op waits if the provider pushes back. */
static inline tl_ofi_list_t *tl_ofi_queue_of(fold_tl_t *tl, const tl_ofi_op_t *op)
{
    tl_ofi_peer_t *peer = &tl->peers[op->peer];
    return op->kind == TL_OFI_RECV ? &peer->queued_rx : &peer->queued_tx;
}

static tl_ofi_op_t *tl_ofi_op_get(fold_tl_t *tl)
{
    tl_ofi_op_t *op = tl->free_ops;
    if (op != NULL) {
        tl->free_ops = op->links[0].next;
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

static void tl_ofi_op_put(fold_tl_t *tl, tl_ofi_op_t *op)
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
    op->links[0].next = tl->free_ops;
    tl->free_ops = op;
}

/* Registers memory with the domain, bound to the endpoint when the provider wants. */
static int tl_ofi_register(fold_tl_t *tl, void *buf, size_t len, uint64_t access,
                           struct fid_mr **mr_p)
{
    struct fid_mr *mr;
    uint64_t requested_key = 0;
    if (!(tl->mr_mode & FI_MR_PROV_KEY)) {
        requested_key = tl->next_mr_key++ & tl->mr_key_mask;
    }
    int ret = fi_mr_reg(tl->domain, buf, len, access, 0, requested_key, 0, &mr, NULL);
    if (ret != 0) {
        fold_error("ofi: cannot register %zu bytes at %p: %s", len, buf, fi_strerror(-ret));
        return tl_ofi_status(-ret);
    }
    if (tl->mr_mode & FI_MR_ENDPOINT) {
        ret = fi_mr_bind(mr, &tl->ep->fid, 0);
        if (ret == 0) {
            ret = fi_mr_enable(mr);
        }
        if (ret != 0) {
            fold_error("ofi: cannot bind %zu registered bytes to the endpoint: %s", len,
                       fi_strerror(-ret));
            fi_close(&mr->fid);
            return tl_ofi_status(-ret);
        }
    }
    *mr_p = mr;
    return FOLD_OK;
}

/* ---- completion ----------------------------------------------------------------- */

/* Takes op out of its lists, recycles it and stores the final status. */
static void tl_ofi_finish(fold_tl_t *tl, tl_ofi_op_t *op, int status, size_t length)
{
    if (op->state == TL_OFI_OP_QUEUED) {
        tl_ofi_list_remove(tl_ofi_queue_of(tl, op), op);
    } else if (op->state == TL_OFI_OP_POSTED) {
        tl_ofi_list_remove(&tl->posted, op);
    }
    if (tl_ofi_is_rma(op)) {
        tl_ofi_list_remove(&tl->peers[op->peer].rma, op);
    }
    fold_tl_req_t *req = op->req;
    int is_recv = op->kind == TL_OFI_RECV;
    tl_ofi_op_put(tl, op);
    if (req == NULL) {
        /* A bounce-buffered send: its caller was told long ago; errors were logged. */
        return;
    }

    req->handle = NULL;
    if (status == FOLD_OK && is_recv) {
        req->length = length;
    }
    req->status = status;
}

/* Completes the flushes that no longer have an earlier put or get before them. */
static void tl_ofi_complete_flushes(fold_tl_t *tl, tl_ofi_peer_t *peer)
{
    while (peer->rma.head != NULL && peer->rma.head->kind == TL_OFI_FLUSH) {
        tl_ofi_finish(tl, peer->rma.head, peer->failed ? FOLD_ERR_PEER_FAILED : FOLD_OK, 0);
    }
}

static void tl_ofi_complete(fold_tl_t *tl, tl_ofi_op_t *op, int status, size_t length)
{
    int peer = op->peer, is_rma = tl_ofi_is_rma(op);
    tl_ofi_finish(tl, op, status, length);
    if (is_rma) {
        tl_ofi_complete_flushes(tl, &tl->peers[peer]);
    }
}

/* The peer is gone: its queued operations fail, its posted receives (which wait on
 * no connection, so the provider will not fail them) are canceled. */
static void tl_ofi_peer_failed(fold_tl_t *tl, int rank, const char *why)
{
    tl_ofi_peer_t *peer = &tl->peers[rank];
    if (peer->failed) {
        return;
    }
    if (tl->closing) {
        fold_debug("ofi: peer %d error while closing: %s", rank, why);
    } else {
        fold_error("ofi: peer %d failed: %s", rank, why);
    }
    peer->failed = 1;

    tl_ofi_op_t *op;
    while ((op = peer->queued_tx.head) != NULL || (op = peer->queued_rx.head) != NULL) {
        tl_ofi_complete(tl, op, FOLD_ERR_PEER_FAILED, 0);
    }
    for (op = tl->posted.head; op != NULL; op = op->links[TL_OFI_LINK_QUEUE].next) {
        if (op->peer == rank && op->kind == TL_OFI_RECV) {
            op->peer_failed = 1;
            fi_cancel(&tl->ep->fid, &op->fi_context);
        }
    }
    tl_ofi_complete_flushes(tl, peer);
}

/* One error completion: what failed, with which peer, and why. Returns 0 when
 * there was none to read. */
static int tl_ofi_read_error(fold_tl_t *tl)
{
    struct fi_cq_err_entry entry = {0};
    ssize_t ret = fi_cq_readerr(tl->cq, &entry, 0);
    if (ret < 0) {
        if (ret != -FI_EAGAIN) {
            fold_error("ofi: fi_cq_readerr failed: %s", fi_strerror((int)-ret));
        }
        return 0;
    }

    char provider_text[256];
    const char *detail = fi_cq_strerror(tl->cq, entry.prov_errno, entry.err_data,
                                        provider_text, sizeof(provider_text));
    /* Some providers (shm in 1.17) report the error number negated. */
    int err = entry.err < 0 ? -entry.err : entry.err;
    tl_ofi_op_t *op = entry.op_context;
    if (op == NULL) {
        fold_error("ofi: error completion without an operation: %s (%s)", fi_strerror(err),
                   detail ? detail : "no provider detail");
        return 1;
    }
    const char *what = tl_ofi_op_names[op->kind];
    int status = tl_ofi_status(err);
    if (err == FI_ETRUNC) {
        /* The executor reports mismatched calls; the details help it. */
        fold_debug("ofi: %s from peer %d (tag 0x%llx) truncated: the message is longer than "
                   "the %zu-byte buffer", what, op->peer,
                   (unsigned long long)(op->wire_tag & TL_OFI_USER_TAG_MASK), op->len);
    } else if (err == FI_ECANCELED) {
        if (op->peer_failed) {
            status = FOLD_ERR_PEER_FAILED;
        }
        fold_debug("ofi: %s with peer %d canceled", what, op->peer);
    } else if (status == FOLD_ERR_PEER_FAILED) {
        char why[384];
        snprintf(why, sizeof(why), "%s of %zu bytes: %s (%s)", what, op->len,
                 fi_strerror(err), detail ? detail : "no provider detail");
        tl_ofi_peer_failed(tl, op->peer, why);
    } else if (tl->closing) {
        fold_debug("ofi: %s of %zu bytes with peer %d failed while closing: %s", what,
                   op->len, op->peer, fi_strerror(err));
    } else {
        fold_error("ofi: %s of %zu bytes with peer %d failed: %s (provider error %d: %s)",
                   what, op->len, op->peer, fi_strerror(err), entry.prov_errno,
                   detail ? detail : "no detail");
    }
    tl_ofi_complete(tl, op, status, 0);
    return 1;
}

/* A successful completion; a receive that spilled into the discard iov was
 * truncated. */
static void tl_ofi_complete_entry(fold_tl_t *tl, tl_ofi_op_t *op, size_t length)
{
    if (op->kind == TL_OFI_RECV && length > op->len) {
        fold_debug("ofi: tag receive from peer %d (tag 0x%llx) truncated: %zu bytes into a "
                   "%zu-byte buffer", op->peer,
                   (unsigned long long)(op->wire_tag & TL_OFI_USER_TAG_MASK), length, op->len);
        /* Give back the pages the excess landed in. */
        size_t spilled = length - op->len;
        madvise(tl->discard, spilled < tl->discard_len ? spilled : tl->discard_len,
                MADV_DONTNEED);
        tl_ofi_complete(tl, op, FOLD_ERR_TRUNCATED, 0);
        return;
    }
    tl_ofi_complete(tl, op, FOLD_OK, length);
}

/* Reads completions until the queue is empty; returns how many it handled. */
static int tl_ofi_read_cq(fold_tl_t *tl)
{
    struct fi_cq_tagged_entry entries[TL_OFI_CQ_BATCH];
    int events = 0;

    for (;;) {
        ssize_t n = fi_cq_read(tl->cq, entries, TL_OFI_CQ_BATCH);
        if (n > 0) {
            for (ssize_t i = 0; i < n; i++) {
                tl_ofi_complete_entry(tl, entries[i].op_context, entries[i].len);
            }
            events += (int)n;
            if (n < TL_OFI_CQ_BATCH) {
                return events;
            }
        } else if (n == -FI_EAVAIL) {
            if (tl_ofi_read_error(tl) == 0) {
                return events;
            }
            events++;
        } else {
            if (n != -FI_EAGAIN) {
                fold_error("ofi: fi_cq_read failed: %s", fi_strerror((int)-n));
            }
            return events;
        }
    }
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
    fi_addr_t dest = tl->peers[op->peer].fi_addr;

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
    case TL_OFI_PUT: {
        struct iovec iov = {.iov_base = op->buf, .iov_len = op->len};
        struct fi_rma_iov rma_iov = {.addr = op->remote_addr, .len = op->len,
                                     .key = op->remote_key};
        struct fi_msg_rma msg = {
            .msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = dest,
            .rma_iov = &rma_iov, .rma_iov_count = 1, .context = &op->fi_context,
        };
        return fi_writemsg(tl->ep, &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE);
    }
    case TL_OFI_GET:
        return fi_read(tl->ep, op->buf, op->len, desc, dest, op->remote_addr, op->remote_key,
                       &op->fi_context);
    default:
        return -FI_EINVAL;
    }
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
            fold_error("ofi: %s of %zu bytes with peer %d failed to start: %s",
                       tl_ofi_op_names[op->kind], op->len, op->peer, fi_strerror((int)-ret));
            if (tl_ofi_is_rma(op)) {
                tl_ofi_list_remove(&tl->peers[op->peer].rma, op);
            }
            tl_ofi_op_put(tl, op);
            return tl_ofi_status((int)-ret);
        }
    }
    op->state = TL_OFI_OP_QUEUED;
    tl_ofi_list_push(queue, op);
    tl_ofi_peer_t *peer = &tl->peers[op->peer];
    if (!peer->waiting) {
        peer->waiting = 1;
        tl->waiting_peers[tl->nwaiting++] = op->peer;
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
            fold_error("ofi: queued %s of %zu bytes with peer %d failed to start: %s",
                       tl_ofi_op_names[op->kind], op->len, op->peer, fi_strerror((int)-ret));
            tl_ofi_complete(tl, op, tl_ofi_status((int)-ret), 0);
        }
    }
    return events;
}

/* Posts what waits in the peers' queues; forgets peers whose queues emptied. */
static int tl_ofi_post_queued(fold_tl_t *tl)
{
    int events = 0;

    for (int i = 0; i < tl->nwaiting;) {
        tl_ofi_peer_t *peer = &tl->peers[tl->waiting_peers[i]];
        events += tl_ofi_post_queue(tl, &peer->queued_tx);
        events += tl_ofi_post_queue(tl, &peer->queued_rx);
        if (peer->queued_tx.head == NULL && peer->queued_rx.head == NULL) {
            peer->waiting = 0;
            tl->waiting_peers[i] = tl->waiting_peers[--tl->nwaiting];
        } else {
            i++;
        }
    }
    return events;
}

static int tl_ofi_progress(fold_tl_t *tl)
{
    int events = tl_ofi_read_cq(tl);
    if (tl->nwaiting > 0) {
        events += tl_ofi_post_queued(tl);
    }
    return events;
}

/* ---- peers ---------------------------------------------------------------------- */

static int tl_ofi_check_peer(fold_tl_t *tl, int peer)
{
    if (tl->peers == NULL) {
        fold_error("ofi: operation before set_peers");
        return FOLD_ERR_INVALID_ARG;
    }
    if (peer < 0 || peer >= tl->size) {
        fold_error("ofi: peer %d out of range [0, %d)", peer, tl->size);
        return FOLD_ERR_INVALID_ARG;
    }
    return FOLD_OK;
}

/* Puts the peer in the address vector on first use. */
static int tl_ofi_connect(fold_tl_t *tl, int rank)
{
    int status = tl_ofi_check_peer(tl, rank);
    if (status != FOLD_OK) {
        return status;
    }
    tl_ofi_peer_t *peer = &tl->peers[rank];
    if (peer->failed) {
        return FOLD_ERR_PEER_FAILED;
    }
    if (peer->fi_addr == FI_ADDR_NOTAVAIL) {
        fi_addr_t fi_addr;
        int ret = fi_av_insert(tl->av, peer->addr, 1, &fi_addr, 0, NULL);
        if (ret != 1) {
            fold_error("ofi: cannot add peer %d to the address vector: %s", rank,
                       ret < 0 ? fi_strerror(-ret) : "address rejected");
            return FOLD_ERR_TRANSPORT;
        }
        peer->fi_addr = fi_addr;
    }
    return FOLD_OK;
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

static int tl_ofi_check_length(fold_tl_t *tl, tl_ofi_op_kind_t kind, int peer, size_t len)
{
    if (len > tl->max_msg_size) {
        fold_error("ofi: %s of %zu bytes with peer %d exceeds the provider's max_msg_size "
                   "(%zu bytes)", tl_ofi_op_names[kind], len, peer, tl->max_msg_size);
        return FOLD_ERR_UNSUPPORTED;
    }
    return FOLD_OK;
}

/* A new operation towards peer, with its buffer registered if the provider needs
 * local registration. */
static int tl_ofi_op_new(fold_tl_t *tl, tl_ofi_op_kind_t kind, int peer, void *buf, size_t len,
                         tl_ofi_op_t **op_p)
{
    static const uint64_t local_access[] = {
        [TL_OFI_SEND] = FI_SEND, [TL_OFI_RECV] = FI_RECV, [TL_OFI_PUT] = FI_WRITE,
        [TL_OFI_GET] = FI_READ, [TL_OFI_FLUSH] = 0,
    };
    tl_ofi_op_t *op = tl_ofi_op_get(tl);
    if (op == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    op->kind = kind;
    op->peer = peer;
    op->buf  = buf;
    op->len  = len;
    if ((tl->mr_mode & FI_MR_LOCAL) && len > 0 && kind != TL_OFI_FLUSH) {
        int status = tl_ofi_register(tl, buf, len, local_access[kind], &op->local_mr);
        if (status != FOLD_OK) {
            tl_ofi_op_put(tl, op);
            return status;
        }
    }
    *op_p = op;
    return FOLD_OK;
}

/* ---- open / close --------------------------------------------------------------- */

/* The fi_info of the provider to use: FOLD_OFI_PROVIDER's, or the first that fits. */
static int tl_ofi_getinfo(struct fi_info **info_p)
{
    const char *provider = getenv("FOLD_OFI_PROVIDER");
    struct fi_info *hints = fi_allocinfo();
    if (hints == NULL) {
        fold_error("ofi: out of memory");
        return FOLD_ERR_NO_MEMORY;
    }
    hints->ep_attr->type          = FI_EP_RDM;
    hints->caps                   = FI_TAGGED | FI_RMA;
    hints->mode                   = FI_CONTEXT | FI_CONTEXT2;
    hints->domain_attr->mr_mode   = TL_OFI_MR_MODES;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    /* Messages with the same tag must match receives in the order they were sent. */
    hints->tx_attr->msg_order     = FI_ORDER_SAS;
    hints->rx_attr->msg_order     = FI_ORDER_SAS;
    if (provider != NULL && provider[0] != '\0') {
        hints->fabric_attr->prov_name = strdup(provider);
        if (hints->fabric_attr->prov_name == NULL) {
            fi_freeinfo(hints);
            fold_error("ofi: out of memory");
            return FOLD_ERR_NO_MEMORY;
        }
    }

    struct fi_info *info = NULL;
    int ret = fi_getinfo(TL_OFI_API_VERSION, NULL, NULL, 0, hints, &info);
    fi_freeinfo(hints);
    if (ret == -FI_ENODATA || (ret == 0 && info == NULL)) {
        fold_error("ofi: no libfabric provider%s%s%s offers reliable datagrams with tagged "
                   "messages and RMA (fold_info -t lists the providers found)",
                   provider && provider[0] ? " named '" : "", provider && provider[0] ?
                   provider : "", provider && provider[0] ? "'" : "");
        return FOLD_ERR_NOT_FOUND;
    }
    if (ret != 0) {
        fold_error("ofi: fi_getinfo failed: %s", fi_strerror(-ret));
        return FOLD_ERR_TRANSPORT;
    }
    *info_p = info;
    return FOLD_OK;
}

/* The provider's usable tag bits above fold's leave room for the sender's rank. */
static int tl_ofi_check_rank_bits(const struct fi_info *info, int size)
{
    uint64_t format = info->ep_attr->mem_tag_format;
    int tag_bits = format == 0 ? 64 : 64 - __builtin_clzll(format);
    int rank_bits = tag_bits - FOLD_TL_TAG_BITS;
    if (rank_bits < 1 || (rank_bits < 31 && size > (1 << rank_bits))) {
        fold_error("ofi: provider %s has %d tag bits; %d ranks need more than fold's %d",
                   info->fabric_attr->prov_name, tag_bits, size, FOLD_TL_TAG_BITS);
        return FOLD_ERR_UNSUPPORTED;
    }
    return FOLD_OK;
}

/* The receives' discard iov, where the provider allows a second iov without
 * registration. Only written pages cost memory; without the mapping the provider
 * truncates. */
static void tl_ofi_reserve_discard(fold_tl_t *tl)
{
    if ((tl->mr_mode & FI_MR_LOCAL) || tl->info->rx_attr->iov_limit < 2) {
        return;
    }
    void *p = mmap(NULL, TL_OFI_DISCARD_LEN, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        fold_debug("ofi: cannot reserve %zu bytes of address space for over-long messages; "
                   "the provider truncates them", TL_OFI_DISCARD_LEN);
        return;
    }
    tl->discard     = p;
    tl->discard_len = TL_OFI_DISCARD_LEN;
}

static int tl_ofi_open(const fold_tl_params_t *params, fold_tl_t **tl_p)
{
    struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
    struct fi_av_attr av_attr = {0};
    int ret, status;

    if (params->size <= 0 || params->rank < 0 || params->rank >= params->size) {
        fold_error("ofi: rank %d of %d is out of range", params->rank, params->size);
        return FOLD_ERR_INVALID_ARG;
    }
    fold_tl_t *tl = calloc(1, sizeof(*tl));
    if (tl == NULL) {
        fold_error("ofi: out of memory");
        return FOLD_ERR_NO_MEMORY;
    }
    tl->rank = params->rank;
    tl->size = params->size;
    tl_ofi_list_init(&tl->posted, TL_OFI_LINK_QUEUE);

    if ((status = tl_ofi_getinfo(&tl->info)) != FOLD_OK) {
        goto err_free;
    }
    struct fi_info *info = tl->info;
    const char *provider = info->fabric_attr->prov_name;
    if ((status = tl_ofi_check_rank_bits(info, tl->size)) != FOLD_OK) {
        goto err_freeinfo;
    }
    tl->mr_mode      = (uint64_t)info->domain_attr->mr_mode;
    tl->inject_size  = info->tx_attr->inject_size;
    tl->max_msg_size = info->ep_attr->max_msg_size;
    tl->bounce_limit = strcmp(provider, "shm") == 0 ? TL_OFI_BOUNCE_LIMIT : 0;
    tl->mr_key_mask  = info->domain_attr->mr_key_size >= 8
                           ? UINT64_MAX
                           : (UINT64_C(1) << (8 * info->domain_attr->mr_key_size)) - 1;
    tl->next_mr_key  = 1;

    if ((ret = fi_fabric(info->fabric_attr, &tl->fabric, NULL)) != 0) {
        fold_error("ofi: %s: fi_fabric failed: %s", provider, fi_strerror(-ret));
        status = tl_ofi_status(-ret);
        goto err_freeinfo;
    }
    if ((ret = fi_domain(tl->fabric, info, &tl->domain, NULL)) != 0) {
        fold_error("ofi: %s: fi_domain failed: %s", provider, fi_strerror(-ret));
        status = tl_ofi_status(-ret);
        goto err_close_fabric;
    }
    if ((ret = fi_cq_open(tl->domain, &cq_attr, &tl->cq, NULL)) != 0) {
        fold_error("ofi: %s: fi_cq_open failed: %s", provider, fi_strerror(-ret));
        status = tl_ofi_status(-ret);
        goto err_close_domain;
    }
    av_attr.type  = info->domain_attr->av_type != FI_AV_UNSPEC ? info->domain_attr->av_type
                                                                 : FI_AV_TABLE;
    av_attr.count = (size_t)tl->size;
    if ((ret = fi_av_open(tl->domain, &av_attr, &tl->av, NULL)) != 0) {
        fold_error("ofi: %s: fi_av_open failed: %s", provider, fi_strerror(-ret));
        status = tl_ofi_status(-ret);
        goto err_close_cq;
    }
    if ((ret = fi_endpoint(tl->domain, info, &tl->ep, NULL)) != 0) {
        fold_error("ofi: %s: fi_endpoint failed: %s", provider, fi_strerror(-ret));
        status = tl_ofi_status(-ret);
        goto err_close_av;
    }
    if ((ret = fi_ep_bind(tl->ep, &tl->cq->fid, FI_TRANSMIT | FI_RECV)) != 0 ||
        (ret = fi_ep_bind(tl->ep, &tl->av->fid, 0)) != 0 || (ret = fi_enable(tl->ep)) != 0) {
        fold_error("ofi: %s: cannot set up the endpoint: %s", provider, fi_strerror(-ret));
        status = tl_ofi_status(-ret);
        goto err_close_ep;
    }

    /* Names are short; ask again with the length the provider reports if not. */
    size_t len = TL_OFI_NAME_GUESS;
    tl->address = malloc(len);
    ret = tl->address != NULL ? fi_getname(&tl->ep->fid, tl->address, &len) : -FI_ENOMEM;
    if (ret == -FI_ETOOSMALL) {
        void *bigger = realloc(tl->address, len);
        ret = bigger != NULL ? fi_getname(&tl->ep->fid, bigger, &len) : -FI_ENOMEM;
        if (bigger != NULL) {
            tl->address = bigger;
        }
    }
    if (ret != 0) {
        fold_error("ofi: %s: fi_getname failed: %s", provider, fi_strerror(-ret));
        status = tl_ofi_status(-ret);
        goto err_free_address;
    }
    tl->address_len = len;
    tl_ofi_reserve_discard(tl);

    fold_debug("ofi: provider %s, fabric %s, domain %s: inject %zu bytes, max message %zu "
               "bytes, mr_mode 0x%llx, %s data progress", provider, info->fabric_attr->name,
               info->domain_attr->name, tl->inject_size, tl->max_msg_size,
               (unsigned long long)tl->mr_mode,
               info->domain_attr->data_progress == FI_PROGRESS_AUTO ? "auto" : "manual");
    *tl_p = tl;
    return FOLD_OK;

err_free_address:
    free(tl->address);
err_close_ep:
    fi_close(&tl->ep->fid);
err_close_av:
    fi_close(&tl->av->fid);
err_close_cq:
    fi_close(&tl->cq->fid);
err_close_domain:
    fi_close(&tl->domain->fid);
err_close_fabric:
    fi_close(&tl->fabric->fid);
err_freeinfo:
    fi_freeinfo(tl->info);
err_free:
    free(tl);
    return status;
}

/* Operations nobody will complete any more (a receive never matched, a send its
 * receiver never posted): cancel them, give the provider a moment to report back,
 * then complete what is left as canceled. */
static void tl_ofi_drain(fold_tl_t *tl)
{
    tl_ofi_op_t *op;
    for (int i = 0; i < tl->size; i++) {
        tl_ofi_peer_t *peer = &tl->peers[i];
        while ((op = peer->queued_tx.head) != NULL || (op = peer->queued_rx.head) != NULL) {
            tl_ofi_complete(tl, op, FOLD_ERR_CANCELED, 0);
        }
    }
    tl->nwaiting = 0;
    for (op = tl->posted.head; op != NULL; op = op->links[TL_OFI_LINK_QUEUE].next) {
        fi_cancel(&tl->ep->fid, &op->fi_context);
    }

    double deadline = fold_util_time_now() + TL_OFI_CLOSE_TIMEOUT_SEC;
    while (tl->posted.head != NULL && fold_util_time_now() < deadline) {
        if (tl_ofi_read_cq(tl) == 0) {
            sched_yield();
        }
    }

    int abandoned = 0;
    while ((op = tl->posted.head) != NULL) {
        tl_ofi_complete(tl, op, FOLD_ERR_CANCELED, 0);
        abandoned++;
    }
    if (abandoned > 0) {
        fold_warn("ofi: %d operation(s) were still in flight at close; completed them as "
                  "canceled", abandoned);
    }
}

static void tl_ofi_close(fold_tl_t *tl)
{
    tl->closing = 1;
    if (tl->peers != NULL) {
        tl_ofi_drain(tl);
    }
    /* The endpoint goes first: it is bound to the address vector and the queue, and
     * the provider may hold op contexts until then. */
    fi_close(&tl->ep->fid);
    while (tl->free_ops != NULL) {
        tl_ofi_op_t *op = tl->free_ops;
        tl->free_ops = op->links[0].next;
        free(op);
    }
    while (tl->bounce_cache != NULL) {
        tl_ofi_bounce_t *bounce = tl->bounce_cache;
        tl->bounce_cache = bounce->next;
        free(bounce);
    }
    free(tl->peers);
    free(tl->waiting_peers);
    free(tl->peer_addrs);
    if (tl->discard != NULL) {
        munmap(tl->discard, tl->discard_len);
    }
    free(tl->address);
    fi_close(&tl->av->fid);
    fi_close(&tl->cq->fid);
    fi_close(&tl->domain->fid);
    fi_close(&tl->fabric->fid);
    fi_freeinfo(tl->info);
    free(tl);
}

static int tl_ofi_address(fold_tl_t *tl, const void **addr, size_t *len)
{
    *addr = tl->address;
    *len  = tl->address_len;
    return FOLD_OK;
}

static int tl_ofi_set_peers(fold_tl_t *tl, const void *const *addrs, const size_t *lens)
{
    if (tl->peers != NULL) {
        fold_error("ofi: set_peers called twice");
        return FOLD_ERR_INVALID_ARG;
    }

    /* Each address gets a terminating NUL: string formats (FI_ADDR_STR) need one. */
    size_t total = 0;
    for (int i = 0; i < tl->size; i++) {
        if (addrs[i] == NULL || lens[i] == 0) {
            fold_error("ofi: no address for peer %d", i);
            return FOLD_ERR_INVALID_ARG;
        }
        total += lens[i] + 1;
    }

    tl_ofi_peer_t *peers = calloc((unsigned)tl->size, sizeof(*peers));
    int *waiting_peers = calloc((unsigned)tl->size, sizeof(*waiting_peers));
    char *block = calloc(1, total);
    if (peers == NULL || waiting_peers == NULL || block == NULL) {
        fold_error("ofi: out of memory for %d peer addresses", tl->size);
        free(block);
        free(waiting_peers);
        free(peers);
        return FOLD_ERR_NO_MEMORY;
    }

    size_t offset = 0;
    for (int i = 0; i < tl->size; i++) {
        memcpy(block + offset, addrs[i], lens[i]);
        peers[i].addr    = block + offset;
        peers[i].fi_addr = FI_ADDR_NOTAVAIL;
        tl_ofi_list_init(&peers[i].queued_tx, TL_OFI_LINK_QUEUE);
        tl_ofi_list_init(&peers[i].queued_rx, TL_OFI_LINK_QUEUE);
        tl_ofi_list_init(&peers[i].rma, TL_OFI_LINK_RMA);
        offset += lens[i] + 1;
    }
    tl->peers         = peers;
    tl->waiting_peers = waiting_peers;
    tl->peer_addrs    = block;
    return FOLD_OK;
}

/* ---- tagged messages ------------------------------------------------------------ */

static int tl_ofi_tag_send(fold_tl_t *tl, int peer, uint64_t tag, const void *buf, size_t len,
                           fold_tl_req_t *req)
{
    tl_ofi_op_t *op;
    int status = tl_ofi_check_tag(tag);
    if (status == FOLD_OK) {
        status = tl_ofi_connect(tl, peer);
    }
    if (status == FOLD_OK) {
        status = tl_ofi_check_length(tl, TL_OFI_SEND, peer, len);
    }
    if (status != FOLD_OK) {
        return status;
    }

    uint64_t wire_tag = tl_ofi_wire_tag(tl->rank, tag);
    if (len <= tl->inject_size && tl->peers[peer].queued_tx.head == NULL) {
        /* The provider copies the data: complete now, no completion entry follows. */
        ssize_t ret = fi_tinject(tl->ep, buf, len, tl->peers[peer].fi_addr, wire_tag);
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

static int tl_ofi_tag_recv(fold_tl_t *tl, int peer, uint64_t tag, void *buf, size_t len,
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
static void tl_ofi_cancel(fold_tl_t *tl, fold_tl_req_t *req)
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
    int ret = fi_cancel(&tl->ep->fid, &op->fi_context);
    if (ret != 0) {
        fold_debug("ofi: fi_cancel of a %s with peer %d: %s", tl_ofi_op_names[op->kind],
                   op->peer, fi_strerror(-ret));
    }
}

/* ---- RMA ------------------------------------------------------------------------ */

static int tl_ofi_mem_reg(fold_tl_t *tl, void *buf, size_t len, fold_tl_mem_t **mem_p)
{
    fold_tl_mem_t *mem = malloc(sizeof(*mem));
    if (mem == NULL) {
        fold_error("ofi: out of memory");
        return FOLD_ERR_NO_MEMORY;
    }
    uint64_t access = FI_REMOTE_READ | FI_REMOTE_WRITE;
    if (tl->mr_mode & FI_MR_LOCAL) {
        /* The caller may also send from or receive into this memory. */
        access |= FI_READ | FI_WRITE | FI_SEND | FI_RECV;
    }
    int status = tl_ofi_register(tl, buf, len, access, &mem->mr);
    if (status != FOLD_OK) {
        free(mem);
        return status;
    }
    mem->base = buf;
    mem->len  = len;
    *mem_p = mem;
    return FOLD_OK;
}

static void tl_ofi_mem_dereg(fold_tl_t *tl, fold_tl_mem_t *mem)
{
    int ret = fi_close(&mem->mr->fid);
    if (ret != 0) {
        fold_warn("ofi: deregistering %zu bytes at %p: %s", mem->len, mem->base,
                  fi_strerror(-ret));
    }
    free(mem);
}

static int tl_ofi_rkey_pack(fold_tl_t *tl, fold_tl_mem_t *mem, void **rkey_buf, size_t *len)
{
    tl_ofi_packed_rkey_t *packed = malloc(sizeof(*packed));
    if (packed == NULL) {
        fold_error("ofi: out of memory");
        return FOLD_ERR_NO_MEMORY;
    }
    packed->key  = fi_mr_key(mem->mr);
    packed->base = (uint64_t)(uintptr_t)mem->base;
    packed->len  = mem->len;
    if (packed->key == FI_KEY_NOTAVAIL) {
        fold_error("ofi: the provider gives no key for %zu registered bytes", mem->len);
        free(packed);
        return FOLD_ERR_UNSUPPORTED;
    }
    *rkey_buf = packed;
    *len      = sizeof(*packed);
    return FOLD_OK;
}

static void tl_ofi_rkey_release(fold_tl_t *tl, void *rkey_buf)
{
    free(rkey_buf);
}

static int tl_ofi_rkey_unpack(fold_tl_t *tl, int peer, const void *rkey_buf, size_t len,
                              fold_tl_rkey_t **rkey_p)
{
    int status = tl_ofi_check_peer(tl, peer);
    if (status != FOLD_OK) {
        return status;
    }
    if (len != sizeof(tl_ofi_packed_rkey_t)) {
        fold_error("ofi: a remote key from peer %d has %zu bytes, expected %zu (another "
                   "transport's key?)", peer, len, sizeof(tl_ofi_packed_rkey_t));
        return FOLD_ERR_INVALID_ARG;
    }
    fold_tl_rkey_t *rkey = malloc(sizeof(*rkey));
    if (rkey == NULL) {
        fold_error("ofi: out of memory");
        return FOLD_ERR_NO_MEMORY;
    }
    memcpy(&rkey->remote, rkey_buf, sizeof(rkey->remote));
    *rkey_p = rkey;
    return FOLD_OK;
}

static void tl_ofi_rkey_destroy(fold_tl_t *tl, fold_tl_rkey_t *rkey)
{
    free(rkey);
}

static int tl_ofi_rma(fold_tl_t *tl, tl_ofi_op_kind_t kind, int peer, void *buf, size_t len,
                      uint64_t remote_addr, fold_tl_rkey_t *rkey, fold_tl_req_t *req)
{
    const tl_ofi_packed_rkey_t *remote = &rkey->remote;
    tl_ofi_op_t *op;
    int status = tl_ofi_connect(tl, peer);
    if (status == FOLD_OK) {
        status = tl_ofi_check_length(tl, kind, peer, len);
    }
    if (status != FOLD_OK) {
        return status;
    }
    if (remote_addr < remote->base || len > remote->len ||
        remote_addr - remote->base > remote->len - len) {
        fold_error("ofi: %s of %zu bytes at 0x%llx lies outside peer %d's registered "
                   "[0x%llx, +%llu)", tl_ofi_op_names[kind], len,
                   (unsigned long long)remote_addr, peer, (unsigned long long)remote->base,
                   (unsigned long long)remote->len);
        return FOLD_ERR_INVALID_ARG;
    }

    status = tl_ofi_op_new(tl, kind, peer, buf, len, &op);
    if (status != FOLD_OK) {
        return status;
    }
    /* Without FI_MR_VIRT_ADDR the provider addresses a region by offset. */
    op->remote_addr = (tl->mr_mode & FI_MR_VIRT_ADDR) ? remote_addr : remote_addr - remote->base;
    op->remote_key  = remote->key;
    tl_ofi_list_push(&tl->peers[peer].rma, op);
    return tl_ofi_start(tl, op, req);
}

static int tl_ofi_put(fold_tl_t *tl, int peer, const void *buf, size_t len, uint64_t remote_addr,
                      fold_tl_rkey_t *rkey, fold_tl_req_t *req)
{
    return tl_ofi_rma(tl, TL_OFI_PUT, peer, (void *)buf, len, remote_addr, rkey, req);
}

static int tl_ofi_get(fold_tl_t *tl, int peer, void *buf, size_t len, uint64_t remote_addr,
                      fold_tl_rkey_t *rkey, fold_tl_req_t *req)
{
    return tl_ofi_rma(tl, TL_OFI_GET, peer, buf, len, remote_addr, rkey, req);
}

static int tl_ofi_flush(fold_tl_t *tl, int peer, fold_tl_req_t *req)
{
    int status = tl_ofi_check_peer(tl, peer);
    if (status != FOLD_OK) {
        return status;
    }
    tl_ofi_peer_t *p = &tl->peers[peer];
    if (p->failed) {
        return FOLD_ERR_PEER_FAILED;
    }
    if (p->rma.head == NULL) {
        /* Every earlier put was delivered (FI_DELIVERY_COMPLETE) and every get read. */
        req->handle = NULL;
        req->status = FOLD_OK;
        return FOLD_OK;
    }

    tl_ofi_op_t *op = tl_ofi_op_get(tl);
    if (op == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    op->kind  = TL_OFI_FLUSH;
    op->state = TL_OFI_OP_MARKER;
    op->peer  = peer;
    op->req   = req;
    tl_ofi_list_push(&p->rma, op);
    req->handle = op;
    req->status = FOLD_INPROGRESS;
    return FOLD_OK;
}

const fold_tl_ops_t fold_tl_ofi_ops = {
    .name         = "ofi",
    .description  = "libfabric: tagged messages and RMA over one reliable-datagram endpoint "
                    "(FOLD_OFI_PROVIDER selects the provider)",
    .open         = tl_ofi_open,
    .close        = tl_ofi_close,
    .address      = tl_ofi_address,
    .set_peers    = tl_ofi_set_peers,
    .tag_send     = tl_ofi_tag_send,
    .tag_recv     = tl_ofi_tag_recv,
    .cancel       = tl_ofi_cancel,
    .progress     = tl_ofi_progress,
    .mem_reg      = tl_ofi_mem_reg,
    .mem_dereg    = tl_ofi_mem_dereg,
    .rkey_pack    = tl_ofi_rkey_pack,
    .rkey_release = tl_ofi_rkey_release,
    .rkey_unpack  = tl_ofi_rkey_unpack,
    .rkey_destroy = tl_ofi_rkey_destroy,
    .put          = tl_ofi_put,
    .get          = tl_ofi_get,
    .flush        = tl_ofi_flush,
};
