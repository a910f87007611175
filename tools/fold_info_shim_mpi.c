/*
 * The MPI library the shim was built against, by its own header's macros; compiled
 * with MPI's include directories only (fold_info does not link MPI). Compiled once per
 * shim: FOLD_INFO_SHIM_MPI_FN names the copy (fold_info_shim_mpich for MPICH's).
 */
#include <mpi.h>
#include <stdio.h>

#ifndef FOLD_INFO_SHIM_MPI_FN
#define FOLD_INFO_SHIM_MPI_FN fold_info_shim_mpi
#endif

const char *FOLD_INFO_SHIM_MPI_FN(void);

const char *FOLD_INFO_SHIM_MPI_FN(void)
{
    static char text[96];
#if defined(OMPI_MAJOR_VERSION)
    snprintf(text, sizeof(text), "Open MPI %d.%d.%d (MPI %d.%d)", OMPI_MAJOR_VERSION,
             OMPI_MINOR_VERSION, OMPI_RELEASE_VERSION, MPI_VERSION, MPI_SUBVERSION);
#elif defined(MPICH_VERSION)
    snprintf(text, sizeof(text), "MPICH %s (MPI %d.%d)", MPICH_VERSION, MPI_VERSION,
             MPI_SUBVERSION);
#else
    snprintf(text, sizeof(text), "an MPI %d.%d library", MPI_VERSION, MPI_SUBVERSION);
#endif
    return text;
}
