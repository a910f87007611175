/*
 * Intercommunicator MPI_Allreduce and MPI_Reduce, which the shim serves in fold. The
 * world splits unevenly into a low group (the first size/2 ranks: 1 of 3, 2 of 5) and
 * a high group, joined by MPI_Intercomm_create, twice: with each group's ranks in world
 * order, then in reverse (the groups' rank order, not the world's, must order a
 * non-commutative op). On each:
 *   - allreduce: each group gets the other group's reduction (MPI_SUM on MPI_INT, and
 *     a non-commutative product of 2x2 matrices on MPI_Type_contiguous(4, MPI_INT),
 *     which must come in the other group's rank order), at 0, 1, 7 and 5000 elements;
 *   - reduce: the root (first and last rank of each group in turn) passes MPI_ROOT,
 *     the rest of its group MPI_PROC_NULL, and gets the other group's reduction.
 * Results are checked against a reference folded here over the other group's ranks.
 * Needs 2 or more ranks.
 */
#include "shim_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, failures;

/* io = in * io, row-major {a, b, c, d}, modulo 2^32. */
static void matrix_one(const uint32_t *x, uint32_t *y)
{
    uint32_t r[4] = {x[0] * y[0] + x[1] * y[2], x[0] * y[1] + x[1] * y[3],
                     x[2] * y[0] + x[3] * y[2], x[2] * y[1] + x[3] * y[3]};
    memcpy(y, r, sizeof(r));
}

static void matrix_op(void *in, void *io, int *len, MPI_Datatype *type)
{
    (void)type;
    for (int i = 0; i < *len; i++) {
        matrix_one((const uint32_t *)in + 4 * i, (uint32_t *)io + 4 * i);
    }
}

/* World rank r's element i: `words` ints (1: the sum, 4: a matrix). */
static void fill(int words, int r, size_t i, uint32_t *e)
{
    if (words == 1) {
        e[0] = (uint32_t)(r * 1000) + (uint32_t)i;
    } else {
        uint32_t m[4] = {1u + (uint32_t)(r + (int)i) % 3u, (uint32_t)r + 1u, (uint32_t)i % 5u,
                         1u};
        memcpy(e, m, sizeof(m));
    }
}

/* World ranks lo..hi-1 folded in group order (reversed: from hi-1 down). */
static void reference(int words, int lo, int hi, int reversed, size_t count, uint32_t *want)
{
    uint32_t x[4];
    for (size_t i = 0; i < count; i++) {
        uint32_t *acc = want + (size_t)words * i;
        fill(words, reversed ? hi - 1 : lo, i, acc);
        for (int k = 1; k < hi - lo; k++) {
            fill(words, reversed ? hi - 1 - k : lo + k, i, x);
            if (words == 1) {
                acc[0] += x[0];
            } else {
                matrix_one(acc, x);
                memcpy(acc, x, sizeof(x));
            }
        }
    }
}

static void check_result(const char *what, const uint32_t *got, const uint32_t *want,
                         size_t n)
{
    if (memcmp(got, want, n * sizeof(uint32_t)) != 0) {
        fprintf(stderr, "rank %d: %s: wrong result\n", rank, what);
        failures++;
    }
    test_digest(got, n * sizeof(uint32_t));
}

typedef struct side {
    MPI_Comm inter;
    int      low;             /* this process is in the low group */
    int      nlow;
    int      group_rank;
    int      reversed;        /* group ranks run against world ranks */
} side_t;

/* The other group's world ranks. */
static void other_group(const side_t *s, int *lo, int *hi)
{
    *lo = s->low ? s->nlow : 0;
    *hi = s->low ? size : s->nlow;
}

static void allreduce(const side_t *s, int words, MPI_Datatype type, MPI_Op op, size_t count)
{
    size_t n = (size_t)words * count;
    uint32_t *in = malloc(n * 4 + 4), *out = malloc(n * 4 + 4), *want = malloc(n * 4 + 4);
    for (size_t i = 0; i < count; i++) {
        fill(words, rank, i, in + (size_t)words * i);
    }
    int lo, hi;
    other_group(s, &lo, &hi);
    reference(words, lo, hi, s->reversed, count, want);
    memset(out, 0xa5, n * 4);
    char what[96];
    snprintf(what, sizeof(what), "allreduce of %zu %s", count, words == 1 ? "ints" : "matrices");
    if (MPI_Allreduce(in, out, (int)count, type, op, s->inter) != MPI_SUCCESS) {
        fprintf(stderr, "rank %d: %s failed\n", rank, what);
        failures++;
    }
    test_expect(COLL_ALLREDUCE, ROUTE_FOLD);
    check_result(what, out, want, n);
    free(in);
    free(out);
    free(want);
}

/* The root is rank `root` of the group `root_low` says. */
static void reduce(const side_t *s, int words, MPI_Datatype type, MPI_Op op, size_t count,
                   int root_low, int root)
{
    size_t n = (size_t)words * count;
    uint32_t *in = malloc(n * 4 + 4), *out = malloc(n * 4 + 4), *want = malloc(n * 4 + 4);
    for (size_t i = 0; i < count; i++) {
        fill(words, rank, i, in + (size_t)words * i);
    }
    int in_root_group = s->low == root_low;
    int arg = !in_root_group ? root : s->group_rank == root ? MPI_ROOT : MPI_PROC_NULL;
    memset(out, 0xa5, n * 4);
    char what[96];
    snprintf(what, sizeof(what), "reduce of %zu %s to %s rank %d", count,
             words == 1 ? "ints" : "matrices", root_low ? "low" : "high", root);
    if (MPI_Reduce(in, out, (int)count, type, op, arg, s->inter) != MPI_SUCCESS) {
        fprintf(stderr, "rank %d: %s failed\n", rank, what);
        failures++;
    }
    test_expect(COLL_REDUCE, ROUTE_FOLD);
    if (arg == MPI_ROOT) {
        int lo, hi;
        other_group(s, &lo, &hi);
        reference(words, lo, hi, s->reversed, count, want);
        check_result(what, out, want, n);
    }
    free(in);
    free(out);
    free(want);
}

/* Every call on one intercommunicator. */
static void calls(const side_t *s, MPI_Datatype matrix, MPI_Op product)
{
    static const size_t counts[] = {0, 1, 7, 5000};
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
        allreduce(s, 1, MPI_INT, MPI_SUM, counts[k]);
        allreduce(s, 4, matrix, product, counts[k]);
    }
    int nhigh = size - s->nlow;
    for (int root_low = 0; root_low <= 1; root_low++) {
        int last = (root_low ? s->nlow : nhigh) - 1;
        for (int root = 0; root <= last; root += last > 0 ? last : 1) {
            reduce(s, 1, MPI_INT, MPI_SUM, 7, root_low, root);
            reduce(s, 4, matrix, product, 5000, root_low, root);
        }
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) {
        if (rank == 0) {
            printf("skipped: needs 2 or more ranks\n");
        }
        MPI_Finalize();
        return 77;
    }
    MPI_Datatype matrix;
    MPI_Type_contiguous(4, MPI_INT, &matrix);
    MPI_Type_commit(&matrix);
    MPI_Op product;
    MPI_Op_create(matrix_op, 0, &product);

    for (int reversed = 0; reversed <= 1; reversed++) {
        side_t s = {.nlow = size / 2, .low = rank < size / 2, .reversed = reversed};
        MPI_Comm half;
        MPI_Comm_split(MPI_COMM_WORLD, s.low, reversed ? size - rank : rank, &half);
        MPI_Comm_rank(half, &s.group_rank);
        /* Each group's leader: its first world rank, or its last when reversed. */
        int remote_leader = s.low ? (reversed ? size - 1 : s.nlow)
                                  : (reversed ? s.nlow - 1 : 0);
        MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, remote_leader, 40 + reversed, &s.inter);
        calls(&s, matrix, product);
        MPI_Comm_free(&s.inter);
        MPI_Comm_free(&half);
    }
    MPI_Op_free(&product);
    MPI_Type_free(&matrix);
    int failed = test_finish(failures);
    MPI_Finalize();
    return failed;
}
