/* The node segments' flags during a replay (sim_flags.h). */
#include "sim_flags.h"

#include "node/segment.h"
#include "util/grow.h"

#include <stdlib.h>

#define NO_WAITER UINT32_MAX

typedef struct flag_log {
    double   *t;        /* when each post landed, in order */
    uint64_t *v;        /* the flag's value from then on */
    uint32_t *post;     /* the post step */
    size_t    n, cap;
    uint32_t  waiters;  /* head of the parked waits, or NO_WAITER */
} flag_log_t;

typedef struct waiter {
    uint64_t value;
    uint32_t g;
    int32_t  rank;
    uint32_t next;
} waiter_t;

struct sim_flags {
    flag_log_t *logs;   /* rank * FOLD_SHM_NFLAGS + flag */
    size_t      nlogs;
    waiter_t   *pool;   /* entries are not reused: a replay parks each wait once */
    size_t      npool, pool_cap;
};

sim_flags_t *sim_flags_new(int ranks)
{
    sim_flags_t *f = calloc(1, sizeof(*f));
    if (f == NULL) {
        return NULL;
    }
    f->nlogs = (size_t)ranks * FOLD_SHM_NFLAGS;
    f->logs  = calloc(f->nlogs, sizeof(*f->logs));
    if (f->logs == NULL) {
        free(f);
        return NULL;
    }
    for (size_t i = 0; i < f->nlogs; i++) {
        f->logs[i].waiters = NO_WAITER;
    }
    return f;
}

void sim_flags_free(sim_flags_t *f)
{
    if (f == NULL) {
        return;
    }
    for (size_t i = 0; i < f->nlogs; i++) {
        free(f->logs[i].t);
        free(f->logs[i].v);
        free(f->logs[i].post);
    }
    free(f->logs);
    free(f->pool);
    free(f);
}

static flag_log_t *log_of(const sim_flags_t *f, int owner, int flag)
{
    return &f->logs[(size_t)owner * FOLD_SHM_NFLAGS + (size_t)flag];
}

double sim_flags_reached(const sim_flags_t *f, int owner, int flag, uint64_t value,
                         uint32_t *post)
{
    const flag_log_t *l = log_of(f, owner, flag);
    size_t a = 0, z = l->n;
    while (a < z) {   /* the first entry at or above value */
        size_t mid = (a + z) / 2;
        if (l->v[mid] < value) {
            a = mid + 1;
        } else {
            z = mid;
        }
    }
    if (a == l->n) {
        return -1;
    }
    *post = l->post[a];
    return l->t[a];
}

int sim_flags_park(sim_flags_t *f, int owner, int flag, uint64_t value, int rank, uint32_t g)
{
    if (fold_util_grow((void **)&f->pool, &f->pool_cap, f->npool + 1, sizeof(*f->pool), 256) !=
        FOLD_OK) {
        return -1;
    }
    flag_log_t *l = log_of(f, owner, flag);
    f->pool[f->npool] = (waiter_t){value, g, rank, l->waiters};
    l->waiters = (uint32_t)f->npool++;
    return 0;
}

static int log_grow(flag_log_t *l)
{
    if (l->n < l->cap) {
        return 0;
    }
    size_t cap = l->cap ? 2 * l->cap : 4;   /* most flags are posted a few times */
    double *t = realloc(l->t, cap * sizeof(*t));
    if (t != NULL) {
        l->t = t;
    }
    uint64_t *v = realloc(l->v, cap * sizeof(*v));
    if (v != NULL) {
        l->v = v;
    }
    uint32_t *p = realloc(l->post, cap * sizeof(*p));
    if (p != NULL) {
        l->post = p;
    }
    if (t == NULL || v == NULL || p == NULL) {
        return -1;
    }
    l->cap = cap;
    return 0;
}

int sim_flags_post(sim_flags_t *f, int owner, int flag, uint64_t value, uint32_t post,
                   double t, sim_flag_met_fn met, void *arg)
{
    flag_log_t *l = log_of(f, owner, flag);
    if (log_grow(l) != 0) {
        return -1;
    }
    const uint64_t v = l->n > 0 && l->v[l->n - 1] > value ? l->v[l->n - 1] : value;
    l->t[l->n]    = t;
    l->v[l->n]    = v;
    l->post[l->n] = post;
    l->n++;
    for (uint32_t *at = &l->waiters; *at != NO_WAITER;) {
        waiter_t *w = &f->pool[*at];
        if (w->value > v) {
            at = &w->next;
            continue;
        }
        *at = w->next;
        met(arg, w->rank, w->g, post, t);
    }
    return 0;
}
