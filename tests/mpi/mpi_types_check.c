/*
 * The pair types with MPI_MAXLOC / MPI_MINLOC and the complex types with MPI_SUM /
 * MPI_PROD: each call made through MPI_Allreduce / MPI_Reduce (fold, under the shim)
 * and again through PMPI_Allreduce / PMPI_Reduce (the MPI library itself, which the
 * shim never sees), at small and large counts, in place and not, on MPI_COMM_WORLD.
 * The two results must agree: pairs bit for bit (value and index; padding aside),
 * complex numbers by value (a product's zero parts take their sign from the order
 * of the factors), and both must match a reference computed here. Values are small
 * integers, so every order of reduction is exact; pair values repeat across ranks,
 * with indices not in rank order, so the tie rule (lower index) decides often.
 * Runs on any number of ranks; shim_run.sh runs it with and without the shim.
 */
#include "shim_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum value_kind { V_FLOAT, V_DOUBLE, V_LONG, V_INT, V_SHORT } value_kind_t;

typedef struct ttype {
    const char  *name;
    MPI_Datatype type;
    int          pair;     /* else complex */
    value_kind_t kind;     /* a pair's value; a complex number's parts (float, double) */
    size_t       extent;   /* bytes per element in memory */
    size_t       index_offset;
} ttype_t;

static ttype_t types[24];
static int ntypes, rank, size, failures;

#define PAIR(name, handle, kind, T) \
    add((ttype_t){name, handle, 1, kind, sizeof(struct { T v; int i; }), \
                  offsetof(struct { T v; int i; }, i)})
#define COMPLEX(name, handle, kind, T) add((ttype_t){name, handle, 0, kind, 2 * sizeof(T), 0})

static size_t part_size(value_kind_t kind)
{
    return kind == V_DOUBLE || kind == V_LONG ? 8 : kind == V_SHORT ? 2 : 4;
}

/* A type whose size the library reports otherwise (a Fortran kind built differently)
 * is left out, as the shim leaves it to the library. */
static void add(ttype_t t)
{
    int tsize = 0;
    MPI_Type_size(t.type, &tsize);
    if ((size_t)tsize == (t.pair ? part_size(t.kind) + sizeof(int) : t.extent)) {
        types[ntypes++] = t;
    }
}

static void types_init(void)
{
    PAIR("MPI_FLOAT_INT", MPI_FLOAT_INT, V_FLOAT, float);
    PAIR("MPI_DOUBLE_INT", MPI_DOUBLE_INT, V_DOUBLE, double);
    PAIR("MPI_LONG_INT", MPI_LONG_INT, V_LONG, long);
    PAIR("MPI_2INT", MPI_2INT, V_INT, int);
    PAIR("MPI_SHORT_INT", MPI_SHORT_INT, V_SHORT, short);
    PAIR("MPI_2INTEGER", MPI_2INTEGER, V_INT, int);
    COMPLEX("MPI_C_FLOAT_COMPLEX", MPI_C_FLOAT_COMPLEX, V_FLOAT, float);
    COMPLEX("MPI_C_DOUBLE_COMPLEX", MPI_C_DOUBLE_COMPLEX, V_DOUBLE, double);
    COMPLEX("MPI_C_COMPLEX", MPI_C_COMPLEX, V_FLOAT, float);
    COMPLEX("MPI_COMPLEX", MPI_COMPLEX, V_FLOAT, float);
    COMPLEX("MPI_DOUBLE_COMPLEX", MPI_DOUBLE_COMPLEX, V_DOUBLE, double);
#ifdef MPI_COMPLEX8
    COMPLEX("MPI_COMPLEX8", MPI_COMPLEX8, V_FLOAT, float);
#endif
#ifdef MPI_COMPLEX16
    COMPLEX("MPI_COMPLEX16", MPI_COMPLEX16, V_DOUBLE, double);
#endif
#ifdef MPI_CXX_FLOAT_COMPLEX
    COMPLEX("MPI_CXX_FLOAT_COMPLEX", MPI_CXX_FLOAT_COMPLEX, V_FLOAT, float);
#endif
#ifdef MPI_CXX_DOUBLE_COMPLEX
    COMPLEX("MPI_CXX_DOUBLE_COMPLEX", MPI_CXX_DOUBLE_COMPLEX, V_DOUBLE, double);
#endif
}

/* ---- Values ------------------------------------------------------------------ */

static uint32_t mix(uint32_t seed, int r, size_t i)
{
    uint64_t x = ((uint64_t)seed << 40) ^ ((uint64_t)(unsigned)r << 32) ^ (uint64_t)i;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (uint32_t)x;
}

/* A pair: value -3..3 (no -0: MPI leaves the sign of tied zeros to the order), index
 * -20..20. */
static void pair_value(uint32_t seed, int r, size_t i, int64_t *v, int *idx)
{
    uint32_t h = mix(seed, r, i);
    *v = (int64_t)(h % 7) - 3;
    *idx = (int)((h >> 8) % 41) - 20;
}

/* A complex number: small parts for a sum; for a product a unit (1, -1, i, -i), now
 * and then times 1+i on the first ranks, so that every product is exact in float. */
static void complex_value(int prod, uint32_t seed, int r, size_t i, int64_t *re, int64_t *im)
{
    uint32_t h = mix(seed, r, i);
    if (!prod) {
        *re = (int64_t)(h % 9) - 4;
        *im = (int64_t)((h >> 8) % 9) - 4;
        return;
    }
    static const int64_t ure[4] = {1, 0, -1, 0}, uim[4] = {0, 1, 0, -1};
    *re = ure[h % 4];
    *im = uim[h % 4];
    if (r < 6 && (h >> 8) % 4 == 0) {
        int64_t a = *re, b = *im;
        *re = a - b;
        *im = a + b;
    }
}

static void store_value(value_kind_t kind, char *p, int64_t v)
{
    switch (kind) {
    case V_FLOAT:  { float x = (float)v;   memcpy(p, &x, sizeof(x)); break; }
    case V_DOUBLE: { double x = (double)v; memcpy(p, &x, sizeof(x)); break; }
    case V_LONG:   { long x = (long)v;     memcpy(p, &x, sizeof(x)); break; }
    case V_INT:    { int x = (int)v;       memcpy(p, &x, sizeof(x)); break; }
    default:       { short x = (short)v;   memcpy(p, &x, sizeof(x)); break; }
    }
}

static double load_value(value_kind_t kind, const char *p)
{
    switch (kind) {
    case V_FLOAT:  { float x;  memcpy(&x, p, sizeof(x)); return x; }
    case V_DOUBLE: { double x; memcpy(&x, p, sizeof(x)); return x; }
    case V_LONG:   { long x;   memcpy(&x, p, sizeof(x)); return (double)x; }
    case V_INT:    { int x;    memcpy(&x, p, sizeof(x)); return x; }
    default:       { short x;  memcpy(&x, p, sizeof(x)); return x; }
    }
}

static int load_index(const ttype_t *t, const char *e)
{
    int x;
    memcpy(&x, e + t->index_offset, sizeof(x));
    return x;
}

static void fill(const ttype_t *t, int op_is_max_or_prod, uint32_t seed, int r, char *buf,
                 size_t n)
{
    memset(buf, 0, n * t->extent);
    for (size_t i = 0; i < n; i++) {
        char *e = buf + i * t->extent;
        if (t->pair) {
            int64_t v;
            int idx;
            pair_value(seed, r, i, &v, &idx);
            store_value(t->kind, e, v);
            memcpy(e + t->index_offset, &idx, sizeof(idx));
        } else {
            int64_t re, im;
            complex_value(op_is_max_or_prod, seed, r, i, &re, &im);
            store_value(t->kind, e, re);
            store_value(t->kind, e + part_size(t->kind), im);
        }
    }
}

/* MPI's rule over ranks 0..size-1: the better value, and the lower index on a tie;
 * complex sums and products in integers. */
static void reference(const ttype_t *t, int max_or_prod, uint32_t seed, char *buf, size_t n)
{
    memset(buf, 0, n * t->extent);
    for (size_t i = 0; i < n; i++) {
        char *e = buf + i * t->extent;
        if (t->pair) {
            int64_t v, w;
            int idx, jdx;
            pair_value(seed, 0, i, &v, &idx);
            for (int r = 1; r < size; r++) {
                pair_value(seed, r, i, &w, &jdx);
                int better = max_or_prod ? w > v : w < v;
                if (better || (w == v && jdx < idx)) {
                    v = w;
                    idx = jdx;
                }
            }
            store_value(t->kind, e, v);
            memcpy(e + t->index_offset, &idx, sizeof(idx));
        } else {
            int64_t re, im, bre, bim;
            complex_value(max_or_prod, seed, 0, i, &re, &im);
            for (int r = 1; r < size; r++) {
                complex_value(max_or_prod, seed, r, i, &bre, &bim);
                int64_t are = re, aim = im;
                re = max_or_prod ? are * bre - aim * bim : are + bre;
                im = max_or_prod ? are * bim + aim * bre : aim + bim;
            }
            store_value(t->kind, e, re);
            store_value(t->kind, e + part_size(t->kind), im);
        }
    }
}

/* Pairs: the value's bytes and the index, bit for bit. Complex: both parts by value. */
static int same(const ttype_t *t, const char *a, const char *b)
{
    if (t->pair) {
        return memcmp(a, b, part_size(t->kind)) == 0 && load_index(t, a) == load_index(t, b);
    }
    size_t ps = part_size(t->kind);
    return load_value(t->kind, a) == load_value(t->kind, b) &&
           load_value(t->kind, a + ps) == load_value(t->kind, b + ps);
}

/* What shim_run.sh compares across the runs: the same numbers, whatever the
 * padding holds or the zeros' signs. */
static void digest(const ttype_t *t, const char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *e = buf + i * t->extent;
        double v[2] = {load_value(t->kind, e) + 0.0, 0};
        if (t->pair) {
            v[1] = load_index(t, e);
        } else {
            v[1] = load_value(t->kind, e + part_size(t->kind)) + 0.0;
        }
        test_digest(v, sizeof(v));
    }
}

static int compare(const ttype_t *t, const char *got, const char *want, size_t n,
                   const char *what, const char *against)
{
    for (size_t i = 0; i < n; i++) {
        const char *g = got + i * t->extent, *w = want + i * t->extent;
        if (!same(t, g, w)) {
            size_t ps = part_size(t->kind);
            fprintf(stderr, "rank %d: %s: element %zu of %zu is (%g, %g), %s has (%g, %g)\n",
                    rank, what, i, n, load_value(t->kind, g),
                    t->pair ? load_index(t, g) : load_value(t->kind, g + ps), against,
                    load_value(t->kind, w),
                    t->pair ? load_index(t, w) : load_value(t->kind, w + ps));
            return 1;
        }
    }
    return 0;
}

/* ---- One call, twice ------------------------------------------------------------ */

static int call(int use_pmpi, int allreduce, const void *in, void *out, size_t n,
                const ttype_t *t, MPI_Op op, int root)
{
    if (allreduce) {
        return use_pmpi ? PMPI_Allreduce(in, out, (int)n, t->type, op, MPI_COMM_WORLD)
                        : MPI_Allreduce(in, out, (int)n, t->type, op, MPI_COMM_WORLD);
    }
    return use_pmpi ? PMPI_Reduce(in, out, (int)n, t->type, op, root, MPI_COMM_WORLD)
                    : MPI_Reduce(in, out, (int)n, t->type, op, root, MPI_COMM_WORLD);
}

static void run_case(const ttype_t *t, int max_or_prod, int allreduce, size_t n, int inplace)
{
    static uint32_t seed;
    seed++;
    int root = (int)(seed % (uint32_t)size);
    MPI_Op op = t->pair ? (max_or_prod ? MPI_MAXLOC : MPI_MINLOC)
                        : (max_or_prod ? MPI_PROD : MPI_SUM);
    const char *opname = t->pair ? (max_or_prod ? "MPI_MAXLOC" : "MPI_MINLOC")
                                 : (max_or_prod ? "MPI_PROD" : "MPI_SUM");
    char what[160];
    snprintf(what, sizeof(what), "%s %s %s, count %zu%s, root %d",
             allreduce ? "MPI_Allreduce" : "MPI_Reduce", t->name, opname, n,
             inplace ? ", in place" : "", root);
    size_t bytes = n * t->extent;
    char *in = malloc(bytes), *out[2], *want = malloc(bytes);
    int has_out = allreduce || rank == root;
    fill(t, max_or_prod, seed, rank, in, n);
    for (int k = 0; k < 2; k++) {   /* k = 0: through the shim; 1: the MPI library */
        const void *sbuf;
        out[k] = test_output(in, bytes, inplace && has_out, &sbuf);
        int rc = call(k, allreduce, sbuf, has_out ? out[k] : NULL, n, t, op, root);
        if (rc != MPI_SUCCESS) {
            fprintf(stderr, "rank %d: %s%s: returned %d\n", rank, k ? "P" : "", what, rc);
            failures++;
        }
    }
    test_expect(allreduce ? COLL_ALLREDUCE : COLL_REDUCE, ROUTE_FOLD);
    if (has_out) {
        reference(t, max_or_prod, seed, want, n);
        failures += compare(t, out[0], out[1], n, what, "the MPI library");
        failures += compare(t, out[0], want, n, what, "the reference");
        digest(t, out[0], n);
    }
    free(in);
    free(out[0]);
    free(out[1]);
    free(want);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    types_init();
    static const size_t counts[] = {1, 37, 70001};
    for (int k = 0; k < ntypes; k++) {
        for (int which = 0; which < 2; which++) {
            for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
                for (int inplace = 0; inplace <= 1; inplace++) {
                    run_case(&types[k], which, 1, counts[c], inplace);
                    run_case(&types[k], which, 0, counts[c], !inplace);
                }
            }
        }
    }
    if (rank == 0) {
        printf("%d pair and complex types\n", ntypes);
    }
    int failed = test_finish(failures);
    MPI_Finalize();
    return failed;
}
