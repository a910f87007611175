/* The replay's logic (sim_run.h). */
#include "sim_run.h"

#include "sim_flags.h"

#include "coll/sched.h"
#include "util/grow.h"

#include <fold/fold_status.h>
#include <math.h>
#include <stdlib.h>

/* A timer due within this much of now is due now (the simulator's clock rounds). */
#define DUE_SLACK 1e-12

typedef struct entry {
    double   t;
    uint32_t g;
} entry_t;

/* A binary heap of (time, step), least first. */
typedef struct heap {
    entry_t *e;
    size_t   n, cap;
} heap_t;

typedef struct rank_state {
    heap_t   ready;     /* steps ready for the CPU */
    heap_t   timers;    /* flag posts landing, waits met */
    uint32_t cpu_step;  /* the step on the CPU, SIM_NONE: idle */
    uint32_t cpu_last;  /* the last step that had it */
    double   cpu_free;  /* when its last slot ended */
    size_t   left;      /* steps not done */
} rank_state_t;

struct sim_run {
    sim_prog_t   *g;
    sim_step_t   *steps;
    rank_state_t *ranks;
    sim_flags_t  *flags;
    sim_hooks_t   hooks;
    double        step_s, flag_s, eager_bytes;
    size_t        ndone;
    int           status;
};

static int before(const entry_t *a, const entry_t *b)
{
    return a->t < b->t || (a->t == b->t && a->g < b->g);
}

static int heap_push(heap_t *h, double t, uint32_t g)
{
    if (fold_util_grow((void **)&h->e, &h->cap, h->n + 1, sizeof(*h->e), 8) != FOLD_OK) {
        return -1;
    }
    entry_t x = {t, g};
    size_t i = h->n++;
    while (i > 0 && before(&x, &h->e[(i - 1) / 2])) {
        h->e[i] = h->e[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->e[i] = x;
    return 0;
}

static entry_t heap_pop(heap_t *h)
{
    entry_t top = h->e[0], last = h->e[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) {
            break;
        }
        if (c + 1 < h->n && before(&h->e[c + 1], &h->e[c])) {
            c++;
        }
        if (!before(&h->e[c], &last)) {
            break;
        }
        h->e[i] = h->e[c];
        i = c;
    }
    if (h->n > 0) {
        h->e[i] = last;
    }
    return top;
}

static uint32_t ev(uint32_t g, int type)
{
    return (g << 1) | (uint32_t)type;
}

sim_run_t *sim_run_new(sim_prog_t *g, const fold_model_params_t *p, const sim_hooks_t *hooks)
{
    sim_run_t *run = calloc(1, sizeof(*run));
    if (run == NULL) {
        return NULL;
    }
    run->g     = g;
    run->steps = g->steps;
    run->hooks = *hooks;
    run->step_s = p->step_us * 1e-6;
    run->flag_s = p->flag_us * 1e-6;
    run->eager_bytes = p->eager_bytes;
    run->ranks = calloc((size_t)g->size, sizeof(*run->ranks));
    run->flags = sim_flags_new(g->size);
    if (run->ranks == NULL || run->flags == NULL) {
        sim_run_free(run);
        return NULL;
    }
    for (int r = 0; r < g->size; r++) {
        run->ranks[r].cpu_step = SIM_NONE;
        run->ranks[r].cpu_last = SIM_NONE;
        run->ranks[r].left     = g->end[r] - g->first[r];
    }
    return run;
}

void sim_run_free(sim_run_t *run)
{
    if (run == NULL) {
        return;
    }
    for (int r = 0; run->ranks != NULL && r < run->g->size; r++) {
        free(run->ranks[r].ready.e);
        free(run->ranks[r].timers.e);
    }
    free(run->ranks);
    sim_flags_free(run->flags);
    free(run);
}

static void oom(sim_run_t *run)
{
    run->status = FOLD_ERR_NO_MEMORY;
}

/* Step g of rank is ready at t: a flag post lands step_us later, anything else
 * queues for the CPU. */
static void make_ready(sim_run_t *run, int rank, uint32_t g, double t)
{
    sim_step_t *st = &run->steps[g];
    st->state = SIM_READY;
    st->t_post = t;
    heap_t *h = st->kind == FOLD_STEP_SHM_POST ? &run->ranks[rank].timers
                                               : &run->ranks[rank].ready;
    if (heap_push(h, st->kind == FOLD_STEP_SHM_POST ? t + run->step_s : t, g) != 0) {
        oom(run);
    }
}

/* Step g of rank is done at t, after event `cause`. */
static void complete(sim_run_t *run, int rank, uint32_t g, double t, uint32_t cause)
{
    sim_step_t *st = &run->steps[g];
    st->state      = SIM_DONE;
    st->t_done     = t;
    st->cause_done = cause;
    run->ranks[rank].left--;
    run->ndone++;
    const uint32_t *succ = run->g->succ + st->succ_off;
    for (uint32_t k = 0; k < st->nsucc; k++) {
        sim_step_t *next = &run->steps[succ[k]];
        if (next->cause_post == SIM_NONE || t >= next->t_post) {
            next->t_post     = t;
            next->cause_post = ev(g, SIM_EV_DONE);
        }
        if (--next->npred == 0) {
            make_ready(run, rank, succ[k], next->t_post);
        }
    }
}

void sim_run_start(sim_run_t *run, int rank)
{
    for (size_t g = run->g->first[rank]; g < run->g->end[rank]; g++) {
        if (run->steps[g].npred == 0) {
            make_ready(run, rank, (uint32_t)g, 0);
        }
    }
    sim_run_kick(run, rank, 0);
}

static void start_transfer(sim_run_t *run, int sender, uint32_t send, uint32_t cause)
{
    sim_step_t *st = &run->steps[send];
    st->state      = SIM_MOVING;
    st->cause_done = cause;
    run->hooks.start_msg(run->hooks.arg, sender, send, st->amount, st->peer);
}

void sim_run_arrived(sim_run_t *run, uint32_t send, double now)
{
    sim_step_t *st = &run->steps[send];
    sim_step_t *recv = &run->steps[st->link];
    const int sender = run->steps[st->link].peer, receiver = st->peer;
    complete(run, sender, send, now, st->cause_done);
    run->hooks.ring(run->hooks.arg, sender);
    if (recv->state == SIM_POSTED) {
        complete(run, receiver, st->link, now, ev(send, SIM_EV_DONE));
        run->hooks.ring(run->hooks.arg, receiver);
    }
}

/* A wait whose flags have all come: done at the latest of them + flag_us (kept in
 * t_done), now or by a timer. */
static void wait_met_all(sim_run_t *run, int rank, uint32_t g, double now)
{
    sim_step_t *st = &run->steps[g];
    if (st->t_done <= now + DUE_SLACK) {
        complete(run, rank, g, st->t_done > now ? st->t_done : now, st->cause_done);
    } else if (heap_push(&run->ranks[rank].timers, st->t_done, g) != 0) {
        oom(run);
    }
}

static void flag_met(void *arg, int rank, uint32_t g, uint32_t post, double t)
{
    sim_run_t *run = arg;
    sim_step_t *st = &run->steps[g];
    if (t + run->flag_s > st->t_done) {
        st->t_done     = t + run->flag_s;
        st->cause_done = ev(post, SIM_EV_DONE);
    }
    if (--st->link == 0) {
        wait_met_all(run, rank, g, t);
        run->hooks.ring(run->hooks.arg, rank);
    }
}

static void wait_posted(sim_run_t *run, int rank, uint32_t g, double now)
{
    sim_step_t *st = &run->steps[g];
    const fold_topo_t *topo = run->g->topo;
    const int node = topo->node_of[rank], me = topo->local_of[rank];
    const int lo = st->peer >= 0 ? st->peer : 0;
    const int hi = st->peer >= 0 ? st->peer + 1 : fold_topo_ppn(topo, node);
    st->t_done     = now;
    st->cause_done = ev(g, SIM_EV_POST);
    st->link       = 0;
    if (st->amount == 0) {   /* the previous call's end: a single call never waits */
        complete(run, rank, g, now, st->cause_done);
        return;
    }
    for (int l = lo; l < hi; l++) {
        if (st->peer < 0 && l == me) {
            continue;
        }
        const int owner = fold_topo_rank(topo, node, l);
        uint32_t post;
        double at = sim_flags_reached(run->flags, owner, st->flag, st->amount, &post);
        if (at >= 0) {
            if (at + run->flag_s > st->t_done) {
                st->t_done     = at + run->flag_s;
                st->cause_done = ev(post, SIM_EV_DONE);
            }
        } else if (sim_flags_park(run->flags, owner, st->flag, st->amount, rank, g) != 0) {
            oom(run);
        } else {
            st->link++;
        }
    }
    if (st->link == 0) {
        wait_met_all(run, rank, g, now);
    }
}

static int is_eager(const sim_run_t *run, const sim_step_t *st)
{
    return (double)st->amount <= run->eager_bytes;
}

void sim_run_cpu_done(sim_run_t *run, int rank, double now)
{
    rank_state_t *rs = &run->ranks[rank];
    const uint32_t g = rs->cpu_step;
    sim_step_t *st = &run->steps[g];
    rs->cpu_step = SIM_NONE;
    rs->cpu_last = g;
    rs->cpu_free = now;
    st->t_post   = now;
    st->state    = SIM_POSTED;
    const uint32_t posted = ev(g, SIM_EV_POST);
    switch (st->kind) {
    case FOLD_STEP_SEND:
        if (is_eager(run, st) || run->steps[st->link].state == SIM_POSTED) {
            start_transfer(run, rank, g, posted);
        }
        break;
    case FOLD_STEP_RECV: {
        const sim_step_t *send = &run->steps[st->link];
        if (send->state == SIM_DONE) {   /* already arrived */
            const int late = send->t_done > now;
            complete(run, rank, g, late ? send->t_done : now,
                     late ? ev(st->link, SIM_EV_DONE) : posted);
        } else if (send->state == SIM_POSTED && !is_eager(run, send)) {
            start_transfer(run, st->peer, st->link, posted);   /* the sender waits */
        }
        break;
    }
    case FOLD_STEP_SHM_WAIT:
        wait_posted(run, rank, g, now);
        break;
    default:
        complete(run, rank, g, now, posted);
    }
}

void sim_run_kick(sim_run_t *run, int rank, double now)
{
    rank_state_t *rs = &run->ranks[rank];
    while (rs->cpu_step == SIM_NONE && rs->ready.n > 0 && run->status == FOLD_OK) {
        entry_t e = heap_pop(&rs->ready);
        sim_step_t *st = &run->steps[e.g];
        if (rs->cpu_last != SIM_NONE && rs->cpu_free > st->t_post) {
            st->cause_post = ev(rs->cpu_last, SIM_EV_POST);   /* it waited for the CPU */
        }
        rs->cpu_step = e.g;
        if (st->cost > 0) {
            run->hooks.start_cpu(run->hooks.arg, rank, st->cost);
        } else {
            sim_run_cpu_done(run, rank, now);
        }
    }
}

void sim_run_fire(sim_run_t *run, int rank, double now)
{
    heap_t *h = &run->ranks[rank].timers;
    while (h->n > 0 && h->e[0].t <= now + DUE_SLACK && run->status == FOLD_OK) {
        entry_t e = heap_pop(h);
        sim_step_t *st = &run->steps[e.g];
        if (st->kind == FOLD_STEP_SHM_POST) {   /* the flag lands */
            st->t_post = e.t;
            st->state  = SIM_POSTED;
            if (sim_flags_post(run->flags, rank, st->flag, st->amount, e.g, e.t, flag_met,
                               run) != 0) {
                oom(run);
            }
            complete(run, rank, e.g, e.t, ev(e.g, SIM_EV_POST));
        } else {   /* a wait met */
            complete(run, rank, e.g, e.t, st->cause_done);
        }
    }
}

double sim_run_next_timer(const sim_run_t *run, int rank)
{
    const heap_t *h = &run->ranks[rank].timers;
    return h->n > 0 ? h->e[0].t : INFINITY;
}

int sim_run_rank_done(const sim_run_t *run, int rank)
{
    return run->ranks[rank].left == 0 || run->status != FOLD_OK;
}

int sim_run_status(const sim_run_t *run)
{
    return run->status;
}

size_t sim_run_steps_done(const sim_run_t *run)
{
    return run->ndone;
}
