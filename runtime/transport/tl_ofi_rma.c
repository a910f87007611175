/*
 * libfabric transport, RMA: registered memory, remote keys, put, get and flush.
 * Apart from the tagged path because the MR mode bits (tl_ofi.c reads them at
 * open) decide everything here: who picks keys, virtual addresses or offsets.
 *
 * Puts ask for FI_DELIVERY_COMPLETE, so a completed put is visible at the target;
 * flush only waits for the peer's earlier puts and gets, kept per peer in posting
 * order.
 */
#include "transport/tl_ofi_impl.h"
#include "log.h"

#include <fold/fold_status.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- RMA ------------------------------------------------------------------------ */

int tl_ofi_mem_reg(fold_tl_t *tl, void *buf, size_t len, fold_tl_mem_t **mem_p)
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

void tl_ofi_mem_dereg(fold_tl_t *tl, fold_tl_mem_t *mem)
{
    (void)tl;
    int ret = fi_close(&mem->mr->fid);
    if (ret != 0) {
        fold_warn("ofi: deregistering %zu bytes at %p: %s", mem->len, mem->base,
                  fi_strerror(-ret));
    }
    free(mem);
}

int tl_ofi_rkey_pack(fold_tl_t *tl, fold_tl_mem_t *mem, void **rkey_buf, size_t *len)
{
    (void)tl;
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

void tl_ofi_rkey_release(fold_tl_t *tl, void *rkey_buf)
{
    (void)tl;
    free(rkey_buf);
}

int tl_ofi_rkey_unpack(fold_tl_t *tl, int peer, const void *rkey_buf, size_t len,
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

void tl_ofi_rkey_destroy(fold_tl_t *tl, fold_tl_rkey_t *rkey)
{
    (void)tl;
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

int tl_ofi_put(fold_tl_t *tl, int peer, const void *buf, size_t len, uint64_t remote_addr,
               fold_tl_rkey_t *rkey, fold_tl_req_t *req)
{
    return tl_ofi_rma(tl, TL_OFI_PUT, peer, (void *)buf, len, remote_addr, rkey, req);
}

int tl_ofi_get(fold_tl_t *tl, int peer, void *buf, size_t len, uint64_t remote_addr,
               fold_tl_rkey_t *rkey, fold_tl_req_t *req)
{
    return tl_ofi_rma(tl, TL_OFI_GET, peer, buf, len, remote_addr, rkey, req);
}

int tl_ofi_flush(fold_tl_t *tl, int peer, fold_tl_req_t *req)
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
