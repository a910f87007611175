/*
 * Predefined ops on derived datatypes made of copies of one predefined type back to
 * back, which the shim serves as that many elements of the base type: contiguous;
 * vector and hvector without gaps; dup; resized to its own size; indexed, hindexed,
 * indexed-block, hindexed-block and struct types whose blocks follow one another; a
 * nesting of these; and contiguous pairs with MAXLOC / MINLOC. Each call is made
 * through MPI_Allreduce / MPI_Reduce, at small and large counts, in place and not,
 * the root moving, and compared bit for bit with the same data reduced through
 * PMPI_* as the base type (count * n elements), and with a reference.
 *
 * Open MPI refuses predefined ops on derived types (MPI_ERR_OP). Where MPI_* refuses
 * them too (the run without the shim), the program makes the base-type call through
 * MPI_* instead, so that both runs print the same digest. Then types are made and
 * freed in turn with other layouts, most likely on the same handles: each must be
 * decoded afresh (a stale layout would reduce the wrong elements, or serve a type
 * with gaps that must go to MPI).
 */
#include "shim_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum pair_kind { NO_PAIR, PAIR_2INT, PAIR_DOUBLE_INT } pair_kind_t;

typedef struct dcase {
    const char  *name;
    MPI_Datatype (*make)(void);
    size_t       n;          /* base elements per element */
    const char  *base;       /* shim_test's name of the base type (not a pair) */
    test_op_t    op;
    pair_kind_t  pair;       /* a pair: its kind, with maxloc (else minloc) */
    int          maxloc;
} dcase_t;

typedef struct { int v, i; } two_int_t;
typedef struct { double v; int i; } double_int_t;

static int rank, size, failures, mpi_accepts;

/* ---- The types ------------------------------------------------------------------- */

static MPI_Datatype committed(MPI_Datatype t)
{
    MPI_Type_commit(&t);
    return t;
}

static MPI_Datatype contiguous_int(void)
{
    MPI_Datatype t;
    MPI_Type_contiguous(3, MPI_INT, &t);
    return committed(t);
}

static MPI_Datatype vector_double(void)
{
    MPI_Datatype t;
    MPI_Type_vector(4, 2, 2, MPI_DOUBLE, &t);
    return committed(t);
}

static MPI_Datatype hvector_float(void)
{
    MPI_Datatype t;
    MPI_Type_create_hvector(3, 2, 2 * sizeof(float), MPI_FLOAT, &t);
    return committed(t);
}

static MPI_Datatype dup_long(void)
{
    MPI_Datatype t;
    MPI_Type_dup(MPI_LONG, &t);
    return committed(t);
}

static MPI_Datatype resized_unsigned(void)
{
    MPI_Datatype c, t;
    MPI_Type_contiguous(2, MPI_UNSIGNED, &c);
    MPI_Type_create_resized(c, 0, 2 * sizeof(unsigned), &t);
    MPI_Type_free(&c);
    return committed(t);
}

static MPI_Datatype indexed_short(void)
{
    int lengths[2] = {2, 3}, displs[2] = {0, 2};
    MPI_Datatype t;
    MPI_Type_indexed(2, lengths, displs, MPI_SHORT, &t);
    return committed(t);
}

static MPI_Datatype hindexed_int64(void)
{
    int lengths[2] = {1, 2};
    MPI_Aint displs[2] = {0, 8};
    MPI_Datatype t;
    MPI_Type_create_hindexed(2, lengths, displs, MPI_INT64_T, &t);
    return committed(t);
}

static MPI_Datatype indexed_block_uint8(void)
{
    int displs[2] = {0, 2};
    MPI_Datatype t;
    MPI_Type_create_indexed_block(2, 2, displs, MPI_UINT8_T, &t);
    return committed(t);
}

static MPI_Datatype hindexed_block_double(void)
{
    MPI_Aint displs[3] = {0, 8, 16};
    MPI_Datatype t;
    MPI_Type_create_hindexed_block(3, 1, displs, MPI_DOUBLE, &t);
    return committed(t);
}

static MPI_Datatype struct_int(void)
{
    int lengths[2] = {2, 1};
    MPI_Aint displs[2] = {0, 2 * sizeof(int)};
    MPI_Datatype types[2] = {MPI_INT, MPI_INT}, t;
    MPI_Type_create_struct(2, lengths, displs, types, &t);
    return committed(t);
}

/* contiguous(2, vector(2, 3, 3, dup(MPI_INT))): 12 ints. */
static MPI_Datatype nested_int(void)
{
    MPI_Datatype d, v, t;
    MPI_Type_dup(MPI_INT, &d);
    MPI_Type_vector(2, 3, 3, d, &v);
    MPI_Type_contiguous(2, v, &t);
    MPI_Type_free(&v);
    MPI_Type_free(&d);
    return committed(t);
}

static MPI_Datatype pairs_2int(void)
{
    MPI_Datatype t;
    MPI_Type_contiguous(2, MPI_2INT, &t);
    return committed(t);
}

static MPI_Datatype pairs_double_int(void)
{
    MPI_Datatype t;
    MPI_Type_contiguous(3, MPI_DOUBLE_INT, &t);
    return committed(t);
}

static const dcase_t cases[] = {
    {"contiguous(3, MPI_INT) sum", contiguous_int, 3, "int", OP_SUM, NO_PAIR, 0},
    {"vector(4, 2, 2, MPI_DOUBLE) max", vector_double, 8, "double", OP_MAX, NO_PAIR, 0},
    {"hvector(3, 2, 8 B, MPI_FLOAT) sum", hvector_float, 6, "float", OP_SUM, NO_PAIR, 0},
    {"dup(MPI_LONG) min", dup_long, 1, "long", OP_MIN, NO_PAIR, 0},
    {"resized(contiguous(2, MPI_UNSIGNED), 0, 8) bxor", resized_unsigned, 2, "unsigned",
     OP_BXOR, NO_PAIR, 0},
    {"indexed({2, 3}, {0, 2}, MPI_SHORT) bor", indexed_short, 5, "short", OP_BOR, NO_PAIR, 0},
    {"hindexed({1, 2}, {0, 8 B}, MPI_INT64_T) prod", hindexed_int64, 3, "int64", OP_PROD,
     NO_PAIR, 0},
    {"indexed_block(2, {0, 2}, MPI_UINT8_T) lxor", indexed_block_uint8, 4, "uint8", OP_LXOR,
     NO_PAIR, 0},
    {"hindexed_block(1, {0, 8, 16 B}, MPI_DOUBLE) prod", hindexed_block_double, 3, "double",
     OP_PROD, NO_PAIR, 0},
    {"struct({2, 1} MPI_INT at {0, 8 B}) land", struct_int, 3, "int", OP_LAND, NO_PAIR, 0},
    {"contiguous(2, vector(2, 3, 3, dup(MPI_INT))) sum", nested_int, 12, "int", OP_SUM,
     NO_PAIR, 0},
    {"contiguous(2, MPI_2INT) maxloc", pairs_2int, 2, NULL, OP_COUNT, PAIR_2INT, 1},
    {"contiguous(3, MPI_DOUBLE_INT) minloc", pairs_double_int, 3, NULL, OP_COUNT,
     PAIR_DOUBLE_INT, 0},
};

/* ---- Pairs -------------------------------------------------------------------------- */

static size_t pair_extent(pair_kind_t kind)
{
    return kind == PAIR_2INT ? sizeof(two_int_t) : sizeof(double_int_t);
}

/* Value -3..3 and index -20..20: ties are frequent, and the lower index wins them. */
static void pair_value(uint32_t seed, int r, size_t i, int *v, int *idx)
{
    uint32_t h = test_mix(seed, r, i);
    *v = (int)(h % 7) - 3;
    *idx = (int)((h >> 8) % 41) - 20;
}

static void pair_store(pair_kind_t kind, char *buf, size_t i, int v, int idx)
{
    if (kind == PAIR_2INT) {
        two_int_t e = {v, idx};
        memcpy(buf + i * sizeof(e), &e, sizeof(e));
    } else {
        double_int_t e;
        memset(&e, 0, sizeof(e));
        e.v = v;
        e.i = idx;
        memcpy(buf + i * sizeof(e), &e, sizeof(e));
    }
}

static void pair_load(pair_kind_t kind, const char *buf, size_t i, double *v, int *idx)
{
    if (kind == PAIR_2INT) {
        two_int_t e;
        memcpy(&e, buf + i * sizeof(e), sizeof(e));
        *v = e.v;
        *idx = e.i;
    } else {
        double_int_t e;
        memcpy(&e, buf + i * sizeof(e), sizeof(e));
        *v = e.v;
        *idx = e.i;
    }
}

static void pair_fill(pair_kind_t kind, uint32_t seed, int r, char *buf, size_t n)
{
    memset(buf, 0, n * pair_extent(kind));
    for (size_t i = 0; i < n; i++) {
        int v, idx;
        pair_value(seed, r, i, &v, &idx);
        pair_store(kind, buf, i, v, idx);
    }
}

static void pair_reference(pair_kind_t kind, int maxloc, uint32_t seed, char *buf, size_t n)
{
    memset(buf, 0, n * pair_extent(kind));
    for (size_t i = 0; i < n; i++) {
        int v, idx, w, jdx;
        pair_value(seed, 0, i, &v, &idx);
        for (int r = 1; r < size; r++) {
            pair_value(seed, r, i, &w, &jdx);
            if ((maxloc ? w > v : w < v) || (w == v && jdx < idx)) {
                v = w;
                idx = jdx;
            }
        }
        pair_store(kind, buf, i, v, idx);
    }
}

static int pair_compare(pair_kind_t kind, const char *got, const char *want, size_t n,
                        const char *what)
{
    for (size_t i = 0; i < n; i++) {
        double g, w;
        int gi, wi;
        pair_load(kind, got, i, &g, &gi);
        pair_load(kind, want, i, &w, &wi);
        if (g != w || gi != wi) {
            fprintf(stderr, "rank %d: %s: pair %zu of %zu is (%g, %d), want (%g, %d)\n", rank,
                    what, i, n, g, gi, w, wi);
            return 1;
        }
    }
    return 0;
}

static void pair_digest(pair_kind_t kind, const char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double v;
        int idx;
        pair_load(kind, buf, i, &v, &idx);
        test_digest(&v, sizeof(v));
        test_digest(&idx, sizeof(idx));
    }
}

/* ---- One call, twice ----------------------------------------------------------------- */

/* Through MPI_*: the derived type, or where MPI_* refuses it the base type; through
 * PMPI_*: the base type. */
static int call(int use_pmpi, int allreduce, const void *in, void *out, size_t count,
                MPI_Datatype type, const dcase_t *c, MPI_Datatype base, MPI_Op op, int root)
{
    if (use_pmpi || !mpi_accepts) {
        type = base;
        count *= c->n;
    }
    if (allreduce) {
        return use_pmpi ? PMPI_Allreduce(in, out, (int)count, type, op, MPI_COMM_WORLD)
                        : MPI_Allreduce(in, out, (int)count, type, op, MPI_COMM_WORLD);
    }
    return use_pmpi ? PMPI_Reduce(in, out, (int)count, type, op, root, MPI_COMM_WORLD)
                    : MPI_Reduce(in, out, (int)count, type, op, root, MPI_COMM_WORLD);
}

static void run_case(const dcase_t *c, MPI_Datatype type, int allreduce, size_t count,
                     int inplace)
{
    static uint32_t seed;
    seed++;
    int root = (int)(seed % (uint32_t)size);
    char what[200];
    snprintf(what, sizeof(what), "%s %s, count %zu%s, root %d",
             allreduce ? "MPI_Allreduce" : "MPI_Reduce", c->name, count,
             inplace ? ", in place" : "", root);
    const test_type_t *t = c->pair ? NULL : test_type_named(c->base);
    size_t elements = count * c->n;
    size_t bytes = elements * (c->pair ? pair_extent(c->pair) : t->size);
    MPI_Datatype base = c->pair == PAIR_2INT ? MPI_2INT
                      : c->pair == PAIR_DOUBLE_INT ? MPI_DOUBLE_INT : t->type;
    MPI_Op op = c->pair ? (c->maxloc ? MPI_MAXLOC : MPI_MINLOC) : test_mpi_op(c->op);
    char *in = malloc(bytes), *out[2], *want = malloc(bytes);
    int has_out = allreduce || rank == root;
    if (c->pair) {
        pair_fill(c->pair, seed, rank, in, elements);
    } else {
        test_fill(t, c->op, seed, rank, in, elements);
    }
    for (int k = 0; k < 2; k++) {   /* k = 0: through MPI_*; 1: the library, base type */
        const void *sbuf;
        out[k] = test_output(in, bytes, inplace && has_out, &sbuf);
        int rc = call(k, allreduce, sbuf, has_out ? out[k] : NULL, count, type, c, base, op,
                      root);
        if (rc != MPI_SUCCESS) {
            fprintf(stderr, "rank %d: %s%s: returned %d\n", rank, k ? "P" : "", what, rc);
            failures++;
        }
    }
    test_expect(allreduce ? COLL_ALLREDUCE : COLL_REDUCE, ROUTE_FOLD);
    if (has_out && c->pair) {
        pair_reference(c->pair, c->maxloc, seed, want, elements);
        failures += pair_compare(c->pair, out[0], out[1], elements, what);
        failures += pair_compare(c->pair, out[0], want, elements, what);
        pair_digest(c->pair, out[0], elements);
    } else if (has_out) {
        test_reference(t, c->op, seed, size, want, elements);
        failures += test_compare(t, out[0], out[1], elements, what);
        failures += test_compare(t, out[0], want, elements, what);
        test_digest(out[0], bytes);
    }
    free(in);
    free(out[0]);
    free(out[1]);
    free(want);
}

/* ---- Types made and freed in turn -------------------------------------------------- */

/* 2 and 5 ints back to back, then vector(3, 1, 2, MPI_INT) with gaps; 4 elements of
 * each summed. The gapped one goes to MPI, and gets MPI's answer (Open MPI:
 * MPI_ERR_OP), the same with and without the shim. */
static int reuse_round(MPI_Datatype *last)
{
    const test_type_t *t = test_type_named("int");
    int in[4 * 5], out[4 * 5], want[4 * 5], reused = 0;
    for (int shape = 0; shape < 3; shape++) {
        MPI_Datatype type;
        int n = shape == 0 ? 2 : 5;
        if (shape < 2) {
            MPI_Type_contiguous(n, MPI_INT, &type);
        } else {
            MPI_Type_vector(3, 1, 2, MPI_INT, &type);
        }
        MPI_Type_commit(&type);
        reused += type == *last;
        *last = type;
        test_fill(t, OP_SUM, 1000u + (uint32_t)shape, rank, in, 4 * 5);
        memset(out, 0, sizeof(out));
        if (shape < 2) {
            int rc = mpi_accepts ? MPI_Allreduce(in, out, 4, type, MPI_SUM, MPI_COMM_WORLD)
                                 : MPI_Allreduce(in, out, 4 * n, MPI_INT, MPI_SUM,
                                                 MPI_COMM_WORLD);
            test_expect(COLL_ALLREDUCE, ROUTE_FOLD);
            test_reference(t, OP_SUM, 1000u + (uint32_t)shape, size, want, 4 * 5);
            failures += rc != MPI_SUCCESS;
            failures += test_compare(t, out, want, 4 * (size_t)n, "a type made again");
            test_digest(out, sizeof(out));
        } else {
            int cls = MPI_SUCCESS;
            MPI_Error_class(MPI_Allreduce(in, out, 4, type, MPI_SUM, MPI_COMM_WORLD), &cls);
            test_expect(COLL_ALLREDUCE, ROUTE_DERIVED);
            test_digest(&cls, sizeof(cls));
            test_digest(out, sizeof(out));
        }
        MPI_Type_free(&type);
    }
    return reused;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    test_types_init();

    /* Does MPI_* take a predefined op on a derived type? (Open MPI alone: no.) */
    MPI_Datatype probe = contiguous_int();
    int pin[3] = {1, 2, 3}, pout[3];
    mpi_accepts = MPI_Allreduce(pin, pout, 1, probe, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS;
    test_expect(COLL_ALLREDUCE, ROUTE_FOLD);
    MPI_Type_free(&probe);

    static const size_t counts[] = {1, 7, 4001};
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        MPI_Datatype type = cases[k].make();
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
            for (int inplace = 0; inplace <= 1; inplace++) {
                run_case(&cases[k], type, 1, counts[c], inplace);
                run_case(&cases[k], type, 0, counts[c], !inplace);
            }
        }
        MPI_Type_free(&type);
    }
    MPI_Datatype last = MPI_DATATYPE_NULL;
    int reused = 0;
    for (int round = 0; round < 3; round++) {
        reused += reuse_round(&last);
    }
    if (rank == 0) {
        printf("%zu derived types; MPI_* %s predefined ops on them; %d of 9 types made "
               "again on the handle freed just before\n", sizeof(cases) / sizeof(cases[0]),
               mpi_accepts ? "takes" : "refuses", reused);
    }
    int failed = test_finish(failures);
    MPI_Finalize();
    return failed;
}
