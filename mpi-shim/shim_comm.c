/*
 * MPI communicator -> fold communicator, made on the first reduction that needs it
 * and cached on the MPI communicator as an attribute. The attribute's delete
 * callback frees fold's communicator with the MPI one; MPI_Comm_dup does not copy it
 * (each MPI communicator gets its own fold communicator and message tags).
 * MPI_COMM_WORLD is fold's world communicator and needs no attribute. An
 * intercommunicator maps to a fold communicator over both its groups (shim_inter.c).
 *
 * Creation is collective over the communicator: its members translate their group
 * to world ranks (= fold context ranks) and call fold_comm_create_group with an
 * allgather over the communicator itself. Everything that decides the outcome is
 * agreed by all members, so they all end up on the same path (fold or PMPI).
 *
 * The attribute is a shim_comm_t for a served communicator, or, for one that is not,
 * just the reason as a small integer: recording a refusal then needs no memory, and
 * cannot fail on one member only.
 */
#include "shim.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

static shim_comm_t world;

/* One creation at a time per process: fold_comm_create_group picks the new
 * communicator's id from the context's next free id. */
static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;

void shim_comm_start(void)
{
    shim_fold_lock();
    world = (shim_comm_t){.fold = fold_comm_world(shim.ctx), .rank = shim.world_rank,
                          .size = shim.world_size};
    shim_fold_unlock();
}

static int is_reason(const void *attr)
{
    return (uintptr_t)attr < SHIM_ROUTE_COUNT;
}

int shim_comm_delete(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    (void)comm;
    (void)keyval;
    (void)extra;
    if (is_reason(attr)) {
        return MPI_SUCCESS;
    }
    shim_comm_t *record = attr;
    shim_fold_lock();
    if (shim.running) {   /* else fold_finalize has freed them */
        if (record->local != NULL) {
            fold_comm_free(&record->local);
        }
        fold_comm_free(&record->fold);
    }
    shim_fold_unlock();
    free(record);
    return MPI_SUCCESS;
}

void shim_comm_attach(MPI_Comm comm, shim_comm_t *record)
{
    if (PMPI_Comm_set_attr(comm, shim.comm_keyval, record) != MPI_SUCCESS) {
        shim_log("MPI_Comm_set_attr failed; this communicator's members may disagree");
    }
}

void shim_comm_refuse(MPI_Comm comm, shim_route_t why)
{
    if (PMPI_Comm_set_attr(comm, shim.comm_keyval, (void *)(uintptr_t)why) != MPI_SUCCESS) {
        shim_log("MPI_Comm_set_attr failed; this communicator's members may disagree");
    }
}

/* Every member's world rank, in communicator order; 0 if some member is not in
 * MPI_COMM_WORLD (a spawned or connected process). */
static int world_ranks(MPI_Comm comm, int size, int *members)
{
    MPI_Group group;
    int *ranks = malloc((size_t)size * sizeof(int));
    int ok = ranks != NULL && PMPI_Comm_group(comm, &group) == MPI_SUCCESS;
    if (ok) {
        for (int i = 0; i < size; i++) {
            ranks[i] = i;
        }
        ok = PMPI_Group_translate_ranks(group, size, ranks, shim.world_group, members) ==
             MPI_SUCCESS;
        PMPI_Group_free(&group);
    }
    for (int i = 0; ok && i < size; i++) {
        ok = members[i] != MPI_UNDEFINED;
    }
    free(ranks);
    return ok;
}

/* The allgather fold_comm_create_group uses to agree on an id. It releases the fold
 * lock while it waits, so that other threads' collectives keep moving: the context
 * is not touched during the allgather, and create_lock keeps other creations out. */
static int comm_allgather(const void *sendbuf, void *recvbuf, size_t len, void *arg)
{
    MPI_Comm comm = *(MPI_Comm *)arg;
    shim_fold_unlock();
    int rc = PMPI_Allgather((void *)sendbuf, (int)len, MPI_BYTE, recvbuf, (int)len, MPI_BYTE,
                            comm);
    shim_fold_lock();
    return rc == MPI_SUCCESS ? 0 : -1;
}

/* What each member brings to a creation, worst last; the members agree on the worst
 * before anybody starts. */
enum { READY, BUSY, NO_MEMORY, FOREIGN };

static shim_route_t route_of(int state)
{
    switch (state) {
    case BUSY:    return SHIM_ROUTE_COMM_BUSY;
    case FOREIGN: return SHIM_ROUTE_FOREIGN;
    default:      return SHIM_ROUTE_COMM_FAILED;
    }
}

static int worst_of_members(MPI_Comm comm, int mine)
{
    int worst = mine;
    PMPI_Allreduce(&mine, &worst, 1, MPI_INT, MPI_MAX, comm);
    return worst;
}

/* Under MPI_THREAD_MULTIPLE a member that is already creating another communicator
 * says BUSY: the call goes to MPI and the next one tries again. Waiting on create_lock
 * instead could deadlock two threads that first use two communicators in opposite
 * orders on two processes. */
shim_route_t shim_comm_create_fold(MPI_Comm comm, int ready, fold_comm_h *made)
{
    int size, rank;
    PMPI_Comm_size(comm, &size);
    PMPI_Comm_rank(comm, &rank);
    int *members = malloc((size_t)size * sizeof(int));
    int locked = shim.thread_multiple ? pthread_mutex_trylock(&create_lock) == 0
                                      : pthread_mutex_lock(&create_lock) == 0;
    int mine = !ready || members == NULL ? NO_MEMORY
             : !world_ranks(comm, size, members) ? FOREIGN : !locked ? BUSY : READY;
    int worst = worst_of_members(comm, mine);
    fold_comm_h fold = NULL;
    if (worst == READY) {
        shim_fold_lock();
        int status = fold_comm_create_group(shim.ctx, size, members, rank, comm_allgather,
                                            &comm, &fold);
        shim_fold_unlock();
        if (status != FOLD_OK) {
            shim_log("fold_comm_create_group failed: %s", fold_status_string(status));
        }
        /* A member that failed would sit in PMPI while the others run fold. */
        worst = worst_of_members(comm, status == FOLD_OK ? READY : NO_MEMORY);
    }
    if (locked) {
        pthread_mutex_unlock(&create_lock);
    }
    free(members);
    if (worst == READY) {
        *made = fold;
        return SHIM_ROUTE_FOLD;
    }
    if (fold != NULL) {
        shim_fold_lock();
        fold_comm_free(&fold);
        shim_fold_unlock();
    }
    return route_of(worst);
}

/* Creates the fold communicator of an intracommunicator and caches it on comm. */
static shim_route_t create(MPI_Comm comm, const shim_comm_t **mapping)
{
    shim_comm_t *record = calloc(1, sizeof(*record));
    fold_comm_h fold = NULL;
    shim_route_t route = shim_comm_create_fold(comm, record != NULL, &fold);
    if (route == SHIM_ROUTE_FOLD) {
        record->fold = fold;
        PMPI_Comm_rank(comm, &record->rank);
        PMPI_Comm_size(comm, &record->size);
        shim_comm_attach(comm, record);
        *mapping = record;
        return route;
    }
    free(record);
    if (route != SHIM_ROUTE_COMM_BUSY) {   /* not recorded: the next call tries again */
        shim_comm_refuse(comm, route);
    }
    return route;
}

shim_route_t shim_comm_get(MPI_Comm comm, const shim_comm_t **mapping)
{
    if (comm == MPI_COMM_WORLD) {
        *mapping = &world;
        return SHIM_ROUTE_FOLD;
    }
    void *attr = NULL;
    int found = 0;
    PMPI_Comm_get_attr(comm, shim.comm_keyval, &attr, &found);
    if (found) {
        if (is_reason(attr)) {
            return (shim_route_t)(uintptr_t)attr;
        }
        *mapping = attr;
        return SHIM_ROUTE_FOLD;
    }
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    return inter ? shim_inter_create(comm, mapping) : create(comm, mapping);
}
