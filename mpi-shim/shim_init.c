/*
 * The MPI start and end points: fold starts right after the MPI library and stops
 * right before it. Communicator free is hooked through the attribute delete
 * callback (shim_comm.c), which MPI_Comm_free and MPI_Comm_disconnect both run.
 */
#include "shim.h"

SHIM_EXPORT int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS) {
        shim_start();
    }
    return rc;
}

SHIM_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS) {
        shim_start();
    }
    return rc;
}

SHIM_EXPORT int MPI_Finalize(void)
{
    shim_stop();
    return PMPI_Finalize();
}
