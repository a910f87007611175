/*
 * fold_info -L: the launcher fold_init would meet here (a PMIx server, Slurm, Open
 * MPI), the bootstrap it would take, the node as the launcher and hwloc describe it,
 * and the MPI library the shim was built for. Read from the environment only: it
 * starts nothing.
 */
#include "fold_info_launcher.h"

#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

#ifdef FOLD_INFO_SHIM_MPI
const char *fold_info_shim_mpi(void);   /* fold_info_shim_mpi.c */
#endif
#ifdef FOLD_INFO_SHIM_MPICH
const char *fold_info_shim_mpich(void);   /* the same, against MPICH's mpi.h */
#endif

/* The value of the first variable whose name starts with prefix, or NULL. */
static const char *env_prefixed(const char *prefix, const char **name)
{
    size_t n = strlen(prefix);
    for (char **e = environ; e != NULL && *e != NULL; e++) {
        if (strncmp(*e, prefix, n) == 0 && strchr(*e, '=') != NULL) {
            *name = *e;
            return strchr(*e, '=') + 1;
        }
    }
    return NULL;
}

static const char *env_or(const char *name, const char *fallback)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' ? v : fallback;
}

static void print_launcher_line(void)
{
    if (getenv("SLURM_JOB_ID") != NULL) {
        printf("#   launcher:     Slurm, job %s step %s, task %s of %s (SLURM_MPI_TYPE=%s)\n",
               env_or("SLURM_JOB_ID", "?"), env_or("SLURM_STEP_ID", "none"),
               env_or("SLURM_PROCID", "?"), env_or("SLURM_NTASKS", "?"),
               env_or("SLURM_MPI_TYPE", "unset; srun --mpi=pmix starts a PMIx server"));
    } else if (getenv("OMPI_COMM_WORLD_SIZE") != NULL) {
        printf("#   launcher:     Open MPI's mpirun, rank %s of %s\n",
               env_or("OMPI_COMM_WORLD_RANK", "?"), env_or("OMPI_COMM_WORLD_SIZE", "?"));
    } else if (getenv("PMI_RANK") != NULL || getenv("PMI_FD") != NULL) {
        printf("#   launcher:     a PMI-1/PMI-2 launcher (MPICH's Hydra?), which fold does not "
               "speak: use its MPI shim or an out-of-band allgather\n");
    } else {
        printf("#   launcher:     none found (run under mpirun or srun --mpi=pmix)\n");
    }
}

static void print_bootstrap_line(void)
{
    const char *uri_name = NULL;
    const char *uri = env_prefixed("PMIX_SERVER_URI", &uri_name);
    const char *ns = getenv("PMIX_NAMESPACE");
    if (uri != NULL && ns != NULL) {
        printf("#   PMIx server:  found (namespace %s, rank %s)\n", ns, env_or("PMIX_RANK", "?"));
        printf("#   fold_init:    bootstraps through PMIx (transport addresses published and "
               "fetched on first use)\n");
    } else {
        printf("#   PMIx server:  not found\n");
        printf("#   fold_init:    fails unless given an out-of-band allgather (params.oob; "
               "fold_perf and the MPI shim pass MPI_Allgather)\n");
    }
}

/* Ranks on this node by the launcher's word, and the machine by hwloc's. */
static void print_node_lines(void)
{
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (local == NULL) {
        local = getenv("SLURM_NTASKS_PER_NODE");
    }
    if (local == NULL) {
        local = getenv("SLURM_TASKS_PER_NODE");
    }
    printf("#   this node:    %s ranks by the launcher", local != NULL ? local : "?");
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) == 0 && hwloc_topology_load(t) == 0) {
        printf("; %d socket(s), %d core(s), %d hardware thread(s) by hwloc",
               hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE),
               hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE),
               hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU));
        hwloc_topology_destroy(t);
    }
    printf("\n#   leaders:      one per socket in turn, as many as the model picks for the "
           "size (FOLD_DPML_LEADERS forces them); fold_info -S NODESxPPN shows the choice\n");
}

void fold_info_print_launcher(void)
{
    printf("#\n# Launcher and bootstrap (from this process's environment)\n#\n");
    print_launcher_line();
    print_bootstrap_line();
    print_node_lines();
#ifdef FOLD_INFO_SHIM_MPI
    printf("#   MPI shim:     libfold-mpi.so, built for %s\n", fold_info_shim_mpi());
#else
    printf("#   MPI shim:     not built (no MPI found when configuring)\n");
#endif
#ifdef FOLD_INFO_SHIM_MPICH
    printf("#   MPICH shim:   libfold-mpich.so, built for %s\n", fold_info_shim_mpich());
#endif
}
