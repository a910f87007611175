/*
 * Topology of a communicator for the node-aware algorithms: which of its ranks
 * share a node (from the context's launcher locality, ctx->node_of), which socket
 * each runs on (hwloc, gathered once per communicator), and the order in which a
 * node's ranks become leaders. That order takes one rank per socket in turn, so
 * the first l leaders of a node are spread across its sockets (the paper's
 * socket-level leaders when l equals the number of sockets).
 *
 * Nodes are numbered by their lowest comm rank; a node's ranks keep comm-rank order
 * and their index in it is their local index. Built once, immutable, so a schedule
 * may keep a pointer to it.
 */
#ifndef FOLD_TOPO_H
#define FOLD_TOPO_H

typedef struct fold_topo {
    int  size;          /* comm ranks */
    int  nnodes;
    int  min_ppn;       /* fewest ranks on a node */
    int  max_ppn;
    int  ring_cuts;     /* ranks r whose r + 1 (mod size) lies on another node: the
                           hops of a ring over the ranks that cross between nodes */
    int *node_of;       /* comm rank -> node */
    int *local_of;      /* comm rank -> local index */
    int *node_first;    /* node -> first entry of the node in ranks[], leader_order[];
                           nnodes + 1 entries */
    int *ranks;         /* comm ranks, node by node, increasing within a node */
    int *leader_order;  /* local indices, node by node, in leader order */
} fold_topo_t;

/* node_key[r] and package[r] for every comm rank r: equal keys share a node;
 * package -1 means unknown. Returns FOLD_OK or FOLD_ERR_NO_MEMORY. */
int  fold_topo_build(int size, const int *node_key, const int *package, fold_topo_t **topo);
void fold_topo_free(fold_topo_t *topo);

static inline int fold_topo_ppn(const fold_topo_t *t, int node)
{
    return t->node_first[node + 1] - t->node_first[node];
}

/* Comm rank of the rank with local index `local` on `node`. */
static inline int fold_topo_rank(const fold_topo_t *t, int node, int local)
{
    return t->ranks[t->node_first[node] + local];
}

/* Local index of leader j (0 <= j < ppn) on `node`. */
static inline int fold_topo_leader_local(const fold_topo_t *t, int node, int j)
{
    return t->leader_order[t->node_first[node] + j];
}

/* Which leader `rank` is when each node has `leaders` leaders, or -1. */
int fold_topo_leader_index(const fold_topo_t *t, int rank, int leaders);

/* The package (socket) and NUMA node the calling thread runs on, from hwloc:
 * its binding when that lies within one package, else where it last ran; -1 when
 * hwloc cannot tell. */
void fold_topo_locate(int *package, int *numa);

#endif
