/*
 * MPICH's Fortran entry points that bypass the C ones. MPICH's mpif.h and `use mpi`
 * bindings, and its mpi_f08 reductions, call MPI_Init, MPI_Allreduce, MPI_Op_create,
 * ... which the shim serves; but its mpi_f08 MPI_Init, MPI_Init_thread and
 * MPI_Finalize call PMPI_* directly (MPICH 4.0), so a program using mpi_f08 would
 * never start fold. These run the real binding (dlsym(RTLD_NEXT)) around the shim's
 * start and stop. MPI_Op_free from mpi_f08 calls PMPI_Op_free as well: the shim
 * forgets the op first, as for C. mpi_f08's MPI_Op_create calls PMPI_Op_create, so
 * its ops are unknown to the shim and their calls go to MPI (reason op), as under
 * Open MPI. The error argument is optional in mpi_f08: it may be NULL.
 */
#define _GNU_SOURCE
#include "shim.h"

#include <dlfcn.h>

typedef void (*init_fn)(int *ierror);
typedef void (*init_thread_fn)(int *required, int *provided, int *ierror);
typedef void (*op_free_fn)(MPI_Op *op, int *ierror);

/* Whether the real MPI_Init binding succeeded: its ierror, or without one, whether
 * MPI is initialised now. */
static int init_succeeded(const int *ierror)
{
    int initialized = 0;
    if (ierror != NULL) {
        return *ierror == MPI_SUCCESS;
    }
    PMPI_Initialized(&initialized);
    return initialized;
}

SHIM_EXPORT void mpi_init_f08_(int *ierror)
{
    init_fn real = (init_fn)dlsym(RTLD_NEXT, "mpi_init_f08_");
    real(ierror);
    if (init_succeeded(ierror)) {
        shim_start();
    }
}

SHIM_EXPORT void mpi_init_thread_f08_(int *required, int *provided, int *ierror)
{
    init_thread_fn real = (init_thread_fn)dlsym(RTLD_NEXT, "mpi_init_thread_f08_");
    real(required, provided, ierror);
    if (init_succeeded(ierror)) {
        shim_start();
    }
}

SHIM_EXPORT void mpi_finalize_f08_(int *ierror)
{
    shim_stop();
    init_fn real = (init_fn)dlsym(RTLD_NEXT, "mpi_finalize_f08_");
    real(ierror);
}

SHIM_EXPORT void mpi_op_free_f08_(MPI_Op *op, int *ierror)
{
    shim_userop_forget(*op);   /* before MPI may hand the handle out again */
    op_free_fn real = (op_free_fn)dlsym(RTLD_NEXT, "mpi_op_free_f08_");
    real(op, ierror);
}
