/*
 * Private to the libfabric transport: the structures its files share (the instance,
 * a peer, an operation, a bounce buffer) and the calls one file makes into another.
 * Nothing outside runtime/transport/tl_ofi*.c includes it; everyone else sees
 * fold_tl_ofi_ops only.
 *
 *   tl_ofi.c       provider discovery, open and close, peers and addresses, memory
 *                  registration (for providers that need FI_MR_LOCAL)
 *   tl_ofi_post.c  operations: the pool, posting and per-peer queues, tagged
 *                  sends (inject, bounce buffers) and receives (truncation), cancel
 *   tl_ofi_cq.c    the completion queue: final statuses, errors, failed peers
 */
#ifndef FOLD_TL_OFI_IMPL_H
#define FOLD_TL_OFI_IMPL_H

#include "transport/peer_table.h"
#include "transport/transport.h"

#include <rdma/fabric.h>
#include <stddef.h>
#include <stdint.h>

#define TL_OFI_API_VERSION   FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION)
#define TL_OFI_USER_TAG_MASK ((UINT64_C(1) << FOLD_TL_TAG_BITS) - 1)
/* The MR requirements this backend knows how to meet (FI_MR_VIRT_ADDR only
 * concerns remote access to registered memory, which fold never grants). */
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
/* How long close() waits for operations in flight after canceling them: at most
 * the first, and no longer than the second once the queue stopped reporting any
 * (a send to a dead peer never completes; ofi_rxm reports canceled receives at once). */
#define TL_OFI_CLOSE_TIMEOUT_SEC 5.0
#define TL_OFI_CLOSE_IDLE_SEC    0.5

typedef struct tl_ofi_op tl_ofi_op_t;

/* The header of a bounce buffer; the data follows at TL_OFI_BOUNCE_HEADER. */
typedef struct tl_ofi_bounce {
    struct tl_ofi_bounce *next;      /* in tl->bounce_cache while idle */
    size_t                capacity;  /* data bytes */
} tl_ofi_bounce_t;

typedef enum tl_ofi_op_kind {
    TL_OFI_SEND, TL_OFI_RECV
} tl_ofi_op_kind_t;

/* What each kind is called in log lines (indexed by tl_ofi_op_kind_t). */
extern const char *const tl_ofi_op_names[];

typedef enum tl_ofi_op_state {
    TL_OFI_OP_QUEUED,   /* in its peer's queue, not yet accepted by the provider */
    TL_OFI_OP_POSTED,   /* in tl->posted, owned by the provider until it completes */
} tl_ofi_op_state_t;

/* A list of ops in order: a peer's queue or tl->posted (an op is in one at most). */
typedef struct tl_ofi_list {
    tl_ofi_op_t *head, *tail;
} tl_ofi_list_t;

struct tl_ofi_op {
    struct fi_context2 fi_context;    /* first: libfabric hands back its address */
    fold_tl_req_t     *req;           /* NULL: a bounce-buffered send, already complete */
    tl_ofi_op_kind_t   kind;
    tl_ofi_op_state_t  state;
    int                peer;
    int                peer_failed;   /* canceled because the peer failed */
    int                canceled;      /* fold asked the provider to cancel it */
    void              *buf;
    size_t             len;
    uint64_t           wire_tag;
    struct fid_mr     *local_mr;      /* FI_MR_LOCAL only */
    tl_ofi_bounce_t   *bounce;        /* owned copy of a send's data */
    tl_ofi_op_t       *prev, *next;   /* in its list; next chains tl->free_ops too */
};

typedef struct tl_ofi_peer {
    int           rank;
    fi_addr_t     fi_addr;      /* in the address vector since the first operation */
    int           failed;
    int           waiting;      /* listed in tl->waiting */
    tl_ofi_list_t queued_tx;    /* sends refused with -FI_EAGAIN */
    tl_ofi_list_t queued_rx;    /* receives refused with -FI_EAGAIN */
} tl_ofi_peer_t;

struct fold_tl {
    int                rank;
    int                size;
    int                closing;     /* peer errors during close are expected */
    fold_tl_t         *kept_next;   /* closed but kept open: see tl_ofi_close */
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
    fold_tl_resolve_fn resolve;     /* NULL until set_resolver */
    void              *resolve_arg;
    fold_peer_table_t  peers;       /* tl_ofi_peer_t records, made on first use */
    tl_ofi_peer_t    **waiting;     /* peers with queued operations, for progress() */
    int                nwaiting;
    int                waiting_cap; /* as many as there are peers */
    tl_ofi_list_t      posted;
    tl_ofi_op_t       *free_ops;    /* recycled ops, chained through next */
};

/* ---- lists ---------------------------------------------------------------------- */

static inline void tl_ofi_list_init(tl_ofi_list_t *list)
{
    list->head = list->tail = NULL;
}

static inline void tl_ofi_list_push(tl_ofi_list_t *list, tl_ofi_op_t *op)
{
    op->prev = list->tail;
    op->next = NULL;
    if (list->tail != NULL) {
        list->tail->next = op;
    } else {
        list->head = op;
    }
    list->tail = op;
}

static inline void tl_ofi_list_remove(tl_ofi_list_t *list, tl_ofi_op_t *op)
{
    if (op->prev != NULL) {
        op->prev->next = op->next;
    } else {
        list->head = op->next;
    }
    if (op->next != NULL) {
        op->next->prev = op->prev;
    } else {
        list->tail = op->prev;
    }
    op->prev = op->next = NULL;
}

/* ---- small helpers ------------------------------------------------------------ */

static inline uint64_t tl_ofi_wire_tag(int sender, uint64_t tag)
{
    return ((uint64_t)sender << FOLD_TL_TAG_BITS) | tag;
}

/* The record of a peer an operation was started with (so tl_ofi_connect made it). */
static inline tl_ofi_peer_t *tl_ofi_peer_of(fold_tl_t *tl, int rank)
{
    return fold_peer_table_find(&tl->peers, rank);
}

/* Where op waits if the provider pushes back. */
static inline tl_ofi_list_t *tl_ofi_queue_of(fold_tl_t *tl, const tl_ofi_op_t *op)
{
    tl_ofi_peer_t *peer = tl_ofi_peer_of(tl, op->peer);
    return op->kind == TL_OFI_RECV ? &peer->queued_rx : &peer->queued_tx;
}

/* ---- tl_ofi.c: the instance and its peers ------------------------------------- */

/* A positive libfabric error number as a fold status. */
int tl_ofi_status(int fi_err);
/* Registers memory with the domain, bound to the endpoint when the provider wants. */
int tl_ofi_register(fold_tl_t *tl, void *buf, size_t len, uint64_t access,
                    struct fid_mr **mr_p);
/* Puts the peer in the address vector on first use. */
int tl_ofi_connect(fold_tl_t *tl, int rank);

/* ---- tl_ofi_post.c: operations ------------------------------------------------ */

/* Recycles op, releasing its local registration and bounce buffer. */
void tl_ofi_op_put(fold_tl_t *tl, tl_ofi_op_t *op);

int  tl_ofi_tag_send(fold_tl_t *tl, int peer, uint64_t tag, const void *buf, size_t len,
                     fold_tl_req_t *req);
int  tl_ofi_tag_recv(fold_tl_t *tl, int peer, uint64_t tag, void *buf, size_t len,
                     fold_tl_req_t *req);
void tl_ofi_cancel(fold_tl_t *tl, fold_tl_req_t *req);
int  tl_ofi_progress(fold_tl_t *tl);

/* ---- tl_ofi_cq.c: completions ------------------------------------------------- */

/* Takes op out of its list, recycles it and stores its final status. */
void tl_ofi_complete(fold_tl_t *tl, tl_ofi_op_t *op, int status, size_t length);
/* Reads completions until the queue is empty; returns how many it handled. */
int  tl_ofi_read_cq(fold_tl_t *tl);
/* The peer is gone: logs why once, fails its queued operations and cancels its
 * posted receives. */
void tl_ofi_peer_failed(fold_tl_t *tl, int rank, const char *why);

#endif
