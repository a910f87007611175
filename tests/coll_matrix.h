/*
 * The correctness matrix of the reduction collectives, as a list of cases: every
 * algorithm of the registry (coll/alg_table.c) for each collective it builds, at
 * each count, with roots, in place and not, a rotation of datatype x op pairs, the
 * non-commutative user op, and a sweep of the pair types (maxloc/minloc) and complex
 * types (sum/prod): each of those pairs once per algorithm and collective at a small
 * count, and one of them at the large count (coll_matrix_spec_t.typed says which). test_coll_loopback runs
 * the whole of it once, on the loopback transport at every rank count; the runs on
 * real transports (mp_coll) take slices of it.
 */
#ifndef FOLD_TEST_COLL_MATRIX_H
#define FOLD_TEST_COLL_MATRIX_H

#include "comm.h"

#include <stddef.h>

typedef struct coll_case {
    const fold_alg_t *alg;
    fold_coll_t       coll;
    size_t            count;
    int               root;
    int               inplace;
    fold_dtype_t      dt;
    fold_op_t         op;
} coll_case_t;

typedef struct coll_matrix_spec {
    int           size;       /* ranks */
    const size_t *counts;
    size_t        ncounts;
    size_t        large;      /* counts from this one on are large: reduce roots first,
                                 middle and last only, the user op at the first, and
                                 int8 (overflow-prone) turned into float32 */
    int           slice;      /* one case per algorithm, collective and count (root,
                                 in place and datatype x op rotating), and the user op
                                 at 7 and the large counts */
    size_t        rot;        /* where the rotation starts */
    fold_op_t     user_op;    /* the non-commutative op (ref_affine_fn) */
    int           typed;      /* the pair/complex sweep: 0 none, 1 at small counts, 2
                                 also one large case per algorithm and collective */
} coll_matrix_spec_t;

/* The cases (malloc'd, *ncases of them). */
coll_case_t *coll_matrix_build(const coll_matrix_spec_t *spec, size_t *ncases);

/* "allreduce ring p=3 count=7 root=0 inplace=1 int32/sum" into buf. */
void coll_case_name(const coll_case_t *c, int size, char *buf, size_t len);

#endif
