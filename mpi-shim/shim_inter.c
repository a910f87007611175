/*
 * Intercommunicator MPI_Allreduce and MPI_Reduce in fold. MPI's semantics: in an
 * allreduce each group gets the reduction of the other group's inputs, in that
 * group's rank order; in a reduce the root passes MPI_ROOT, the rest of its group
 * MPI_PROC_NULL, and the other group's inputs are reduced to the root.
 *
 * On first use both groups build one fold communicator over their union, the first
 * group's ranks first, then the second's: MPI_Intercomm_merge orders them (the group
 * whose leader has the lower rank in MPI_COMM_WORLD passes high = 0), and the merged
 * communicator serves only as the creation's allgather, freed at once. fold_comm_split
 * of the union then gives each group its own fold communicator, in its own rank order.
 * A call then runs on fold's transports alone:
 *
 *   allreduce   each group reduces its inputs to its leader (its own communicator),
 *               then the first group's leader broadcasts its result over the union, and
 *               the second's leader its own: each process keeps the other group's
 *   reduce      the sending group reduces to its leader, which broadcasts over the
 *               union; the root keeps it
 *
 * Broadcasting over the union rather than to the other group alone costs a message
 * to the sender's own group, in exchange for one communicator per intercommunicator.
 * MPI_IN_PLACE is not defined on intercommunicators (MPI's error answers it), and
 * under MPI_THREAD_MULTIPLE these calls go to MPI (SHIM_ROUTE_INTERCOMM): fold's
 * broadcast has no non-blocking form to poll with the lock released (shim_run.c).
 */
#include "shim.h"

#include <stdlib.h>

/* The world rank of rank 0 of a group, or -1 where it is not in MPI_COMM_WORLD. */
static int leader_in_world(MPI_Group group)
{
    int zero = 0, world = MPI_UNDEFINED;
    if (PMPI_Group_translate_ranks(group, 1, &zero, shim.world_group, &world) !=
            MPI_SUCCESS ||
        world == MPI_UNDEFINED) {
        return -1;
    }
    return world;
}

/* Whether this process's group goes first: the one whose leader has the lower world
 * rank. Spawned groups see each other's leader as undefined and may both say yes;
 * MPI_Intercomm_merge orders them all the same, and the fold communicator is refused
 * (SHIM_ROUTE_FOREIGN), since it needs every member in MPI_COMM_WORLD. */
static int goes_first(MPI_Comm comm)
{
    MPI_Group local, remote;
    if (PMPI_Comm_group(comm, &local) != MPI_SUCCESS) {
        return 1;
    }
    if (PMPI_Comm_remote_group(comm, &remote) != MPI_SUCCESS) {
        PMPI_Group_free(&local);
        return 1;
    }
    int mine = leader_in_world(local), theirs = leader_in_world(remote);
    PMPI_Group_free(&local);
    PMPI_Group_free(&remote);
    return theirs < 0 || (mine >= 0 && mine < theirs);
}

/* Each group's own fold communicator, split from the union; every member agrees on
 * the outcome over the merged communicator. */
static int split_groups(MPI_Comm merged, shim_comm_t *r)
{
    shim_fold_lock();
    int status = fold_comm_split(r->fold, r->first ? 0 : 1, r->local_rank, &r->local);
    shim_fold_unlock();
    if (status != FOLD_OK) {
        shim_log("fold_comm_split of an intercommunicator's groups failed: %s",
                 fold_status_string(status));
    }
    int failed = status != FOLD_OK, any = 1;
    PMPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, merged);
    return !any;
}

static void free_record(shim_comm_t *r)
{
    shim_fold_lock();
    if (r->local != NULL) {
        fold_comm_free(&r->local);
    }
    if (r->fold != NULL) {
        fold_comm_free(&r->fold);
    }
    shim_fold_unlock();
    free(r);
}

shim_route_t shim_inter_create(MPI_Comm comm, const shim_comm_t **mapping)
{
    if (shim.thread_multiple) {
        shim_comm_refuse(comm, SHIM_ROUTE_INTERCOMM);
        return SHIM_ROUTE_INTERCOMM;
    }
    MPI_Comm merged;
    if (PMPI_Intercomm_merge(comm, !goes_first(comm), &merged) != MPI_SUCCESS) {
        shim_log("MPI_Intercomm_merge failed: the intercommunicator's calls go to MPI");
        shim_comm_refuse(comm, SHIM_ROUTE_COMM_FAILED);
        return SHIM_ROUTE_COMM_FAILED;
    }
    shim_comm_t *r = calloc(1, sizeof(*r));
    fold_comm_h fold = NULL;
    shim_route_t route = shim_comm_create_fold(merged, r != NULL, &fold);
    if (route == SHIM_ROUTE_FOLD) {
        r->fold = fold;
        r->inter = 1;
        PMPI_Comm_rank(merged, &r->rank);
        PMPI_Comm_size(merged, &r->size);
        PMPI_Comm_rank(comm, &r->local_rank);
        PMPI_Comm_size(comm, &r->local_size);
        PMPI_Comm_remote_size(comm, &r->remote_size);
        /* The merge put this group first exactly where its ranks kept their numbers. */
        r->first = r->rank == r->local_rank;
        if (!split_groups(merged, r)) {
            route = SHIM_ROUTE_COMM_FAILED;
        }
    }
    PMPI_Comm_free(&merged);
    if (route == SHIM_ROUTE_FOLD) {
        shim_comm_attach(comm, r);
        *mapping = r;
        return route;
    }
    if (r != NULL) {
        free_record(r);
    }
    shim_comm_refuse(comm, route);
    return route;
}

/* The union's rank of the first or the second group's leader. */
static int leader(const shim_comm_t *m, int first_group)
{
    return first_group ? 0 : m->first ? m->local_size : m->remote_size;
}

int shim_inter_run(const shim_fold_call_t *c)
{
    const shim_comm_t *m = c->mapping;
    size_t bytes = c->count * fold_dtype_size(c->dtype);
    /* This group's result at its leader; elsewhere what a broadcast brings that this
     * process does not keep. */
    void *scratch = bytes > 0 ? malloc(bytes) : NULL;
    if (bytes > 0 && scratch == NULL) {
        shim_log("no memory for %zu bytes of an intercommunicator's call", bytes);
        return FOLD_ERR_NO_MEMORY;
    }
    void *at_leader = m->local_rank == 0 ? scratch : NULL;
    int status = FOLD_OK;
    if (c->coll == SHIM_ALLREDUCE) {
        status = fold_reduce(c->sendbuf, at_leader, c->count, c->dtype, c->op, 0, m->local);
        for (int g = 0; g < 2 && status == FOLD_OK; g++) {
            int mine = (g == 0) == m->first;
            status = fold_bcast(mine ? scratch : c->recvbuf, c->count, c->dtype,
                                leader(m, g == 0), m->fold);
        }
    } else {
        int receiving = c->root == MPI_ROOT || c->root == MPI_PROC_NULL;
        if (!receiving) {
            status = fold_reduce(c->sendbuf, at_leader, c->count, c->dtype, c->op, 0, m->local);
        }
        int sender_first = receiving ? !m->first : m->first;
        if (status == FOLD_OK) {
            status = fold_bcast(c->root == MPI_ROOT ? c->recvbuf : scratch, c->count, c->dtype,
                                leader(m, sender_first), m->fold);
        }
    }
    free(scratch);
    return status;
}
