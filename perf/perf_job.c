/*
 * The tools' life as processes of a job (perf_job.h).
 */
#include "perf_job.h"
#include "perf_mpi.h"

#include <stdio.h>
#include <stdlib.h>

int perf_launcher_rank(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                       "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        if (v != NULL && *v != '\0') {
            return atoi(v);
        }
    }
    return 0;
}

int perf_init_fold(int use_mpi, const char *transport, fold_context_h *ctx)
{
    fold_context_params_t params;
    fold_context_params_init(&params);
    if (transport != NULL && transport[0] != '\0') {
        params.transport = transport;
    }
    if (use_mpi) {
        int rank, size;
        if (perf_mpi_init(NULL, NULL, &rank, &size) != 0) {
            return FOLD_ERR_BOOTSTRAP;
        }
        params.oob.allgather = perf_mpi_oob_allgather;
        params.oob.arg       = NULL;
        params.oob.rank      = rank;
        params.oob.size      = size;
    }
    return fold_init(&params, ctx);
}

void perf_fail_job(int code)
{
    fflush(stdout);
    if (perf_mpi_initialized()) {
        perf_mpi_abort(code);
    }
    exit(code);
}
