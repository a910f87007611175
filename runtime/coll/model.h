/*
 * The cost model: predicts how long a schedule takes by replaying the schedules of
 * every rank of a (possibly virtual) communicator in a discrete-event simulation.
 * Algorithms are pure schedule builders, so the same evaluator serves every one of
 * them, on shapes this machine cannot run (64 ranks per node, 1000 nodes).
 *
 * Costs, per step (all parameters are per machine, from a calibration or the
 * generic defaults of fold_model_defaults):
 *   every step           step_us of its rank's CPU (the executor's overhead)
 *   copy / reduce        move_us, then bytes / bandwidth on its rank's CPU, the bandwidth taken
 *                        from the in-cache or the memory figure by the node's working
 *                        set, and shared with the node's other ranks in memory; one
 *                        that touches the node segment at most at shm_gbs (a copy
 *                        out of it), shm_write_gbs (a copy into it), shm_reduce_gbs
 *                        (a reduction into it) or shm_fold_gbs .. shm_fold_far_gbs
 *                        (a reduction out of it), what two cores of the node were
 *                        measured to cost each other (node/probe.c)
 *   send / recv          a message between two ranks of one node: intra_lat_us +
 *                        bytes / intra_gbs; between nodes: inter_lat_us + bytes /
 *                        inter_gbs, each node's link (nics of them) carrying one
 *                        message's bytes at a time in each direction (latencies
 *                        overlap), and within a node each rank's channel likewise.
 *                        A message larger than eager_bytes moves only once its
 *                        receive is posted.
 *   shm post / wait      a wait completes flag_us after the post it waits for
 * The exact rules are at the top of model.c. Communicators too large to replay are
 * priced by closed forms of the same rules (model_closed.h).
 */
#ifndef FOLD_MODEL_H
#define FOLD_MODEL_H

#include "alg.h"
#include "node/topo.h"

#include <stddef.h>

typedef struct fold_model_params {
    double step_us;          /* executor overhead per step */
    double flag_us;          /* a flag post seen by a rank waiting for it */
    double intra_lat_us;     /* transport message between ranks of one node */
    double intra_gbs;        /* ... its bandwidth, GB/s (1e9 B/s) */
    double inter_lat_us;     /* transport message between nodes */
    double inter_gbs;        /* ... one link's bandwidth, GB/s */
    int    nics;             /* links per node, shared by its ranks */
    double eager_bytes;      /* larger messages wait for their receive (rendezvous) */
    double copy_gbs;         /* one core's memcpy, in cache, bytes copied per ns */
    double copy_mem_gbs;     /* ... out of cache */
    double reduce_gbs;       /* one core's c = a op b, in cache, bytes of c per ns */
    double reduce_mem_gbs;   /* ... out of cache */
    double node_mem_gbs;     /* all ranks of a node streaming at once: the ceiling of
                                the sum of their memory-bound copies and reductions */
    double cache_bytes;      /* last-level cache of a node */
    double l2_bytes;         /* a core's own cache below it (its L2); 0: no such level */
    double copy_l2_gbs;      /* memcpy and c = a op b with the rank's working set within */
    double reduce_l2_gbs;    /* l2_bytes: copy_gbs and reduce_gbs are the rates past it */
    double shm_gbs;          /* one core copying data another core wrote (the node
                                segment): copies from it go no faster */
    double shm_reduce_gbs;   /* ... reducing it with its own into the segment (bytes
                                of result) */
    double shm_write_gbs;    /* one core copying its own data into the segment, over
                                lines another core read last */
    double shm_fold_gbs;     /* ... and into a buffer of its own, 64 KiB rows (in the
                                cores' caches) */
    double shm_fold_far_gbs; /* ... the same for 1 MiB rows (past the cores' L2s); a
                                rank's rate moves from one to the other with the
                                bytes of its own it touches */
    double cma_gbs;          /* single copy: the kernel copying from or to another
                                process (process_vm_readv), GB/s */
    double cma_mem_gbs;      /* ... out of cache (its working set past the caches):
                                the kernel walks and pins every page, and that work
                                slows out of cache as copies do */
    double cma_us;           /* ... its cost per call */
    double adopt_gbs;        /* moving a buffer's private pages into fold memory
                                (mem_adopt.c), bytes per ns: what adopting costs */
    double move_us;          /* a copy's or reduction's start, beyond step_us: the
                                prefetchers ramping up on a new stream (a step of
                                less than 4 KiB pays its share) */
    double peer_views;       /* 1 (fold_model_mapped): a peer read a reduction takes
                                over (exec_plan.h) costs nothing, the reduction reading
                                the bytes through the mapping; 0: it copies. Not a
                                parameter one sets. */
} fold_model_params_t;

/* Generic defaults: a current x86 server node and a 100 Gb/s network. */
void fold_model_defaults(fold_model_params_t *p);

/* The parameters of a call whose buffers are in fold memory on every rank: single
 * copy's reads and writes of a peer's buffer go through a mapping (node/xmap.c) at
 * the segment's copy rates instead of the kernel's (cma_gbs, cma_us). */
void fold_model_mapped(const fold_model_params_t *p, fold_model_params_t *mapped);

/* The parameters of a blocking shm_flat call on the node's tiny-message path
 * (node/fast.c): the schedule's steps without the executor's overhead. */
void fold_model_tiny(const fold_model_params_t *p, fold_model_params_t *tiny);

/* Sets one parameter by name ("flag_us", "inter_gbs", ... as in the struct), value
 * with the size syntax of util/size.h for byte counts. FOLD_ERR_NOT_FOUND for
 * an unknown name, FOLD_ERR_INVALID_ARG for a bad value (times must be plain
 * numbers >= 0, bandwidths > 0, nics an integer 1..1024; nothing may follow the
 * number); either is logged and leaves *p as it was. */
int fold_model_set(fold_model_params_t *p, const char *name, const char *value);
/* 1 if every parameter of a equals b's (field by field), else 0. */
int fold_model_equal(const fold_model_params_t *a, const fold_model_params_t *b);
/* h extended with every parameter's value (for keys of decisions made with them). */
uint64_t fold_model_hash(const fold_model_params_t *p, uint64_t h);

/* Writes every parameter as "name value" lines, each prefixed by `prefix` (may be
 * NULL), to a FILE *; every value reads back through fold_model_set exactly. */
void fold_model_print(const fold_model_params_t *p, const char *prefix, void *file);

/*
 * What to predict: `proto` carries everything but the rank (coll, size, root,
 * count, seg_count, depth, inplace, commutative and, for node-aware algorithms,
 * leaders, shm_count and inter); the evaluator fills rank and topo for each
 * rank of `topo` itself. proto.size is topo->size (or 0). esize is the element size
 * in bytes.
 */
typedef struct fold_model_query {
    const fold_alg_t       *alg;
    fold_coll_args_t        proto;
    size_t                  esize;
    /* 0 (or 1): the rates of the schedules' own working sets. s > 1: each rank's IN
     * and OUT count s times toward them: fold_select extrapolates a large call from
     * two smaller ones, which must then run at the large call's rates (a 64-rank
     * node's 512 KiB allreduce, extrapolated from calls in the cache, came out 3.4x
     * faster than replayed, and beat a schedule replayed whole). */
    double                  ws_scale;
    /* FOLD_MODEL_SYM_UNKNOWN: the prediction looks for node symmetry itself; else
     * what fold_model_symmetry found for this very question. */
    int                     symmetry;
} fold_model_query_t;

enum {
    FOLD_MODEL_SYM_UNKNOWN,
    FOLD_MODEL_SYM_NONE,    /* the nodes differ: every rank is replayed */
    FOLD_MODEL_SYM_FLIP,    /* node k's picture is node 0's with node bits k flipped */
    FOLD_MODEL_SYM_SHIFT    /* ... with every node moved on by k */
};

typedef struct fold_model_result {
    double time_us;          /* when the last rank finishes */
    double root_us;          /* reduce: when the root finishes; else time_us (the
                                latest rank whose schedule has an output buffer) */
    size_t steps;            /* steps simulated over all ranks */
    int    cut;              /* fold_model_predict_within stopped at its cutoff: the
                                schedules take at least time_us (>= the cutoff) */
    int    one_node;         /* only node 0's ranks were replayed, every other node
                                being its image (node symmetry, model.c); steps are
                                node 0's */
    int    kernel_free;      /* no step the kernel's copies or a mapping's price (peer
                                reads and writes, messages within a node): the
                                parameters of fold_model_mapped give the same time */
} fold_model_result_t;

/* Builds every rank's schedule on `topo` and replays them. FOLD_OK, or the build's
 * error, or FOLD_ERR_INVALID_ARG when the schedules do not match each other (a
 * receive with no send or of another size, a wait for a flag never posted, a cycle):
 * that is a bug in the algorithm, and is logged naming the rank and step. */
int fold_model_predict(const fold_model_params_t *p, const fold_topo_t *topo,
                       const fold_model_query_t *q, fold_model_result_t *res);

/* fold_model_predict for a caller that only needs to know whether the time is below
 * cutoff_us: the simulation stops at its first event at or after cutoff_us, since
 * every step still to come ends at or after that event (res->cut = 1, time_us and
 * root_us the event's time). Otherwise (res->cut = 0) the result is
 * fold_model_predict's, bit for bit. A cutoff of INFINITY never stops. */
typedef struct fold_model_space fold_model_space_t;
int fold_model_predict_within(const fold_model_params_t *p, const fold_topo_t *topo,
                              const fold_model_query_t *q, double cutoff_us,
                              fold_model_space_t *space, fold_model_result_t *res);
/* Working memory for a series of predictions (may be NULL: each allocates its own).
 * It keeps the largest prediction's buffers, tens of MB for 512 ranks: free it once
 * the series is over. Not for two predictions at once. */
fold_model_space_t *fold_model_space_new(void);
void fold_model_space_free(fold_model_space_t *space);

/* Steps of `rank`'s schedule (built, not finalized), 0 if it does not build: what a
 * replay costs is about ranks x steps. */
size_t fold_model_rank_steps(const fold_topo_t *topo, const fold_model_query_t *q, int rank,
                             fold_model_space_t *space);

/* The symmetry under which a prediction of q on topo replays node 0's ranks alone
 * (model.c): what it costs is then a node's steps, not every rank's. Passed back in
 * q->symmetry, it spares the prediction finding it again. */
int fold_model_symmetry(const fold_topo_t *topo, const fold_model_query_t *q,
                        fold_model_space_t *space);

/* fold_model_predict, also giving when each of `rank`'s steps is predicted to end
 * (done[i] for its step i, in us from the start; at most cap of them) and how many
 * steps its schedule has (*nsteps): the beside-column of a traced call (exec_trace.c). */
int fold_model_predict_steps(const fold_model_params_t *p, const fold_topo_t *topo,
                             const fold_model_query_t *q, int rank, double *done, size_t cap,
                             size_t *nsteps, fold_model_result_t *res);

/* 1: every prediction replays every rank, node symmetry or not (the reference the
 * one-node replay is tested against). */
extern int fold_model_full_replay;

/* The same over schedules already built and finalized, one per rank of topo
 * (sched[r] for rank r); for tests with hand-made schedules. */
int fold_model_replay(const fold_model_params_t *p, const fold_topo_t *topo,
                      fold_sched_t *const *sched, size_t esize, fold_model_result_t *res);

#endif
