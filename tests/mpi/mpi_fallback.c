/*
 * Calls the fold MPI shim must hand to the MPI library, each with its expected reason:
 * derived datatypes with gaps, with a predefined op and with a user op, an op the shim
 * never saw created (PMPI_Op_create), one beyond fold's 256, long double (its pair and
 * complex types too), MPI_OFFSET, ops MPI does not define for a type but Open MPI
 * accepts, messages outside FOLD_MPI_*_MIN..MAX, and erroneous calls, whose MPI error
 * class must not change with the shim. Results are checked; served calls stand beside
 * them as a control: a user op on a contiguous type of several elements, and an
 * intercommunicator's allreduce and reduce. Needs 2 or more ranks.
 */
#include "shim_test.h"

#include <complex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Elements per call: within the size range the test runs with, so that only the
 * cases meant to be small or large are. */
#define N 40

static int failures, rank, size;

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "rank %d: %s: wrong result\n", rank, what);
        failures++;
    }
}

static void check_rc(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "rank %d: %s: returned %d\n", rank, what, rc);
        failures++;
    }
}

/* Element i of rank r, and its sum over ranks. */
static int value(int r, int i)
{
    return (r * 7 + i * 3) % 11 - 5;
}

static long sum_over_ranks(int i, int lo, int hi)
{
    long s = 0;
    for (int r = lo; r < hi; r++) {
        s += value(r, i);
    }
    return s;
}

/* Open MPI applies predefined ops to predefined types only (the shim serves them on
 * derived types without gaps too: mpi_derived_check): derived types come with a user
 * op here, and the datatype decides the route. */
static void add_int_pairs(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    for (int i = 0; i < 2 * *len; i++) {
        ((int *)inout)[i] += ((int *)in)[i];
    }
}

/* vector(2, 1, 2, MPI_DOUBLE): doubles at bytes 0 and 16 of a 24-byte element. */
static void add_gapped_doubles(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    for (int i = 0; i < *len; i++) {
        ((double *)inout)[3 * i] += ((double *)in)[3 * i];
        ((double *)inout)[3 * i + 2] += ((double *)in)[3 * i + 2];
    }
}

/* A user op on a derived type of two ints (served: whole elements as opaque ones), and
 * one on a vector with gaps (left to MPI: fold would write the gaps). */
static void derived_types(void)
{
    MPI_Datatype pair, gapped;
    MPI_Op add_pairs, add_dbl;
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    MPI_Type_vector(2, 1, 2, MPI_DOUBLE, &gapped);
    MPI_Type_commit(&gapped);
    MPI_Op_create(add_int_pairs, 1, &add_pairs);
    MPI_Op_create(add_gapped_doubles, 1, &add_dbl);
    int in[2 * N], out[2 * N];
    double din[3 * N / 2], dout[3 * N / 2];
    for (int i = 0; i < 2 * N; i++) {
        in[i] = value(rank, i);
    }
    for (int i = 0; i < 3 * N / 2; i++) {
        din[i] = value(rank, i);
        dout[i] = 0;
    }
    check_rc(MPI_Allreduce(in, out, N, pair, add_pairs, MPI_COMM_WORLD), "contiguous type");
    test_expect(COLL_ALLREDUCE, ROUTE_FOLD);
    int ok = 1;
    for (int i = 0; i < 2 * N; i++) {
        ok &= out[i] == sum_over_ranks(i, 0, size);
    }
    check(ok, "contiguous type");
    test_digest(out, sizeof(out));
    check_rc(MPI_Reduce(din, dout, N / 2, gapped, add_dbl, size - 1, MPI_COMM_WORLD),
             "vector with gaps");
    test_expect(COLL_REDUCE, ROUTE_USER_OP_DERIVED);
    if (rank == size - 1) {
        ok = 1;
        for (int i = 0; i < 3 * N / 2; i++) {
            ok &= dout[i] == (i % 3 == 1 ? 0.0 : (double)sum_over_ranks(i, 0, size));
        }
        check(ok, "vector with gaps");
        test_digest(dout, sizeof(dout));
    }
    MPI_Op_free(&add_pairs);
    MPI_Op_free(&add_dbl);
    MPI_Type_free(&pair);
    MPI_Type_free(&gapped);
}

static void add_ints(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    for (int i = 0; i < *len; i++) {
        ((int *)inout)[i] += ((int *)in)[i];
    }
}

/* "a op b = a": associative, not commutative; the result is rank 0's input. */
static void first(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    memcpy(inout, in, (size_t)*len * sizeof(int));
}

/* A user op the shim saw created, served (a control), and one made through
 * PMPI_Op_create, which the shim never sees: MPI runs it. */
static void user_ops(void)
{
    MPI_Op add, keep_first;
    MPI_Op_create(add_ints, 1, &add);
    PMPI_Op_create(first, 0, &keep_first);
    int in[N], out[N];
    for (int i = 0; i < N; i++) {
        in[i] = value(rank, i);
    }
    check_rc(MPI_Allreduce(in, out, N, MPI_INT, add, MPI_COMM_WORLD), "user op");
    test_expect(COLL_ALLREDUCE, ROUTE_FOLD);
    int ok = 1;
    for (int i = 0; i < N; i++) {
        ok &= out[i] == sum_over_ranks(i, 0, size);
    }
    check(ok, "user op");
    test_digest(out, sizeof(out));
    check_rc(MPI_Reduce(in, out, N, MPI_INT, keep_first, 0, MPI_COMM_WORLD),
             "non-commutative user op");
    test_expect(COLL_REDUCE, ROUTE_OP);
    if (rank == 0) {
        ok = 1;
        for (int i = 0; i < N; i++) {
            ok &= out[i] == value(0, i);
        }
        check(ok, "non-commutative user op");
        test_digest(out, sizeof(out));
    }
    MPI_Op_free(&add);
    MPI_Op_free(&keep_first);
}

/* fold holds 256 user ops at a time: the 257th op created goes to MPI. */
static void user_op_slots(void)
{
    enum { OPS = 257 };
    MPI_Op ops[OPS];
    for (int k = 0; k < OPS; k++) {
        MPI_Op_create(add_ints, 1, &ops[k]);
    }
    int in[N], out[N];
    for (int i = 0; i < N; i++) {
        in[i] = value(rank, i);
    }
    check_rc(MPI_Allreduce(in, out, N, MPI_INT, ops[OPS - 1], MPI_COMM_WORLD), "257th op");
    test_expect(COLL_ALLREDUCE, ROUTE_USER_OP);
    int ok = 1;
    for (int i = 0; i < N; i++) {
        ok &= out[i] == sum_over_ranks(i, 0, size);
    }
    check(ok, "257th op");
    test_digest(out, sizeof(out));
    for (int k = 0; k < OPS; k++) {
        MPI_Op_free(&ops[k]);
    }
}

/* The pair types fold serves (MPI_2INT, a control within the size range) beside one
 * it does not: long double's pair. */
static void pair_types(void)
{
    struct { long double v; int i; } lin[N], lout[N];
    struct { int v, i; } iin[N], iout[N];
    for (int i = 0; i < N; i++) {
        lin[i].v = value(rank, i);
        lin[i].i = rank;
        iin[i].v = value(rank, i);
        iin[i].i = rank;
    }
    check_rc(MPI_Allreduce(lin, lout, N, MPI_LONG_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD),
             "maxloc");
    test_expect(COLL_ALLREDUCE, ROUTE_DATATYPE);
    check_rc(MPI_Reduce(iin, iout, N, MPI_2INT, MPI_MINLOC, 1, MPI_COMM_WORLD), "minloc");
    test_expect(COLL_REDUCE, ROUTE_FOLD);
    int ok_max = 1, ok_min = 1;
    for (int i = 0; i < N; i++) {
        int best_max = 0, best_min = 0;
        for (int r = 1; r < size; r++) {
            best_max = value(r, i) > value(best_max, i) ? r : best_max;
            best_min = value(r, i) < value(best_min, i) ? r : best_min;
        }
        ok_max &= lout[i].v == value(best_max, i) && lout[i].i == best_max;
        ok_min &= rank != 1 || (iout[i].v == value(best_min, i) && iout[i].i == best_min);
    }
    check(ok_max, "maxloc");
    check(ok_min, "minloc");
    for (int i = 0; i < N; i++) {   /* the fields: long double's pair has padding */
        int v = (int)lout[i].v;
        test_digest(&v, sizeof(v));
        test_digest(&lout[i].i, sizeof(lout[i].i));
    }
}

static void types_mpi_keeps(void)
{
    long double lin[N], lout[N];
    long double complex cin[N], cout[N];
    MPI_Offset oin[N], oout[N];
    unsigned char bin[N], bout[N];
    MPI_Aint ain[N], aout[N];
    for (int i = 0; i < N; i++) {
        lin[i] = value(rank, i);
        cin[i] = value(rank, i) + value(rank, i + 1) * I;
        oin[i] = value(rank, i);
        bin[i] = (unsigned char)(value(rank, i) + 5);
        ain[i] = i % 3 == 0 ? 0 : value(rank, i);
    }
    check_rc(MPI_Allreduce(lin, lout, N, MPI_LONG_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "ldouble");
    test_expect(COLL_ALLREDUCE, ROUTE_DATATYPE);
    check_rc(MPI_Allreduce(cin, cout, N, MPI_C_LONG_DOUBLE_COMPLEX, MPI_SUM, MPI_COMM_WORLD),
             "complex");
    test_expect(COLL_ALLREDUCE, ROUTE_DATATYPE);
    check_rc(MPI_Allreduce(oin, oout, N, MPI_OFFSET, MPI_SUM, MPI_COMM_WORLD), "offset");
    test_expect(COLL_ALLREDUCE, ROUTE_DATATYPE);
    /* MPI defines only bitwise ops on MPI_BYTE and no logical ops on MPI_AINT: the shim
     * leaves them to the library, which computes them (Open MPI) or refuses them
     * (MPICH), the same with the shim as without. */
    memset(bout, 0, sizeof(bout));
    memset(aout, 0, sizeof(aout));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int byte_rc = MPI_Allreduce(bin, bout, N, MPI_BYTE, MPI_SUM, MPI_COMM_WORLD);
    test_expect(COLL_ALLREDUCE, ROUTE_DTYPE_OP);
    int aint_rc = MPI_Allreduce(ain, aout, N, MPI_AINT, MPI_LOR, MPI_COMM_WORLD);
    test_expect(COLL_ALLREDUCE, ROUTE_DTYPE_OP);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    int refused[2] = {byte_rc != MPI_SUCCESS, aint_rc != MPI_SUCCESS};
    test_digest(refused, sizeof(refused));
    int ok = 1;
    for (int i = 0; i < N; i++) {
        long s = sum_over_ranks(i, 0, size);
        int any = 0;
        for (int r = 0; r < size; r++) {
            any |= i % 3 != 0 && value(r, i) != 0;
        }
        ok &= lout[i] == s && creall(cout[i]) == s && cimagl(cout[i]) ==
              sum_over_ranks(i + 1, 0, size) && oout[i] == s &&
              (refused[0] || bout[i] == (unsigned char)(s + 5 * size)) &&
              (refused[1] || aout[i] == any);
    }
    check(ok, "long double, complex, offset, byte sum, aint lor");
    test_digest(bout, sizeof(bout));
    test_digest(aout, sizeof(aout));
}

/* Low half and high half of the world, joined by an intercommunicator (served).
 * Allreduce gives each side the other's sum; reduce gives the low side's rank 0 the high
 * side's. */
static void intercomm(void)
{
    int low = rank < size / 2, nlow = size / 2;
    MPI_Comm half, inter;
    MPI_Comm_split(MPI_COMM_WORLD, low, rank, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, low ? nlow : 0, 99, &inter);
    int in[N], out[N];
    for (int i = 0; i < N; i++) {
        in[i] = value(rank, i);
    }
    check_rc(MPI_Allreduce(in, out, N, MPI_INT, MPI_SUM, inter), "intercomm allreduce");
    test_expect(COLL_ALLREDUCE, ROUTE_FOLD);
    int ok = 1;
    for (int i = 0; i < N; i++) {
        ok &= out[i] == (low ? sum_over_ranks(i, nlow, size) : sum_over_ranks(i, 0, nlow));
    }
    check(ok, "intercomm allreduce");
    test_digest(out, sizeof(out));
    int root = low ? (rank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
    memset(out, 0, sizeof(out));
    check_rc(MPI_Reduce(in, out, N, MPI_INT, MPI_SUM, root, inter), "intercomm reduce");
    test_expect(COLL_REDUCE, ROUTE_FOLD);
    if (rank == 0) {
        ok = 1;
        for (int i = 0; i < N; i++) {
            ok &= out[i] == sum_over_ranks(i, nlow, size);
        }
        check(ok, "intercomm reduce");
        test_digest(out, sizeof(out));
    }
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
}

/* A predefined op on a derived type without gaps, which the shim serves and Open MPI
 * alone refuses: where MPI_* takes it (under the shim), it must also work at sizes the
 * shim hands to MPI, which then gets the same call on the base type. Only checked, not
 * digested: without the shim it fails. */
static void derived_sizes(void)
{
    MPI_Datatype pair;
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int in[2 * 100], out[2 * 100];
    for (int i = 0; i < 2 * 100; i++) {
        in[i] = value(rank, i);
    }
    /* 10 pairs = 80 bytes: served; 4 = 32 and 100 = 800 bytes: outside 64 .. 512. */
    static const int counts[3] = {10, 4, 100};
    static const test_route_t routes[3] = {ROUTE_FOLD, ROUTE_SMALL, ROUTE_LARGE};
    int accepted = 0;
    for (int k = 0; k < 3; k++) {
        memset(out, 0, sizeof(out));
        int rc = MPI_Allreduce(in, out, counts[k], pair, MPI_SUM, comm);
        test_expect(COLL_ALLREDUCE, routes[k]);
        if (k == 0) {
            accepted = rc == MPI_SUCCESS;
        }
        if (accepted) {
            check_rc(rc, "sum on a contiguous type");
            int ok = 1;
            for (int i = 0; i < 2 * counts[k]; i++) {
                ok &= out[i] == sum_over_ranks(i, 0, size);
            }
            check(ok, "sum on a contiguous type");
        }
    }
    MPI_Comm_free(&comm);
    MPI_Type_free(&pair);
}

static size_t env_size(const char *name)
{
    const char *text = getenv(name);
    return text != NULL ? strtoul(text, NULL, 10) : 0;
}

static test_route_t size_route(size_t bytes, const char *min, const char *max)
{
    return bytes < env_size(min) ? ROUTE_SMALL
         : getenv(max) != NULL && bytes > env_size(max) ? ROUTE_LARGE : ROUTE_FOLD;
}

/* Around FOLD_MPI_*_MIN and FOLD_MPI_*_MAX (plain byte counts when set). */
static void thresholds(void)
{
    for (int count = 1; count <= 256; count *= 4) {
        int in[256], out[256];
        for (int i = 0; i < count; i++) {
            in[i] = value(rank, i);
        }
        size_t bytes = (size_t)count * sizeof(int);
        check_rc(MPI_Allreduce(in, out, count, MPI_INT, MPI_SUM, MPI_COMM_WORLD), "size");
        test_expect(COLL_ALLREDUCE,
                    size_route(bytes, "FOLD_MPI_ALLREDUCE_MIN", "FOLD_MPI_ALLREDUCE_MAX"));
        int ok = 1;
        for (int i = 0; i < count; i++) {
            ok &= out[i] == sum_over_ranks(i, 0, size);
        }
        check(ok, "allreduce around the thresholds");
        check_rc(MPI_Reduce(in, out, count, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD), "size");
        test_expect(COLL_REDUCE,
                    size_route(bytes, "FOLD_MPI_REDUCE_MIN", "FOLD_MPI_REDUCE_MAX"));
        if (rank == 0) {
            ok = 1;
            for (int i = 0; i < count; i++) {
                ok &= out[i] == sum_over_ranks(i, 0, size);
            }
            check(ok, "reduce around the thresholds");
            test_digest(out, bytes);
        }
    }
}

/* Calls MPI rejects must fail as they did without the shim: the error class goes into
 * the digest. Every rank makes each mistake, so nobody waits on a peer. */
static void record_error(int rc, const char *what)
{
    int cls = MPI_SUCCESS;
    MPI_Error_class(rc, &cls);
    if (rc == MPI_SUCCESS) {
        fprintf(stderr, "rank %d: %s: succeeded, expected an error\n", rank, what);
        failures++;
    }
    test_digest(&cls, sizeof(cls));
}

static void erroneous_calls(void)
{
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int buf[N] = {0}, out[N];
    _Bool flags[N] = {0};
    double d[N] = {0};
    record_error(MPI_Allreduce(buf, buf, N, MPI_INT, MPI_SUM, comm), "aliased buffers");
    test_expect(COLL_ALLREDUCE, ROUTE_ARGS);
    record_error(MPI_Allreduce(buf, MPI_IN_PLACE, N, MPI_INT, MPI_SUM, comm),
                 "MPI_IN_PLACE as recvbuf");
    test_expect(COLL_ALLREDUCE, ROUTE_ARGS);
#ifndef MPICH_VERSION   /* MPICH 4.0 does not check the count: it crashes */
    record_error(MPI_Allreduce(buf, out, -1, MPI_INT, MPI_SUM, comm), "negative count");
    test_expect(COLL_ALLREDUCE, ROUTE_ARGS);
#endif
    record_error(MPI_Reduce(buf, out, N, MPI_INT, MPI_SUM, size, comm), "root out of range");
    test_expect(COLL_REDUCE, ROUTE_ARGS);
    record_error(MPI_Allreduce(flags, out, N, MPI_C_BOOL, MPI_SUM, comm), "sum of bools");
    test_expect(COLL_ALLREDUCE, ROUTE_DTYPE_OP);
    record_error(MPI_Allreduce(d, out, N, MPI_DOUBLE, MPI_BAND, comm), "band of doubles");
    test_expect(COLL_ALLREDUCE, ROUTE_DTYPE_OP);
    record_error(MPI_Allreduce(buf, out, N, MPI_INT, MPI_MAXLOC, comm), "maxloc of ints");
    test_expect(COLL_ALLREDUCE, ROUTE_DTYPE_OP);
    record_error(MPI_Allreduce(buf, out, N / 2, MPI_2INT, MPI_SUM, comm), "sum of pairs");
    test_expect(COLL_ALLREDUCE, ROUTE_DTYPE_OP);
    /* A predefined op on a type with gaps: MPI's answer, whatever it is (Open MPI:
     * MPI_ERR_OP; a library that takes it reduces it). */
    MPI_Datatype gapped;
    MPI_Type_vector(2, 1, 2, MPI_INT, &gapped);
    MPI_Type_commit(&gapped);
    int cls = MPI_SUCCESS;
    MPI_Error_class(MPI_Allreduce(buf, out, N / 3, gapped, MPI_SUM, comm), &cls);
    test_digest(&cls, sizeof(cls));
    test_expect(COLL_ALLREDUCE, ROUTE_DERIVED);
    MPI_Type_free(&gapped);
    record_error(MPI_Allreduce(buf, out, N, MPI_INT, MPI_OP_NULL, comm), "MPI_OP_NULL");
    test_expect(COLL_ALLREDUCE, ROUTE_OP);
    record_error(MPI_Allreduce(buf, out, N, MPI_DATATYPE_NULL, MPI_SUM, comm),
                 "MPI_DATATYPE_NULL");
    test_expect(COLL_ALLREDUCE, ROUTE_DATATYPE);
    record_error(MPI_Allreduce(buf, out, N, MPI_INT, MPI_SUM, MPI_COMM_NULL), "MPI_COMM_NULL");
    test_expect(COLL_ALLREDUCE, ROUTE_ARGS);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_free(&comm);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) {
        if (rank == 0) {
            fprintf(stderr, "mpi_fallback needs 2 or more ranks\n");
        }
        MPI_Finalize();
        return 2;
    }
    derived_types();
    derived_sizes();
    user_ops();
    user_op_slots();
    pair_types();
    types_mpi_keeps();
    intercomm();
    thresholds();
    erroneous_calls();
    int failed = test_finish(failures);
    MPI_Finalize();
    return failed;
}
