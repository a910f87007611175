/*
 * Out-of-band bootstrap: a hosting runtime (MPI, a job manager) supplies rank, size
 * and a blocking allgather; fold only wraps them.
 */
#include "bootstrap.h"
#include "log.h"

#include <fold/fold_status.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct bootstrap_oob {
    int  (*allgather)(const void *, void *, size_t, void *);
    void *arg;
} bootstrap_oob_t;

static int bootstrap_oob_allgather(fold_bootstrap_t *bs, const void *in, void *out, size_t len)
{
    bootstrap_oob_t *impl = bs->impl;
    int rc = impl->allgather(in, out, len, impl->arg);
    if (rc != 0) {
        fold_error("oob: the caller's allgather of %zu bytes failed (%d)", len, rc);
        return FOLD_ERR_BOOTSTRAP;
    }
    return FOLD_OK;
}

static void bootstrap_oob_finalize(fold_bootstrap_t *bs)
{
    free(bs->impl);
    bs->impl = NULL;
}

/* Rank 0 names the job ("hostname-pid-time") and everyone takes its name. */
static int bootstrap_oob_job_id(fold_bootstrap_t *bs, char *job_id, size_t len)
{
    char *mine = calloc(1, len);
    char *all = calloc((size_t)bs->size, len);
    int status = FOLD_ERR_NO_MEMORY;

    if (mine == NULL || all == NULL) {
        fold_error("oob: out of memory for the job id exchange");
        goto out;
    }
    if (bs->rank == 0) {
        char host[256];
        if (gethostname(host, sizeof(host)) != 0) {
            snprintf(host, sizeof(host), "unknown");
        }
        host[sizeof(host) - 1] = '\0';
        snprintf(mine, len, "%.32s-%ld-%lld", host, (long)getpid(), (long long)time(NULL));
    }

    status = bs->allgather(bs, mine, all, len);
    if (status == FOLD_OK) {
        memcpy(job_id, all, len);
        job_id[len - 1] = '\0';
    }
out:
    free(all);
    free(mine);
    return status;
}

int fold_bootstrap_oob_init(fold_bootstrap_t *bs,
                            int (*allgather)(const void *, void *, size_t, void *),
                            void *arg, int rank, int size)
{
    fold_bootstrap_t result;

    if (allgather == NULL || size <= 0 || rank < 0 || rank >= size) {
        fold_error("oob: invalid bootstrap (allgather %s, rank %d, size %d)",
                   allgather ? "set" : "NULL", rank, size);
        return FOLD_ERR_INVALID_ARG;
    }

    bootstrap_oob_t *impl = malloc(sizeof(*impl));
    if (impl == NULL) {
        fold_error("oob: out of memory");
        return FOLD_ERR_NO_MEMORY;
    }
    impl->allgather = allgather;
    impl->arg       = arg;

    memset(&result, 0, sizeof(result));
    result.rank      = rank;
    result.size      = size;
    result.allgather = bootstrap_oob_allgather;
    result.finalize  = bootstrap_oob_finalize;
    result.impl      = impl;
    fold_bootstrap_default_node_name(result.node_name, sizeof(result.node_name));

    int status = bootstrap_oob_job_id(&result, result.job_id, sizeof(result.job_id));
    if (status != FOLD_OK) {
        free(impl);
        return status;
    }

    *bs = result;
    return FOLD_OK;
}
