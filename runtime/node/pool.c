/*
 * The segment of the last communicator a process freed, kept mapped for the next
 * communicator of the same ranks. Backing a new segment's pages (posix_fallocate,
 * segment.c) is most of a node setup's cost, which a program that duplicates and
 * frees a communicator around a few calls would pay every time. A setup reuses the
 * kept segment on a node only where every rank of that node kept the very same one
 * (its nonce, shared when it was made), so they are the ranks that held it, and none
 * of them is still inside a call on it: each kept it when it freed its communicator,
 * and is now in the new one's setup (setup.c).
 *
 * One segment per context (a process may hold several, each with its own mapping:
 * the loopback harness runs every rank as a context in one process): a setup that
 * does not reuse it gives it back before it measures /dev/shm's budget, so a kept
 * segment never takes the room of a new one. Its name was unlinked when it was made,
 * so a killed process leaves nothing behind. The lock: a setup over a caller's
 * allgather lets other threads use the context meanwhile (comm.c).
 */
#include "node/node.h"

#include <pthread.h>
#include <string.h>

void fold_node_pool_init(fold_node_pool_t *pool)
{
    memset(pool, 0, sizeof(*pool));
    pthread_mutex_init(&pool->lock, NULL);
}

void fold_node_pool_destroy(fold_node_pool_t *pool)
{
    fold_node_pool_release(pool);
    pthread_mutex_destroy(&pool->lock);
}

void fold_node_pool_keep(fold_node_pool_t *pool, fold_shm_seg_t *seg, uint64_t nonce,
                         size_t seg_bytes, size_t shm_size)
{
    pthread_mutex_lock(&pool->lock);
    fold_shm_detach(&pool->seg);
    pool->seg       = *seg;
    pool->nonce     = nonce;
    pool->seg_bytes = seg_bytes;
    pool->shm_size  = shm_size;
    pthread_mutex_unlock(&pool->lock);
    memset(seg, 0, sizeof(*seg));
}

uint64_t fold_node_pool_offer(fold_node_pool_t *pool, int local_size, size_t shm_size)
{
    pthread_mutex_lock(&pool->lock);
    uint64_t nonce = pool->seg.base != NULL && pool->seg.local_size == local_size &&
                             pool->shm_size == shm_size
                         ? pool->nonce
                         : 0;
    pthread_mutex_unlock(&pool->lock);
    return nonce;
}

int fold_node_pool_take(fold_node_pool_t *pool, uint64_t nonce, fold_shm_seg_t *seg,
                        size_t *seg_bytes)
{
    pthread_mutex_lock(&pool->lock);
    int ok = pool->seg.base != NULL && pool->nonce == nonce;
    if (ok) {
        *seg       = pool->seg;
        *seg_bytes = pool->seg_bytes;
        memset(&pool->seg, 0, sizeof(pool->seg));
        pool->nonce = 0;
        pool->reuses++;
    }
    pthread_mutex_unlock(&pool->lock);
    return ok;
}

void fold_node_pool_release(fold_node_pool_t *pool)
{
    pthread_mutex_lock(&pool->lock);
    fold_shm_detach(&pool->seg);
    pool->nonce = 0;
    pthread_mutex_unlock(&pool->lock);
}
