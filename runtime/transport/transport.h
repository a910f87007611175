/*
 * The transport interface: one ops table per backend (ucp, ofi, loopback), for
 * tagged messages between the ranks of a context.
 * A transport knows nothing about collectives. Peers are context ranks (0..size-1).
 *
 * Completion: every non-blocking call takes a caller-owned fold_tl_req_t. The call
 * sets req->status to FOLD_INPROGRESS (or straight to the final status when it
 * completes at once); the backend stores the final status there from progress().
 * A call that fails to start returns a negative status and leaves req untouched.
 *
 * Tags: callers use only the low bits of a tag, as many as the backend's caps say
 * (FOLD_TL_TAG_BITS for ucp and ofi); a backend may use the bits above them, e.g.
 * to carry the sender's rank so that a receive matches exactly (peer, tag).
 *
 * The messaging rule, which schedules and the executor rely on and every backend
 * keeps (query() reports it as FOLD_TL_CAP_* flags; the context refuses a backend
 * without what the executor needs, see fold_exec_check_caps):
 *
 *   - A send's request completing with FOLD_OK means the backend no longer reads
 *     the caller's buffer: it may be overwritten or freed at once (ucp: UCX local
 *     completion; ofi: inject, a bounce copy or the provider's completion;
 *     loopback: the copy is made). It says nothing about delivery.
 *     [FOLD_TL_CAP_SEND_REUSE]
 *   - A send may complete at once (eager, inject, bounce copy) or only once the
 *     receiver has matched it (rendezvous: ucp and ofi for large messages,
 *     loopback from its rendezvous threshold). So a caller must never make the
 *     matching receive wait for the send's completion. A send does not wait for
 *     any other send to be received, and sends complete in any order (ofi over
 *     shm keeps this with bounce buffers, up to 64 MiB of sends in flight).
 *   - Between one sender and one receiver, messages with the same tag match
 *     receives in posting order on both sides: the k-th send meets the k-th
 *     receive. [FOLD_TL_CAP_ORDERED]
 *   - A message longer than the receive buffer completes the receive with
 *     FOLD_ERR_TRUNCATED (the buffer's contents are then undefined); a shorter or
 *     equal one completes it with FOLD_OK and req->length set to the message's
 *     size. [FOLD_TL_CAP_TRUNCATION]
 */
#ifndef FOLD_TRANSPORT_H
#define FOLD_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#define FOLD_TL_TAG_BITS 44

typedef struct fold_tl       fold_tl_t;       /* a backend instance (one per context) */

typedef struct fold_tl_req {
    volatile int status;   /* FOLD_INPROGRESS until the operation completes */
    size_t       length;   /* bytes received (tag_recv) */
    void        *handle;   /* backend-private */
} fold_tl_req_t;

/* What a backend guarantees, beyond the calls themselves (see the rule above). */
#define FOLD_TL_CAP_ORDERED    (1u << 0)  /* same peer and tag: k-th send meets k-th receive */
#define FOLD_TL_CAP_SEND_REUSE (1u << 1)  /* a completed send no longer reads its buffer */
#define FOLD_TL_CAP_TRUNCATION (1u << 2)  /* an over-long message fails the receive, reported */

typedef struct fold_tl_caps {
    const char *name;      /* the backend's (its ops table's name) */
    const char *provider;  /* what the backend runs over (ofi: the libfabric provider;
                              ucp: UCX's transports, "self,tcp,cma"); NULL if unknown */
    const char *fallback;  /* why it runs on less than it was asked to (ucp: without
                              UCX's shared memory); NULL when it does not */
    unsigned    flags;     /* FOLD_TL_CAP_* */
    int         tag_bits;  /* low tag bits a caller may use */
    size_t      peers;     /* peers this instance has state for (made on first use) */
} fold_tl_caps_t;

/* A flag's meaning in words, for error messages; NULL for an unknown flag. */
const char *fold_tl_cap_name(unsigned flag);

typedef struct fold_tl_params {
    int         rank;
    int         size;
    void       *loopback_fabric;  /* loopback backend only: the shared in-process fabric */
    /* ofi backend only: the libfabric provider, read during open (the context passes
     * its FOLD_OFI_PROVIDER setting); NULL or empty: the first that fits. */
    const char *ofi_provider;
    /* ucp backend only: 1 opens endpoints without UCX's peer error handling (a failed
     * peer is not reported, and UCX may use cross-memory attach); 0, the default, with. */
    int         ucx_err_none;
} fold_tl_params_t;

/* A peer's address, asked for on the first operation towards it: stores a copy that
 * the backend then owns (free()) in *addr and its length in *len. */
typedef int (*fold_tl_resolve_fn)(void *arg, int rank, void **addr, size_t *len);

typedef struct fold_tl_ops {
    const char *name;
    const char *description;

    int  (*open)(const fold_tl_params_t *params, fold_tl_t **tl);
    void (*close)(fold_tl_t *tl);
    /* What this instance guarantees; the strings stay valid until close. */
    int  (*query)(fold_tl_t *tl, fold_tl_caps_t *caps);

    /* This instance's address, for the bootstrap to publish. */
    int  (*address)(fold_tl_t *tl, const void **addr, size_t *len);
    /* Where peers' addresses come from (arg stays valid until close). The backend
     * keeps no table of the job's addresses: it asks for a peer's on the first
     * operation towards it, and keeps state only for the peers it talks to. */
    int  (*set_resolver)(fold_tl_t *tl, fold_tl_resolve_fn resolve, void *arg);

    /* Tagged messages; a receive matches exactly (peer, tag). A message longer than
     * the receive buffer completes the receive with FOLD_ERR_TRUNCATED. */
    int  (*tag_send)(fold_tl_t *tl, int peer, uint64_t tag, const void *buf, size_t len,
                     fold_tl_req_t *req);
    int  (*tag_recv)(fold_tl_t *tl, int peer, uint64_t tag, void *buf, size_t len,
                     fold_tl_req_t *req);
    /* Cancels an incomplete request; it then completes with FOLD_ERR_CANCELED. */
    void (*cancel)(fold_tl_t *tl, fold_tl_req_t *req);

    /* Makes progress; returns how many events it handled (0 when idle). */
    int  (*progress)(fold_tl_t *tl);
} fold_tl_ops_t;

extern const fold_tl_ops_t fold_tl_ucp_ops;
extern const fold_tl_ops_t fold_tl_ofi_ops;
extern const fold_tl_ops_t fold_tl_loopback_ops;

/* Every backend compiled in, NULL-terminated. */
extern const fold_tl_ops_t *const fold_tl_all[];
const fold_tl_ops_t *fold_tl_find(const char *name);

/* The in-process fabric shared by `size` loopback instances (tests only). */
void *fold_loopback_fabric_create(int size);
void  fold_loopback_fabric_destroy(void *fabric);
/* Sends of at least `threshold` bytes complete only once received (default: never). */
void  fold_loopback_fabric_set_rndv(void *fabric, size_t threshold);

#endif
