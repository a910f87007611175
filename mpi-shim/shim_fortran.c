/*
 * Fortran entry points. Open MPI's Fortran bindings (mpif.h, use mpi, use mpi_f08)
 * call PMPI_* directly, so the C entry points never see a Fortran program's calls;
 * these take their place. MPI_INIT, MPI_INIT_THREAD and MPI_FINALIZE run the real
 * binding (found with dlsym(RTLD_NEXT)) around the shim's start and stop. A reduction
 * translates its handles and Fortran's MPI_IN_PLACE and goes through the C path, which
 * hands anything it does not serve to PMPI_Allreduce / PMPI_Reduce, as the real
 * binding would.
 *
 * MPI_OP_CREATE and MPI_OP_FREE run the real binding and record or forget the op
 * (shim_userop.c), whose function fold then calls with Fortran's arguments. Each
 * routine carries the four names Fortran compilers use (mpi_allreduce_, ...) and
 * Open MPI's internal ompi_allreduce_f, which its mpi_f08 module calls for most
 * routines. Not for MPI_Op_create: Open MPI's mpi_f08 calls pmpi_op_create_, which a
 * profiling library must leave alone, so the shim never sees mpi_f08's ops, and calls
 * with them go to MPI (reason op); their MPI_Op_free comes here all the same.
 * Fortran's MPI_IN_PLACE and MPI_BOTTOM are addresses of common blocks named by the
 * MPI library; without them (not Open MPI) every call goes to the real binding.
 */
#define _GNU_SOURCE
#include "shim.h"

#include <dlfcn.h>
#include <pthread.h>

typedef void (*init_fn)(MPI_Fint *ierr);
typedef void (*init_thread_fn)(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr);
typedef void (*allreduce_fn)(void *sendbuf, void *recvbuf, MPI_Fint *count,
                             MPI_Fint *datatype, MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr);
typedef void (*reduce_fn)(void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype,
                          MPI_Fint *op, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr);
/* commute is a Fortran LOGICAL, passed through untouched. */
typedef void (*op_create_fn)(void (*function)(void), void *commute, MPI_Fint *op,
                             MPI_Fint *ierr);
typedef void (*op_free_fn)(MPI_Fint *op, MPI_Fint *ierr);

/* The real binding: the first of the names this MPI library defines after us. */
static void *next_binding(const char *ompi_name, const char *name)
{
    void *fn = dlsym(RTLD_NEXT, ompi_name);
    return fn != NULL ? fn : dlsym(RTLD_NEXT, name);
}

/* Resolved once: the real reduction bindings and the library's Fortran sentinels. */
static struct {
    allreduce_fn allreduce;
    reduce_fn    reduce;
    const void  *in_place[4];
    const void  *bottom[4];
    int          sentinels_known;
} fortran;
static pthread_once_t fortran_once = PTHREAD_ONCE_INIT;

static void resolve(void)
{
    static const char *const in_place[4] = {"mpi_fortran_in_place_", "mpi_fortran_in_place",
                                            "mpi_fortran_in_place__", "MPI_FORTRAN_IN_PLACE"};
    static const char *const bottom[4] = {"mpi_fortran_bottom_", "mpi_fortran_bottom",
                                          "mpi_fortran_bottom__", "MPI_FORTRAN_BOTTOM"};
    fortran.allreduce = (allreduce_fn)next_binding("ompi_allreduce_f", "mpi_allreduce_");
    fortran.reduce = (reduce_fn)next_binding("ompi_reduce_f", "mpi_reduce_");
    int found_in_place = 0, found_bottom = 0;
    for (int i = 0; i < 4; i++) {
        fortran.in_place[i] = dlsym(RTLD_DEFAULT, in_place[i]);
        fortran.bottom[i] = dlsym(RTLD_DEFAULT, bottom[i]);
        found_in_place |= fortran.in_place[i] != NULL;
        found_bottom |= fortran.bottom[i] != NULL;
    }
    fortran.sentinels_known = found_in_place && found_bottom;
}

static int is_one_of(const void *addr, const void *const set[4])
{
    for (int i = 0; i < 4; i++) {
        if (set[i] != NULL && set[i] == addr) {
            return 1;
        }
    }
    return 0;
}

/* Fortran buffer -> C buffer; 0 when the C path cannot take it (MPI_BOTTOM). */
static int c_buffer(void *buf, const void **out)
{
    if (is_one_of(buf, fortran.bottom)) {
        return 0;
    }
    *out = is_one_of(buf, fortran.in_place) ? MPI_IN_PLACE : buf;
    return 1;
}

/* The call in C terms; 0 when it must go to the real binding. */
static int c_call(shim_coll_t coll, void *sendbuf, void *recvbuf, MPI_Fint *count,
                  MPI_Fint *datatype, MPI_Fint *op, MPI_Fint *root, MPI_Fint *comm,
                  shim_call_t *call)
{
    const void *send, *recv;
    pthread_once(&fortran_once, resolve);
    if (!shim.running || !fortran.sentinels_known || !c_buffer(sendbuf, &send) ||
        !c_buffer(recvbuf, &recv)) {
        return 0;
    }
    *call = (shim_call_t){coll, send, (void *)recv, (int)*count, PMPI_Type_f2c(*datatype),
                          PMPI_Op_f2c(*op), root != NULL ? (int)*root : 0,
                          PMPI_Comm_f2c(*comm)};
    return 1;
}

#define FORTRAN_NAMES(lower, upper, ompi)                                                  \
    SHIM_EXPORT __attribute__((alias(#lower "_"))) typeof(lower##_) lower;                 \
    SHIM_EXPORT __attribute__((alias(#lower "_"))) typeof(lower##_) lower##__;             \
    SHIM_EXPORT __attribute__((alias(#lower "_"))) typeof(lower##_) upper;                 \
    SHIM_EXPORT __attribute__((alias(#lower "_"))) typeof(lower##_) ompi;

SHIM_EXPORT void mpi_allreduce_(void *sendbuf, void *recvbuf, MPI_Fint *count,
                                MPI_Fint *datatype, MPI_Fint *op, MPI_Fint *comm,
                                MPI_Fint *ierr)
{
    shim_call_t call;
    if (c_call(SHIM_ALLREDUCE, sendbuf, recvbuf, count, datatype, op, NULL, comm, &call)) {
        *ierr = (MPI_Fint)shim_reduction(&call);
        return;
    }
    fortran.allreduce(sendbuf, recvbuf, count, datatype, op, comm, ierr);
}
FORTRAN_NAMES(mpi_allreduce, MPI_ALLREDUCE, ompi_allreduce_f)

SHIM_EXPORT void mpi_reduce_(void *sendbuf, void *recvbuf, MPI_Fint *count,
                             MPI_Fint *datatype, MPI_Fint *op, MPI_Fint *root, MPI_Fint *comm,
                             MPI_Fint *ierr)
{
    shim_call_t call;
    if (c_call(SHIM_REDUCE, sendbuf, recvbuf, count, datatype, op, root, comm, &call)) {
        *ierr = (MPI_Fint)shim_reduction(&call);
        return;
    }
    fortran.reduce(sendbuf, recvbuf, count, datatype, op, root, comm, ierr);
}
FORTRAN_NAMES(mpi_reduce, MPI_REDUCE, ompi_reduce_f)

SHIM_EXPORT void mpi_op_create_(void (*function)(void), void *commute, MPI_Fint *op,
                                MPI_Fint *ierr)
{
    op_create_fn real = (op_create_fn)next_binding("ompi_op_create_f", "mpi_op_create_");
    real(function, commute, op, ierr);
    if (*ierr == MPI_SUCCESS) {
        shim_userop_record(PMPI_Op_f2c(*op), function, 1);
    }
}
FORTRAN_NAMES(mpi_op_create, MPI_OP_CREATE, ompi_op_create_f)

SHIM_EXPORT void mpi_op_free_(MPI_Fint *op, MPI_Fint *ierr)
{
    shim_userop_forget(PMPI_Op_f2c(*op));   /* before MPI may hand the handle out again */
    op_free_fn real = (op_free_fn)next_binding("ompi_op_free_f", "mpi_op_free_");
    real(op, ierr);
}
FORTRAN_NAMES(mpi_op_free, MPI_OP_FREE, ompi_op_free_f)

SHIM_EXPORT void mpi_init_(MPI_Fint *ierr)
{
    init_fn real = (init_fn)next_binding("ompi_init_f", "mpi_init_");
    real(ierr);
    if (*ierr == MPI_SUCCESS) {
        shim_start();
    }
}
FORTRAN_NAMES(mpi_init, MPI_INIT, ompi_init_f)

SHIM_EXPORT void mpi_init_thread_(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr)
{
    init_thread_fn real = (init_thread_fn)next_binding("ompi_init_thread_f",
                                                       "mpi_init_thread_");
    real(required, provided, ierr);
    if (*ierr == MPI_SUCCESS) {
        shim_start();
    }
}
FORTRAN_NAMES(mpi_init_thread, MPI_INIT_THREAD, ompi_init_thread_f)

SHIM_EXPORT void mpi_finalize_(MPI_Fint *ierr)
{
    shim_stop();
    init_fn real = (init_fn)next_binding("ompi_finalize_f", "mpi_finalize_");
    real(ierr);
}
FORTRAN_NAMES(mpi_finalize, MPI_FINALIZE, ompi_finalize_f)
