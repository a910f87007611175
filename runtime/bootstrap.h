/*
 * Bootstrap: who am I, how many are we, and one blocking allgather over every rank
 * of the context. Backends: PMIx (default), a caller-supplied out-of-band
 * allgather, and an in-memory one for tests (ranks are threads of one process).
 */
#ifndef FOLD_BOOTSTRAP_H
#define FOLD_BOOTSTRAP_H

#include <stddef.h>

typedef struct fold_bootstrap fold_bootstrap_t;

struct fold_bootstrap {
    int  rank;
    int  size;
    /* Gathers len bytes from every rank into out (size * len bytes, rank order). */
    int  (*allgather)(fold_bootstrap_t *bs, const void *in, void *out, size_t len);
    void (*finalize)(fold_bootstrap_t *bs);
    /* A directory, where the backend has one (PMIx; NULL otherwise): publish makes
     * len bytes under key known to the other ranks from the next allgather on (which
     * fences); lookup fetches rank's, as a malloc'd copy, so that no rank needs
     * every rank's data. */
    int  (*publish)(fold_bootstrap_t *bs, const char *key, const void *data, size_t len);
    int  (*lookup)(fold_bootstrap_t *bs, int rank, const char *key, void **data, size_t *len);
    /* A name for the node this rank runs on, unique per node within the job (PMIx
     * hostname, or gethostname() plus the network namespace). */
    char node_name[64];
    char job_id[64];       /* identifies the job, for shared-memory segment names */
    void *impl;
};

int fold_bootstrap_pmix_init(fold_bootstrap_t *bs);
int fold_bootstrap_oob_init(fold_bootstrap_t *bs,
                            int (*allgather)(const void *, void *, size_t, void *),
                            void *arg, int rank, int size);

/* In-memory bootstrap for tests: create one group, then call
 * fold_bootstrap_mem_init from each of `size` threads with its rank. */
void *fold_bootstrap_mem_group_create(int size);
void  fold_bootstrap_mem_group_destroy(void *group);
int   fold_bootstrap_mem_init(fold_bootstrap_t *bs, void *group, int rank);

/* Fills node_name with gethostname() plus the network namespace inode, so that
 * namespaced "hosts" on one machine are told apart. */
void fold_bootstrap_default_node_name(char *buf, size_t len);

#endif
