/*
 * libfold-mpi: an MPI profiling-interface library that serves MPI_Allreduce and
 * MPI_Reduce with fold and hands everything else to the MPI library (PMPI_*).
 * Internal interface between its files; nothing here is exported.
 *
 * Besides the calls it hands over, the shim uses MPI collectives for bootstrap only:
 * fold's context starts over an allgather on a private copy of MPI_COMM_WORLD, and
 * each MPI communicator maps lazily to a fold communicator made with an allgather
 * over that communicator. fold itself never uses MPI.
 */
#ifndef FOLD_MPI_SHIM_H
#define FOLD_MPI_SHIM_H

#include "shim_config.h"

#include <fold/fold.h>
#include <mpi.h>

#include <stddef.h>

#define SHIM_EXPORT __attribute__((visibility("default")))

/* Where a call went: fold, or why it went to the MPI library. */
typedef enum shim_route {
    SHIM_ROUTE_FOLD,
    SHIM_ROUTE_OFF,         /* fold is not running: disabled, failed to start, finalized */
    SHIM_ROUTE_ARGS,        /* arguments MPI rejects; its own error path answers them */
    SHIM_ROUTE_DATATYPE,    /* a predefined type fold has no match for (long double and
                               its pair and complex types, ...), or copies of one */
    SHIM_ROUTE_OP,          /* REPLACE, NO_OP, or an op the shim did not see created */
    SHIM_ROUTE_DTYPE_OP,    /* an op MPI does not define for that datatype */
    SHIM_ROUTE_DERIVED,     /* a derived type that is not copies of one type back to back:
                               holes, gaps, a lower bound, mixed types, subarray, ... */
    SHIM_ROUTE_USER_OP,     /* a user op fold could not register (its table is full) */
    SHIM_ROUTE_USER_OP_DERIVED, /* a user op on a derived type with holes or gaps, a lower
                               bound, subarray, ..., or of more than FOLD_OPAQUE_MAX_SIZE
                               bytes */
    SHIM_ROUTE_SMALL,       /* below FOLD_MPI_ALLREDUCE_MIN / FOLD_MPI_REDUCE_MIN */
    SHIM_ROUTE_LARGE,       /* above FOLD_MPI_ALLREDUCE_MAX / FOLD_MPI_REDUCE_MAX */
    SHIM_ROUTE_MPI_FASTER,  /* no range set: fold_serve_advice expects MPI to be faster */
    SHIM_ROUTE_INTERCOMM,   /* an intercommunicator under MPI_THREAD_MULTIPLE */
    SHIM_ROUTE_FOREIGN,     /* a member outside MPI_COMM_WORLD (dynamic processes) */
    SHIM_ROUTE_COMM_FAILED, /* fold could not create the communicator */
    SHIM_ROUTE_COMM_BUSY,   /* MPI_THREAD_MULTIPLE: another first use was mapping; retried */
    SHIM_ROUTE_COUNT
} shim_route_t;

/* ---- process state (shim_state.c) --------------------------------------------- */

typedef struct shim_state {
    int            running;         /* fold serves calls (between start and stop) */
    int            thread_multiple; /* MPI_THREAD_MULTIPLE was provided */
    int            world_rank;
    int            world_size;
    MPI_Comm       boot_comm;       /* private MPI_COMM_WORLD copy for fold's allgather */
    MPI_Group      world_group;
    int            comm_keyval;     /* attribute caching each communicator's mapping */
    fold_context_h ctx;
    shim_config_t  config;
} shim_state_t;

extern shim_state_t shim;

/* After PMPI_Init / PMPI_Init_thread: configuration, fold_init, the banner. */
void shim_start(void);
/* Before PMPI_Finalize: the summary, fold_finalize. */
void shim_stop(void);

/* fold contexts are single-threaded: every fold call holds this lock. */
void shim_fold_lock(void);
void shim_fold_unlock(void);

/* Logs one line to stderr, prefixed "fold-mpi: rank R: ". */
void shim_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- datatypes and ops (shim_types.c) ------------------------------------------ */

/* A call's datatype and op in fold's terms. */
typedef struct shim_typemap {
    fold_dtype_t dtype;
    fold_op_t    op;
    size_t       elements;   /* fold elements per element of the call's datatype */
    MPI_Datatype base;       /* the predefined type those elements are (MPI_DATATYPE_NULL
                                for opaque elements) */
    int          derived;    /* the call's datatype is a derived one */
} shim_typemap_t;

/* Fills the datatype table (the MPI handles are only usable after MPI_Init). */
void shim_types_init(void);
/* SHIM_ROUTE_FOLD with *map set, or the reason MPI must handle the call. */
shim_route_t shim_types_map(MPI_Datatype datatype, MPI_Op op, shim_typemap_t *map);
/* The table's index of a predefined datatype fold serves, or -1. */
int shim_types_find(MPI_Datatype datatype);
/* The MPI handle and fold datatype at an index shim_types_find gave. */
MPI_Datatype shim_types_handle(int index);
fold_dtype_t shim_types_dtype(int index);

/* ---- derived datatypes (shim_derived.c) ----------------------------------------- */

/* The cache's attribute key; created after MPI_Init, freed before MPI_Finalize. */
void shim_derived_start(void);
void shim_derived_stop(void);
/* A datatype's layout: n copies of the table's entry `base` back to back from offset 0,
 * or (base SHIM_MIXED) n bytes of members of several types without a hole, `foreign`
 * when one of them is a predefined type the table does not hold. */
#define SHIM_MIXED (-2)
typedef struct shim_layout {
    int    base;
    size_t n;
    int    foreign;
} shim_layout_t;

/* For a datatype not in the table: SHIM_ROUTE_FOLD and its layout, or the reason it
 * has none fold can serve. */
shim_route_t shim_derived_decode(MPI_Datatype datatype, shim_layout_t *layout);
/* The bytes of one element of that layout. */
size_t shim_layout_bytes(const shim_layout_t *layout);

/* ---- user ops (shim_userop.c) ---------------------------------------------------- */

/* Records an op the application created (C or Fortran calling convention) and
 * registers it with fold; forgets one it frees. */
void shim_userop_record(MPI_Op op, void (*fn)(void), int fortran);
void shim_userop_forget(MPI_Op op);
/* Forgets every op (MPI_Finalize). */
void shim_userop_clear(void);
/* SHIM_ROUTE_FOLD and fold's op for a recorded op, or the reason MPI must run it. */
shim_route_t shim_userop_get(MPI_Op op, fold_op_t *fop);
/* The datatype the application passed to the call this thread is about to run in
 * fold: what its user op receives. */
void shim_userop_set_datatype(MPI_Datatype datatype);

/* ---- communicators (shim_comm.c) ------------------------------------------------ */

/* fold_serve_advice per collective and power-of-two size class: the same on every
 * member, so remembering it skips fold's lock on the calls that follow. */
#define SHIM_ADVICE_CLASSES 64
#define SHIM_ADVICE_UNKNOWN 0
#define SHIM_ADVICE_FOLD    1
#define SHIM_ADVICE_MPI     2

/* An MPI communicator fold serves. An intercommunicator's fold communicator holds
 * both groups, the first one's ranks first (shim_inter.c). */
typedef struct shim_comm {
    fold_comm_h fold;
    int         rank;    /* in fold's communicator (an intracommunicator's: the same) */
    int         size;
    unsigned char advice[SHIM_COLL_COUNT][SHIM_ADVICE_CLASSES];   /* SHIM_ADVICE_* */
    /* intercommunicators only */
    int         inter;
    int         first;        /* this process's group comes first in fold's */
    int         local_size;   /* this process's group */
    int         remote_size;
    int         local_rank;
    fold_comm_h local;        /* this process's group alone, in its order */
} shim_comm_t;

/* After fold_init: MPI_COMM_WORLD is fold's world communicator. */
void shim_comm_start(void);

/* SHIM_ROUTE_FOLD and the fold communicator serving comm (created on first use), or
 * the reason comm cannot be served. Collective over comm when it creates; every
 * member gets the same answer. */
shim_route_t shim_comm_get(MPI_Comm comm, const shim_comm_t **mapping);
/* The attribute's delete callback (MPI_Comm_free, MPI_Finalize). */
int shim_comm_delete(MPI_Comm comm, int keyval, void *attr, void *extra);
/* Makes the fold communicator of an intracommunicator's members in its order (*made),
 * or says why not; `ready` 0 when the caller ran out of memory. Collective over comm:
 * every member gets the same answer. */
shim_route_t shim_comm_create_fold(MPI_Comm comm, int ready, fold_comm_h *made);
/* Caches a served communicator's record, or the reason it is not served, on comm. */
void shim_comm_attach(MPI_Comm comm, shim_comm_t *record);
void shim_comm_refuse(MPI_Comm comm, shim_route_t why);

/* ---- intercommunicators (shim_inter.c) ----------------------------------------- */

struct shim_fold_call;

/* shim_comm_get for an intercommunicator: collective over both groups. */
shim_route_t shim_inter_create(MPI_Comm comm, const shim_comm_t **mapping);
/* Runs an intercommunicator's call in fold (under the lock). Returns a fold status. */
int shim_inter_run(const struct shim_fold_call *fcall);

/* ---- reductions (shim_reduce.c, shim_run.c) ------------------------------------ */

/* One MPI_Allreduce or MPI_Reduce call as the application made it. */
typedef struct shim_call {
    shim_coll_t  coll;
    const void  *sendbuf;
    void        *recvbuf;
    int          count;
    MPI_Datatype datatype;
    MPI_Op       op;
    int          root;
    MPI_Comm     comm;
} shim_call_t;

/* The same call in fold's terms. */
typedef struct shim_fold_call {
    shim_coll_t  coll;
    const void  *sendbuf;   /* FOLD_IN_PLACE or the input */
    void        *recvbuf;   /* NULL at reduce non-roots */
    size_t       count;
    fold_dtype_t dtype;
    fold_op_t    op;
    int          root;
    fold_comm_h  comm;
    MPI_Datatype datatype;  /* the application's, which a user op receives */
    const shim_comm_t *mapping;   /* what comm is; root is MPI's for an intercommunicator */
} shim_fold_call_t;

/* Decides whether fold serves the call; if so fills *fcall. *map is set (elements
 * nonzero) whenever the datatype and op are ones fold could serve. */
shim_route_t shim_route(const shim_call_t *call, shim_typemap_t *map,
                        shim_fold_call_t *fcall);
/* Runs the call in fold (under the lock). Returns a fold status. */
int shim_run(const shim_fold_call_t *fcall);
/* Serves one call: fold when shim_route says so, else PMPI. Returns an MPI code. */
int shim_reduction(const shim_call_t *call);

/* ---- counters and reports (shim_stats.c) ---------------------------------------- */

void shim_stats_count(shim_coll_t coll, shim_route_t route);
/* A block MPI_Alloc_mem gave from fold memory (FOLD_MPI_ALLOC_MEM). */
void shim_stats_alloc_mem(size_t bytes);
/* FOLD_MPI_VERBOSE: the banner line at start (rank 0). */
void shim_stats_banner(const char *what);
/* FOLD_MPI_VERBOSE: the totals over all ranks, printed by rank 0. Collective. */
void shim_stats_report(void);

#endif
