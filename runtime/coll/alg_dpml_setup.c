/*
 * The node state DPML needs on a communicator, set up at its first node-aware call
 * and kept until the communicator is freed: the topology (who shares a node, each
 * rank's socket, leader order) and the node segment.
 *
 * Setup is collective over the communicator and runs once:
 *   1. The node's lowest rank creates the segment under a name carrying the job,
 *      the node, the communicator id and a random nonce (mode 0600, O_EXCL).
 *   2. One allgather over the communicator tells everyone every rank's socket, its
 *      FOLD_SHM_SIZE, and each creator's nonce and whether the creation worked.
 *   3. The other ranks of the node attach (the last one to do so unlinks the name).
 *   4. A second allgather tells everyone whether every rank attached; the creator
 *      unlinks the name whatever happened. Any failure fails the call on every rank
 *      alike, and nothing is left in /dev/shm.
 * Chunk sizes must agree between nodes, so every node lays its segment out for the
 * smallest FOLD_SHM_SIZE of the communicator.
 */
#include "core.h"
#include "log.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

typedef struct node_record {
    int32_t package;
    int32_t status;       /* creator: whether the segment exists */
    int32_t spare[2];
    uint64_t nonce;       /* creator: the name's nonce */
    uint64_t shm_bytes;   /* this rank's FOLD_SHM_SIZE */
} node_record_t;

#define RECORD_INTS ((size_t)(sizeof(node_record_t) / sizeof(int32_t)))

static int comm_allgather_int32(fold_comm_t *comm, const void *mine, void *all, size_t count)
{
    fold_exec_args_t args = {
        .coll  = FOLD_COLL_ALLGATHER,
        .build = fold_build_allgather_ring,
        .cargs = {.coll = FOLD_COLL_ALLGATHER, .rank = comm->rank, .size = comm->size,
                  .count = count, .seg_count = count, .depth = 1, .commutative = 1},
        .in    = mine,
        .out   = all,
        .dtype = FOLD_INT32,
        .op    = FOLD_OP_SUM,
    };
    fold_request_t *req;
    int status = fold_exec_start(comm, &args, &req);
    if (status != FOLD_OK) {
        return status;
    }
    status = fold_exec_wait(req);
    fold_exec_release(req);
    return status;
}

static uint64_t random_nonce(void)
{
    uint64_t n = 0;
    if (getrandom(&n, sizeof(n), GRND_NONBLOCK) != (ssize_t)sizeof(n)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        n = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)&n;
    }
    return n;
}

static void segment_name(const fold_comm_t *comm, uint64_t nonce, char *buf, size_t len)
{
    const fold_bootstrap_t *bs = &comm->ctx->bs;
    fold_shm_make_name(buf, len, bs->job_id, bs->node_name, comm->id, nonce);
}

void fold_node_free(fold_node_t *node)
{
    fold_shm_detach(&node->seg);
    fold_topo_free(node->topo);
    free(node);
}

/* Every rank of the comm ran the setup; returns FOLD_OK only where all succeeded. */
static int node_setup(fold_comm_t *comm, fold_node_t *node)
{
    fold_context_t *ctx = comm->ctx;
    int size = comm->size, status;
    int *key = malloc((size_t)size * sizeof(int));
    int *pkg = malloc((size_t)size * sizeof(int));
    int32_t *ok_all = malloc((size_t)size * sizeof(int32_t));
    node_record_t *all = malloc((size_t)size * sizeof(node_record_t));
    node_record_t mine;
    char name[FOLD_SHM_NAME_MAX];
    int creator = -1, local_size = 0, created = 0;

    if (key == NULL || pkg == NULL || ok_all == NULL || all == NULL) {
        status = FOLD_ERR_NO_MEMORY;
        goto out;
    }
    for (int r = 0; r < size; r++) {
        key[r] = ctx->node_of[fold_rank_map_get(&comm->map, r)];
    }
    for (int r = 0; r < size; r++) {
        if (key[r] == key[comm->rank]) {
            creator = creator < 0 ? r : creator;
            local_size++;
        }
    }

    memset(&mine, 0, sizeof(mine));
    int numa;
    fold_topo_locate(&mine.package, &numa);
    mine.shm_bytes = ctx->config.shm_size;
    mine.status    = FOLD_OK;
    if (creator == comm->rank && local_size > 1) {
        mine.nonce = random_nonce();
        segment_name(comm, mine.nonce, name, sizeof(name));
        /* shm_flat's fast-path region lies past what the node-aware schedules use */
        mine.status = fold_shm_create(&node->seg, name, local_size,
                                      ctx->config.shm_size + fold_fast_region_bytes(local_size));
        created = mine.status == FOLD_OK;
    }
    if ((status = comm_allgather_int32(comm, &mine, all, RECORD_INTS)) != FOLD_OK) {
        goto out;
    }

    for (int r = 0; r < size; r++) {
        pkg[r] = all[r].package;
        if (r == 0 || all[r].shm_bytes < node->shm_bytes) {
            node->shm_bytes = all[r].shm_bytes;
        }
    }
    int32_t ok = fold_topo_build(size, key, pkg, &node->topo);
    if (ok == FOLD_OK && local_size > 1 && creator != comm->rank) {
        if (all[creator].status != FOLD_OK) {
            fold_error("comm %u: rank %d could not create this node's segment", comm->id,
                       creator);
            ok = all[creator].status;
        } else {
            segment_name(comm, all[creator].nonce, name, sizeof(name));
            ok = fold_shm_attach(&node->seg, name, local_size);
        }
    } else if (ok == FOLD_OK && creator == comm->rank) {
        ok = mine.status;
    }
    status = comm_allgather_int32(comm, &ok, ok_all, 1);
    for (int r = 0; r < size && status == FOLD_OK; r++) {
        if (ok_all[r] != FOLD_OK) {
            if (ok == FOLD_OK) {
                fold_error("comm %u: rank %d could not set up its node state: %s", comm->id,
                           r, fold_status_string(ok_all[r]));
            }
            status = ok_all[r];
        }
    }
    if (status == FOLD_OK) {
        node->local_rank = node->topo->local_of[comm->rank];
    }
out:
    if (created) {
        fold_shm_unlink(name);   /* everyone has tried to attach by now, or failed */
    }
    free(key);
    free(pkg);
    free(ok_all);
    free(all);
    return status;
}

int fold_node_prepare(fold_comm_t *comm, fold_exec_args_t *args)
{
    if (comm->node == NULL) {
        fold_node_t *node = calloc(1, sizeof(*node));
        if (node == NULL) {
            return FOLD_ERR_NO_MEMORY;
        }
        int status = node_setup(comm, node);
        if (status != FOLD_OK) {
            fold_node_free(node);
            return status;
        }
        comm->node = node;
        fold_debug("comm %u: %d nodes, %d-%d ranks per node, segment %s (%zu bytes)",
                   comm->id, node->topo->nnodes, node->topo->min_ppn, node->topo->max_ppn,
                   node->seg.base ? node->seg.name : "none", node->seg.data_size);
    }
    fold_node_t *node = comm->node;
    fold_coll_args_t *a = &args->cargs;
    size_t esize = fold_dtype_size(args->dtype);
    a->topo      = node->topo;
    a->remote    = comm->remote;
    a->shm_count = node->shm_bytes / esize;
    if (a->leaders < 1) {   /* not chosen by selection (internal callers) */
        a->leaders = 1;
    }
    a->leaders = a->leaders < node->topo->min_ppn ? a->leaders : node->topo->min_ppn;
    if (node->topo->nnodes == 1) {
        a->inter = NULL;
    } else if (a->inter == NULL) {
        a->inter = args->coll == FOLD_COLL_ALLREDUCE ? &fold_alg_rabenseifner
                                                     : &fold_alg_binomial;
    }
    return FOLD_OK;
}

void fold_node_enqueue(fold_node_t *node, fold_request_t *req)
{
    req->shm_next = NULL;
    if (node->tail != NULL) {
        node->tail->shm_next = req;
    } else {
        node->head = req;
    }
    node->tail = req;
}

void fold_node_dequeue(fold_node_t *node, fold_request_t *req)
{
    fold_request_t *prev = NULL;
    for (fold_request_t *r = node->head; r != NULL; prev = r, r = r->shm_next) {
        if (r != req) {
            continue;
        }
        if (prev != NULL) {
            prev->shm_next = r->shm_next;
        } else {
            node->head = r->shm_next;
        }
        if (node->tail == r) {
            node->tail = prev;
        }
        r->shm_next = NULL;
        return;
    }
}
