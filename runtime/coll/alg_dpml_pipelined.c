/*
 * DPML-pipelined (Bayatpour et al., SC17, section 4.2): DPML whose leaders cut
 * their partition into sub-partitions (about one pipeline segment each, at most
 * four per chunk) and keep an exchange between nodes in flight for each of them,
 * while the segment holds FOLD_PIPELINE_DEPTH chunks (stages) at once. A large
 * message thus becomes many small non-blocking inter-node operations, the regime
 * where networks gain from concurrency, and the copy-in of later chunks, the
 * reduction, the exchange and the copy-out of earlier ones all overlap.
 *
 * One leader, 2 chunks of 2 sub-partitions each (c = copy in, r = reduce,
 * x = exchange between nodes, o = copy out); all leaders of a node run the same
 * pattern on their own partitions at the same time:
 *
 *                   t0    t1    t2    t3    t4    t5    t6
 *   chunk 0 sub 0   c     r     x     o
 *   chunk 0 sub 1   c     r     x     x     o
 *   chunk 1 sub 0         c     r     x     o
 *   chunk 1 sub 1         c     r     x     x     o
 *
 * Everything else (layout, flags, zero-copy designation) is DPML's: alg_dpml.c.
 */
#include "alg_dpml.h"

static int dpml_pipelined_build(const fold_coll_args_t *args, fold_sched_t *s)
{
    return fold_dpml_build(args, s, 1);
}

const fold_alg_t fold_alg_dpml_pipelined = {
    .name        = "dpml_pipelined",
    .description = "DPML with sub-partitions: several non-blocking exchanges between "
                   "nodes in flight per leader, chunks pipelined through the segment",
    .allreduce   = dpml_pipelined_build,
    .reduce      = dpml_pipelined_build,
    .flags       = FOLD_ALG_NODE_AWARE,
};
