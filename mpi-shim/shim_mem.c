/*
 * MPI_Alloc_mem and MPI_Free_mem: with FOLD_MPI_ALLOC_MEM=1 (rank 0's value, as every
 * variable) the memory comes from fold_mem_alloc, which the node's other ranks can
 * map: single copy then reads and writes a peer's buffers in it with memcpy instead
 * of the kernel's cross-memory attach. Off by default: a program that passes such
 * buffers on some ranks of a node and heap buffers on others, where that changes the
 * algorithm, gets a failed call (fold_mem_alloc in fold.h).
 */
#include "shim.h"

SHIM_EXPORT int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void *baseptr)
{
    void *p;
    if (!shim.running || !shim.config.alloc_mem || size <= 0 || baseptr == NULL ||
        fold_mem_alloc((size_t)size, &p) != FOLD_OK) {
        /* Off, a size MPI answers itself, or no fold memory left: the MPI library's. */
        return PMPI_Alloc_mem(size, info, baseptr);
    }
    *(void **)baseptr = p;
    shim_stats_alloc_mem((size_t)size);
    return MPI_SUCCESS;
}

/* Either kind, whether or not fold still runs (fold memory needs no context). */
SHIM_EXPORT int MPI_Free_mem(void *base)
{
    if (base != NULL && fold_mem_contains(base)) {
        return fold_mem_free(base) == FOLD_OK ? MPI_SUCCESS : MPI_ERR_ARG;
    }
    return PMPI_Free_mem(base);
}
