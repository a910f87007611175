/*
 * The ucp transport's start-up (tl_ucp_start.c), apart from its operations
 * (tl_ucp.c). Nothing outside runtime/transport/tl_ucp*.c includes this.
 */
#ifndef FOLD_TL_UCP_START_H
#define FOLD_TL_UCP_START_H

#include <stddef.h>
#include <ucp/api/ucp.h>

typedef struct tl_ucp_started {
    ucp_context_h context;
    ucp_worker_h  worker;
    char          tls[128];       /* the UCX transports the context has, "self,tcp,cma" */
    char          fallback[1024]; /* why it runs without UCX's shared memory; "" if not */
} tl_ucp_started_t;

/* A UCP context with `params` and its worker, from UCX's configuration (UCX_*);
 * where they cannot start with UCX's shared-memory transports, without them.
 * FOLD_OK, or an error that says why (logged, naming /dev/shm when it was short). */
int tl_ucp_start(const ucp_params_t *params, tl_ucp_started_t *out);

#endif
