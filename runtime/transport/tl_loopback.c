/*
 * Loopback transport: many ranks inside one process (threads), for tests. Each rank
 * has a mailbox of posted receives and unexpected messages. A send copies straight
 * into a matching posted receive; otherwise a small one is copied into an unexpected
 * message (eager) and completes at once, while one of at least the fabric's
 * rendezvous threshold waits, uncopied, until the receiver matches it — as UCX's
 * rendezvous does, so that tests see the deadlocks a real network would cause.
 */
#include "transport.h"
#include "log.h"

#include <fold/fold_status.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct lb_msg {
    struct lb_msg *next;
    int            src;
    uint64_t       tag;
    size_t         len;
    const void    *rndv_buf;    /* rendezvous: the sender's buffer, not yet copied */
    fold_tl_req_t *rndv_req;    /* rendezvous: completes when the receiver matches */
    char           data[];
} lb_msg_t;

typedef struct lb_recv {
    struct lb_recv *next;
    int             src;
    uint64_t        tag;
    void           *buf;
    size_t          len;
    fold_tl_req_t  *req;
} lb_recv_t;

typedef struct lb_mailbox {
    pthread_mutex_t lock;
    lb_msg_t       *unexpected;   /* FIFO: matching takes the oldest */
    lb_msg_t      **unexpected_tail;
    lb_recv_t      *posted;       /* FIFO too, so sends match receives in posting order */
    lb_recv_t     **posted_tail;
} lb_mailbox_t;

typedef struct lb_fabric {
    int           size;
    size_t        rndv_threshold;   /* SIZE_MAX: every send is eager */
    lb_mailbox_t *boxes;
} lb_fabric_t;

struct fold_tl {
    lb_fabric_t *fabric;
    int          rank;
};

static void req_complete(fold_tl_req_t *req, int status, size_t len)
{
    req->length = len;
    __atomic_store_n(&req->status, status, __ATOMIC_RELEASE);
}

void *fold_loopback_fabric_create(int size)
{
    lb_fabric_t *f = calloc(1, sizeof(*f));
    if (f == NULL) {
        return NULL;
    }
    f->boxes = calloc((size_t)size, sizeof(*f->boxes));
    if (f->boxes == NULL) {
        free(f);
        return NULL;
    }
    f->size = size;
    f->rndv_threshold = SIZE_MAX;
    for (int i = 0; i < size; i++) {
        pthread_mutex_init(&f->boxes[i].lock, NULL);
        f->boxes[i].unexpected_tail = &f->boxes[i].unexpected;
        f->boxes[i].posted_tail     = &f->boxes[i].posted;
    }
    return f;
}

void fold_loopback_fabric_set_rndv(void *fabric, size_t threshold)
{
    ((lb_fabric_t *)fabric)->rndv_threshold = threshold;
}

void fold_loopback_fabric_destroy(void *fabric)
{
    lb_fabric_t *f = fabric;
    if (f == NULL) {
        return;
    }
    for (int i = 0; i < f->size; i++) {
        lb_msg_t *m = f->boxes[i].unexpected;
        while (m != NULL) {
            lb_msg_t *next = m->next;
            free(m);
            m = next;
        }
        lb_recv_t *r = f->boxes[i].posted;
        while (r != NULL) {
            lb_recv_t *next = r->next;
            free(r);
            r = next;
        }
        pthread_mutex_destroy(&f->boxes[i].lock);
    }
    free(f->boxes);
    free(f);
}

static int lb_open(const fold_tl_params_t *params, fold_tl_t **tl_p)
{
    lb_fabric_t *f = params->loopback_fabric;
    if (f == NULL || params->size != f->size || params->rank < 0 ||
        params->rank >= f->size) {
        fold_error("loopback transport needs an in-process fabric of the context's size");
        return FOLD_ERR_UNSUPPORTED;
    }
    fold_tl_t *tl = calloc(1, sizeof(*tl));
    if (tl == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    tl->fabric = f;
    tl->rank   = params->rank;
    *tl_p      = tl;
    return FOLD_OK;
}

static void lb_close(fold_tl_t *tl)
{
    free(tl);
}

/* Mailboxes are FIFOs, every send copies its data before it completes (eager at
 * once, rendezvous into the matching receive), and tags are compared whole. */
static int lb_query(fold_tl_t *tl, fold_tl_caps_t *caps)
{
    (void)tl;
    *caps = (fold_tl_caps_t){
        .name     = fold_tl_loopback_ops.name,
        .provider = NULL,
        .flags    = FOLD_TL_CAP_ORDERED | FOLD_TL_CAP_SEND_REUSE | FOLD_TL_CAP_TRUNCATION,
        .tag_bits = 64,
    };
    return FOLD_OK;
}

static int lb_address(fold_tl_t *tl, const void **addr, size_t *len)
{
    *addr = &tl->rank;
    *len  = sizeof(tl->rank);
    return FOLD_OK;
}

/* Mailboxes are found by rank: no address is ever asked for. */
static int lb_set_resolver(fold_tl_t *tl, fold_tl_resolve_fn resolve, void *arg)
{
    (void)tl;
    (void)arg;
    return resolve != NULL ? FOLD_OK : FOLD_ERR_INVALID_ARG;
}

static int lb_check_peer(fold_tl_t *tl, int peer)
{
    return (peer >= 0 && peer < tl->fabric->size) ? FOLD_OK : FOLD_ERR_INVALID_ARG;
}

/* Unlinks the posted receive *pp, keeping the tail. */
static lb_recv_t *posted_remove(lb_mailbox_t *box, lb_recv_t **pp)
{
    lb_recv_t *r = *pp;
    *pp = r->next;
    if (box->posted_tail == &r->next) {
        box->posted_tail = pp;
    }
    return r;
}

/* Unlinks the unexpected message m (after prev; NULL: the head), keeping the tail. */
static void unexpected_remove(lb_mailbox_t *box, lb_msg_t *prev, lb_msg_t *m)
{
    lb_msg_t **pp = prev != NULL ? &prev->next : &box->unexpected;
    *pp = m->next;
    if (box->unexpected_tail == &m->next) {
        box->unexpected_tail = pp;
    }
}

static void deliver(lb_recv_t *r, const void *data, size_t len)
{
    size_t n = len <= r->len ? len : r->len;
    if (n > 0) {
        memcpy(r->buf, data, n);
    }
    req_complete(r->req, len <= r->len ? FOLD_OK : FOLD_ERR_TRUNCATED, n);
}

static int lb_tag_send(fold_tl_t *tl, int peer, uint64_t tag, const void *buf, size_t len,
                       fold_tl_req_t *req)
{
    if (lb_check_peer(tl, peer) != FOLD_OK) {
        return FOLD_ERR_INVALID_ARG;
    }
    lb_mailbox_t *box = &tl->fabric->boxes[peer];
    pthread_mutex_lock(&box->lock);
    for (lb_recv_t **pp = &box->posted; *pp != NULL; pp = &(*pp)->next) {
        lb_recv_t *r = *pp;
        if (r->src == tl->rank && r->tag == tag) {
            posted_remove(box, pp);
            deliver(r, buf, len);
            pthread_mutex_unlock(&box->lock);
            free(r);
            req_complete(req, FOLD_OK, len);
            return FOLD_OK;
        }
    }
    int rndv = len >= tl->fabric->rndv_threshold;
    lb_msg_t *m = malloc(sizeof(*m) + (rndv ? 0 : len));
    if (m == NULL) {
        pthread_mutex_unlock(&box->lock);
        return FOLD_ERR_NO_MEMORY;
    }
    m->next     = NULL;
    m->src      = tl->rank;
    m->tag      = tag;
    m->len      = len;
    m->rndv_buf = rndv ? buf : NULL;
    m->rndv_req = rndv ? req : NULL;
    if (rndv) {
        req->status = FOLD_INPROGRESS;
    } else if (len > 0) {
        memcpy(m->data, buf, len);
    }
    *box->unexpected_tail = m;
    box->unexpected_tail  = &m->next;
    pthread_mutex_unlock(&box->lock);
    if (!rndv) {
        req_complete(req, FOLD_OK, len);
    }
    return FOLD_OK;
}

static int lb_tag_recv(fold_tl_t *tl, int peer, uint64_t tag, void *buf, size_t len,
                       fold_tl_req_t *req)
{
    if (lb_check_peer(tl, peer) != FOLD_OK) {
        return FOLD_ERR_INVALID_ARG;
    }
    lb_mailbox_t *box = &tl->fabric->boxes[tl->rank];
    lb_recv_t *r = malloc(sizeof(*r));
    if (r == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    *r = (lb_recv_t){NULL, peer, tag, buf, len, req};
    req->status = FOLD_INPROGRESS;
    req->handle = r;

    pthread_mutex_lock(&box->lock);
    lb_msg_t *prev = NULL;
    for (lb_msg_t *m = box->unexpected; m != NULL; prev = m, m = m->next) {
        if (m->src == peer && m->tag == tag) {
            unexpected_remove(box, prev, m);
            pthread_mutex_unlock(&box->lock);
            deliver(r, m->rndv_req ? m->rndv_buf : m->data, m->len);
            if (m->rndv_req != NULL) {
                req_complete(m->rndv_req, FOLD_OK, m->len);
            }
            free(m);
            free(r);
            return FOLD_OK;
        }
    }
    *box->posted_tail = r;
    box->posted_tail  = &r->next;
    pthread_mutex_unlock(&box->lock);
    return FOLD_OK;
}

/* Withdraws a rendezvous send still waiting in some receiver's queue. */
static int cancel_rndv_send(fold_tl_t *tl, fold_tl_req_t *req)
{
    for (int p = 0; p < tl->fabric->size; p++) {
        lb_mailbox_t *box = &tl->fabric->boxes[p];
        pthread_mutex_lock(&box->lock);
        lb_msg_t *prev = NULL;
        for (lb_msg_t *m = box->unexpected; m != NULL; prev = m, m = m->next) {
            if (m->rndv_req != req) {
                continue;
            }
            unexpected_remove(box, prev, m);
            pthread_mutex_unlock(&box->lock);
            free(m);
            req_complete(req, FOLD_ERR_CANCELED, 0);
            return 1;
        }
        pthread_mutex_unlock(&box->lock);
    }
    return 0;
}

static void lb_cancel(fold_tl_t *tl, fold_tl_req_t *req)
{
    lb_mailbox_t *box = &tl->fabric->boxes[tl->rank];
    pthread_mutex_lock(&box->lock);
    for (lb_recv_t **pp = &box->posted; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->req == req) {
            lb_recv_t *r = posted_remove(box, pp);
            free(r);
            req_complete(req, FOLD_ERR_CANCELED, 0);
            pthread_mutex_unlock(&box->lock);
            return;
        }
    }
    pthread_mutex_unlock(&box->lock);
    cancel_rndv_send(tl, req);
}

static int lb_progress(fold_tl_t *tl)
{
    (void)tl;
    return 0;   /* every operation completes inside the call that matches it */
}

const fold_tl_ops_t fold_tl_loopback_ops = {
    .name         = "loopback",
    .description  = "in-process ranks (threads) sharing one fabric; for tests",
    .open         = lb_open,
    .close        = lb_close,
    .query        = lb_query,
    .address      = lb_address,
    .set_resolver = lb_set_resolver,
    .tag_send     = lb_tag_send,
    .tag_recv     = lb_tag_recv,
    .cancel       = lb_cancel,
    .progress     = lb_progress,
};
