/*
 * User ops on derived datatypes of whole records, which the shim serves in fold as
 * opaque elements of the type's size. Each call goes through MPI_Allreduce or
 * MPI_Reduce (every root in turn), in place and not, at 1, 7 and 1000 elements, and
 * is checked against a reference folded here in rank order:
 *   - a MINLOC-like op on {double value; int rank} built with MPI_Type_create_struct
 *     and resized to its 12 bytes of data: the smallest value, the lowest rank on ties;
 *   - a record of a long, three floats and an int (24 bytes, no padding): the longs
 *     summed, the floats' maximum, the ints xor-ed;
 *   - the product of 2x2 matrices of 32-bit integers (not commutative) on
 *     MPI_Type_contiguous(4, MPI_INT) and on a struct of four ints.
 * Left to the MPI library, and still checked: the MINLOC-like op on the struct as MPI
 * makes it, whose extent MPI rounds up to the double's alignment (16 bytes, as the C
 * struct's): its padding is a hole fold would write.
 * Every op checks that it receives the datatype the call passed.
 */
#include "shim_test.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum kind { DBLINT, RECORD, MATRIX };

typedef struct ucase {
    const char  *name;
    enum kind    kind;
    MPI_Datatype type;
    size_t       extent;   /* bytes per element in the buffers */
    int          commute;
    test_route_t route;
} ucase_t;

static int rank, size, failures;
static MPI_Datatype want_type;
static int wrong_type;

/* ---- The records and their ops -------------------------------------------------- */

typedef struct record {
    long  l;
    float f[3];
    int   k;
} record_t;

static void dblint_one(const char *in, char *io)
{
    double a, b;
    int ra, rb;
    memcpy(&a, in, 8);
    memcpy(&ra, in + 8, 4);
    memcpy(&b, io, 8);
    memcpy(&rb, io + 8, 4);
    if (a < b || (a == b && ra < rb)) {
        memcpy(io, in, 12);
    }
}

static void record_one(const char *in, char *io)
{
    record_t a, b;
    memcpy(&a, in, sizeof(a));
    memcpy(&b, io, sizeof(b));
    b.l += a.l;
    for (int j = 0; j < 3; j++) {
        b.f[j] = a.f[j] > b.f[j] ? a.f[j] : b.f[j];
    }
    b.k ^= a.k;
    memcpy(io, &b, sizeof(b));
}

/* io = in * io, row-major {a, b, c, d}, modulo 2^32. */
static void matrix_one(const char *in, char *io)
{
    uint32_t x[4], y[4];
    memcpy(x, in, 16);
    memcpy(y, io, 16);
    uint32_t r[4] = {x[0] * y[0] + x[1] * y[2], x[0] * y[1] + x[1] * y[3],
                     x[2] * y[0] + x[3] * y[2], x[2] * y[1] + x[3] * y[3]};
    memcpy(io, r, 16);
}

static void apply(enum kind kind, const char *in, char *io)
{
    switch (kind) {
    case DBLINT: dblint_one(in, io); break;
    case RECORD: record_one(in, io); break;
    case MATRIX: matrix_one(in, io); break;
    }
}

static void check_type(const MPI_Datatype *type)
{
    wrong_type |= *type != want_type;
}

static void dblint_op(void *in, void *io, int *len, MPI_Datatype *type)
{
    check_type(type);
    MPI_Aint lb, extent;
    MPI_Type_get_extent(*type, &lb, &extent);
    for (int i = 0; i < *len; i++) {
        dblint_one((char *)in + i * extent, (char *)io + i * extent);
    }
}

static void record_op(void *in, void *io, int *len, MPI_Datatype *type)
{
    check_type(type);
    for (int i = 0; i < *len; i++) {
        record_one((char *)in + i * sizeof(record_t), (char *)io + i * sizeof(record_t));
    }
}

static void matrix_op(void *in, void *io, int *len, MPI_Datatype *type)
{
    check_type(type);
    for (int i = 0; i < *len; i++) {
        matrix_one((char *)in + 16 * i, (char *)io + 16 * i);
    }
}

/* Rank r's element i. Padding (the resized case) stays zero. */
static void fill(const ucase_t *c, int r, size_t i, char *e)
{
    memset(e, 0, c->extent);
    if (c->kind == DBLINT) {
        double v = (double)((r * 7 + (int)i * 3) % 5) - 1.5;
        memcpy(e, &v, 8);
        memcpy(e + 8, &r, 4);
    } else if (c->kind == RECORD) {
        record_t x = {.l = (long)r * 1000 + (long)i, .k = r ^ (int)i};
        for (int j = 0; j < 3; j++) {
            x.f[j] = (float)((r + (int)i + j) % 4) * 0.5f;
        }
        memcpy(e, &x, sizeof(x));
    } else {
        uint32_t m[4] = {1u + (uint32_t)(r + (int)i) % 3u, (uint32_t)r, (uint32_t)i % 5u, 1u};
        memcpy(e, m, 16);
    }
}

/* Ranks 0..size-1 folded left to right. */
static void reference(const ucase_t *c, size_t count, char *want)
{
    char *x = malloc(c->extent);
    for (size_t i = 0; i < count; i++) {
        char *acc = want + i * c->extent;
        fill(c, 0, i, acc);
        for (int r = 1; r < size; r++) {
            fill(c, r, i, x);
            apply(c->kind, acc, x);
            memcpy(acc, x, c->extent);
        }
    }
    free(x);
}

/* ---- One call --------------------------------------------------------------------- */

static MPI_User_function *fn_of(enum kind kind)
{
    return kind == DBLINT ? dblint_op : kind == RECORD ? record_op : matrix_op;
}

static void run(const ucase_t *c, int allreduce, size_t count, int inplace, int root)
{
    MPI_Op op;
    MPI_Op_create(fn_of(c->kind), c->commute, &op);
    size_t bytes = count * c->extent;
    char *in = malloc(bytes), *want = malloc(bytes);
    for (size_t i = 0; i < count; i++) {
        fill(c, rank, i, in + i * c->extent);
    }
    reference(c, count, want);
    int has_output = allreduce || rank == root;
    const void *sendbuf;
    char *out = test_output(in, bytes, inplace && has_output, &sendbuf);
    want_type = c->type;
    int rc = allreduce ? MPI_Allreduce(sendbuf, out, (int)count, c->type, op, MPI_COMM_WORLD)
                       : MPI_Reduce(sendbuf, out, (int)count, c->type, op, root,
                                    MPI_COMM_WORLD);
    test_expect(allreduce ? COLL_ALLREDUCE : COLL_REDUCE, c->route);
    char what[160];
    snprintf(what, sizeof(what), "%s %s of %zu%s root %d", allreduce ? "allreduce" : "reduce",
             c->name, count, inplace ? " in place" : "", root);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "rank %d: %s returned %d\n", rank, what, rc);
        failures++;
    } else if (has_output) {
        /* The data bytes only: MPI leaves a padded layout's hole as it was. */
        size_t data = c->kind == DBLINT ? 12 : c->extent;
        for (size_t i = 0; i < count; i++) {
            if (memcmp(out + i * c->extent, want + i * c->extent, data) != 0) {
                fprintf(stderr, "rank %d: %s: element %zu differs\n", rank, what, i);
                failures++;
                break;
            }
            test_digest(out + i * c->extent, data);
        }
    }
    free(out);
    free(in);
    free(want);
    MPI_Op_free(&op);
}

/* ---- The datatypes ------------------------------------------------------------------ */

static MPI_Datatype make_struct(int n, const int *lengths, const MPI_Aint *disps,
                                const MPI_Datatype *types)
{
    MPI_Datatype t;
    MPI_Type_create_struct(n, lengths, disps, types, &t);
    MPI_Type_commit(&t);
    return t;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    const int one_one[2] = {1, 1};
    const MPI_Aint dblint_disps[2] = {0, 8};
    const MPI_Datatype dblint_types[2] = {MPI_DOUBLE, MPI_INT};
    MPI_Datatype padded = make_struct(2, one_one, dblint_disps, dblint_types), dblint;
    MPI_Type_create_resized(padded, 0, 12, &dblint);
    MPI_Type_commit(&dblint);
    const int rec_lengths[3] = {1, 3, 1};
    const MPI_Aint rec_disps[3] = {offsetof(record_t, l), offsetof(record_t, f),
                                   offsetof(record_t, k)};
    const MPI_Datatype rec_types[3] = {MPI_LONG, MPI_FLOAT, MPI_INT};
    MPI_Datatype rec = make_struct(3, rec_lengths, rec_disps, rec_types);
    MPI_Datatype contig, four;
    MPI_Type_contiguous(4, MPI_INT, &contig);
    MPI_Type_commit(&contig);
    const int four_lengths[2] = {2, 2};
    const MPI_Aint four_disps[2] = {0, 8};
    const MPI_Datatype four_types[2] = {MPI_INT, MPI_INT};
    four = make_struct(2, four_lengths, four_disps, four_types);

    const ucase_t cases[] = {
        {"minloc-like on {double, int}", DBLINT, dblint, 12, 1, ROUTE_FOLD},
        {"long, 3 floats, int", RECORD, rec, sizeof(record_t), 1, ROUTE_FOLD},
        {"matrix product on contiguous(4, MPI_INT)", MATRIX, contig, 16, 0, ROUTE_FOLD},
        {"matrix product on a struct of 4 ints", MATRIX, four, 16, 0, ROUTE_FOLD},
        {"minloc-like on {double, int} with its padding", DBLINT, padded, 16, 1,
         ROUTE_USER_OP_DERIVED},
    };
    static const size_t counts[] = {1, 7, 1000};
    int call = 0;
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        for (size_t n = 0; n < sizeof(counts) / sizeof(counts[0]); n++) {
            for (int inplace = 0; inplace <= 1; inplace++) {
                run(&cases[k], 1, counts[n], inplace, 0);
                run(&cases[k], 0, counts[n], inplace, call++ % size);
            }
        }
    }
    if (wrong_type) {
        fprintf(stderr, "rank %d: an op received another datatype than its call's\n", rank);
        failures++;
    }
    MPI_Datatype types[] = {dblint, padded, rec, contig, four};
    for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
        MPI_Type_free(&types[k]);
    }
    int failed = test_finish(failures);
    MPI_Finalize();
    return failed;
}
