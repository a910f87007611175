/* The critical path of a replay (sim_path.h). */
#include "sim_path.h"

#include "coll/sched.h"
#include "util/grow.h"

#include <stdlib.h>
#include <string.h>

static double event_time(const sim_prog_t *g, uint32_t e)
{
    const sim_step_t *st = &g->steps[e >> 1];
    return (e & 1) == SIM_EV_DONE ? st->t_done : st->t_post;
}

static uint32_t cause_of(const sim_prog_t *g, uint32_t e)
{
    const sim_step_t *st = &g->steps[e >> 1];
    return (e & 1) == SIM_EV_DONE ? st->cause_done : st->cause_post;
}

static sim_part_t part_of(const sim_prog_t *g, uint32_t e, uint32_t cause)
{
    const sim_step_t *st = &g->steps[e >> 1];
    if ((e & 1) == SIM_EV_POST) {
        return SIM_PART_CPU;
    }
    if (st->kind == FOLD_STEP_SEND) {
        return SIM_PART_NET;
    }
    if (st->kind == FOLD_STEP_SHM_WAIT && cause != SIM_NONE &&
        g->steps[cause >> 1].kind == FOLD_STEP_SHM_POST) {
        return SIM_PART_FLAG;
    }
    return SIM_PART_WAIT;
}

sim_path_elem_t *sim_path_find(const sim_prog_t *g, size_t *n)
{
    *n = 0;
    size_t last = 0;
    for (size_t i = 1; i < g->nsteps; i++) {
        if (g->steps[i].t_done > g->steps[last].t_done) {
            last = i;
        }
    }
    if (g->nsteps == 0) {
        return NULL;
    }
    size_t cap = 64, len = 0;
    sim_path_elem_t *path = malloc(cap * sizeof(*path));
    uint32_t e = ((uint32_t)last << 1) | SIM_EV_DONE;
    /* Causes go back in time, and a cycle cannot happen; the bound only guards. */
    for (size_t guard = 0; path != NULL && e != SIM_NONE && guard <= 2 * g->nsteps; guard++) {
        const uint32_t c = cause_of(g, e);
        const double end = event_time(g, e), start = c == SIM_NONE ? 0 : event_time(g, c);
        if (end > start) {
            if (fold_util_grow((void **)&path, &cap, len + 1, sizeof(*path), cap) != FOLD_OK) {
                free(path);
                return NULL;
            }
            path[len++] = (sim_path_elem_t){e >> 1, sim_prog_rank_of(g, e >> 1),
                                            part_of(g, e, c), start, end};
        }
        e = c;
    }
    for (size_t i = 0; path != NULL && i < len / 2; i++) {   /* into time order */
        sim_path_elem_t t = path[i];
        path[i] = path[len - 1 - i];
        path[len - 1 - i] = t;
    }
    *n = len;
    return path;
}

static const char *const part_names[] = {"cpu", "net", "flag", "wait"};

/* "cpu reduce", "net send" ...: what an element spent its time on. */
static void describe(const sim_prog_t *g, const sim_path_elem_t *p, char *buf, size_t len)
{
    const sim_step_t *st = &g->steps[p->g];
    const char *kind = fold_step_kind_name(st->kind);
    switch (st->kind) {
    case FOLD_STEP_SEND:
    case FOLD_STEP_RECV:
        snprintf(buf, len, "%s %s rank %d, %llu B", kind,
                 st->kind == FOLD_STEP_SEND ? "to" : "from", st->peer,
                 (unsigned long long)st->amount);
        break;
    case FOLD_STEP_SHM_POST:
    case FOLD_STEP_SHM_WAIT:
        snprintf(buf, len, "%s %s = %llu", kind, fold_flag_name(st->flag),
                 (unsigned long long)st->amount);
        break;
    default:
        snprintf(buf, len, "%s, %llu B", kind, (unsigned long long)st->amount);
    }
}

void sim_path_print(FILE *out, const sim_prog_t *g, const sim_path_elem_t *path, size_t n,
                    size_t limit)
{
    double total[4] = {0}, sum = 0;
    size_t count[4] = {0};
    for (size_t i = 0; i < n; i++) {
        total[path[i].part] += path[i].end - path[i].start;
        count[path[i].part]++;
        sum += path[i].end - path[i].start;
    }
    fprintf(out, "# critical path: %zu elements, %.3f us:", n, sum * 1e6);
    for (int k = 0; k < 4; k++) {
        if (count[k] > 0) {
            fprintf(out, " %s %.3f us (%zu)", part_names[k], total[k] * 1e6, count[k]);
        }
    }
    fprintf(out, "\n#   %6s %6s %-5s %-36s %12s %10s\n", "rank", "step", "part", "step kind",
            "start_us", "us");
    for (size_t i = 0; i < n && limit > 0; i++) {
        if (n > limit && i == limit / 2) {
            fprintf(out, "#   ... %zu more ...\n", n - limit);
            i = n - (limit - limit / 2);
        }
        const sim_path_elem_t *p = &path[i];
        char what[96];
        describe(g, p, what, sizeof(what));
        fprintf(out, "    %6d %6zu %-5s %-36s %12.3f %10.3f\n", p->rank,
                (size_t)p->g - g->first[p->rank] + 1, part_names[p->part], what,
                p->start * 1e6, (p->end - p->start) * 1e6);
    }
}
