/*
 * MPI_Op_create'd ops, run by fold. Each op the application creates (in C below, in
 * Fortran in shim_fortran.c) is registered with fold at once through
 * fold_op_create, in program order, so that the ranks' fold ops get the same values
 * (FOLD_CHECK compares them); its function calls the application's with MPI's
 * arguments: fold's count as len, and the datatype the application passed to the
 * call being served. That datatype is a thread-local set just before each fold call:
 * fold runs a request's reductions only inside calls on that request, on the thread
 * making them. fold's convention is MPI's (inout = in op inout, in holding the
 * lower ranks' contribution), and a non-commutative op (MPI_Op_commutative) makes
 * fold choose among the algorithms that keep the rank order.
 *
 * fold's count is MPI's: on a predefined type (or a dup or resized copy of one) fold
 * reduces elements of it; on a derived type of several elements without holes, which
 * may mix types (shim_types.c), fold reduces opaque elements of the type's size
 * (fold_dtype_opaque), which it splits between whole elements only, so the function
 * always gets whole elements of the application's datatype.
 *
 * The ops sit in a small hash table keyed by handle, guarded by a mutex: ops are
 * created and freed rarely, and a call looks one up once.
 */
#include "shim.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef void (*c_user_fn)(void *in, void *inout, int *len, MPI_Datatype *datatype);
typedef void (*fortran_user_fn)(void *in, void *inout, MPI_Fint *len, MPI_Fint *datatype);

typedef struct userop {
    struct userop *next;        /* in its bucket */
    MPI_Op         handle;
    void         (*fn)(void);   /* c_user_fn or fortran_user_fn */
    int            fortran;
    int            registered;  /* fold_op_create succeeded: fold is set */
    fold_op_t      fold;
} userop_t;

#define BUCKETS 64

static userop_t *buckets[BUCKETS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local MPI_Datatype call_datatype;

/* Handles are pointers (Open MPI) or integers (MPICH): hash their bytes. */
static userop_t **bucket_of(MPI_Op op)
{
    uint64_t key = 0;
    memcpy(&key, &op, sizeof(op) < sizeof(key) ? sizeof(op) : sizeof(key));
    return &buckets[(key * 0x9e3779b97f4a7c15ull) >> 58];
}

/* The entry's link in its bucket, or the bucket's end. Under the lock. */
static userop_t **find(MPI_Op op)
{
    userop_t **link = bucket_of(op);
    while (*link != NULL && (*link)->handle != op) {
        link = &(*link)->next;
    }
    return link;
}

static void run_user_fn(const void *in, void *inout, size_t count, fold_dtype_t dtype,
                        void *arg)
{
    (void)dtype;
    const userop_t *u = arg;
    MPI_Datatype datatype = call_datatype;   /* copies: the fn may write through them */
    /* MPI's in is not const; a user fn does not write it. */
    if (u->fortran) {
        MPI_Fint len = (MPI_Fint)count, fdatatype = PMPI_Type_c2f(datatype);
        ((fortran_user_fn)u->fn)((void *)in, inout, &len, &fdatatype);
    } else {
        int len = (int)count;
        ((c_user_fn)u->fn)((void *)in, inout, &len, &datatype);
    }
}

static void unregister(userop_t *u)
{
    if (u->registered) {
        fold_op_free(u->fold);
    }
    free(u);
}

void shim_userop_record(MPI_Op op, void (*fn)(void), int fortran)
{
    int commutative = 1;
    PMPI_Op_commutative(op, &commutative);
    userop_t *u = calloc(1, sizeof(*u));
    if (u == NULL) {
        return;   /* unknown to the shim: its calls go to MPI (SHIM_ROUTE_OP) */
    }
    *u = (userop_t){.handle = op, .fn = fn, .fortran = fortran};
    u->registered = fold_op_create(run_user_fn, u, commutative, &u->fold) == FOLD_OK;
    pthread_mutex_lock(&lock);
    userop_t **link = find(op);
    userop_t *stale = *link;   /* a handle freed where the shim could not see it */
    if (stale != NULL) {
        *link = stale->next;
    }
    u->next = *bucket_of(op);
    *bucket_of(op) = u;
    pthread_mutex_unlock(&lock);
    if (stale != NULL) {
        unregister(stale);
    }
}

void shim_userop_forget(MPI_Op op)
{
    pthread_mutex_lock(&lock);
    userop_t **link = find(op);
    userop_t *u = *link;
    if (u != NULL) {
        *link = u->next;
    }
    pthread_mutex_unlock(&lock);
    if (u != NULL) {
        unregister(u);
    }
}

void shim_userop_clear(void)
{
    pthread_mutex_lock(&lock);
    for (int b = 0; b < BUCKETS; b++) {
        while (buckets[b] != NULL) {
            userop_t *u = buckets[b];
            buckets[b] = u->next;
            unregister(u);
        }
    }
    pthread_mutex_unlock(&lock);
}

shim_route_t shim_userop_get(MPI_Op op, fold_op_t *fop)
{
    pthread_mutex_lock(&lock);
    const userop_t *u = *find(op);
    shim_route_t route = u == NULL        ? SHIM_ROUTE_OP
                       : !u->registered   ? SHIM_ROUTE_USER_OP
                                          : SHIM_ROUTE_FOLD;
    if (route == SHIM_ROUTE_FOLD) {
        *fop = u->fold;
    }
    pthread_mutex_unlock(&lock);
    return route;
}

void shim_userop_set_datatype(MPI_Datatype datatype)
{
    call_datatype = datatype;
}

SHIM_EXPORT int MPI_Op_create(MPI_User_function *fn, int commute, MPI_Op *op)
{
    int rc = PMPI_Op_create(fn, commute, op);
    if (rc == MPI_SUCCESS) {
        shim_userop_record(*op, (void (*)(void))fn, 0);
    }
    return rc;
}

SHIM_EXPORT int MPI_Op_free(MPI_Op *op)
{
    if (op != NULL) {
        shim_userop_forget(*op);   /* before MPI may hand the handle out again */
    }
    return PMPI_Op_free(op);
}
