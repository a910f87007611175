/*
 * A communicator's node state, set up at its first node-aware call (through
 * fold_comm_node, comm.c) and kept until the communicator is freed: the topology
 * (who shares a node, each rank's socket, leader order) and the node segment.
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
#include "node/node.h"
#include "log.h"

#include <fold/fold_status.h>

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
    int64_t  pid;         /* single copy: who to read from ... */
    uint64_t probe_addr;  /* ... where a known value lies ... */
    uint64_t probe;       /* ... and the value */
} node_record_t;

/* What every rank tells the others once it has tried to attach. */
typedef struct node_outcome {
    int32_t ok;           /* FOLD_OK or why it could not set up */
    int32_t single_copy;  /* it can read every local peer's memory */
} node_outcome_t;


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

static void segment_name(const fold_node_params_t *p, uint64_t nonce, char *buf, size_t len)
{
    fold_shm_make_name(buf, len, p->job_id, p->node_name, p->comm_id, nonce);
}

void fold_node_free(fold_node_t *node)
{
    fold_shm_detach(&node->seg);
    fold_topo_free(node->topo);
    free(node->pids);
    free(node);
}

/* Whether this rank can read every other local rank's probe value: fills
 * node->pids in local order on the way. */
static int probe_peers(const fold_node_params_t *p, fold_node_t *node,
                       const node_record_t *all, int local_size)
{
    node->pids = calloc((size_t)local_size, sizeof(int64_t));
    if (node->pids == NULL) {
        return 0;
    }
    int ok = 1;
    for (int r = 0; r < p->size; r++) {
        if (p->node_key[r] != p->node_key[p->rank]) {
            continue;
        }
        int l = node->topo->local_of[r];
        node->pids[l] = all[r].pid;
        if (r != p->rank) {
            ok &= fold_node_peer_probe(all[r].pid, all[r].probe_addr, all[r].probe);
        }
    }
    return ok;
}

/* Every rank of the comm ran the setup; returns FOLD_OK only where all succeeded. */
static int node_setup(const fold_node_params_t *p, fold_node_t *node)
{
    int size = p->size, rank = p->rank, status;
    int *pkg = malloc((size_t)size * sizeof(int));
    node_outcome_t *ok_all = malloc((size_t)size * sizeof(node_outcome_t));
    node_record_t *all = malloc((size_t)size * sizeof(node_record_t));
    node_record_t mine;
    char name[FOLD_SHM_NAME_MAX];
    int creator = -1, local_size = 0, created = 0;

    if (pkg == NULL || ok_all == NULL || all == NULL) {
        status = FOLD_ERR_NO_MEMORY;
        goto out;
    }
    for (int r = 0; r < size; r++) {
        if (p->node_key[r] == p->node_key[rank]) {
            creator = creator < 0 ? r : creator;
            local_size++;
        }
    }

    memset(&mine, 0, sizeof(mine));
    int numa;
    fold_topo_locate(&mine.package, &numa);
    mine.shm_bytes  = p->shm_size;
    mine.status     = FOLD_OK;
    mine.pid        = (int64_t)getpid();
    node->probe     = random_nonce() | 1;
    mine.probe      = node->probe;
    mine.probe_addr = (uint64_t)(uintptr_t)&node->probe;
    if (creator == rank && local_size > 1) {
        mine.nonce = random_nonce();
        segment_name(p, mine.nonce, name, sizeof(name));
        /* shm_flat's fast-path region lies past what the node-aware schedules use */
        mine.status = fold_shm_create(&node->seg, name, local_size,
                                      p->shm_size + fold_node_fast_region_bytes(local_size) +
                                          fold_node_peer_region_bytes(local_size));
        created = mine.status == FOLD_OK;
    }
    if ((status = p->allgather(p->allgather_arg, &mine, all, sizeof(mine))) != FOLD_OK) {
        goto out;
    }

    for (int r = 0; r < size; r++) {
        pkg[r] = all[r].package;
        if (r == 0 || all[r].shm_bytes < node->shm_bytes) {
            node->shm_bytes = all[r].shm_bytes;
        }
    }
    int32_t ok = fold_topo_build(size, p->node_key, pkg, &node->topo);
    if (ok == FOLD_OK && local_size > 1 && creator != rank) {
        if (all[creator].status != FOLD_OK) {
            fold_error("comm %u: rank %d could not create this node's segment", p->comm_id,
                       creator);
            ok = all[creator].status;
        } else {
            segment_name(p, all[creator].nonce, name, sizeof(name));
            ok = fold_shm_attach(&node->seg, name, local_size);
        }
    } else if (ok == FOLD_OK && creator == rank) {
        ok = mine.status;
    }
    node_outcome_t outcome = {ok, 0};
    if (ok == FOLD_OK && local_size > 1) {
        outcome.single_copy = p->single_copy && probe_peers(p, node, all, local_size);
    }
    status = p->allgather(p->allgather_arg, &outcome, ok_all, sizeof(outcome));
    for (int r = 0; r < size && status == FOLD_OK; r++) {
        if (ok_all[r].ok != FOLD_OK) {
            if (ok == FOLD_OK) {
                fold_error("comm %u: rank %d could not set up its node state: %s",
                           p->comm_id, r, fold_status_string(ok_all[r].ok));
            }
            status = ok_all[r].ok;
        }
    }
    /* Every rank decides alike: single copy where every rank of a node with
     * several can read its peers (ranks alone on their node have nothing to read). */
    node->single_copy = status == FOLD_OK && node->topo->max_ppn > 1;
    for (int r = 0; r < size && node->single_copy; r++) {
        int alone = fold_topo_ppn(node->topo, node->topo->node_of[r]) == 1;
        node->single_copy = alone || ok_all[r].single_copy;
    }
    if (status == FOLD_OK) {
        node->local_rank = node->topo->local_of[rank];
    }
out:
    if (created) {
        fold_shm_unlink(name);   /* everyone has tried to attach by now, or failed */
    }
    free(pkg);
    free(ok_all);
    free(all);
    return status;
}

int fold_node_create(const fold_node_params_t *params, fold_node_t **node_p)
{
    fold_node_t *node = calloc(1, sizeof(*node));
    if (node == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    node->comm_rank = params->rank;
    node->comm_size = params->size;
    node->comm_id   = params->comm_id;
    int status = node_setup(params, node);
    if (status != FOLD_OK) {
        fold_node_free(node);
        return status;
    }
    fold_debug("comm %u: %d nodes, %d-%d ranks per node, segment %s (%zu bytes), single "
               "copy %s", params->comm_id, node->topo->nnodes, node->topo->min_ppn,
               node->topo->max_ppn, node->seg.base ? node->seg.name : "none",
               node->seg.data_size, node->single_copy ? "on" : "off");
    *node_p = node;
    return FOLD_OK;
}
