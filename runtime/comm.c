/*
 * Communicators: a rank map into the context (group/rankmap.h), an id for message
 * tags agreed free at every member (group/comm_ids.h), a schedule cache and a scratch
 * pool. Split learns membership and id proposals with one allgather over the parent
 * (another round only while the proposals differ).
 */
#include "comm.h"
#include "guard.h"
#include "log.h"
#include "group/split.h"

#include <stdlib.h>
#include <string.h>

/* The map of the new communicator's ranks, as FOLD_RANK_MAP and FOLD_RANK_CACHE
 * ask; the world rectangles are built at the first communicator that needs them. */
static int comm_map_init(fold_comm_t *comm, const int *ctx_ranks)
{
    fold_context_t *ctx = comm->ctx;
    if (ctx->worlds.size == 0) {
        fold_world_rects_init(&ctx->worlds, ctx->bs.size);
    }
    fold_rankmap_params_t params = {.mode = ctx->config.rank_map,
                                    .cache = ctx->config.rank_cache,
                                    .worlds = &ctx->worlds};
    int status = fold_rankmap_init(&comm->map, comm->size, ctx_ranks, &params);
    if (status == FOLD_OK && fold_log_level >= FOLD_LOG_DEBUG) {
        char how[128];
        fold_rankmap_describe(&comm->map, how, sizeof(how));
        fold_debug("comm %u: %d ranks, rank map %s, %zu bytes (a table: %zu)", comm->id,
                   comm->size, how, fold_rankmap_bytes(&comm->map),
                   fold_rankmap_dense_bytes(comm->size));
    }
    return status;
}

/* Whether comm rank `peer` runs on another node than this rank: the executor's plan
 * holds answers to those softly (coll/exec_plan.h), the wire codecs weigh the path. */
static int peer_other_node(void *arg, int peer)
{
    fold_comm_t *comm = arg;
    return fold_context_node_of(comm->ctx, fold_comm_ctx_rank(comm, peer)) != comm->node_index;
}

/* The node of every rank of comm (the launcher's locality), malloc'd; NULL when out
 * of memory. */
static int *comm_node_of(fold_comm_t *comm)
{
    const fold_context_t *ctx = comm->ctx;
    int *node_of = malloc((size_t)comm->size * sizeof(int));
    for (int r = 0; node_of != NULL && r < comm->size; r++) {
        node_of[r] = fold_context_node_of(ctx, fold_comm_ctx_rank(comm, r));
    }
    return node_of;
}

/* Nodes and ranks per node of the communicator, from the launcher's locality. */
static int shape_init(fold_comm_t *comm)
{
    int *node_of = comm_node_of(comm);
    if (node_of == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    fold_shape_of(comm->size, node_of, comm->ctx->nnodes, &comm->shape);
    free(node_of);
    return FOLD_OK;
}

int fold_comm_create(fold_context_t *ctx, int size, int rank, const int *ctx_ranks,
                     uint32_t id, fold_comm_t **comm_p)
{
    fold_comm_t *comm = calloc(1, sizeof(*comm));
    if (comm == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    comm->magic = FOLD_COMM_MAGIC;
    comm->ctx   = ctx;
    comm->size  = size;
    comm->rank  = rank;
    comm->id    = id;
    int status = comm_map_init(comm, ctx_ranks);
    if (status != FOLD_OK) {
        fold_rankmap_free(&comm->map);
        free(comm);
        return status;
    }
    fold_select_cache_clear(comm);
    comm->node_index = fold_context_node_of(ctx, fold_comm_ctx_rank(comm, rank));
    comm->remote_fn = (fold_remote_t){peer_other_node, comm};
    status = shape_init(comm);
    if (status == FOLD_OK) {
        comm->remote = comm->shape.nnodes > 1 ? &comm->remote_fn : NULL;
        status = fold_context_add_comm(ctx, comm);
    }
    if (status == FOLD_OK) {
        fold_comm_ids_take(&ctx->comm_ids, id);
    }
    if (status != FOLD_OK) {
        fold_rankmap_free(&comm->map);
        free(comm);
        return status;
    }
    *comm_p = comm;
    return FOLD_OK;
}

/* What the translation cache did for this communicator, at debug level. */
static void log_cache_counters(const fold_comm_t *comm)
{
    const fold_rankcache_t *c = comm->map.cache;
    if (c != NULL) {
        fold_debug("comm %u: rank translation cache %s: %llu hits, %llu misses", comm->id,
                   fold_rankcache_names[c->kind], (unsigned long long)c->hits,
                   (unsigned long long)c->misses);
    }
}

void fold_comm_destroy(fold_comm_t *comm)
{
    fold_context_remove_comm(comm->ctx, comm);
    fold_comm_ids_release(&comm->ctx->comm_ids, comm->id);
    fold_exec_cache_free(comm);
    for (size_t i = 0; i < sizeof(comm->scratch) / sizeof(comm->scratch[0]); i++) {
        free(comm->scratch[i].buf);
    }
    fold_wire_pool_free(comm);
    fold_select_cache_free(comm);
    if (comm->node != NULL) {
        fold_node_free(comm->node, &comm->ctx->node_pool);
    }
    log_cache_counters(comm);
    fold_rankmap_free(&comm->map);
    comm->magic = 0;
    free(comm);
}

/* ---- public API ------------------------------------------------------------- */

fold_comm_h fold_comm_world(fold_context_h ctx)
{
    return fold_context_valid(ctx) ? ctx->world : NULL;
}

int fold_comm_rank(fold_comm_h comm, int *rank)
{
    if (!fold_comm_valid(comm)) {
        return FOLD_ERR_NOT_INITIALIZED;
    }
    if (rank == NULL) {
        return FOLD_ERR_INVALID_ARG;
    }
    *rank = comm->rank;
    return FOLD_OK;
}

int fold_comm_size(fold_comm_h comm, int *size)
{
    if (!fold_comm_valid(comm)) {
        return FOLD_ERR_NOT_INITIALIZED;
    }
    if (size == NULL) {
        return FOLD_ERR_INVALID_ARG;
    }
    *size = comm->size;
    return FOLD_OK;
}

int fold_comm_allgather(fold_comm_t *comm, const void *mine, void *all, size_t bytes)
{
    size_t ints = bytes / sizeof(int32_t);
    fold_exec_args_t args = {
        .coll  = FOLD_COLL_ALLGATHER,
        .build = fold_build_allgather_ring,
        .cargs = {.coll = FOLD_COLL_ALLGATHER, .rank = comm->rank, .size = comm->size,
                  .count = ints, .seg_count = ints, .depth = 1, .commutative = 1},
        .in    = mine,
        .out   = all,
        .dtype = FOLD_INT32,
        .op    = FOLD_OP_SUM,
    };
    return fold_exec_run(comm, &args);
}

static int comm_allgather(void *arg, const void *mine, void *all, size_t bytes)
{
    return fold_comm_allgather(arg, mine, all, bytes);
}

/* Every rank learns every (color, key, id proposal) of the parent. */
static int split_allgather(fold_comm_t *comm, const fold_split_entry_t *mine,
                           fold_split_entry_t *all)
{
    return comm_allgather(comm, mine, all, sizeof(*mine));
}

/* An allgather of one uint32_t per member, for the id agreement's later rounds. */
typedef int (*gather_u32_fn)(void *arg, uint32_t mine, uint32_t *all);

static int comm_gather_u32(void *arg, uint32_t mine, uint32_t *all)
{
    return comm_allgather(arg, &mine, all, sizeof(mine));
}

typedef struct oob_gather {
    fold_oob_allgather_fn allgather;
    void                 *arg;
    fold_context_t       *ctx;   /* claimed by the caller, given back during the gather */
} oob_gather_t;

/* The caller's callback runs without the context claimed, as fold.h promises, so
 * that other threads may use it meanwhile; half way through the agreement (or the
 * node setup) this call must finish, so it waits for the context back rather than be
 * refused. Any size: the node setup's exchanges go through it too. */
static int oob_allgather(void *arg, const void *mine, void *all, size_t bytes)
{
    oob_gather_t *g = arg;
    fold_guard_leave(g->ctx);
    int rc = g->allgather(mine, all, bytes, g->arg);
    fold_guard_wait(g->ctx);
    return rc == 0 ? FOLD_OK : FOLD_ERR_BOOTSTRAP;
}

static int oob_gather_u32(void *arg, uint32_t mine, uint32_t *all)
{
    return oob_allgather(arg, &mine, all, sizeof(mine));
}

/* An id free at all n members (comm_ids.h), from their first proposals (made
 * from candidate 1) and further rounds of gather as needed. */
static int agree_id(fold_context_t *ctx, const char *who, uint32_t *proposals, int n,
                    gather_u32_fn gather, void *arg, uint32_t *id)
{
    uint32_t candidate = 1;
    while (!fold_comm_ids_agree(proposals, n, &candidate, id)) {
        int status = gather(arg, fold_comm_ids_next_free(&ctx->comm_ids, candidate), proposals);
        if (status != FOLD_OK) {
            fold_error("%s: gathering communicator id proposals failed", who);
            return status;
        }
    }
    if (*id == FOLD_COMM_ID_NONE) {
        fold_error("%s: out of communicator ids (a member has %u communicators alive)", who,
                   FOLD_COMM_IDS);
        return FOLD_ERR_BUSY;
    }
    return FOLD_OK;
}

/* The world's first node setup measures what two cores cost each other (probe.c),
 * and every rank takes the same medians into the model before it selects again:
 * the node setup runs before the selection of the call that asked for it. */
static int probe_cores(fold_comm_t *comm, fold_node_allgather_fn allgather, void *arg)
{
    fold_node_calib_t mine;
    fold_node_probe_cores(comm->node, &mine);
    fold_node_calib_t *all = malloc((size_t)comm->size * sizeof(*all));
    if (all == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    int status = allgather(arg, &mine, all, sizeof(mine));
    if (status == FOLD_OK) {
        status = fold_context_set_cores(comm->ctx, all, comm->size);
    }
    free(all);
    return status;
}

/* The node state over `allgather`: the communicator's own, or at fold_init the
 * bootstrap's (which makes no transport peer). */
static int node_setup(fold_comm_t *comm, fold_node_allgather_fn allgather, void *arg)
{
    fold_context_t *ctx = comm->ctx;
    int *key = comm_node_of(comm);
    if (key == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    fold_node_params_t params = {
        .rank = comm->rank, .size = comm->size, .comm_id = comm->id, .node_key = key,
        .job_id = ctx->bs.job_id, .node_name = ctx->bs.node_name,
        .shm_size = ctx->config.shm_size, .shm_reserve = ctx->config.shm_reserve,
        .pipeline_depth = ctx->config.pipeline_depth,
        .single_copy = ctx->config.single_copy,
        .huge_pages = ctx->config.huge_pages,
        .adopt      = ctx->config.adopt,
        .pool = comm != ctx->world ? &ctx->node_pool : NULL,
        .allgather = allgather,
        .allgather_arg = arg};
    int status = fold_node_create(&params, &comm->node, comm->node_why,
                                  sizeof(comm->node_why));
    free(key);
    if (status == FOLD_OK && comm == ctx->world && !ctx->cores_probed) {
        status = probe_cores(comm, allgather, arg);
    }
    if (status == FOLD_ERR_UNSUPPORTED) {
        /* Not asked again: every rank would have to agree to. Decisions made
         * before (fold_selected_algorithm) assumed node-aware algorithms. */
        comm->node_none = 1;
        fold_select_cache_clear(comm);
    }
    return status;
}

int fold_comm_node(fold_comm_t *comm, fold_node_t **node_p)
{
    if (comm->node_none) {
        return FOLD_ERR_UNSUPPORTED;
    }
    if (comm->node == NULL) {
        int status = node_setup(comm, comm_allgather, comm);
        if (status != FOLD_OK) {
            return status;
        }
    }
    *node_p = comm->node;
    return FOLD_OK;
}

static int bootstrap_allgather(void *arg, const void *mine, void *all, size_t bytes)
{
    fold_bootstrap_t *bs = arg;
    return bs->allgather(bs, mine, all, bytes);
}

int fold_comm_node_wanted(const fold_comm_t *comm, fold_coll_t coll)
{
    const fold_alg_t *forced = comm->ctx->forced[coll];
    return comm->node == NULL && !comm->node_none && comm->shape.max_ppn > 1 &&
           (forced == NULL || (forced->flags & FOLD_ALG_NODE_AWARE));
}

int fold_comm_world_setup(fold_comm_t *world)
{
    fold_context_t *ctx = world->ctx;
    if (ctx->config.world_setup != FOLD_WORLD_SETUP_INIT || world->size < 2) {
        return FOLD_OK;
    }
    if (fold_comm_node_wanted(world, FOLD_COLL_ALLREDUCE) ||
        fold_comm_node_wanted(world, FOLD_COLL_REDUCE)) {
        int status = node_setup(world, bootstrap_allgather, &ctx->bs);
        if (status != FOLD_OK && status != FOLD_ERR_UNSUPPORTED) {
            return status;
        }
    }
    return fold_select_warm(world, bootstrap_allgather, &ctx->bs);
}

static int comm_split(fold_comm_t *comm, int color, int key, fold_comm_t **newcomm)
{
    fold_context_t *ctx = comm->ctx;
    fold_split_entry_t mine = {color, key, fold_comm_ids_next_free(&ctx->comm_ids, 1),
                               comm->rank};
    fold_split_entry_t *all = malloc((size_t)comm->size * sizeof(*all));
    uint32_t *proposals = malloc((size_t)comm->size * sizeof(*proposals));
    int *ctx_ranks = malloc((size_t)comm->size * sizeof(int));
    int status = FOLD_ERR_NO_MEMORY;
    uint32_t id;
    if (all == NULL || proposals == NULL || ctx_ranks == NULL) {
        goto out;
    }
    if ((status = split_allgather(comm, &mine, all)) != FOLD_OK) {
        goto out;
    }
    for (int r = 0; r < comm->size; r++) {
        proposals[r] = all[r].id;
    }
    status = agree_id(ctx, "fold_comm_split", proposals, comm->size, comm_gather_u32, comm,
                      &id);
    if (status != FOLD_OK) {
        goto out;
    }
    if (color == FOLD_UNDEFINED) {
        *newcomm = NULL;
        goto out;
    }
    int myrank, n = fold_split_members(all, comm->size, color, comm->rank, &comm->map,
                                       ctx_ranks, &myrank);
    fold_comm_t *c;
    status = fold_comm_create(ctx, n, myrank, ctx_ranks, id, &c);
    if (status == FOLD_OK) {
        *newcomm = c;
    }
out:
    free(all);
    free(proposals);
    free(ctx_ranks);
    return status;
}

int fold_comm_split(fold_comm_h comm, int color, int key, fold_comm_h *newcomm)
{
    if (!fold_comm_valid(comm)) {
        return FOLD_ERR_NOT_INITIALIZED;
    }
    if (newcomm == NULL || (color < 0 && color != FOLD_UNDEFINED)) {
        fold_error("fold_comm_split: color must be >= 0 or FOLD_UNDEFINED");
        return FOLD_ERR_INVALID_ARG;
    }
    fold_context_t *ctx = comm->ctx;
    int status = fold_guard_enter(ctx, "fold_comm_split");
    if (status == FOLD_OK) {
        status = comm_split(comm, color, key, newcomm);
        fold_guard_leave(ctx);
    }
    return status;
}

/* fold_comm_create_group with the context claimed. */
static int create_group(fold_context_t *ctx, int size, const int *ctx_ranks, int rank,
                        fold_oob_allgather_fn allgather, void *arg, fold_comm_t **newcomm)
{
    if (size < 1 || ctx_ranks == NULL || rank < 0 || rank >= size || allgather == NULL ||
        newcomm == NULL) {
        fold_error("fold_comm_create_group: invalid arguments (size %d, rank %d)", size, rank);
        return FOLD_ERR_INVALID_ARG;
    }
    for (int i = 0; i < size; i++) {
        if (ctx_ranks[i] < 0 || ctx_ranks[i] >= ctx->bs.size) {
            fold_error("fold_comm_create_group: member %d is context rank %d, outside 0..%d",
                       i, ctx_ranks[i], ctx->bs.size - 1);
            return FOLD_ERR_INVALID_ARG;
        }
    }
    if (ctx_ranks[rank] != ctx->bs.rank) {
        fold_error("fold_comm_create_group: member %d should be this process (context rank "
                   "%d), not %d", rank, ctx->bs.rank, ctx_ranks[rank]);
        return FOLD_ERR_INVALID_ARG;
    }
    uint32_t *all = malloc((size_t)size * sizeof(*all)), id;
    if (all == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    oob_gather_t oob = {allgather, arg, ctx};
    int status = oob_gather_u32(&oob, fold_comm_ids_next_free(&ctx->comm_ids, 1), all);
    if (status != FOLD_OK) {
        fold_error("fold_comm_create_group: the out-of-band allgather failed");
    } else {
        status = agree_id(ctx, "fold_comm_create_group", all, size, oob_gather_u32, &oob, &id);
    }
    free(all);
    if (status != FOLD_OK) {
        return status;
    }
    fold_comm_t *c;
    status = fold_comm_create(ctx, size, rank, ctx_ranks, id, &c);
    if (status != FOLD_OK) {
        return status;
    }
    /* Its node state now, over the caller's allgather (an MPI layer's, already
     * connected), rather than at its first call over fold's transport, whose first
     * messages connect the peers first, which the first call on a communicator the
     * shim makes (an MPI_Comm_dup of the world) would pay on top of backing the new
     * segment's pages. */
    if (fold_comm_node_wanted(c, FOLD_COLL_ALLREDUCE) ||
        fold_comm_node_wanted(c, FOLD_COLL_REDUCE)) {
        status = node_setup(c, oob_allgather, &oob);
        if (status != FOLD_OK && status != FOLD_ERR_UNSUPPORTED) {
            fold_comm_destroy(c);
            return status;
        }
    }
    *newcomm = c;
    return FOLD_OK;
}

int fold_comm_create_group(fold_context_h ctx, int size, const int *ctx_ranks, int rank,
                           fold_oob_allgather_fn allgather, void *arg, fold_comm_h *newcomm)
{
    if (!fold_context_valid(ctx)) {
        return FOLD_ERR_NOT_INITIALIZED;
    }
    int status = fold_guard_enter(ctx, "fold_comm_create_group");
    if (status == FOLD_OK) {
        status = create_group(ctx, size, ctx_ranks, rank, allgather, arg, newcomm);
        fold_guard_leave(ctx);
    }
    return status;
}

int fold_comm_context_rank(fold_comm_h comm, int r, int *ctx_rank)
{
    if (!fold_comm_valid(comm)) {
        return FOLD_ERR_NOT_INITIALIZED;
    }
    if (r < 0 || r >= comm->size || ctx_rank == NULL) {
        return FOLD_ERR_INVALID_ARG;
    }
    *ctx_rank = fold_comm_ctx_rank(comm, r);
    return FOLD_OK;
}

int fold_comm_free(fold_comm_h *comm)
{
    if (comm == NULL || !fold_comm_valid(*comm)) {
        return FOLD_ERR_NOT_INITIALIZED;
    }
    fold_context_t *ctx = (*comm)->ctx;
    if (*comm == ctx->world) {
        fold_error("fold_comm_free: the world communicator is freed by fold_finalize");
        return FOLD_ERR_INVALID_ARG;
    }
    int status = fold_guard_enter(ctx, "fold_comm_free");
    if (status != FOLD_OK) {
        return status;
    }
    if ((*comm)->active_requests > 0) {
        fold_error("fold_comm_free: %d collectives still running on this communicator",
                   (*comm)->active_requests);
        status = FOLD_ERR_BUSY;
    } else {
        fold_comm_destroy(*comm);
        *comm = NULL;
    }
    fold_guard_leave(ctx);
    return status;
}
