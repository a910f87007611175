/*
 * In-memory bootstrap for tests: `size` threads of one process, each calling
 * fold_bootstrap_mem_init with its rank. The allgather is a two-barrier exchange
 * through a shared buffer.
 */
#include "bootstrap.h"

#include <fold/fold_status.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct mem_group {
    int               size;
    pthread_barrier_t barrier;
    pthread_mutex_t   lock;
    char             *buf;
    size_t            buf_len;
} mem_group_t;

void *fold_bootstrap_mem_group_create(int size)
{
    mem_group_t *g = calloc(1, sizeof(*g));
    if (g == NULL) {
        return NULL;
    }
    g->size = size;
    pthread_barrier_init(&g->barrier, NULL, (unsigned)size);
    pthread_mutex_init(&g->lock, NULL);
    return g;
}

void fold_bootstrap_mem_group_destroy(void *group)
{
    mem_group_t *g = group;
    if (g == NULL) {
        return;
    }
    pthread_barrier_destroy(&g->barrier);
    pthread_mutex_destroy(&g->lock);
    free(g->buf);
    free(g);
}

static int mem_allgather(fold_bootstrap_t *bs, const void *in, void *out, size_t len)
{
    mem_group_t *g = bs->impl;
    size_t total = len * (size_t)g->size;

    pthread_mutex_lock(&g->lock);
    if (g->buf_len < total) {
        char *b = realloc(g->buf, total);
        if (b != NULL) {
            g->buf     = b;
            g->buf_len = total;
        }
    }
    int ok = g->buf_len >= total;
    if (ok && len > 0) {
        memcpy(g->buf + (size_t)bs->rank * len, in, len);
    }
    pthread_mutex_unlock(&g->lock);

    pthread_barrier_wait(&g->barrier);       /* every contribution is in */
    if (ok && len > 0) {
        memcpy(out, g->buf, total);
    }
    pthread_barrier_wait(&g->barrier);       /* nobody overwrites before all read */
    return ok ? FOLD_OK : FOLD_ERR_NO_MEMORY;
}

static void mem_finalize(fold_bootstrap_t *bs)
{
    bs->impl = NULL;
}

int fold_bootstrap_mem_init(fold_bootstrap_t *bs, void *group, int rank)
{
    mem_group_t *g = group;
    if (g == NULL || rank < 0 || rank >= g->size) {
        return FOLD_ERR_INVALID_ARG;
    }
    memset(bs, 0, sizeof(*bs));
    bs->rank      = rank;
    bs->size      = g->size;
    bs->allgather = mem_allgather;
    bs->finalize  = mem_finalize;
    bs->impl      = g;
    snprintf(bs->node_name, sizeof(bs->node_name), "loopback-node");
    snprintf(bs->job_id, sizeof(bs->job_id), "mem-%p", group);
    return FOLD_OK;
}
