/*
 * PMIx bootstrap: rank, size and host from the PMIx server that launched us
 * (mpirun, srun, prterun), an allgather built from put + commit + fence with
 * data collection + get from every rank, and a directory: put + commit now, get of
 * one rank's value when it is needed (the launcher's server holds the values).
 */
#include "bootstrap.h"
#include "log.h"

#include <ctype.h>
#include <fold/fold_status.h>
#include <pmix.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct bootstrap_pmix {
    pmix_proc_t proc;
    /* Every key starts with "fold.<instance>.": a process may run several contexts
     * through PMIx, which share one namespace of keys per process. Contexts are made
     * in the same order on every rank, so the instance numbers agree. */
    unsigned    instance;
    /* Each allgather uses a fresh key: a reused one could be answered from data
     * a peer cached for the previous call. */
    unsigned    next_key;
} bootstrap_pmix_t;

/* PMIx bootstraps this process has made, numbering their keys apart. */
static atomic_uint bootstrap_pmix_instances;

/* NAME as this bootstrap's key: "fold.<instance>.NAME". */
static void bootstrap_pmix_key(const bootstrap_pmix_t *impl, const char *name, char *key,
                               size_t len)
{
    snprintf(key, len, "fold.%u.%s", impl->instance, name);
}

static pmix_proc_t bootstrap_pmix_peer(const bootstrap_pmix_t *impl, pmix_rank_t rank)
{
    pmix_proc_t proc;
    PMIX_LOAD_PROCID(&proc, impl->proc.nspace, rank);
    return proc;
}

/* Gathers into a scratch buffer first, so that out is written only on success. */
static int bootstrap_pmix_get_all(fold_bootstrap_t *bs, const char *key, void *out, size_t len)
{
    bootstrap_pmix_t *impl = bs->impl;
    char *gathered = malloc((size_t)bs->size * len);
    if (gathered == NULL) {
        fold_error("pmix: out of memory for a %d x %zu-byte allgather", bs->size, len);
        return FOLD_ERR_NO_MEMORY;
    }

    for (int r = 0; r < bs->size; r++) {
        pmix_proc_t peer = bootstrap_pmix_peer(impl, (pmix_rank_t)r);
        pmix_value_t *value = NULL;
        pmix_status_t rc = PMIx_Get(&peer, key, NULL, 0, &value);
        if (rc != PMIX_SUCCESS) {
            fold_error("pmix: PMIx_Get(%s) from rank %d failed: %s", key, r,
                       PMIx_Error_string(rc));
            free(gathered);
            return FOLD_ERR_BOOTSTRAP;
        }
        if (value->type != PMIX_BYTE_OBJECT || value->data.bo.size != len) {
            fold_error("pmix: rank %d contributed %zu bytes to %s, expected %zu "
                       "(mismatched allgather calls)", r,
                       value->type == PMIX_BYTE_OBJECT ? value->data.bo.size : 0, key, len);
            PMIX_VALUE_RELEASE(value);
            free(gathered);
            return FOLD_ERR_BOOTSTRAP;
        }
        memcpy(gathered + (size_t)r * len, value->data.bo.bytes, len);
        PMIX_VALUE_RELEASE(value);
    }

    memcpy(out, gathered, (size_t)bs->size * len);
    free(gathered);
    return FOLD_OK;
}

static int bootstrap_pmix_allgather(fold_bootstrap_t *bs, const void *in, void *out, size_t len)
{
    bootstrap_pmix_t *impl = bs->impl;
    char key[PMIX_MAX_KEYLEN + 1];
    pmix_status_t rc;

    char name[32];
    snprintf(name, sizeof(name), "ag.%u", impl->next_key++);
    bootstrap_pmix_key(impl, name, key, sizeof(key));

    /* A zero-length allgather is a barrier: nothing to put or get. */
    if (len > 0) {
        pmix_value_t value;
        PMIX_VALUE_CONSTRUCT(&value);
        value.type          = PMIX_BYTE_OBJECT;
        value.data.bo.bytes = (char *)in;   /* PMIx_Put copies it */
        value.data.bo.size  = len;
        rc = PMIx_Put(PMIX_GLOBAL, key, &value);
        if (rc != PMIX_SUCCESS) {
            fold_error("pmix: PMIx_Put(%s, %zu bytes) failed: %s", key, len,
                       PMIx_Error_string(rc));
            return FOLD_ERR_BOOTSTRAP;
        }
        rc = PMIx_Commit();
        if (rc != PMIX_SUCCESS) {
            fold_error("pmix: PMIx_Commit failed: %s", PMIx_Error_string(rc));
            return FOLD_ERR_BOOTSTRAP;
        }
    }

    pmix_proc_t all = bootstrap_pmix_peer(impl, PMIX_RANK_WILDCARD);
    pmix_info_t info;
    bool collect = true;
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    rc = PMIx_Fence(&all, 1, &info, 1);
    PMIX_INFO_DESTRUCT(&info);
    if (rc != PMIX_SUCCESS) {
        fold_error("pmix: PMIx_Fence failed: %s", PMIx_Error_string(rc));
        return FOLD_ERR_BOOTSTRAP;
    }

    return len > 0 ? bootstrap_pmix_get_all(bs, key, out, len) : FOLD_OK;
}

static int bootstrap_pmix_publish(fold_bootstrap_t *bs, const char *name, const void *data,
                                  size_t len)
{
    char key[PMIX_MAX_KEYLEN + 1];
    bootstrap_pmix_key(bs->impl, name, key, sizeof(key));
    pmix_value_t value;
    PMIX_VALUE_CONSTRUCT(&value);
    value.type          = PMIX_BYTE_OBJECT;
    value.data.bo.bytes = (char *)data;   /* PMIx_Put copies it */
    value.data.bo.size  = len;
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key, &value);
    if (rc == PMIX_SUCCESS) {
        rc = PMIx_Commit();
    }
    if (rc != PMIX_SUCCESS) {
        fold_error("pmix: publishing %s (%zu bytes) failed: %s", key, len,
                   PMIx_Error_string(rc));
        return FOLD_ERR_BOOTSTRAP;
    }
    return FOLD_OK;
}

static int bootstrap_pmix_lookup(fold_bootstrap_t *bs, int rank, const char *name, void **data,
                                 size_t *len)
{
    char key[PMIX_MAX_KEYLEN + 1];
    bootstrap_pmix_key(bs->impl, name, key, sizeof(key));
    pmix_proc_t peer = bootstrap_pmix_peer(bs->impl, (pmix_rank_t)rank);
    pmix_value_t *value = NULL;
    pmix_status_t rc = PMIx_Get(&peer, key, NULL, 0, &value);
    if (rc != PMIX_SUCCESS) {
        fold_error("pmix: PMIx_Get(%s) of rank %d failed: %s", key, rank, PMIx_Error_string(rc));
        return FOLD_ERR_BOOTSTRAP;
    }
    int status = FOLD_OK;
    if (value->type != PMIX_BYTE_OBJECT || value->data.bo.size == 0) {
        fold_error("pmix: rank %d published no bytes under %s", rank, key);
        status = FOLD_ERR_BOOTSTRAP;
    } else if ((*data = malloc(value->data.bo.size)) == NULL) {
        status = FOLD_ERR_NO_MEMORY;
    } else {
        memcpy(*data, value->data.bo.bytes, value->data.bo.size);
        *len = value->data.bo.size;
    }
    PMIX_VALUE_RELEASE(value);
    return status;
}

static void bootstrap_pmix_finalize(fold_bootstrap_t *bs)
{
    pmix_status_t rc = PMIx_Finalize(NULL, 0);
    if (rc != PMIX_SUCCESS) {
        fold_warn("pmix: PMIx_Finalize failed: %s", PMIx_Error_string(rc));
    }
    free(bs->impl);
    bs->impl = NULL;
}

static int bootstrap_pmix_job_size(const bootstrap_pmix_t *impl, int *size)
{
    pmix_proc_t job = bootstrap_pmix_peer(impl, PMIX_RANK_WILDCARD);
    pmix_value_t *value = NULL;
    pmix_status_t rc = PMIx_Get(&job, PMIX_JOB_SIZE, NULL, 0, &value);
    if (rc != PMIX_SUCCESS) {
        fold_error("pmix: cannot get the job size: %s", PMIx_Error_string(rc));
        return FOLD_ERR_BOOTSTRAP;
    }
    if (value->type != PMIX_UINT32 || value->data.uint32 == 0 ||
        value->data.uint32 > INT32_MAX) {
        fold_error("pmix: unusable job size (type %d)", (int)value->type);
        PMIX_VALUE_RELEASE(value);
        return FOLD_ERR_BOOTSTRAP;
    }
    *size = (int)value->data.uint32;
    PMIX_VALUE_RELEASE(value);
    return FOLD_OK;
}

/* The PMIx host name, or the default node name when the server has none. */
static void bootstrap_pmix_node_name(const bootstrap_pmix_t *impl, char *buf, size_t len)
{
    pmix_info_t info;
    bool optional = true;   /* answer from local data only; do not wait on the server */
    pmix_value_t *value = NULL;

    PMIX_INFO_LOAD(&info, PMIX_OPTIONAL, &optional, PMIX_BOOL);
    pmix_status_t rc = PMIx_Get(&impl->proc, PMIX_HOSTNAME, &info, 1, &value);
    PMIX_INFO_DESTRUCT(&info);

    if (rc == PMIX_SUCCESS && value->type == PMIX_STRING && value->data.string != NULL &&
        value->data.string[0] != '\0') {
        snprintf(buf, len, "%s", value->data.string);
    } else {
        fold_debug("pmix: no host name (%s); using the local node name",
                   PMIx_Error_string(rc));
        fold_bootstrap_default_node_name(buf, len);
    }
    if (rc == PMIX_SUCCESS) {
        PMIX_VALUE_RELEASE(value);
    }
}

/* The namespace names the job. It goes into shared-memory segment names, so keep
 * it to portable characters, and hash it when it is too long to fit. */
static void bootstrap_pmix_job_id(const bootstrap_pmix_t *impl, char *buf, size_t len)
{
    const char *nspace = impl->proc.nspace;
    size_t n = strnlen(nspace, PMIX_MAX_NSLEN);

    if (n + 1 > len) {
        uint64_t hash = UINT64_C(14695981039346656037);   /* FNV-1a */
        for (size_t i = 0; i < n; i++) {
            hash = (hash ^ (unsigned char)nspace[i]) * UINT64_C(1099511628211);
        }
        snprintf(buf, len, "pmix-%016llx", (unsigned long long)hash);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)nspace[i];
        buf[i] = (isalnum(c) || c == '-' || c == '_' || c == '.') ? (char)c : '_';
    }
    buf[n] = '\0';
}

int fold_bootstrap_pmix_init(fold_bootstrap_t *bs)
{
    fold_bootstrap_t result;
    pmix_status_t rc;
    int status;

    bootstrap_pmix_t *impl = calloc(1, sizeof(*impl));
    if (impl == NULL) {
        fold_error("pmix: out of memory");
        return FOLD_ERR_NO_MEMORY;
    }

    rc = PMIx_Init(&impl->proc, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        fold_error("pmix: PMIx_Init failed: %s. Start the program with a PMIx launcher "
                   "(e.g. mpirun, srun --mpi=pmix), or give fold an out-of-band allgather",
                   PMIx_Error_string(rc));
        status = FOLD_ERR_BOOTSTRAP;
        goto err_free;
    }

    impl->instance = atomic_fetch_add(&bootstrap_pmix_instances, 1);
    memset(&result, 0, sizeof(result));
    status = bootstrap_pmix_job_size(impl, &result.size);
    if (status != FOLD_OK) {
        goto err_finalize;
    }
    if (impl->proc.rank >= (pmix_rank_t)result.size) {
        fold_error("pmix: rank %u outside a job of %d", impl->proc.rank, result.size);
        status = FOLD_ERR_BOOTSTRAP;
        goto err_finalize;
    }

    result.rank      = (int)impl->proc.rank;
    result.allgather = bootstrap_pmix_allgather;
    result.finalize  = bootstrap_pmix_finalize;
    result.publish   = bootstrap_pmix_publish;
    result.lookup    = bootstrap_pmix_lookup;
    result.impl      = impl;
    bootstrap_pmix_node_name(impl, result.node_name, sizeof(result.node_name));
    bootstrap_pmix_job_id(impl, result.job_id, sizeof(result.job_id));

    *bs = result;
    return FOLD_OK;

err_finalize:
    PMIx_Finalize(NULL, 0);
err_free:
    free(impl);
    return status;
}
