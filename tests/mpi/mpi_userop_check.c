/*
 * User ops (MPI_Op_create) through the shim. Each call is made through MPI_Allreduce /
 * MPI_Reduce (fold, under the shim) and again through PMPI_* (the MPI library), at
 * small and large counts, in place and not, the root moving; both results must match
 * a reference computed here in rank order, bit for bit (the floating values are
 * multiples of 1/8, exact in any order). Served by fold:
 *   - a non-commutative op, the product of 2x2 matrices of 16-bit integers (mod 2^16),
 *     each packed in one MPI_UINT64_T, on that type and on a dup of it;
 *   - commutative ops: the value of largest magnitude on MPI_INT, a sum on
 *     MPI_DOUBLE and on MPI_DOUBLE resized to its own extent;
 *   - the matrix product on MPI_Type_contiguous(4, MPI_UINT16_T) and a sum of long
 *     doubles (a type fold does not know), both as opaque elements of the type's size.
 * Left to the MPI library, and still checked: a sum on a vector with gaps. Every op
 * checks that it receives the datatype the call passed. Ops are
 * created and freed around every call, so handles are reused with other functions:
 * each call must run its own op's function.
 */
#include "shim_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum kind { MATRIX, MAXABS, DSUM, LDSUM, GAPPED } kind_t;

typedef struct ucase {
    const char        *name;
    kind_t             kind;
    MPI_Datatype       type;
    MPI_User_function *fn;
    int                commute;
    test_route_t       route;
} ucase_t;

static int rank, size, failures;

/* ---- The ops ------------------------------------------------------------------- */

static MPI_Datatype seen_type;
static int seen_calls;

static void seen(const MPI_Datatype *type)
{
    seen_type = *type;
    seen_calls++;
}

/* Row-major {a, b, c, d}; x is the left factor. */
static void matrix_mul(const uint16_t *x, const uint16_t *y, uint16_t *out)
{
    uint16_t r[4] = {(uint16_t)(x[0] * y[0] + x[1] * y[2]), (uint16_t)(x[0] * y[1] + x[1] * y[3]),
                     (uint16_t)(x[2] * y[0] + x[3] * y[2]), (uint16_t)(x[2] * y[1] + x[3] * y[3])};
    memcpy(out, r, sizeof(r));
}

/* inout = in * inout: in holds the lower ranks' product. */
static void matrix_product(void *in, void *inout, int *len, MPI_Datatype *type)
{
    seen(type);
    for (int i = 0; i < *len; i++) {
        matrix_mul((uint16_t *)in + 4 * i, (uint16_t *)inout + 4 * i, (uint16_t *)inout + 4 * i);
    }
}

static int maxabs(int a, int b)
{
    int aa = a < 0 ? -a : a, ab = b < 0 ? -b : b;
    return aa != ab ? (aa > ab ? a : b) : (a > b ? a : b);
}

static void max_magnitude(void *in, void *inout, int *len, MPI_Datatype *type)
{
    seen(type);
    for (int i = 0; i < *len; i++) {
        ((int *)inout)[i] = maxabs(((int *)in)[i], ((int *)inout)[i]);
    }
}

static void sum_doubles(void *in, void *inout, int *len, MPI_Datatype *type)
{
    seen(type);
    for (int i = 0; i < *len; i++) {
        ((double *)inout)[i] += ((double *)in)[i];
    }
}

static void sum_long_doubles(void *in, void *inout, int *len, MPI_Datatype *type)
{
    seen(type);
    for (int i = 0; i < *len; i++) {
        ((long double *)inout)[i] += ((long double *)in)[i];
    }
}

/* vector(2, 1, 2, MPI_INT): ints at bytes 0 and 8 of a 12-byte element. */
#define GAPPED_EXTENT 12
static void add_gapped(const char *in, char *inout)
{
    for (int k = 0; k < 2; k++) {
        int a, b;
        memcpy(&a, in + 8 * k, sizeof(a));
        memcpy(&b, inout + 8 * k, sizeof(b));
        b += a;
        memcpy(inout + 8 * k, &b, sizeof(b));
    }
}

static void sum_gapped(void *in, void *inout, int *len, MPI_Datatype *type)
{
    seen(type);
    for (int i = 0; i < *len; i++) {
        add_gapped((char *)in + i * GAPPED_EXTENT, (char *)inout + i * GAPPED_EXTENT);
    }
}

/* ---- Values and references ------------------------------------------------------ */

static size_t extent_of(kind_t kind)
{
    switch (kind) {
    case MATRIX: return 4 * sizeof(uint16_t);
    case MAXABS: return sizeof(int);
    case DSUM:   return sizeof(double);
    case LDSUM:  return sizeof(long double);
    default:     return GAPPED_EXTENT;
    }
}

/* Element i of rank r into e; the gapped type's gap gets junk. */
static void element(kind_t kind, uint32_t seed, int r, size_t i, char *e)
{
    uint32_t h = test_mix(seed, r, i);
    switch (kind) {
    case MATRIX:
        for (int k = 0; k < 4; k++) {
            uint16_t v = (uint16_t)test_mix(seed + 7u * (uint32_t)k, r, i);
            memcpy(e + 2 * k, &v, 2);
        }
        break;
    case MAXABS: { int v = (int)(h % 201) - 100; memcpy(e, &v, sizeof(v)); break; }
    case DSUM:   { double v = ((int)(h % 129) - 64) / 8.0; memcpy(e, &v, sizeof(v)); break; }
    case LDSUM: {
        long double v = ((int)(h % 129) - 64) / 8.0L;
        memset(e, 0, sizeof(v));
        memcpy(e, &v, sizeof(v));
        break;
    }
    default: {
        int v[3] = {(int)(h % 1000) - 500, (int)h, (int)(h >> 12) % 1000 - 500};
        memcpy(e, v, sizeof(v));
        break;
    }
    }
}

/* acc = acc op next, acc the lower ranks'. */
static void combine(kind_t kind, char *acc, const char *next)
{
    switch (kind) {
    case MATRIX: {
        uint16_t x[4], y[4];
        memcpy(x, acc, sizeof(x));
        memcpy(y, next, sizeof(y));
        matrix_mul(x, y, x);
        memcpy(acc, x, sizeof(x));
        break;
    }
    case MAXABS: {
        int a, b;
        memcpy(&a, acc, sizeof(a));
        memcpy(&b, next, sizeof(b));
        a = maxabs(a, b);
        memcpy(acc, &a, sizeof(a));
        break;
    }
    case DSUM:   { double a, b;      memcpy(&a, acc, 8); memcpy(&b, next, 8); a += b; memcpy(acc, &a, 8); break; }
    case LDSUM:  { long double a, b; memcpy(&a, acc, sizeof(a)); memcpy(&b, next, sizeof(b));
                   a += b; memcpy(acc, &a, sizeof(a)); break; }
    default:
        add_gapped(next, acc);
        break;
    }
}

static void reference(kind_t kind, uint32_t seed, char *buf, size_t n)
{
    size_t ext = extent_of(kind);
    char next[32];
    for (size_t i = 0; i < n; i++) {
        element(kind, seed, 0, i, buf + i * ext);
        for (int r = 1; r < size; r++) {
            element(kind, seed, r, i, next);
            combine(kind, buf + i * ext, next);
        }
    }
}

/* The bytes that carry values: a long double's padding and the gap do not. */
static int same(kind_t kind, const char *a, const char *b)
{
    switch (kind) {
    case LDSUM: {
        long double x, y;
        memcpy(&x, a, sizeof(x));
        memcpy(&y, b, sizeof(y));
        return x == y;
    }
    case GAPPED:
        return memcmp(a, b, 4) == 0 && memcmp(a + 8, b + 8, 4) == 0;
    default:
        return memcmp(a, b, extent_of(kind)) == 0;
    }
}

static int compare(kind_t kind, const char *got, const char *want, size_t n, const char *what,
                   const char *against)
{
    size_t ext = extent_of(kind);
    for (size_t i = 0; i < n; i++) {
        if (!same(kind, got + i * ext, want + i * ext)) {
            fprintf(stderr, "rank %d: %s: element %zu of %zu differs from %s\n", rank, what, i,
                    n, against);
            return 1;
        }
    }
    return 0;
}

static void digest(kind_t kind, const char *buf, size_t n)
{
    size_t ext = extent_of(kind);
    for (size_t i = 0; i < n; i++) {
        const char *e = buf + i * ext;
        if (kind == LDSUM) {
            long double x;
            memcpy(&x, e, sizeof(x));
            double d = (double)x;
            test_digest(&d, sizeof(d));
        } else if (kind == GAPPED) {
            test_digest(e, 4);
            test_digest(e + 8, 4);
        } else {
            test_digest(e, ext);
        }
    }
}

/* ---- One call, twice -------------------------------------------------------------- */

static int call(int use_pmpi, int allreduce, const void *in, void *out, size_t n,
                MPI_Datatype type, MPI_Op op, int root)
{
    if (allreduce) {
        return use_pmpi ? PMPI_Allreduce(in, out, (int)n, type, op, MPI_COMM_WORLD)
                        : MPI_Allreduce(in, out, (int)n, type, op, MPI_COMM_WORLD);
    }
    return use_pmpi ? PMPI_Reduce(in, out, (int)n, type, op, root, MPI_COMM_WORLD)
                    : MPI_Reduce(in, out, (int)n, type, op, root, MPI_COMM_WORLD);
}

static void run_case(const ucase_t *c, int allreduce, size_t n, int inplace)
{
    static uint32_t seed;
    seed++;
    int root = (int)(seed % (uint32_t)size);
    char what[160];
    snprintf(what, sizeof(what), "%s %s, count %zu%s, root %d",
             allreduce ? "MPI_Allreduce" : "MPI_Reduce", c->name, n,
             inplace ? ", in place" : "", root);
    size_t ext = extent_of(c->kind), bytes = n * ext;
    char *in = malloc(bytes), *out[2], *want = malloc(bytes);
    int has_out = allreduce || rank == root;
    for (size_t i = 0; i < n; i++) {
        element(c->kind, seed, rank, i, in + i * ext);
    }
    for (int k = 0; k < 2; k++) {   /* k = 0: through the shim; 1: the MPI library */
        MPI_Op op;
        MPI_Op_create(c->fn, c->commute, &op);
        const void *sbuf;
        out[k] = test_output(in, bytes, inplace && has_out, &sbuf);
        seen_calls = 0;
        int rc = call(k, allreduce, sbuf, has_out ? out[k] : NULL, n, c->type, op, root);
        if (rc != MPI_SUCCESS) {
            fprintf(stderr, "rank %d: %s%s: returned %d\n", rank, k ? "P" : "", what, rc);
            failures++;
        }
        if (seen_calls > 0 && seen_type != c->type) {
            fprintf(stderr, "rank %d: %s%s: the op received another datatype\n", rank,
                    k ? "P" : "", what);
            failures++;
        }
        MPI_Op_free(&op);
    }
    test_expect(allreduce ? COLL_ALLREDUCE : COLL_REDUCE, c->route);
    if (has_out) {
        reference(c->kind, seed, want, n);
        failures += compare(c->kind, out[0], out[1], n, what, "the MPI library's");
        failures += compare(c->kind, out[0], want, n, what, "the reference");
        digest(c->kind, out[0], n);
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
    MPI_Datatype u64_dup, d_resized, matrix, gapped;
    MPI_Type_dup(MPI_UINT64_T, &u64_dup);
    MPI_Type_create_resized(MPI_DOUBLE, 0, sizeof(double), &d_resized);
    MPI_Type_contiguous(4, MPI_UINT16_T, &matrix);
    MPI_Type_vector(2, 1, 2, MPI_INT, &gapped);
    MPI_Datatype *made[] = {&u64_dup, &d_resized, &matrix, &gapped};
    for (size_t k = 0; k < sizeof(made) / sizeof(made[0]); k++) {
        MPI_Type_commit(made[k]);
    }
    const ucase_t cases[] = {
        {"matrix product on MPI_UINT64_T", MATRIX, MPI_UINT64_T, matrix_product, 0, ROUTE_FOLD},
        {"matrix product on a dup of MPI_UINT64_T", MATRIX, u64_dup, matrix_product, 0,
         ROUTE_FOLD},
        {"largest magnitude on MPI_INT", MAXABS, MPI_INT, max_magnitude, 1, ROUTE_FOLD},
        {"sum on MPI_DOUBLE", DSUM, MPI_DOUBLE, sum_doubles, 1, ROUTE_FOLD},
        {"sum on MPI_DOUBLE resized to its extent", DSUM, d_resized, sum_doubles, 1,
         ROUTE_FOLD},
        {"matrix product on contiguous(4, MPI_UINT16_T)", MATRIX, matrix, matrix_product, 0,
         ROUTE_FOLD},
        {"sum on MPI_LONG_DOUBLE", LDSUM, MPI_LONG_DOUBLE, sum_long_doubles, 1,
         ROUTE_FOLD},
        {"sum on vector(2, 1, 2, MPI_INT)", GAPPED, gapped, sum_gapped, 1,
         ROUTE_USER_OP_DERIVED},
    };
    /* Kept modest: 5 ranks run on 2 cores in the tests. */
    static const size_t counts[] = {1, 7, 12345};
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
            for (int inplace = 0; inplace <= 1; inplace++) {
                run_case(&cases[k], 1, counts[c], inplace);
                run_case(&cases[k], 0, counts[c], !inplace);
            }
        }
    }
    /* The non-commutative op at 2 MiB, where fold pipelines and segments. */
    for (int inplace = 0; inplace <= 1; inplace++) {
        run_case(&cases[0], 1, 262147, inplace);
        run_case(&cases[0], 0, 262147, !inplace);
    }
    for (size_t k = 0; k < sizeof(made) / sizeof(made[0]); k++) {
        MPI_Type_free(made[k]);
    }
    if (rank == 0) {
        printf("%zu user-op cases\n", sizeof(cases) / sizeof(cases[0]));
    }
    int failed = test_finish(failures);
    MPI_Finalize();
    return failed;
}
