/*
 * Unit tests of the peer maths in runtime/coll/tree_math.c: binomial tree, chain,
 * in-order binary tree and the greedy pipelined plan, for several sizes and every
 * root.
 */
#include "coll/tree_math.h"

#include <criterion/criterion.h>
#include <fold/fold_status.h>
#include <stdlib.h>

static const int sizes[] = {1, 2, 3, 4, 5, 7, 8, 13, 16, 33};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static int ceil_log2(int n)
{
    int k = 0;
    while ((1L << k) < n) {
        k++;
    }
    return k;
}

static int floor_log2(int n)
{
    int k = 0;
    while ((2L << k) <= n) {
        k++;
    }
    return k;
}

/* Follows parent links from every rank; each must reach root within size hops.
 * Returns the largest depth. */
static int check_reaches_root(const int *parent, int size, int root)
{
    int max_depth = 0;
    for (int r = 0; r < size; r++) {
        int depth = 0;
        for (int x = r; x != root; x = parent[x]) {
            cr_assert(x >= 0 && x < size, "size %d root %d: rank %d leaves the tree", size, root, r);
            cr_assert(++depth < size, "size %d root %d: cycle from rank %d", size, root, r);
        }
        max_depth = depth > max_depth ? depth : max_depth;
    }
    return max_depth;
}

/* ---- binomial ------------------------------------------------------------ */

static int binomial_parent_rank(int rank, int root, int size)
{
    int p = fold_binomial_parent(fold_vrank(rank, root, size), size);
    return p < 0 ? -1 : fold_rank_of_vrank(p, root, size);
}

Test(binomial, parents_and_children_agree_for_every_root)
{
    for (size_t i = 0; i < NSIZES; i++) {
        int size = sizes[i];
        int parent[64], nparent_links[64];
        for (int root = 0; root < size; root++) {
            for (int r = 0; r < size; r++) {
                parent[r] = binomial_parent_rank(r, root, size);
                nparent_links[r] = 0;
                cr_assert_eq(parent[r] < 0, r == root, "size %d root %d rank %d", size, root, r);
            }
            for (int r = 0; r < size; r++) {
                int children[FOLD_BINOMIAL_MAX_CHILDREN];
                int n = fold_binomial_children(fold_vrank(r, root, size), size, children);
                for (int c = 0; c < n; c++) {
                    int child = fold_rank_of_vrank(children[c], root, size);
                    cr_assert_eq(parent[child], r, "size %d root %d: %d lists child %d",
                                 size, root, r, child);
                    nparent_links[child]++;
                }
            }
            for (int r = 0; r < size; r++) {
                cr_assert_eq(nparent_links[r], r == root ? 0 : 1, "size %d root %d rank %d",
                             size, root, r);
            }
            /* ceil(log2 p) rounds: the root combines one child per round and no
             * path is longer than that. */
            int depth = check_reaches_root(parent, size, root);
            int children[FOLD_BINOMIAL_MAX_CHILDREN];
            cr_assert_leq(depth, ceil_log2(size), "size %d: depth %d", size, depth);
            cr_assert_eq(fold_binomial_children(0, size, children), ceil_log2(size));
        }
    }
}

/* The range of vranks v's subtree covers, checking that each child in combine
 * order continues the accumulated range on the right. */
static int binomial_range_end(int v, int size)
{
    int children[FOLD_BINOMIAL_MAX_CHILDREN];
    int n = fold_binomial_children(v, size, children);
    int end = v + 1;
    for (int c = 0; c < n; c++) {
        cr_assert_eq(children[c], end, "size %d: child %d of %d is not adjacent", size,
                     children[c], v);
        end = binomial_range_end(children[c], size);
    }
    return end;
}

Test(binomial, subtrees_are_contiguous_in_combine_order)
{
    for (size_t i = 0; i < NSIZES; i++) {
        cr_assert_eq(binomial_range_end(0, sizes[i]), sizes[i]);
    }
}

/* ---- chain --------------------------------------------------------------- */

Test(chain, covers_every_rank_once_and_ends_at_root)
{
    for (size_t i = 0; i < NSIZES; i++) {
        int size = sizes[i];
        for (int root = 0; root < size; root++) {
            int seen[64] = {0};
            int v = size - 1, hops = 0;
            cr_assert_eq(fold_chain_upstream(v, size), -1, "size %d: tail has upstream", size);
            for (;;) {
                int r = fold_rank_of_vrank(v, root, size);
                cr_assert_eq(seen[r]++, 0, "size %d root %d: rank %d twice", size, root, r);
                int down = fold_chain_downstream(v, size);
                if (down < 0) {
                    break;
                }
                cr_assert_eq(fold_chain_upstream(down, size), v, "size %d: link %d>%d", size,
                             v, down);
                v = down;
                hops++;
            }
            cr_assert_eq(fold_rank_of_vrank(v, root, size), root);
            cr_assert_eq(hops, size - 1);
        }
    }
}

/* ---- in-order binary tree ------------------------------------------------- */

static int inorder_walk(int pos, int size, int next)
{
    if (pos < 0) {
        return next;
    }
    fold_bintree_node_t n = fold_bintree_node(pos, size);
    next = inorder_walk(n.left, size, next);
    cr_assert_eq(pos, next, "size %d: in-order visits %d where %d was due", size, pos, next);
    return inorder_walk(n.right, size, next + 1);
}

Test(bintree, parents_and_children_agree_for_every_root)
{
    for (size_t i = 0; i < NSIZES; i++) {
        int size = sizes[i];
        int top  = fold_bintree_root(size);
        for (int root = 0; root < size; root++) {
            /* The commutative mapping: rank = (pos + shift) mod size puts root on top. */
            int shift = fold_vrank(root, top, size);
            int parent[64], links[64] = {0};
            for (int pos = 0; pos < size; pos++) {
                fold_bintree_node_t n = fold_bintree_node(pos, size);
                int r = fold_rank_of_vrank(pos, shift, size);
                parent[r] = n.parent < 0 ? -1 : fold_rank_of_vrank(n.parent, shift, size);
                cr_assert_eq(n.parent < 0, r == root, "size %d root %d rank %d", size, root, r);
                int kids[2] = {n.left, n.right};
                for (int k = 0; k < 2; k++) {
                    if (kids[k] >= 0) {
                        cr_assert_eq(fold_bintree_node(kids[k], size).parent, pos);
                        links[kids[k]]++;
                    }
                }
                if (n.left >= 0 && n.right >= 0) {
                    cr_assert(n.left < pos && pos < n.right);
                }
            }
            for (int pos = 0; pos < size; pos++) {
                cr_assert_eq(links[pos], pos == top ? 0 : 1, "size %d pos %d", size, pos);
            }
            int depth = check_reaches_root(parent, size, root);
            cr_assert_eq(depth, floor_log2(size), "size %d: depth %d", size, depth);
        }
    }
}

Test(bintree, inorder_layout_is_rank_order)
{
    for (size_t i = 0; i < NSIZES; i++) {
        cr_assert_eq(inorder_walk(fold_bintree_root(sizes[i]), sizes[i], 0), sizes[i]);
    }
}

/* ---- greedy plan ----------------------------------------------------------- */

typedef struct plans {
    fold_greedy_xfer_t *x[64];
    size_t              n[64];
    size_t              nsteps;
} plans_t;

static void plans_build(plans_t *p, int size, int root, size_t nsegs)
{
    p->nsteps = 0;
    for (int r = 0; r < size; r++) {
        size_t nsteps = 0;
        int st = fold_greedy_plan(r, size, root, nsegs, &p->x[r], &p->n[r], &nsteps);
        cr_assert_eq(st, FOLD_OK);
        cr_assert(r == 0 || nsteps == p->nsteps, "ranks disagree on the step count");
        p->nsteps = nsteps;
    }
}

static void plans_free(plans_t *p, int size)
{
    for (int r = 0; r < size; r++) {
        free(p->x[r]);
    }
}

static size_t greedy_steps(int size, size_t nsegs)
{
    plans_t p;
    plans_build(&p, size, 0, nsegs);
    plans_free(&p, size);
    return p.nsteps;
}

/* Every send a -> b is the receive b <- a with the same rank among the messages
 * of that pair, the same segment and the same step. */
static void check_pairs_match(const plans_t *p, int size)
{
    for (int a = 0; a < size; a++) {
        for (int b = 0; b < size; b++) {
            size_t i = 0, j = 0;
            for (;;) {
                while (i < p->n[a] && !(p->x[a][i].send && p->x[a][i].peer == b)) {
                    i++;
                }
                while (j < p->n[b] && !(!p->x[b][j].send && p->x[b][j].peer == a)) {
                    j++;
                }
                cr_assert_eq(i < p->n[a], j < p->n[b], "%d>%d: unmatched message", a, b);
                if (i == p->n[a]) {
                    break;
                }
                cr_assert_eq(p->x[a][i].seg, p->x[b][j].seg, "%d>%d: segment differs", a, b);
                cr_assert_eq(p->x[a][i].step, p->x[b][j].step, "%d>%d: step differs", a, b);
                i++;
                j++;
            }
        }
    }
}

/* One transfer per rank per step, segments in order, each non-root sends each
 * segment once, and a segment only goes to a rank that still holds it. */
static void check_plan_shape(const plans_t *p, int size, int root, size_t nsegs)
{
    size_t last_step = 0;
    for (int r = 0; r < size; r++) {
        size_t sent = 0;
        for (size_t i = 0; i < p->n[r]; i++) {
            const fold_greedy_xfer_t *x = &p->x[r][i];
            cr_assert(x->seg < nsegs && x->step < p->nsteps);
            cr_assert(x->peer >= 0 && x->peer < size && x->peer != r);
            if (i > 0) {
                cr_assert(x->step > p->x[r][i - 1].step, "rank %d: two transfers in step %zu",
                          r, x->step);
                cr_assert(x->seg >= p->x[r][i - 1].seg, "rank %d: segments out of order", r);
            }
            if (x->send) {
                cr_assert_neq(r, root, "the root sends");
                cr_assert_eq(x->seg, sent++, "rank %d sends segment %zu out of turn", r, x->seg);
                /* The receiver still holds the segment: it sends it later or is root. */
                int holds = x->peer == root;
                for (size_t j = 0; !holds && j < p->n[x->peer]; j++) {
                    const fold_greedy_xfer_t *y = &p->x[x->peer][j];
                    holds = y->send && y->seg == x->seg && y->step > x->step;
                }
                cr_assert(holds, "rank %d sends segment %zu to %d, which has sent it", r,
                          x->seg, x->peer);
            }
            last_step = x->step > last_step ? x->step : last_step;
        }
        cr_assert_eq(sent, r == root ? 0 : nsegs, "rank %d sent %zu segments", r, sent);
    }
    if (size > 1 && nsegs > 0) {
        cr_assert_eq(last_step + 1, p->nsteps);
    }
}

Test(greedy, plans_are_consistent_for_every_root)
{
    static const size_t nsegs[] = {0, 1, 2, 3, 4, 8, 16};
    for (size_t i = 0; i < NSIZES; i++) {
        int size = sizes[i];
        for (int root = 0; root < size; root++) {
            for (size_t q = 0; q < sizeof(nsegs) / sizeof(nsegs[0]); q++) {
                plans_t p;
                plans_build(&p, size, root, nsegs[q]);
                check_pairs_match(&p, size);
                check_plan_shape(&p, size, root, nsegs[q]);
                plans_free(&p, size);
            }
        }
    }
}

Test(greedy, one_segment_is_the_binomial_tree)
{
    for (size_t i = 0; i < NSIZES; i++) {
        int size = sizes[i];
        for (int root = 0; root < size; root++) {
            plans_t p;
            plans_build(&p, size, root, 1);
            cr_assert_eq(p.nsteps, (size_t)ceil_log2(size), "size %d: %zu steps", size, p.nsteps);
            for (int r = 0; r < size; r++) {
                int children[FOLD_BINOMIAL_MAX_CHILDREN];
                int n = fold_binomial_children(fold_vrank(r, root, size), size, children);
                int parent = binomial_parent_rank(r, root, size);
                cr_assert_eq(p.n[r], (size_t)n + (parent >= 0), "size %d rank %d", size, r);
                for (int c = 0; c < n; c++) {
                    cr_assert(!p.x[r][c].send);
                    cr_assert_eq(p.x[r][c].peer, fold_rank_of_vrank(children[c], root, size));
                }
                if (parent >= 0) {
                    cr_assert(p.x[r][n].send);
                    cr_assert_eq(p.x[r][n].peer, parent);
                }
            }
            plans_free(&p, size);
        }
    }
}

Test(greedy, fewer_steps_than_the_chain)
{
    /* Chain: (p-1) + 2(q-1) steps. The greedy plan matches it at p = 3 (one
     * transfer per step is all three ranks allow) and beats it from p = 4 on. */
    for (size_t i = 0; i < NSIZES; i++) {
        int size = sizes[i];
        for (size_t q = 2; q <= 64; q++) {
            size_t greedy = greedy_steps(size, q);
            size_t chain  = (size_t)(size - 1) + 2 * (q - 1);
            if (size >= 4) {
                cr_assert_lt(greedy, chain, "p %d q %zu: greedy %zu chain %zu", size, q,
                             greedy, chain);
            } else if (size > 1) {
                cr_assert_leq(greedy, chain, "p %d q %zu: greedy %zu chain %zu", size, q,
                              greedy, chain);
            }
        }
    }
}

Test(greedy, rejects_bad_arguments)
{
    fold_greedy_xfer_t *x = NULL;
    size_t n = 7;
    cr_assert_eq(fold_greedy_plan(0, 0, 0, 1, &x, &n, NULL), FOLD_ERR_INVALID_ARG);
    cr_assert_eq(fold_greedy_plan(4, 4, 0, 1, &x, &n, NULL), FOLD_ERR_INVALID_ARG);
    cr_assert_eq(fold_greedy_plan(0, 4, -1, 1, &x, &n, NULL), FOLD_ERR_INVALID_ARG);
    cr_assert_eq(n, 7, "outputs written on failure");
}

/* ---- segments -------------------------------------------------------------- */

Test(segments, cut_covers_count)
{
    static const size_t counts[] = {0, 1, 7, 1024, 1025};
    static const size_t segs[]   = {1, 3, 1024, 5000};
    for (size_t c = 0; c < 5; c++) {
        for (size_t s = 0; s < 4; s++) {
            size_t total = 0, n = fold_seg_num(counts[c], segs[s]);
            for (size_t k = 0; k < n; k++) {
                size_t len = fold_seg_len(counts[c], segs[s], k);
                cr_assert(len > 0 && len <= segs[s]);
                total += len;
            }
            cr_assert_eq(total, counts[c]);
        }
    }
}
