/*
 * The world's decisions before its first call (fold_init, FOLD_WORLD_SETUP=init).
 *
 * A call of a size class no call has had yet asks the cost model, whose replay walks
 * the schedules of every candidate, longer the more segments a size has (on more
 * than FOLD_SELECT_CLOSED_RANKS ranks closed forms answer instead, in microseconds).
 * That cost would land on the application's first call of each size (an OSU sweep
 * sees it at every row). Classes above 64 MiB stay lazy: their calls are long enough
 * that a decision is a few percent of one. Instead every rank decides a share of the
 * classes, one allgather gives everyone every decision, and each rank installs them
 * in its cache as if it had made them: the model is deterministic and its parameters are the
 * same on every rank, so the result is what each would have found.
 *
 *   items: (allreduce, reduce) x size classes 1 B .. 64 MiB
 *   item i is decided by rank i mod size, in its slot i / size
 */
#include "comm.h"
#include "log.h"
#include "util/clock.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define WARM_ITEMS (2 * FOLD_SELECT_WARM_CLASSES)
#define WARM_ADOPT_MIN_CLASS 12   /* 4 KiB: a buffer of whole pages */

/* A choice on the wire: algorithms as indices into fold_alg_all. */
typedef struct warm_choice {
    int8_t   valid;
    int8_t   fast;
    int16_t  alg, inter, leaders, root_weight;
    uint64_t seg_bytes;
    double   us;
} warm_choice_t;

/* One decision on the wire. */
typedef struct warm_record {
    int8_t  advice;   /* fold_serve_advice's answer, -1 not asked */
    int8_t  nalgs;
    int8_t  algs[FOLD_RULE_MAX_ALGS];
    int32_t adopt_passes;   /* fold_select_adopt_passes', 0: not asked */
    uint64_t segs[FOLD_RULE_MAX_ALGS];
    warm_choice_t heap;     /* valid: the model decided (else a rule named one) */
    /* The choice for buffers in fold memory, which pricing the adoption made: every
     * blocking call of the class asks it (the placement agreement). */
    warm_choice_t mapped;
} warm_record_t;

static int alg_index(const fold_alg_t *alg)
{
    for (int i = 0; alg != NULL && fold_alg_all[i] != NULL; i++) {
        if (fold_alg_all[i] == alg) {
            return i;
        }
    }
    return -1;
}

static int alg_count(void)
{
    int n = 0;
    while (fold_alg_all[n] != NULL) {
        n++;
    }
    return n;
}

static const fold_alg_t *alg_at(int i)
{
    return i >= 0 && i < alg_count() ? fold_alg_all[i] : NULL;
}

/* An entry's choice onto the wire. */
static void choice_out(const fold_select_entry_t *e, warm_choice_t *w)
{
    *w = (warm_choice_t){.valid = 1, .fast = (int8_t)e->choice.fast,
                         .alg = (int16_t)alg_index(e->choice.alg),
                         .inter = (int16_t)alg_index(e->choice.inter),
                         .leaders = (int16_t)e->choice.leaders,
                         .root_weight = (int16_t)e->choice.root_weight,
                         .seg_bytes = e->choice.seg_bytes, .us = e->us};
}

/* A choice off the wire into e (memory: the one for buffers in fold memory); 0 where
 * it does not read back. */
static int choice_in(const warm_choice_t *w, int memory, fold_select_entry_t *e)
{
    e->choice = (fold_choice_t){alg_at(w->alg), w->leaders, alg_at(w->inter),
                                w->root_weight, w->fast, (size_t)w->seg_bytes, memory};
    e->us     = w->us;
    return w->valid && e->choice.alg != NULL && (w->inter < 0 || e->choice.inter != NULL);
}

static fold_coll_t item_coll(int item)
{
    return item < FOLD_SELECT_WARM_CLASSES ? FOLD_COLL_ALLREDUCE : FOLD_COLL_REDUCE;
}

static int item_class(int item)
{
    return item % FOLD_SELECT_WARM_CLASSES;
}

static void decide(fold_comm_t *comm, int item, warm_record_t *rec)
{
    fold_coll_t coll = item_coll(item);
    int k = item_class(item);
    fold_choice_t choice;
    memset(rec, 0, sizeof(*rec));
    rec->advice = -1;
    if (fold_select(comm, coll, (size_t)1 << k, FOLD_UINT8, FOLD_OP_SUM, &choice) != FOLD_OK) {
        return;
    }
    const fold_select_entry_t *e = &comm->select.entry[coll][k];
    if (e->valid) {
        rec->nalgs = (int8_t)e->nalgs;
        choice_out(e, &rec->heap);
        for (int a = 0; a < e->nalgs; a++) {
            rec->algs[a] = (int8_t)alg_index(e->algs[a]);
            rec->segs[a] = e->segs[a];
        }
    }
    rec->advice = (int8_t)fold_select_advice_class(comm, coll, k);
    /* Where buffers may move into fold memory (whole pages), what that is worth: the
     * second call of a size would ask the model otherwise. */
    if (k >= WARM_ADOPT_MIN_CLASS && comm->node != NULL && comm->node->adopt && e->valid) {
        const int passes = fold_select_adopt_passes(comm, coll, (size_t)1 << k, FOLD_UINT8,
                                                    FOLD_OP_SUM);
        rec->adopt_passes = passes > 0 ? passes : -1;
        const fold_select_entry_t *m = comm->select.mapped_entry != NULL
                                           ? &comm->select.mapped_entry[coll][k]
                                           : NULL;
        if (m != NULL && m->valid) {
            choice_out(m, &rec->mapped);
        }
    }
}

/* Another rank's decision into this rank's caches; a record that does not read
 * back (a build with other algorithms: never between ranks of one job) is left
 * for the first call to make. */
static void install(fold_comm_t *comm, int item, const warm_record_t *rec)
{
    fold_coll_t coll = item_coll(item);
    int k = item_class(item);
    comm->select.advice[coll][k] = rec->advice >= 0 ? rec->advice : -1;
    if (!rec->heap.valid || rec->nalgs < 1 || rec->nalgs > FOLD_RULE_MAX_ALGS) {
        return;
    }
    fold_select_entry_t e = {.valid = 1, .nalgs = rec->nalgs,
                             .adopt_passes = rec->adopt_passes};
    for (int a = 0; a < rec->nalgs; a++) {
        if ((e.algs[a] = alg_at(rec->algs[a])) == NULL) {
            return;
        }
        e.segs[a] = (size_t)rec->segs[a];
    }
    if (!choice_in(&rec->heap, 0, &e)) {
        return;
    }
    fold_select_entry_install(comm, coll, k, &e, 0);
    e.adopt_passes = 0;
    if (choice_in(&rec->mapped, 1, &e)) {
        fold_select_entry_install(comm, coll, k, &e, 1);
    }
}

int fold_select_warm(fold_comm_t *comm,
                     int (*allgather)(void *arg, const void *mine, void *all, size_t bytes),
                     void *arg)
{
    if (comm->size < 2) {
        return FOLD_OK;   /* calls on one rank select nothing */
    }
    double start = fold_util_time_now();
    int size = comm->size, per = (WARM_ITEMS + size - 1) / size;
    warm_record_t *mine = calloc((size_t)per, sizeof(*mine));
    warm_record_t *all  = calloc((size_t)per * (size_t)size, sizeof(*all));
    if (mine == NULL || all == NULL) {
        free(mine);
        free(all);
        return FOLD_ERR_NO_MEMORY;
    }
    int here = 0;
    fold_select_space_enter(comm);   /* one working memory for all of this rank's */
    for (int j = 0; j < per; j++) {
        int item = comm->rank + j * size;
        if (item < WARM_ITEMS) {
            decide(comm, item, &mine[j]);
            here++;
        }
    }
    fold_select_space_leave(comm);   /* and none kept after */
    int status = allgather(arg, mine, all, (size_t)per * sizeof(*mine));
    for (int r = 0; r < size && status == FOLD_OK; r++) {
        for (int j = 0; j < per; j++) {
            int item = r + j * size;
            if (r != comm->rank && item < WARM_ITEMS) {
                install(comm, item, &all[(size_t)r * (size_t)per + (size_t)j]);
            }
        }
    }
    memset(comm->select.last, 0, sizeof(comm->select.last));
    fold_debug("comm %u: %d decisions made before the first call, %d of them here, in %.1f ms",
               comm->id, WARM_ITEMS, here, (fold_util_time_now() - start) * 1e3);
    free(mine);
    free(all);
    return status;
}
