#include "coll_matrix.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct dt_op { fold_dtype_t dt; fold_op_t op; } dt_op_t;

static const dt_op_t combos[] = {
    {FOLD_INT32, FOLD_OP_SUM},     {FOLD_FLOAT32, FOLD_OP_SUM},  {FOLD_FLOAT64, FOLD_OP_MAX},
    {FOLD_INT64, FOLD_OP_PROD},    {FOLD_UINT8, FOLD_OP_BXOR},   {FOLD_FLOAT16, FOLD_OP_SUM},
    {FOLD_BFLOAT16, FOLD_OP_MIN},  {FOLD_INT16, FOLD_OP_BOR},    {FOLD_UINT32, FOLD_OP_LAND},
    {FOLD_INT8, FOLD_OP_SUM},      {FOLD_UINT64, FOLD_OP_MIN},   {FOLD_FLOAT32, FOLD_OP_LXOR},
    {FOLD_FLOAT64, FOLD_OP_MIN},   {FOLD_UINT16, FOLD_OP_BAND},  {FOLD_FLOAT16, FOLD_OP_MAX},
    {FOLD_BFLOAT16, FOLD_OP_SUM},  {FOLD_INT8, FOLD_OP_LOR},
};
#define NCOMBOS (sizeof(combos) / sizeof(combos[0]))

/* The pair and complex types with each op they take: a sweep of their own, so that
 * every algorithm sees each of them without the rotation above thinning out. */
static const dt_op_t typed[] = {
    {FOLD_FLOAT_INT, FOLD_OP_MAXLOC},  {FOLD_DOUBLE_INT, FOLD_OP_MINLOC},
    {FOLD_LONG_INT, FOLD_OP_MAXLOC},   {FOLD_2INT, FOLD_OP_MINLOC},
    {FOLD_SHORT_INT, FOLD_OP_MAXLOC},  {FOLD_COMPLEX_FLOAT32, FOLD_OP_SUM},
    {FOLD_COMPLEX_FLOAT64, FOLD_OP_PROD},
    {FOLD_FLOAT_INT, FOLD_OP_MINLOC},  {FOLD_DOUBLE_INT, FOLD_OP_MAXLOC},
    {FOLD_LONG_INT, FOLD_OP_MINLOC},   {FOLD_2INT, FOLD_OP_MAXLOC},
    {FOLD_SHORT_INT, FOLD_OP_MINLOC},  {FOLD_COMPLEX_FLOAT32, FOLD_OP_PROD},
    {FOLD_COMPLEX_FLOAT64, FOLD_OP_SUM},
};
#define NTYPED (sizeof(typed) / sizeof(typed[0]))

typedef struct case_list {
    coll_case_t *cases;
    size_t       n, cap;
} case_list_t;

static void add(case_list_t *l, coll_case_t c)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->cases = realloc(l->cases, l->cap * sizeof(*l->cases));
        if (l->cases == NULL) {
            abort();
        }
    }
    l->cases[l->n++] = c;
}

/* One case of the rotation: its datatype x op, int8 kept off the large counts. */
static coll_case_t rotated(const fold_alg_t *alg, fold_coll_t coll, size_t count, int root,
                           int inplace, size_t rot, int is_large)
{
    const dt_op_t *d = &combos[rot % NCOMBOS];
    coll_case_t c = {alg, coll, count, root, inplace, d->dt, d->op};
    if (is_large && d->dt == FOLD_INT8) {
        c.dt = FOLD_FLOAT32;   /* keep big cases on common types */
    }
    return c;
}

/* The typed sweep of one algorithm and collective (spec->typed > 0): in full, every
 * typed pair once at a small count (not 0, below `large`; count, root and in place
 * rotating), and with typed == 2 one pair at the first large count; in a slice, one pair
 * at a small count. */
static void add_typed(case_list_t *l, const coll_matrix_spec_t *s, const fold_alg_t *alg,
                      fold_coll_t coll, size_t *rot)
{
    if (s->typed == 0) {
        return;
    }
    size_t small[8], nsmall = 0, large = 0;
    for (size_t k = 0; k < s->ncounts; k++) {
        if (s->counts[k] >= s->large) {
            large = large ? large : s->counts[k];
        } else if (s->counts[k] > 0 && nsmall < sizeof(small) / sizeof(small[0])) {
            small[nsmall++] = s->counts[k];
        }
    }
    int reduce = coll == FOLD_COLL_REDUCE;
    for (size_t k = 0; k < (s->slice ? 1 : NTYPED) && nsmall > 0; k++) {
        size_t c = (*rot)++;
        const dt_op_t *d = s->slice ? &typed[c % NTYPED] : &typed[k];
        add(l, (coll_case_t){alg, coll, small[c % nsmall],
                             reduce ? (int)(c % (size_t)s->size) : 0, (int)(c / 3 % 2), d->dt,
                             d->op});
    }
    if (!s->slice && large > 0 && s->typed == 2) {
        size_t c = (*rot)++;
        add(l, (coll_case_t){alg, coll, large, reduce ? s->size - 1 : 0, (int)(c % 2),
                             typed[c % NTYPED].dt, typed[c % NTYPED].op});
    }
}

coll_case_t *coll_matrix_build(const coll_matrix_spec_t *s, size_t *ncases)
{
    case_list_t l = {NULL, 0, 0};
    size_t rot = s->rot, typed_rot = s->rot;
    for (int a = 0; fold_alg_all[a] != NULL; a++) {
        const fold_alg_t *alg = fold_alg_all[a];
        for (int coll = FOLD_COLL_ALLREDUCE; coll <= FOLD_COLL_REDUCE; coll++) {
            if (fold_alg_builder(alg, (fold_coll_t)coll) == NULL) {
                continue;
            }
            int reduce = coll == FOLD_COLL_REDUCE;
            add_typed(&l, s, alg, (fold_coll_t)coll, &typed_rot);
            for (size_t k = 0; k < s->ncounts; k++) {
                size_t count = s->counts[k];
                int is_large = count >= s->large;
                coll_case_t u = {alg, (fold_coll_t)coll, count, 0, 0, FOLD_UINT64, s->user_op};
                if (s->slice) {
                    size_t c = rot++;
                    int root = reduce ? (int)(c % (size_t)s->size) : 0;
                    add(&l, rotated(alg, (fold_coll_t)coll, count, root, (int)(c / 3 % 2), c,
                                    is_large));
                    if (count == 7 || is_large) {
                        u.root = root;
                        add(&l, u);
                    }
                    continue;
                }
                int roots[3], nroots = 0;
                if (!reduce) {
                    roots[nroots++] = 0;
                } else if (is_large) {
                    roots[nroots++] = 0;
                    if (s->size > 2) roots[nroots++] = s->size / 2;
                    if (s->size > 1) roots[nroots++] = s->size - 1;
                }
                int all_roots = reduce && !is_large;
                for (int ri = 0; ri < (all_roots ? s->size : nroots); ri++) {
                    int root = all_roots ? ri : roots[ri];
                    for (int inplace = 0; inplace <= 1; inplace++) {
                        add(&l, rotated(alg, (fold_coll_t)coll, count, root, inplace, rot++,
                                        is_large));
                    }
                    if (!is_large || ri == 0) {   /* the user op, not in place */
                        u.root = root;
                        add(&l, u);
                    }
                }
            }
        }
    }
    *ncases = l.n;
    return l.cases;
}

void coll_case_name(const coll_case_t *c, int size, char *buf, size_t len)
{
    snprintf(buf, len, "%s %s p=%d count=%zu root=%d inplace=%d %s/%s",
             fold_coll_name(c->coll), c->alg->name, size, c->count, c->root, c->inplace,
             fold_dtype_name(c->dt),
             c->op >= FOLD_OP_USER_FIRST ? "affine(non-commutative)" : fold_op_name(c->op));
}
