/* Every rank's schedule in one array, priced and matched (sim_prog.h). */
#include "sim_prog.h"

#include "coll/model_build.h"
#include "coll/model_cost.h"
#include "coll/sched.h"
#include "node/segment.h"
#include "util/grow.h"

#include <fold/fold_status.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int grow(void **buf, size_t *cap, size_t need, size_t elem)
{
    return fold_util_grow(buf, cap, need, elem, 1024);
}

/* Appends rank r's finalized schedule with its steps' CPU times (us). */
static int append(sim_prog_t *g, size_t *cap, size_t *succ_cap, int r, const fold_sched_t *s,
                  const double *cost_us, size_t esize)
{
    size_t nsucc = 0;
    for (size_t i = 0; i < s->nsteps; i++) {
        nsucc += s->steps[i].nsucc;
    }
    if (g->nsteps + s->nsteps >= (SIM_NONE >> 1) || g->nsucc + nsucc >= SIM_NONE) {
        fprintf(stderr, "fold_sim: more than 2^31 steps: too large to replay\n");
        return FOLD_ERR_NO_MEMORY;
    }
    if (grow((void **)&g->steps, cap, g->nsteps + s->nsteps, sizeof(*g->steps)) != FOLD_OK ||
        grow((void **)&g->succ, succ_cap, g->nsucc + nsucc, sizeof(*g->succ)) != FOLD_OK) {
        return FOLD_ERR_NO_MEMORY;
    }
    const size_t base = g->nsteps;
    g->first[r] = base;
    for (size_t i = 0; i < s->nsteps; i++) {
        const fold_step_t *st = &s->steps[i];
        const int shm = st->kind == FOLD_STEP_SHM_POST || st->kind == FOLD_STEP_SHM_WAIT;
        g->steps[base + i] = (sim_step_t){
            .cost       = cost_us[i] * 1e-6,
            .amount     = shm ? st->value : (uint64_t)st->count * (uint64_t)esize,
            .peer       = st->kind == FOLD_STEP_SHM_WAIT ? st->local : st->peer,
            .npred      = st->npred,
            .succ_off   = (uint32_t)g->nsucc,
            .nsucc      = st->nsucc,
            .link       = st->kind == FOLD_STEP_RECV || st->kind == FOLD_STEP_SEND ? st->seq
                                                                                 : SIM_NONE,
            .cause_post = SIM_NONE,
            .cause_done = SIM_NONE,
            .kind       = st->kind,
            .flag       = st->flag,
            .state      = SIM_WAITING,
        };
        for (uint32_t k = 0; k < st->nsucc; k++) {
            g->succ[g->nsucc++] = (uint32_t)(base + s->succ[st->succ_off + k]);
        }
    }
    g->nsteps   = base + s->nsteps;
    g->end[r]   = g->nsteps;
    g->has_out[r] = (uint8_t)(s->has_out != 0);
    return FOLD_OK;
}

/* Peers, local indices and flags in range; logs the first that is not. */
static int check_steps(const sim_prog_t *g)
{
    const fold_topo_t *t = g->topo;
    for (int r = 0; r < g->size; r++) {
        const int ppn = fold_topo_ppn(t, t->node_of[r]);
        for (size_t i = g->first[r]; i < g->end[r]; i++) {
            const sim_step_t *st = &g->steps[i];
            const int msg = st->kind == FOLD_STEP_SEND || st->kind == FOLD_STEP_RECV;
            const int shm = st->kind == FOLD_STEP_SHM_POST || st->kind == FOLD_STEP_SHM_WAIT;
            if ((msg && (st->peer < 0 || st->peer >= g->size)) ||
                (st->kind == FOLD_STEP_SHM_WAIT && (st->peer < -1 || st->peer >= ppn)) ||
                (shm && st->flag >= FOLD_SHM_NFLAGS)) {
                fprintf(stderr, "fold_sim: rank %d, step %zu (%s) names a rank, local rank or "
                        "flag that does not exist\n", r, i - g->first[r] + 1,
                        fold_step_kind_name(st->kind));
                return FOLD_ERR_INVALID_ARG;
            }
        }
    }
    return FOLD_OK;
}

/* A receive by (receiver, sender, seq) in one 64-bit key. */
typedef struct recv_key {
    uint64_t key;
    uint32_t g;
} recv_key_t;

#define KEY_RANK_BITS 21
#define KEY_SEQ_BITS  22

static uint64_t key_of(int to, int from, uint32_t seq)
{
    return ((uint64_t)to << (KEY_RANK_BITS + KEY_SEQ_BITS)) |
           ((uint64_t)from << KEY_SEQ_BITS) | seq;
}

static int key_order(const void *a, const void *b)
{
    const recv_key_t *x = a, *y = b;
    return (x->key > y->key) - (x->key < y->key);
}

static int match_fail(const sim_prog_t *g, size_t gi, const char *why)
{
    const int r = sim_prog_rank_of(g, gi);
    const sim_step_t *st = &g->steps[gi];
    fprintf(stderr, "fold_sim: rank %d, step %zu (%s %s rank %d, %llu bytes) %s: the ranks' "
            "schedules do not match\n", r, gi - g->first[r] + 1, fold_step_kind_name(st->kind),
            st->kind == FOLD_STEP_SEND ? "to" : "from", st->peer,
            (unsigned long long)st->amount, why);
    return FOLD_ERR_INVALID_ARG;
}

/* Pairs the k-th send from a to b with the k-th receive b posts from a: link then
 * names the other side. */
static int match_messages(sim_prog_t *g)
{
    if (g->size >= (1 << KEY_RANK_BITS)) {
        fprintf(stderr, "fold_sim: more than %d ranks\n", (1 << KEY_RANK_BITS) - 1);
        return FOLD_ERR_INVALID_ARG;
    }
    size_t nrecv = 0;
    for (size_t i = 0; i < g->nsteps; i++) {
        nrecv += g->steps[i].kind == FOLD_STEP_RECV;
        g->nmsgs += g->steps[i].kind == FOLD_STEP_SEND;
    }
    if (nrecv != g->nmsgs) {
        fprintf(stderr, "fold_sim: %zu sends against %zu receives: the ranks' schedules do "
                "not match\n", g->nmsgs, nrecv);
        return FOLD_ERR_INVALID_ARG;
    }
    recv_key_t *keys = malloc((nrecv + 1) * sizeof(*keys));
    if (keys == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    size_t n = 0;
    int status = FOLD_OK;
    for (int r = 0; r < g->size && status == FOLD_OK; r++) {
        for (size_t i = g->first[r]; i < g->end[r]; i++) {
            const sim_step_t *st = &g->steps[i];
            if (st->kind == FOLD_STEP_RECV) {
                if (st->link >= (1u << KEY_SEQ_BITS)) {
                    status = match_fail(g, i, "has too many messages before it");
                    break;
                }
                keys[n++] = (recv_key_t){key_of(r, st->peer, st->link), (uint32_t)i};
            }
        }
    }
    qsort(keys, n, sizeof(*keys), key_order);
    for (size_t k = 1; k < n && status == FOLD_OK; k++) {
        if (keys[k].key == keys[k - 1].key) {
            status = match_fail(g, keys[k].g, "has the number of another receive");
        }
    }
    for (int r = 0; r < g->size && status == FOLD_OK; r++) {
        for (size_t i = g->first[r]; i < g->end[r] && status == FOLD_OK; i++) {
            sim_step_t *st = &g->steps[i];
            if (st->kind != FOLD_STEP_SEND) {
                continue;
            }
            recv_key_t want = {key_of(st->peer, r, st->link), 0};
            recv_key_t *at = st->link < (1u << KEY_SEQ_BITS)
                                 ? bsearch(&want, keys, n, sizeof(*keys), key_order) : NULL;
            if (at == NULL || at->g == SIM_NONE) {
                status = match_fail(g, i, "has no matching receive");
            } else if (g->steps[at->g].amount != st->amount) {
                status = match_fail(g, i, "sends another size than its receive takes");
            } else {
                st->link = at->g;
                g->steps[at->g].link = (uint32_t)i;
                g->msg_bytes += st->amount;
                at->g = SIM_NONE;
            }
        }
    }
    free(keys);
    return status;
}

/* Builds, prices and appends node n's ranks (ppn schedules live at once: the model
 * prices a node's steps by the node's working set). */
static int build_node(sim_prog_t *g, size_t *cap, size_t *succ_cap, const fold_model_query_t *q,
                      const fold_model_params_t *p, int n, fold_sched_t *scheds,
                      fold_sched_t **ptrs, fold_sched_scratch_t *x, double **cost,
                      size_t *cost_cap)
{
    const fold_topo_t *t = g->topo;
    const int ppn = fold_topo_ppn(t, n);
    size_t total = 0;
    int status = FOLD_OK;
    for (int l = 0; l < ppn && status == FOLD_OK; l++) {
        status = fold_model_build_rank(t, q, fold_topo_rank(t, n, l), x, &scheds[l]);
        ptrs[l] = &scheds[l];
        total += scheds[l].nsteps;
    }
    if (status == FOLD_OK) {
        status = grow((void **)cost, cost_cap, total + 1, sizeof(double));
    }
    if (status == FOLD_OK) {
        status = fold_model_step_costs(p, t, n, ptrs, q->esize, q->ws_scale, *cost);
    }
    for (int l = 0, at = 0; l < ppn && status == FOLD_OK; l++) {
        status = append(g, cap, succ_cap, fold_topo_rank(t, n, l), &scheds[l], *cost + at,
                        q->esize);
        at += (int)scheds[l].nsteps;
    }
    return status;
}

int sim_prog_build(sim_prog_t *g, const fold_topo_t *topo, const fold_model_query_t *q,
                   const fold_model_params_t *p)
{
    memset(g, 0, sizeof(*g));
    g->topo    = topo;
    g->size    = topo->size;
    g->first   = calloc((size_t)topo->size, sizeof(size_t));
    g->end     = calloc((size_t)topo->size, sizeof(size_t));
    g->has_out = calloc((size_t)topo->size, 1);
    const size_t ppn = (size_t)topo->max_ppn;
    fold_sched_t *scheds = calloc(ppn, sizeof(*scheds));
    fold_sched_t **ptrs  = calloc(ppn, sizeof(*ptrs));
    fold_sched_scratch_t *x = fold_sched_scratch_new();
    int status = g->first && g->end && g->has_out && scheds && ptrs ? FOLD_OK
                                                                   : FOLD_ERR_NO_MEMORY;
    for (size_t l = 0; scheds != NULL && l < ppn; l++) {
        fold_sched_init(&scheds[l], &q->proto);
    }
    size_t cap = 0, succ_cap = 0, cost_cap = 0;
    double *cost = NULL;
    for (int n = 0; n < topo->nnodes && status == FOLD_OK; n++) {
        status = build_node(g, &cap, &succ_cap, q, p, n, scheds, ptrs, x, &cost, &cost_cap);
    }
    for (size_t l = 0; scheds != NULL && l < ppn; l++) {
        fold_sched_cleanup(&scheds[l]);
    }
    free(scheds);
    free(ptrs);
    free(cost);
    fold_sched_scratch_free(x);
    if (status == FOLD_OK) {
        status = check_steps(g);
    }
    if (status == FOLD_OK) {
        status = match_messages(g);
    }
    return status;
}

void sim_prog_free(sim_prog_t *g)
{
    free(g->first);
    free(g->end);
    free(g->steps);
    free(g->succ);
    free(g->has_out);
    memset(g, 0, sizeof(*g));
}

int sim_prog_rank_of(const sim_prog_t *g, size_t gi)
{
    /* Ranks are appended node by node: search the ranks by their first steps. */
    for (int r = 0; r < g->size; r++) {
        if (gi >= g->first[r] && gi < g->end[r]) {
            return r;
        }
    }
    return -1;
}
