/*
 * fold: reduction collectives (allreduce, reduce) at the UCX/libfabric level.
 *
 * Typical use by a runtime:
 *
 *     fold_context_h ctx;
 *     fold_init(NULL, &ctx);                 // bootstrap through PMIx
 *     fold_comm_h world = fold_comm_world(ctx);
 *     fold_allreduce(FOLD_IN_PLACE, buf, n, FOLD_FLOAT32, FOLD_OP_SUM, world);
 *     fold_finalize(ctx);
 *
 * Every function returns an int holding a fold_status_t value (0 on success,
 * negative on error) unless documented otherwise. Outputs are written only on
 * success.
 *
 * Threading: a context and its communicators may be used by one thread at a time,
 * and fold enforces it. A call that changes a context's state (collectives, blocking
 * and non-blocking; fold_test, fold_wait, fold_request_free; communicator split,
 * create and free; fold_config_set/get; fold_selected_algorithm, _segment_size and
 * fold_selected_for_buffers; fold_selection_trying; fold_serve_advice;
 * fold_finalize) claims the context with one atomic compare-and-swap; a call from
 * another thread meanwhile, or from a user op or callback inside such a call, is
 * refused with FOLD_ERR_IN_USE (logged, naming the call) and changes nothing. The
 * caller may retry it or serialise its threads. fold_comm_world, fold_comm_rank,
 * fold_comm_size and fold_comm_context_rank read what never changes and are not
 * claimed; fold_op_create/fold_op_free are process-wide and thread-safe. Threads may
 * use different contexts freely. fold_finalize must not race with other calls on the
 * context (their handles die with it).
 * Counts are numbers of elements, as size_t; a count of 0 is valid and does nothing.
 */
#ifndef FOLD_H
#define FOLD_H

#include <stddef.h>
#include <stdint.h>
#include <fold/fold_status.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FOLD_VERSION_MAJOR 0
#define FOLD_VERSION_MINOR 1
#define FOLD_VERSION_PATCH 0

typedef struct fold_context *fold_context_h;
typedef struct fold_comm    *fold_comm_h;
typedef struct fold_request *fold_request_h;

/* Pass as sendbuf to reduce in place: the input is taken from recvbuf (at the root
 * for fold_reduce; at non-roots recvbuf then holds the input and is not modified). */
#define FOLD_IN_PLACE ((const void *)(intptr_t)1)

/* fold_comm_split(): a color that puts the caller in no new communicator. */
#define FOLD_UNDEFINED (-32766)

typedef enum fold_dtype {
    FOLD_INT8, FOLD_INT16, FOLD_INT32, FOLD_INT64,
    FOLD_UINT8, FOLD_UINT16, FOLD_UINT32, FOLD_UINT64,
    FOLD_FLOAT16,   /* IEEE binary16; each reduction step computes in float32 */
    FOLD_BFLOAT16,  /* bfloat16; each reduction step computes in float32 */
    FOLD_FLOAT32, FOLD_FLOAT64,
    /* MPI's pair types, for FOLD_OP_MAXLOC / FOLD_OP_MINLOC only: a value and an
     * int index, laid out as the C structs below (padding included), as MPI's
     * MPI_FLOAT_INT, MPI_DOUBLE_INT, MPI_LONG_INT, MPI_2INT and MPI_SHORT_INT. */
    FOLD_FLOAT_INT, FOLD_DOUBLE_INT, FOLD_LONG_INT, FOLD_2INT, FOLD_SHORT_INT,
    /* {real, imaginary} as C99's float _Complex / double _Complex; sum and prod only. */
    FOLD_COMPLEX_FLOAT32, FOLD_COMPLEX_FLOAT64,
    FOLD_DTYPE_COUNT
} fold_dtype_t;

/* Opaque elements of `size` bytes (1 .. FOLD_OPAQUE_MAX_SIZE), for user ops on
 * records such as an MPI struct of several members: fold moves and splits such data
 * in whole elements only and never looks inside; user ops reduce it, predefined ops
 * refuse it. The value depends on the size alone (FOLD_DTYPE_OPAQUE_FIRST + size - 1),
 * so every rank and process gets the same one, with nothing to create or free.
 * fold_dtype_name calls it "opaque". FOLD_ERR_INVALID_ARG for a size out of range or
 * a NULL dtype. */
#define FOLD_OPAQUE_MAX_SIZE    4096
#define FOLD_DTYPE_OPAQUE_FIRST 0x1000
int fold_dtype_opaque(size_t size, fold_dtype_t *dtype);

/* The pair types' elements. A result's padding bytes are zero, or the input's where
 * no reduction step touched the element. */
typedef struct fold_float_int  { float  v; int i; } fold_float_int_t;
typedef struct fold_double_int { double v; int i; } fold_double_int_t;
typedef struct fold_long_int   { long   v; int i; } fold_long_int_t;
typedef struct fold_2int       { int    v; int i; } fold_2int_t;
typedef struct fold_short_int  { short  v; int i; } fold_short_int_t;

/* Predefined operations. Bitwise ops (band, bor, bxor) take integer types only.
 * Logical ops treat nonzero as true and produce 0 or 1. min/max propagate NaN
 * and order -0 below +0, so every algorithm gives the same bits. Integer sum and
 * prod wrap around modulo 2^bits. Complex types take sum and prod only (prod is
 * complex multiplication, (a+bi)(c+di) = (ac-bd) + (ad+bc)i, without C's recovery
 * of infinities from NaN results). maxloc and minloc take the pair types only, and
 * the pair types nothing else: the larger (smaller) value with its index, and on
 * equal values the lower index (MPI's rule); equal floats of different signs give
 * +0 (maxloc) or -0 (minloc). A NaN value follows no rule. User ops (fold_op_create)
 * have values from FOLD_OP_USER_FIRST on. */
typedef enum fold_op {
    FOLD_OP_SUM, FOLD_OP_PROD, FOLD_OP_MIN, FOLD_OP_MAX,
    FOLD_OP_BAND, FOLD_OP_BOR, FOLD_OP_BXOR,
    FOLD_OP_LAND, FOLD_OP_LOR, FOLD_OP_LXOR,
    FOLD_OP_MAXLOC, FOLD_OP_MINLOC,
    FOLD_OP_PREDEFINED_COUNT,
    FOLD_OP_USER_FIRST = 64
} fold_op_t;

/* A user operation, with MPI's semantics: inout[i] = in[i] op inout[i], where `in`
 * holds the contribution of lower ranks. */
typedef void (*fold_user_op_fn)(const void *in, void *inout, size_t count,
                                fold_dtype_t dtype, void *arg);

/* Registers a user op. A non-commutative op (commutative == 0) gets the
 * rank-ordered result x0 op x1 op ... op x(p-1) from every algorithm. */
int fold_op_create(fold_user_op_fn fn, void *arg, int commutative, fold_op_t *op);
int fold_op_free(fold_op_t op);

size_t      fold_dtype_size(fold_dtype_t dtype);    /* 0 for an unknown datatype */
const char *fold_dtype_name(fold_dtype_t dtype);    /* "float32", ...; "unknown" */
const char *fold_op_name(fold_op_t op);             /* "sum", ...; "user"; "unknown" */
int         fold_dtype_from_name(const char *name, fold_dtype_t *dtype);
int         fold_op_from_name(const char *name, fold_op_t *op);

/* Out-of-band allgather supplied by a hosting runtime (MPI, a job manager, ...):
 * gathers `len` bytes from every rank, in rank order, into recvbuf (size * len).
 * It is blocking and collective over all ranks of the context; returns 0 on success. */
typedef int (*fold_oob_allgather_fn)(const void *sendbuf, void *recvbuf, size_t len,
                                     void *arg);

typedef struct fold_context_params {
    const char *transport;           /* NULL: FOLD_TRANSPORT, default "ucp" */
    struct {
        fold_oob_allgather_fn allgather; /* NULL: bootstrap through PMIx */
        void *arg;
        int   rank;
        int   size;
    } oob;
    int check;   /* 1: every allreduce and reduce first compares its arguments with
                    every rank's (FOLD_CHECK=1); 0: as FOLD_CHECK says */
} fold_context_params_t;

void fold_context_params_init(fold_context_params_t *params);

/* params may be NULL (PMIx bootstrap, configuration from FOLD_* variables). */
int fold_init(const fold_context_params_t *params, fold_context_h *ctx);
/* Collective over the context's ranks. Frees every communicator; requests must be
 * completed and freed before. */
int fold_finalize(fold_context_h ctx);

/* Overrides a configuration variable for this context, by its name with or without
 * the FOLD_ prefix ("ALLREDUCE_ALG", "ring"). Affects later calls only. */
int fold_config_set(fold_context_h ctx, const char *name, const char *value);
/* Reads the current value; the string stays valid until the next fold_config_set. */
int fold_config_get(fold_context_h ctx, const char *name, const char **value);

/* Communicators. fold_comm_world() returns NULL for an invalid context. */
fold_comm_h fold_comm_world(fold_context_h ctx);
int fold_comm_rank(fold_comm_h comm, int *rank);
int fold_comm_size(fold_comm_h comm, int *size);
/* Collective over comm. Ranks with the same color form a communicator, ordered by
 * key then by rank in comm. color FOLD_UNDEFINED gives *newcomm = NULL. */
int fold_comm_split(fold_comm_h comm, int color, int key, fold_comm_h *newcomm);
/* Collective over the listed ranks only (not the whole context): a communicator of
 * `size` members whose rank i is context rank ctx_ranks[i], the caller being rank
 * `rank`. `allgather` (with `arg`) is an out-of-band allgather over exactly those
 * members in that order, used to agree on an identifier and, where members share a
 * node, to set up the node's shared memory before the first call; an MPI layer
 * passes one built on the MPI communicator. fold holds no context state across the callback,
 * so the caller may let other threads use the context while it runs. */
int fold_comm_create_group(fold_context_h ctx, int size, const int *ctx_ranks, int rank,
                           fold_oob_allgather_fn allgather, void *arg, fold_comm_h *newcomm);
/* The context rank of a communicator's rank r. */
int fold_comm_context_rank(fold_comm_h comm, int r, int *ctx_rank);
/* Frees a communicator made by fold_comm_split or fold_comm_create_group (not the
 * world); sets *comm = NULL. */
int fold_comm_free(fold_comm_h *comm);

/* Blocking collectives. sendbuf may be FOLD_IN_PLACE. For fold_reduce, recvbuf is
 * significant at the root only and may be NULL elsewhere. */
int fold_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                   fold_dtype_t dtype, fold_op_t op, fold_comm_h comm);
int fold_reduce(const void *sendbuf, void *recvbuf, size_t count,
                fold_dtype_t dtype, fold_op_t op, int root, fold_comm_h comm);
int fold_bcast(void *buf, size_t count, fold_dtype_t dtype, int root, fold_comm_h comm);
int fold_barrier(fold_comm_h comm);

/* Non-blocking collectives: the buffers must stay untouched until fold_test returns
 * FOLD_OK or fold_wait returns. Collectives on one communicator must be started in
 * the same order on every rank. A request is released with fold_request_free. */
int fold_iallreduce(const void *sendbuf, void *recvbuf, size_t count,
                    fold_dtype_t dtype, fold_op_t op, fold_comm_h comm,
                    fold_request_h *req);
int fold_ireduce(const void *sendbuf, void *recvbuf, size_t count,
                 fold_dtype_t dtype, fold_op_t op, int root, fold_comm_h comm,
                 fold_request_h *req);
/* FOLD_OK when complete, FOLD_INPROGRESS when not yet, or the collective's error. */
int fold_test(fold_request_h req);
int fold_wait(fold_request_h req);
int fold_request_free(fold_request_h req);

/* Memory for a call's buffers that the other ranks of a node can map (process-wide,
 * thread-safe, no context needed; page-granular, so for large buffers). Where single
 * copy runs (the cma algorithm), a rank reads and writes a peer's buffers in it with
 * memcpy instead of through the kernel's cross-memory attach (several times faster
 * on most machines). Selection knows: a call whose buffers are in fold memory on
 * every rank of a node may get another algorithm than one on other memory. Where it
 * does, every rank of the call must have its buffers there, or the call fails with
 * FOLD_ERR_MISMATCH (FOLD_MISMATCH_MEMORY) on the node's ranks (a blocking call of at
 * least 1 MiB instead runs, on every rank, what it would on other memory); a forced
 * algorithm (FOLD_ALLREDUCE_ALG=cma, ...) takes any mix, each peer's bytes through its
 * mapping or the kernel. Nothing lands in /dev/shm. fold_mem_free takes what fold_mem_alloc
 * gave (NULL is a no-op); a buffer must not be freed while a call that uses it runs. */
int fold_mem_alloc(size_t bytes, void **ptr);
int fold_mem_free(void *ptr);
/* 1 when ptr lies in memory fold_mem_alloc gave that is not freed yet, else 0 (and
 * nothing logged): for a layer that hands out both kinds, such as the MPI shim's
 * MPI_Free_mem. */
int fold_mem_contains(const void *ptr);

/* The algorithm a call of this kind would use ("ring", ...), for tools and logs. */
const char *fold_selected_algorithm(fold_comm_h comm, const char *collective,
                                    size_t count, fold_dtype_t dtype);
/* The bytes of each pipeline segment such a call cuts its message into (the cost
 * model's pick, a rule's alg@SIZE, or FOLD_SEGMENT_SIZE); 0 on a bad argument. */
size_t fold_selected_segment_size(fold_comm_h comm, const char *collective, size_t count,
                                  fold_dtype_t dtype);
/* Both for a call on these buffers (sendbuf may be FOLD_IN_PLACE, recvbuf NULL where
 * the rank gets no result): buffers in fold memory on every rank of a node may be
 * served otherwise (fold_mem_alloc). segment_size may be NULL. */
const char *fold_selected_for_buffers(fold_comm_h comm, const char *collective,
                                      const void *sendbuf, const void *recvbuf, size_t count,
                                      fold_dtype_t dtype, size_t *segment_size);

/* Whether the blocking calls with these arguments are still trying the cost model's
 * rivals (FOLD_ONLINE: their first calls time each and the ranks agree on the
 * fastest): *trying is 1 from the first such call until they agree, else 0 (before any
 * call, and where nothing is tried). Every rank answers alike after the same calls.
 * For benchmarks, whose warm-ups should last until the choice has settled. root is a
 * reduce's root (-1: any); an allreduce ignores it. */
int fold_selection_trying(fold_comm_h comm, const char *collective, size_t count,
                          fold_dtype_t dtype, fold_op_t op, int root, int *trying);

/* Whether fold expects to serve a call of `bytes` per rank faster than the MPI
 * library beside it, for layers such as the MPI shim that choose between the two:
 * the tuning file's measured verdict (fold_tune's "serve" lines) where it has one,
 * else the cost model (fold's choice against the best flat algorithm, which is what
 * an MPI library runs). *serve is 1 or 0; *source, if not NULL, names where the
 * answer came from ("tuning file <path>" or "cost model"). Every rank of comm gets
 * the same answer. */
int fold_serve_advice(fold_comm_h comm, const char *collective, size_t bytes, int *serve,
                      const char **source);

const char *fold_version_string(void);

#ifdef __cplusplus
}
#endif
#endif
