/*
 * A communicator's node state, set up at its first node-aware call (through
 * fold_comm_node, comm.c) and kept until the communicator is freed: the topology
 * (who shares a node, each rank's socket, leader order) and the node segment.
 *
 * Setup is collective over the communicator and runs once:
 *   0. (Not for the world.) One allgather of the segment each rank's context kept
 *      when it freed its last communicator (pool.c): where every rank of a node kept
 *      the same one, that node takes it, its creator clears its flags and regions,
 *      and steps 1 and 3 are skipped there; elsewhere the kept segment is given back
 *      first.
 *   1. The node's lowest rank asks the node's budget (budget.c) how many data bytes
 *      the segment may have, and creates it with every page reserved, under a name
 *      carrying the job, the node, the communicator id and a random nonce (mode
 *      0600, O_EXCL).
 *   2. One allgather tells everyone every rank's socket, its FOLD_SHM_SIZE, and
 *      each creator's nonce and what it reserved, or the numbers of why it could
 *      not. A node without its segment leaves the whole communicator without node
 *      state: every rank returns FOLD_ERR_UNSUPPORTED (the creator that found out
 *      logs it, at warn level the first time in the process) and the communicator
 *      runs the node-unaware algorithms.
 *   3. The other ranks of the node attach (the last one to do so unlinks the name).
 *   4. A second allgather tells everyone whether every rank attached; the creator
 *      unlinks the name whatever happened. Every rank decides alike from what it
 *      gathered, and nothing is left in /dev/shm. A rank whose exchange fails (a
 *      peer died: maybe the creator, before unlinking) removes this communicator's
 *      segment itself.
 * Chunk sizes must agree between nodes, so every node lays its segment out for the
 * smallest data size of the communicator: a FOLD_SHM_SIZE or what a node reserved.
 */
#include "node/node.h"
#include "log.h"

#include <errno.h>
#include <fold/fold_status.h>

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

typedef struct node_record {
    int32_t  package;
    int32_t  status;      /* creator: whether its segment exists */
    int32_t  sys_errno;   /* creator: why creating it failed; 0 when the budget said no */
    int32_t  spare;
    uint64_t nonce;       /* creator: the name's nonce */
    uint64_t shm_bytes;   /* creator: data bytes reserved; others: their FOLD_SHM_SIZE */
    uint64_t need;        /* creator: bytes the segment takes at FOLD_SHM_SIZE, */
    uint64_t need_min;    /* at the least, */
    uint64_t tried;       /* and what it tried to reserve (0: nothing) */
    uint64_t free;        /* creator: FOLD_SHM_DIR's free bytes, */
    uint64_t total;       /* its size */
    uint64_t reserve;     /* and what is left to others */
    int64_t  pid;         /* single copy: who to read from ... */
    uint64_t probe_addr;  /* ... where a known value lies ... */
    uint64_t probe;       /* ... and the value */
} node_record_t;

/* What every rank tells the others once it has tried to attach. */
typedef struct node_outcome {
    int32_t ok;           /* FOLD_OK or why it could not set up */
    int32_t single_copy;  /* it can read every local peer's memory */
    int32_t sys_errno;    /* attaching the segment failed: why (else 0) */
    int32_t spare;
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

void fold_node_free(fold_node_t *node, fold_node_pool_t *pool)
{
    if (pool != NULL && node->seg.base != NULL && !node->broken && node->nonce != 0) {
        fold_node_pool_keep(pool, &node->seg, node->nonce, node->seg_bytes, node->shm_size);
    } else {
        fold_shm_detach(&node->seg);
    }
    fold_node_xmap_destroy(node);
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

/* The bytes the resync, the fast path and single copy lay out past the schedules'
 * data (in that order, single copy's last). */
static size_t segment_extra(int local_size)
{
    return fold_node_resync_region_bytes(local_size) + fold_node_fast_region_bytes(local_size) +
           fold_node_peer_region_bytes(local_size);
}

int fold_node_check_segment(const fold_shm_seg_t *seg, size_t shm_bytes, char *why,
                            size_t whylen)
{
    size_t extra = segment_extra(seg->local_size);
    if (seg->data_size < extra || seg->data_size - extra < shm_bytes) {
        snprintf(why, whylen, "its %zu data bytes cannot hold the %zu the schedules use and "
                 "the %zu of the resync, tiny-message and single-copy regions", seg->data_size,
                 shm_bytes, extra);
        return FOLD_ERR_MALFORMED;
    }
    return FOLD_OK;
}

/* The creator's part: what the budget grants, and the segment with every page
 * reserved. Fills the record's numbers either way. */
static int create_segment(const fold_node_params_t *p, fold_node_t *node, int local_size,
                          int max_ppn, node_record_t *mine, char *name, size_t name_len)
{
    size_t extra = segment_extra(local_size);
    fold_shm_budget_t b = {
        .cap   = p->shm_size,
        .floor = fold_shm_budget_floor(p->shm_size, max_ppn, p->pipeline_depth),
        .fixed = fold_shm_footprint(local_size, extra),
    };
    if (fold_shm_budget_measure(&b, p->shm_reserve) != FOLD_OK) {
        mine->sys_errno = errno;
        return FOLD_ERR_NOT_FOUND;
    }
    mine->need     = fold_shm_budget_need(&b, b.cap);
    mine->need_min = fold_shm_budget_need(&b, b.floor);
    mine->free     = b.free;
    mine->total    = b.total;
    mine->reserve  = b.reserve;
    size_t data = fold_shm_budget_grant(&b);
    if (data == 0) {
        return FOLD_ERR_NO_MEMORY;
    }
    mine->nonce = random_nonce();
    mine->tried = fold_shm_footprint(local_size, data + extra);
    segment_name(p, mine->nonce, name, name_len);
    int status = fold_shm_create(&node->seg, name, local_size, data + extra);
    if (status != FOLD_OK) {
        mine->sys_errno = errno;
        return status;
    }
    mine->shm_bytes = data;
    return FOLD_OK;
}

/* Why creator `rank` has no segment, from its record: the same words on every rank. */
static void describe_shortage(const node_record_t *c, int rank, char *buf, size_t len)
{
    if (c->tried == 0 && c->sys_errno != 0) {
        snprintf(buf, len, "rank %d cannot use " FOLD_SHM_DIR ": %s", rank,
                 strerror(c->sys_errno));
        return;
    }
    if (c->tried != 0) {
        snprintf(buf, len, "rank %d could not reserve %llu bytes in " FOLD_SHM_DIR " for its "
                 "node's segment: %s (%llu bytes free of %llu)", rank,
                 (unsigned long long)c->tried, strerror(c->sys_errno),
                 (unsigned long long)c->free, (unsigned long long)c->total);
        return;
    }
    snprintf(buf, len, "the node segment of rank %d needs %llu bytes in " FOLD_SHM_DIR
             " (%llu at the least) and %llu of its %llu bytes are free, %llu of which fold "
             "leaves to others (FOLD_SHM_RESERVE)", rank, (unsigned long long)c->need,
             (unsigned long long)c->need_min, (unsigned long long)c->free,
             (unsigned long long)c->total, (unsigned long long)c->reserve);
}

/* The first time in this process at warn level, then at info level: a program that
 * makes many communicators on a full node hears of it once. */
static void report_shortage(const fold_node_params_t *p, const char *why)
{
    static atomic_int warned;
    if (!atomic_exchange(&warned, 1)) {
        fold_warn("comm %u: %s: this communicator runs the node-unaware algorithms (later "
                  "communicators short of " FOLD_SHM_DIR " are logged at info level)",
                  p->comm_id, why);
    } else {
        fold_info("comm %u: %s: this communicator runs the node-unaware algorithms",
                  p->comm_id, why);
    }
}

/* first[r]: the lowest rank on r's node (its creator); ranks[r]: how many ranks that
 * node has, for a creator r. As fold_topo_build, at most ranks x nodes steps. */
static void node_creators(const fold_node_params_t *p, int *first, int *ranks)
{
    for (int r = 0; r < p->size; r++) {
        first[r] = r;
        for (int q = 0; q < r; q++) {
            if (first[q] == q && p->node_key[q] == p->node_key[r]) {
                first[r] = q;
                break;
            }
        }
        ranks[r] = 0;
        ranks[first[r]]++;
    }
}

/* The first creator, in rank order, that has no segment; -1 if every node has one. */
static int first_short_creator(int size, const int *first, const int *ranks,
                               const node_record_t *all)
{
    for (int r = 0; r < size; r++) {
        if (first[r] == r && ranks[r] > 1 && all[r].status != FOLD_OK) {
            return r;
        }
    }
    return -1;
}

/* Step 0 (non-world communicators): the nonce of the segment every rank of this
 * rank's node kept when it freed its last communicator (pool.c), if they all kept
 * the same one, else 0. An allgather on every rank, whatever its node. */
static int kept_segment(const fold_node_params_t *p, const int *first, int local_size,
                        uint64_t *nonce)
{
    uint64_t mine = local_size > 1 ? fold_node_pool_offer(p->pool, local_size, p->shm_size) : 0;
    uint64_t *all = malloc((size_t)p->size * sizeof(*all));
    if (all == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    int status = p->allgather(p->allgather_arg, &mine, all, sizeof(mine));
    int agreed = status == FOLD_OK && mine != 0;
    for (int r = 0; r < p->size && agreed; r++) {
        agreed = first[r] != first[p->rank] || all[r] == mine;
    }
    free(all);
    *nonce = agreed ? mine : 0;
    return status;
}

/* Makes a kept segment this communicator's: the creator clears what the last one
 * left in its flags and data before the first exchange, and the others touch it only
 * after that exchange. */
static int take_kept(fold_node_pool_t *pool, fold_node_t *node, uint64_t nonce, int is_creator,
                     node_record_t *mine)
{
    size_t seg_bytes = 0;
    if (!fold_node_pool_take(pool, nonce, &node->seg, &seg_bytes)) {
        return 0;
    }
    if (is_creator) {
        /* The flags, and the resync, tiny-message and single-copy regions at the
         * end of the data; the schedules' slots are written before they are read. */
        fold_shm_seg_t *seg = &node->seg;
        size_t extra = segment_extra(seg->local_size);
        memset(seg->flags, 0, (size_t)seg->local_size * sizeof(*seg->flags));
        memset(seg->data + seg->data_size - extra, 0, extra);
        mine->nonce     = nonce;
        mine->shm_bytes = seg_bytes;
    }
    return 1;
}

/* Every rank of the comm ran the setup; FOLD_OK only where all succeeded, and
 * FOLD_ERR_UNSUPPORTED where only a segment is missing. */
static int node_setup(const fold_node_params_t *p, fold_node_t *node, char *why,
                      size_t why_len)
{
    int size = p->size, rank = p->rank, status;
    int *pkg = malloc((size_t)size * sizeof(int));
    int *first = malloc((size_t)size * sizeof(int)), *ranks = malloc((size_t)size * sizeof(int));
    node_outcome_t *ok_all = malloc((size_t)size * sizeof(node_outcome_t));
    node_record_t *all = malloc((size_t)size * sizeof(node_record_t));
    node_record_t mine;
    char name[FOLD_SHM_NAME_MAX];
    int created = 0, max_ppn = 1, exchange_failed = 0, local_size = 1;

    if (pkg == NULL || first == NULL || ranks == NULL || ok_all == NULL || all == NULL) {
        status = FOLD_ERR_NO_MEMORY;
        goto out;
    }
    node_creators(p, first, ranks);
    for (int r = 0; r < size; r++) {
        max_ppn = ranks[r] > max_ppn ? ranks[r] : max_ppn;
    }
    int creator = first[rank];
    local_size = ranks[creator];

    memset(&mine, 0, sizeof(mine));
    int numa;
    fold_topo_locate(&mine.package, &numa);
    mine.shm_bytes  = p->shm_size;
    mine.status     = FOLD_OK;
    mine.pid        = (int64_t)getpid();
    node->probe     = random_nonce() | 1;
    mine.probe      = node->probe;
    mine.probe_addr = (uint64_t)(uintptr_t)&node->probe;
    uint64_t kept = 0;
    if (p->pool != NULL && (status = kept_segment(p, first, local_size, &kept)) != FOLD_OK) {
        exchange_failed = 1;
        goto out;
    }
    int reused = kept != 0 && take_kept(p->pool, node, kept, creator == rank, &mine);
    if (!reused && p->pool != NULL) {
        fold_node_pool_release(p->pool);   /* before the budget counts /dev/shm's room */
    }
    if (creator == rank && local_size > 1 && !reused) {
        mine.status = create_segment(p, node, local_size, max_ppn, &mine, name, sizeof(name));
        created = mine.status == FOLD_OK;
    }
    if ((status = p->allgather(p->allgather_arg, &mine, all, sizeof(mine))) != FOLD_OK) {
        exchange_failed = 1;
        goto out;
    }

    /* A node without its segment: nobody attaches, everyone says why alike. */
    int short_rank = first_short_creator(size, first, ranks, all);
    if (short_rank >= 0) {
        describe_shortage(&all[short_rank], short_rank, why, why_len);
        if (mine.status != FOLD_OK) {
            char own[384];
            describe_shortage(&mine, rank, own, sizeof(own));
            report_shortage(p, own);
        } else {
            fold_debug("comm %u: no node shared memory: %s", p->comm_id, why);
        }
        status = FOLD_ERR_UNSUPPORTED;
        goto out;
    }
    for (int r = 0; r < size; r++) {
        pkg[r] = all[r].package;
        if (r == 0 || all[r].shm_bytes < node->shm_bytes) {
            node->shm_bytes = all[r].shm_bytes;
        }
    }
    node_outcome_t outcome = {fold_topo_build(size, p->node_key, pkg, &node->topo), 0, 0, 0};
    if (reused && creator != rank && all[creator].nonce != kept) {
        /* The creator could not take it after all (another thread of its process
         * gave it back meanwhile) and made a new one: attach that one instead. */
        fold_shm_detach(&node->seg);
        reused = 0;
    }
    node->nonce     = local_size > 1 ? all[creator].nonce : 0;
    node->seg_bytes = all[creator].shm_bytes;
    node->shm_size  = p->shm_size;
    if (outcome.ok == FOLD_OK && local_size > 1 && creator != rank && !reused) {
        segment_name(p, all[creator].nonce, name, sizeof(name));
        errno = 0;
        char bad[256];
        if (fold_shm_attach(&node->seg, name, local_size) != FOLD_OK) {
            outcome.sys_errno = errno != 0 ? errno : EINVAL;
        } else if (fold_node_check_segment(&node->seg, node->shm_bytes, bad, sizeof(bad)) !=
                   FOLD_OK) {
            /* Another local process wrote a header that does not match the creator's
             * record: nothing of it may be used. */
            fold_error("comm %u: node segment %s: %s", p->comm_id, name, bad);
            fold_shm_detach(&node->seg);
            outcome.sys_errno = EINVAL;
        }
    }
    if (outcome.ok == FOLD_OK && outcome.sys_errno == 0 && local_size > 1) {
        outcome.single_copy = p->single_copy && probe_peers(p, node, all, local_size);
    }
    status = p->allgather(p->allgather_arg, &outcome, ok_all, sizeof(outcome));
    exchange_failed = status != FOLD_OK;
    for (int r = 0; r < size && status == FOLD_OK; r++) {
        if (ok_all[r].ok != FOLD_OK) {
            if (outcome.ok == FOLD_OK) {
                fold_error("comm %u: rank %d could not set up its node state: %s",
                           p->comm_id, r, fold_status_string(ok_all[r].ok));
            }
            status = ok_all[r].ok;
        }
    }
    for (int r = 0; r < size && status == FOLD_OK; r++) {
        if (ok_all[r].sys_errno != 0) {
            snprintf(why, why_len, "rank %d could not map its node's segment from "
                     FOLD_SHM_DIR ": %s", r, strerror(ok_all[r].sys_errno));
            if (r == rank) {
                report_shortage(p, why);
            }
            status = FOLD_ERR_UNSUPPORTED;
        }
    }
    /* Every rank decides alike: single copy where every rank of a node with
     * several can read its peers (ranks alone on their node have nothing to read). */
    node->single_copy = status == FOLD_OK && node->topo->max_ppn > 1;
    for (int r = 0; r < size && node->single_copy; r++) {
        int alone = fold_topo_ppn(node->topo, node->topo->node_of[r]) == 1;
        node->single_copy = alone || ok_all[r].single_copy;
    }
    fold_node_huge_init(&node->huge, node->single_copy && p->huge_pages);
    node->adopt = node->single_copy && p->adopt;
    if (status == FOLD_OK) {
        node->local_rank = node->topo->local_of[rank];
    }
out:
    if (created) {
        fold_shm_unlink(name);   /* everyone has tried to attach by now, or failed */
    } else if (exchange_failed && local_size > 1) {
        /* A peer failed: if it was the creator, it may have died before unlinking, and
         * nobody learnt the nonce. The setup has failed for every rank, so whatever
         * segment of this communicator is left can go. */
        fold_shm_unlink_stale(p->job_id, p->node_name, p->comm_id);
    }
    free(pkg);
    free(first);
    free(ranks);
    free(ok_all);
    free(all);
    return status;
}

int fold_node_create(const fold_node_params_t *params, fold_node_t **node_p, char *why,
                     size_t why_len)
{
    fold_node_t *node = calloc(1, sizeof(*node));
    if (node == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    node->comm_rank = params->rank;
    node->comm_size = params->size;
    node->comm_id   = params->comm_id;
    int status = node_setup(params, node, why, why_len);
    if (status != FOLD_OK) {
        fold_node_free(node, NULL);   /* a failed setup keeps nothing */
        return status;
    }
    fold_node_resync_init(node);
    if (node->seg.base != NULL) {
        fold_node_fast_init(node);
    }
    if (node->single_copy && node->seg.base != NULL &&
        (status = fold_node_xmap_create(node)) != FOLD_OK) {
        fold_node_free(node, NULL);
        return status;
    }
    fold_debug("comm %u: %d nodes, %d-%d ranks per node, segment %s (%zu data bytes, %zu "
               "for the schedules), single copy %s", params->comm_id, node->topo->nnodes,
               node->topo->min_ppn, node->topo->max_ppn,
               node->seg.base ? node->seg.name : "none", node->seg.data_size, node->shm_bytes,
               node->single_copy ? "on" : "off");
    *node_p = node;
    return FOLD_OK;
}
