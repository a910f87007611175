/*
 * Private to the libfabric transport: the structures its files share (the instance,
 * a peer, an operation, a bounce buffer, registered memory and keys) and the calls
 * one file makes into another. Nothing outside runtime/transport/tl_ofi*.c includes
 * it; everyone else sees fold_tl_ofi_ops only.
 *
 *   tl_ofi.c       provider discovery, open and close, peers and addresses
 *   tl_ofi_post.c  operations: the pool, posting and per-peer queues, tagged
 *                  sends (inject, bounce buffers) and receives (truncation), cancel
 *   tl_ofi_cq.c    the completion queue: final statuses, errors, failed peers
 *   tl_ofi_rma.c   registered memory, remote keys, put, get and flush
 */
#ifndef FOLD_TL_OFI_IMPL_H
#define FOLD_TL_OFI_IMPL_H

#include "transport/transport.h"

#include <rdma/fabric.h>
#include <stddef.h>
#include <stdint.h>

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

/* What each kind is called in log lines (indexed by tl_ofi_op_kind_t). */
extern const char *const tl_ofi_op_names[];

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

/* ---- lists (an op's links, see above) ------------------------------------------- */

static inline void tl_ofi_list_init(tl_ofi_list_t *list, int link)
{
    list->head = list->tail = NULL;
    list->link = link;
}

static inline void tl_ofi_list_push(tl_ofi_list_t *list, tl_ofi_op_t *op)
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

static inline void tl_ofi_list_remove(tl_ofi_list_t *list, tl_ofi_op_t *op)
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

/* ---- small helpers ------------------------------------------------------------ */

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

/* ---- tl_ofi.c: the instance and its peers ------------------------------------- */

/* A positive libfabric error number as a fold status. */
int tl_ofi_status(int fi_err);
/* Registers memory with the domain, bound to the endpoint when the provider wants. */
int tl_ofi_register(fold_tl_t *tl, void *buf, size_t len, uint64_t access,
                    struct fid_mr **mr_p);
int tl_ofi_check_peer(fold_tl_t *tl, int peer);
/* Puts the peer in the address vector on first use. */
int tl_ofi_connect(fold_tl_t *tl, int rank);

/* ---- tl_ofi_post.c: operations ------------------------------------------------ */

tl_ofi_op_t *tl_ofi_op_get(fold_tl_t *tl);
void tl_ofi_op_put(fold_tl_t *tl, tl_ofi_op_t *op);
int  tl_ofi_op_new(fold_tl_t *tl, tl_ofi_op_kind_t kind, int peer, void *buf, size_t len,
                   tl_ofi_op_t **op_p);
int  tl_ofi_check_length(fold_tl_t *tl, tl_ofi_op_kind_t kind, int peer, size_t len);
/* Posts a new operation, or queues it behind earlier ones; fills req once started.
 * On failure op is recycled and req untouched. */
int  tl_ofi_start(fold_tl_t *tl, tl_ofi_op_t *op, fold_tl_req_t *req);

int  tl_ofi_tag_send(fold_tl_t *tl, int peer, uint64_t tag, const void *buf, size_t len,
                     fold_tl_req_t *req);
int  tl_ofi_tag_recv(fold_tl_t *tl, int peer, uint64_t tag, void *buf, size_t len,
                     fold_tl_req_t *req);
void tl_ofi_cancel(fold_tl_t *tl, fold_tl_req_t *req);
int  tl_ofi_progress(fold_tl_t *tl);

/* ---- tl_ofi_cq.c: completions ------------------------------------------------- */

/* Stores op's final status and recycles it; completes the flushes it held back. */
void tl_ofi_complete(fold_tl_t *tl, tl_ofi_op_t *op, int status, size_t length);
/* Reads completions until the queue is empty; returns how many it handled. */
int  tl_ofi_read_cq(fold_tl_t *tl);

/* ---- tl_ofi_rma.c: RMA -------------------------------------------------------- */

int  tl_ofi_mem_reg(fold_tl_t *tl, void *buf, size_t len, fold_tl_mem_t **mem_p);
void tl_ofi_mem_dereg(fold_tl_t *tl, fold_tl_mem_t *mem);
int  tl_ofi_rkey_pack(fold_tl_t *tl, fold_tl_mem_t *mem, void **rkey_buf, size_t *len);
void tl_ofi_rkey_release(fold_tl_t *tl, void *rkey_buf);
int  tl_ofi_rkey_unpack(fold_tl_t *tl, int peer, const void *rkey_buf, size_t len,
                        fold_tl_rkey_t **rkey_p);
void tl_ofi_rkey_destroy(fold_tl_t *tl, fold_tl_rkey_t *rkey);
int  tl_ofi_put(fold_tl_t *tl, int peer, const void *buf, size_t len, uint64_t remote_addr,
                fold_tl_rkey_t *rkey, fold_tl_req_t *req);
int  tl_ofi_get(fold_tl_t *tl, int peer, void *buf, size_t len, uint64_t remote_addr,
                fold_tl_rkey_t *rkey, fold_tl_req_t *req);
int  tl_ofi_flush(fold_tl_t *tl, int peer, fold_tl_req_t *req);

#endif
