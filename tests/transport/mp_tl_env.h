/*
 * What the multi-process transport tests (mp_transport.c, mp_ofi.c) share: ranks from
 * the PMIx bootstrap, a transport opened with the settings fold_init would pass and
 * connected to every rank, failing with the rank named, waits with a timeout, both
 * barriers, and payloads that name their sender and tag.
 */
#ifndef FOLD_TEST_MP_TL_ENV_H
#define FOLD_TEST_MP_TL_ENV_H

#include "bootstrap.h"
#include "config.h"
#include "transport/transport.h"

#include <stddef.h>
#include <stdint.h>

/* mp_tl_barrier's tags: [MP_TL_TAG_BARRIER, MP_TL_TAG_BARRIER + 0x20000); keep the
 * tests' own tags out of that range. */
#define MP_TL_TAG_BARRIER UINT64_C(0x100000)

typedef struct mp_tl_env {
    fold_bootstrap_t     bs;
    fold_config_t        config;      /* from the environment, as fold_init loads it */
    const fold_tl_ops_t *ops;
    fold_tl_t           *tl;
    int                  rank, size;
    int                  left, right; /* ring neighbours */
    unsigned             barrier_seq;
    uint64_t            *addr_lens;   /* every rank's transport address (connect_peers) */
    char                *addrs;       /* addr_max bytes each */
    size_t               addr_max;
} mp_tl_env_t;

/* Joins the job through PMIx and loads the configuration; test_name prefixes every
 * failure. */
void mp_tl_env_init(mp_tl_env_t *env, const char *test_name);
/* Opens the transport called `transport` with the configuration's settings and
 * connects it to every rank. */
void mp_tl_env_open(mp_tl_env_t *env, const char *transport);
/* Closes the transport once every rank is done with it (a transport barrier first). */
void mp_tl_env_close(mp_tl_env_t *env);
void mp_tl_env_finalize(mp_tl_env_t *env);

/* Prints "<test> rank <r>: FAIL: ..." and exits 1 (mpirun then stops the others). */
void mp_tl_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
#define MP_TL_CHECK(cond, ...) do { if (!(cond)) mp_tl_fail(__VA_ARGS__); } while (0)
void mp_tl_check_ok(int status, const char *what);
void mp_tl_expect_status(const fold_tl_req_t *req, int expected, const char *what);

/* Progresses until all n requests complete, failing after 60 s; yields when idle
 * (2 cores, maybe more ranks). */
void mp_tl_wait_all(mp_tl_env_t *env, fold_tl_req_t *reqs, size_t n, const char *what);
/* Runs progress for a while, so that messages in flight reach the unexpected queue. */
void mp_tl_progress_for(mp_tl_env_t *env, double seconds);

/* A barrier through the bootstrap (the transport is not progressed meanwhile). */
void mp_tl_bs_barrier(mp_tl_env_t *env);
/* A dissemination barrier over the transport itself. Unlike the bootstrap barrier it
 * keeps every rank progressing until all have arrived: a peer's operations may need
 * this rank's progress to complete (UCX over TCP, manual-progress libfabric
 * providers), and no rank may close its endpoints while a neighbour still needs them. */
void mp_tl_barrier(mp_tl_env_t *env);

/* send_len bytes to the right neighbour into a receive of recv_len (fewer) from the
 * left: the receive must complete with FOLD_ERR_TRUNCATED. The sender's outcome is
 * not part of the contract; it only has to finish. */
void mp_tl_check_truncation(mp_tl_env_t *env, uint64_t tag, size_t send_len, size_t recv_len);

/* Bytes that depend on the sender, the tag and the position. */
void mp_tl_fill_pattern(void *buf, size_t len, int sender, uint64_t tag);
void mp_tl_check_pattern(const void *buf, size_t len, int sender, uint64_t tag,
                         const char *what);

#endif
