/*
 * libfabric transport, completions: reading the completion queue, storing each
 * operation's final status in the caller's request, and what an error completion
 * means (truncation, cancelation, a failed peer). Every operation ends here, also
 * one that never reached the provider (failed or canceled while queued).
 */
#include "transport/tl_ofi_impl.h"
#include "log.h"

#include <fold/fold_status.h>
#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

/* ---- completion ----------------------------------------------------------------- */

/* Takes op out of its list, recycles it and stores the final status. */
void tl_ofi_complete(fold_tl_t *tl, tl_ofi_op_t *op, int status, size_t length)
{
    if (op->state == TL_OFI_OP_QUEUED) {
        tl_ofi_list_remove(tl_ofi_queue_of(tl, op), op);
    } else if (op->state == TL_OFI_OP_POSTED) {
        tl_ofi_list_remove(&tl->posted, op);
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

/* The peer is gone: its queued operations fail, its posted receives (which wait on
 * no connection, so the provider will not fail them) are canceled. */
void tl_ofi_peer_failed(fold_tl_t *tl, int rank, const char *why)
{
    tl_ofi_peer_t *peer = tl_ofi_peer_of(tl, rank);
    if (peer == NULL || peer->failed) {
        return;   /* no operation was ever started with it */
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
    for (op = tl->posted.head; op != NULL; op = op->next) {
        if (op->peer == rank && op->kind == TL_OFI_RECV) {
            op->peer_failed = 1;
            fi_cancel(&tl->ep->fid, &op->fi_context);
        }
    }
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
    if (err == FI_EIO && strcmp(tl->info->fabric_attr->prov_name, "shm") == 0) {
        /* The shm provider copies straight from or to the peer's memory (cross-memory
         * attach): an I/O error means that process is gone. */
        status = FOLD_ERR_PEER_FAILED;
    }
    if (err == FI_ETRUNC) {
        /* The executor reports mismatched calls; the details help it. */
        fold_debug("ofi: %s from peer %d (tag 0x%llx) truncated: the message is longer than "
                   "the %zu-byte buffer", what, op->peer,
                   (unsigned long long)(op->wire_tag & TL_OFI_USER_TAG_MASK), op->len);
    } else if (err == FI_ECANCELED && !op->canceled && !op->peer_failed && !tl->closing) {
        /* Nobody asked: the provider gave the operation up (ofi_rxm cancels the
         * receives posted for a peer whose connection broke). */
        char why[384];
        snprintf(why, sizeof(why), "the provider canceled a %s of %zu bytes on its own "
                 "(connection lost)", what, op->len);
        int peer = op->peer;
        tl_ofi_complete(tl, op, FOLD_ERR_PEER_FAILED, 0);   /* out of tl->posted first */
        tl_ofi_peer_failed(tl, peer, why);
        return 1;
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
int tl_ofi_read_cq(fold_tl_t *tl)
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
