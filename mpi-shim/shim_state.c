/*
 * The process-wide state: fold's context, started right after MPI_Init over an
 * allgather on a private copy of MPI_COMM_WORLD (fold's ranks are then world ranks),
 * and stopped just before MPI_Finalize. fold_init and fold_finalize are collective,
 * so they live here rather than in the lazy per-communicator path.
 */
#include "shim.h"

#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

shim_state_t shim = {.boot_comm = MPI_COMM_NULL, .world_group = MPI_GROUP_NULL,
                     .comm_keyval = MPI_KEYVAL_INVALID};

static pthread_mutex_t fold_lock = PTHREAD_MUTEX_INITIALIZER;

/* Below MPI_THREAD_MULTIPLE only one thread is in MPI at a time: no lock needed. */
void shim_fold_lock(void)
{
    if (shim.thread_multiple) {
        pthread_mutex_lock(&fold_lock);
    }
}

void shim_fold_unlock(void)
{
    if (shim.thread_multiple) {
        pthread_mutex_unlock(&fold_lock);
    }
}

void shim_log(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "fold-mpi: rank %d: %s\n", shim.world_rank, line);
}

static int boot_allgather(const void *sendbuf, void *recvbuf, size_t len, void *arg)
{
    if (len > INT_MAX) {
        return -1;
    }
    MPI_Comm comm = *(MPI_Comm *)arg;
    /* MPI-2 headers take a non-const send buffer. */
    return PMPI_Allgather((void *)sendbuf, (int)len, MPI_BYTE, recvbuf, (int)len, MPI_BYTE,
                          comm) == MPI_SUCCESS ? 0 : -1;
}

/* fold_init on every rank; fold serves only if it started everywhere. */
static int start_fold(void)
{
    if (PMPI_Comm_dup(MPI_COMM_WORLD, &shim.boot_comm) != MPI_SUCCESS) {
        shim_log("MPI_Comm_dup(MPI_COMM_WORLD) failed; fold stays off");
        return 0;
    }
    fold_context_params_t params;
    fold_context_params_init(&params);
    params.oob.allgather = boot_allgather;
    params.oob.arg       = &shim.boot_comm;
    params.oob.rank      = shim.world_rank;
    params.oob.size      = shim.world_size;
    int status = fold_init(&params, &shim.ctx);
    if (status != FOLD_OK) {
        shim_log("fold_init failed: %s", fold_status_string(status));
    }
    int ok = status == FOLD_OK, all_ok = 0;
    PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, shim.boot_comm);
    if (!all_ok && ok) {
        /* fold_finalize would wait for the ranks that have no context: leave it. */
        shim_log("fold did not start on every rank; fold stays off");
        shim.ctx = NULL;
    }
    if (!all_ok) {
        PMPI_Comm_free(&shim.boot_comm);
    }
    return all_ok;
}

void shim_start(void)
{
    int level = MPI_THREAD_SINGLE;
    PMPI_Comm_rank(MPI_COMM_WORLD, &shim.world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &shim.world_size);
    PMPI_Query_thread(&level);
    shim.thread_multiple = level == MPI_THREAD_MULTIPLE;
    char refused[160];
    int nrefused = shim_config_load(&shim.config, shim.world_rank, refused, sizeof(refused));
    shim_config_t mine = shim.config;
    /* Rank 0's settings apply everywhere: ranks that disagreed on a threshold would
     * route one call differently and wait for each other forever. */
    PMPI_Bcast(&shim.config, (int)sizeof(shim.config), MPI_BYTE, 0, MPI_COMM_WORLD);
    /* Rank 0 warned about its own values; another rank speaks only where its own
     * environment was refused or differs, so that a job whose ranks share one
     * environment warns once. */
    if (shim.world_rank != 0 && nrefused > 0) {
        shim_log("ignoring %d FOLD_MPI_* value%s refused here (%s); rank 0's settings "
                 "apply on every rank", nrefused, nrefused > 1 ? "s" : "", refused);
    } else if (shim.world_rank != 0 && memcmp(&mine, &shim.config, sizeof(mine)) != 0) {
        shim_log("FOLD_MPI_* here differ from rank 0's; rank 0's settings apply on every "
                 "rank");
    }
    if (shim.config.verbose >= 2 && shim.world_rank == 0) {
        shim_config_print();
    }
    if (!shim.config.enable) {
        shim_stats_banner("off (FOLD_MPI_ENABLE=0): every call goes to the MPI library");
        return;
    }
    shim_types_init();
    shim_derived_start();
    if (!start_fold()) {
        shim_stats_banner("off: fold did not start; every call goes to the MPI library");
        return;
    }
    shim_comm_start();
    PMPI_Comm_group(MPI_COMM_WORLD, &shim.world_group);
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, shim_comm_delete, &shim.comm_keyval, NULL);
    shim.running = 1;
    shim_stats_banner(NULL);
}

void shim_stop(void)
{
    shim_stats_report();
    shim_userop_clear();
    shim_derived_stop();
    if (!shim.running) {
        return;
    }
    shim_fold_lock();
    shim.running = 0;
    int status = fold_finalize(shim.ctx);
    shim.ctx = NULL;
    shim_fold_unlock();
    if (status != FOLD_OK) {
        shim_log("fold_finalize failed: %s", fold_status_string(status));
    }
    /* fold_finalize freed every fold communicator. Attributes MPI_Finalize still
     * deletes (those on MPI_COMM_SELF) find running == 0 and free only their record. */
    PMPI_Comm_free_keyval(&shim.comm_keyval);
    PMPI_Group_free(&shim.world_group);
    PMPI_Comm_free(&shim.boot_comm);
}
