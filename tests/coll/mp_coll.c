/*
 * Every algorithm of the registry over a real transport, in real processes launched
 * by mpirun (PMIx bootstrap), checked against the independent reference. The full
 * matrix (tests/coll_matrix.h) runs once, on the loopback transport at every rank
 * count (test_coll_loopback.c); here each run takes a slice of it by default: every
 * algorithm and collective at counts {0,1,7,1024,2^16+3}, root, in place and
 * datatype x op rotating from a start that depends on the job size, and the user op
 * at 7 and the large count. `mp_coll full` runs the whole matrix with 2^20+3
 * elements. Also split, bcast, barrier and a non-blocking pair, and sparse inputs
 * through the codecs (each algorithm one codec in turn; `full`: every codec), which
 * must have sent messages encoded. Exits non-zero on any failure.
 */
#include <fold/fold.h>

#include "coll_matrix.h"
#include "coll_reference.h"
#include "comm.h"   /* the context's codec counters */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LARGE_COUNT ((size_t)(1u << 20) + 3)
#define SLICE_LARGE_COUNT ((size_t)(1u << 16) + 3)

static int rank, size, passed, failed;
static char *expected;

static void check(int ok, const char *what)
{
    if (ok) {
        passed++;
    } else {
        failed++;
        fprintf(stderr, "mp_coll rank %d of %d: FAILED %s\n", rank, size, what);
    }
}

static void run_case(fold_context_h ctx, const char *alg, int allreduce, size_t n, int root,
                     int inplace, fold_dtype_t dt, fold_op_t op)
{
    fold_comm_h w = fold_comm_world(ctx);
    size_t es = fold_dtype_size(dt);
    int has_out = allreduce || rank == root;
    char *in = malloc(n * es + 1), *out = malloc(n * es + 1), *copy = malloc(n * es + 1);
    ref_fill_input(dt, op, rank, n, in);
    memcpy(copy, in, n * es);
    memset(out, 0x77, n * es);
    for (size_t i = 0; i < n && has_out; i++) {
        ref_expected(dt, op, size, i, expected);
    }
    const void *sbuf = in;
    void *rbuf = has_out ? out : NULL;
    if (inplace) {
        memcpy(out, in, n * es);
        sbuf = FOLD_IN_PLACE;
        rbuf = out;
    }
    int st = fold_config_set(ctx, allreduce ? "ALLREDUCE_ALG" : "REDUCE_ALG", alg);
    if (st == FOLD_OK) {
        st = allreduce ? fold_allreduce(sbuf, rbuf, n, dt, op, w)
                       : fold_reduce(sbuf, rbuf, n, dt, op, root, w);
    }
    int ok = st == FOLD_OK;
    for (size_t i = 0; i < n && ok && has_out; i++) {
        ok = ref_same_element(dt, out, expected, i);
    }
    if (ok && !inplace) {
        ok = memcmp(in, copy, n * es) == 0;
    }
    char what[200];
    snprintf(what, sizeof(what), "%s %s count=%zu root=%d inplace=%d %s/%s: %s",
             allreduce ? "allreduce" : "reduce", alg, n, root, inplace, fold_dtype_name(dt),
             op >= FOLD_OP_USER_FIRST ? "affine" : fold_op_name(op),
             st != FOLD_OK ? fold_status_string(st) : "wrong result or modified input");
    check(ok, what);
    free(in);
    free(out);
    free(copy);
}

/* The matrix (tests/coll_matrix.h), or a slice of it: one case per algorithm,
 * collective and count, each job size its own rotation. */
static void run_matrix(fold_context_h ctx, fold_op_t affine, int slice)
{
    const size_t counts[] = {0, 1, 7, 1024, slice ? SLICE_LARGE_COUNT : LARGE_COUNT};
    coll_matrix_spec_t spec = {.size = size, .counts = counts, .ncounts = 5,
                               .large = counts[4], .slice = slice,
                               .rot = slice ? (size_t)size * 5 : 0, .user_op = affine,
                               .typed = 1};
    size_t ncases;
    coll_case_t *cases = coll_matrix_build(&spec, &ncases);
    for (size_t k = 0; k < ncases; k++) {
        const coll_case_t *c = &cases[k];
        run_case(ctx, c->alg->name, c->coll == FOLD_COLL_ALLREDUCE, c->count, c->root,
                 c->inplace, c->dt, c->op);
    }
    free(cases);
}

/* Rank r's sparse input at i: ~1% small integers at random positions, plus a block of
 * 8 in every 256 on every rank, so sums are exact in any order. */
static double sparse_value(int r, size_t i)
{
    uint64_t h = (uint64_t)(r + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)i * 0xc2b2ae3d27d4eb4full;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    if (h % 100 == 0 || i % 256 < 8) {
        return (double)((int)(h % 7) - 3);
    }
    return 0.0;
}

static void sparse_case(fold_context_h ctx, const char *alg, const char *codec, int allreduce,
                        size_t n, int root, fold_dtype_t dt)
{
    fold_comm_h w = fold_comm_world(ctx);
    size_t es = fold_dtype_size(dt);
    int has_out = allreduce || rank == root;
    char *in = malloc(n * es), *out = malloc(n * es), *want = malloc(n * es);
    for (size_t i = 0; i < n; i++) {
        double mine = sparse_value(rank, i), all = 0;
        for (int r = 0; r < size; r++) {
            all += sparse_value(r, i);
        }
        if (dt == FOLD_FLOAT32) {
            ((float *)in)[i] = (float)mine;
            ((float *)want)[i] = (float)all;
        } else if (dt == FOLD_FLOAT64) {
            ((double *)in)[i] = mine;
            ((double *)want)[i] = all;
        } else {
            ((int32_t *)in)[i] = (int32_t)mine;
            ((int32_t *)want)[i] = (int32_t)all;
        }
    }
    int st = fold_config_set(ctx, allreduce ? "ALLREDUCE_ALG" : "REDUCE_ALG", alg);
    if (st == FOLD_OK) {
        st = fold_config_set(ctx, "CODEC", codec);
    }
    if (st == FOLD_OK) {
        st = allreduce ? fold_allreduce(in, has_out ? out : NULL, n, dt, FOLD_OP_SUM, w)
                       : fold_reduce(in, has_out ? out : NULL, n, dt, FOLD_OP_SUM, root, w);
    }
    char what[200];
    snprintf(what, sizeof(what), "sparse %s %s codec=%s count=%zu root=%d %s: %s",
             allreduce ? "allreduce" : "reduce", alg, codec, n, root, fold_dtype_name(dt),
             st != FOLD_OK ? fold_status_string(st) : "wrong result");
    check(st == FOLD_OK && (!has_out || memcmp(out, want, n * es) == 0), what);
    free(in);
    free(out);
    free(want);
}

/* Every algorithm on sparse data with each codec (slice: one codec each, in turn);
 * the codecs must have been used. */
static void run_sparse(fold_context_h ctx, int slice)
{
    static const char *const codecs[] = {"auto", "bits", "idx", "rle"};
    static const fold_dtype_t dts[] = {FOLD_FLOAT32, FOLD_FLOAT64, FOLD_INT32};
    fold_wire_counters_t before = ctx->wire;
    size_t rot = 0;
    for (int allreduce = 0; allreduce <= 1; allreduce++) {
        fold_coll_t coll = allreduce ? FOLD_COLL_ALLREDUCE : FOLD_COLL_REDUCE;
        for (int a = 0; fold_alg_all[a] != NULL; a++) {
            if (fold_alg_builder(fold_alg_all[a], coll) == NULL) {
                continue;
            }
            for (size_t k = slice ? rot % 4 : 0; k < 4; k++, rot++) {
                size_t n = k % 2 ? 100003 : (slice ? SLICE_LARGE_COUNT : (1u << 20) + 3);
                sparse_case(ctx, fold_alg_all[a]->name, codecs[k], allreduce, n,
                            (int)(rot % (size_t)size), dts[rot % 3]);
                if (slice) {
                    rot++;
                    break;
                }
            }
        }
    }
    fold_config_set(ctx, "CODEC", "auto");
    uint64_t encoded = 0;
    for (int c = 1; c < 4; c++) {
        encoded += ctx->wire.msgs[c] - before.msgs[c];
    }
    if (size > 1) {
        char what[160];
        snprintf(what, sizeof(what), "sparse data sent encoded (%llu encoded, %llu fused "
                 "decodes)", (unsigned long long)encoded,
                 (unsigned long long)(ctx->wire.fused - before.fused));
        check(encoded > 0, what);
    }
}

static void run_others(fold_context_h ctx)
{
    fold_comm_h w = fold_comm_world(ctx), sub;
    check(fold_comm_split(w, rank % 2, size - rank, &sub) == FOLD_OK, "split");
    int64_t v = rank, sum = -1, expect = 0;
    for (int r = rank % 2; r < size; r += 2) {
        expect += r;
    }
    check(fold_allreduce(&v, &sum, 1, FOLD_INT64, FOLD_OP_SUM, sub) == FOLD_OK && sum == expect,
          "allreduce on a split communicator");
    check(fold_comm_free(&sub) == FOLD_OK, "comm free");

    size_t n = 1000003;
    int32_t *buf = malloc(n * sizeof(*buf));
    for (size_t i = 0; i < n; i++) {
        buf[i] = rank == size - 1 ? (int32_t)i : 0;
    }
    int ok = fold_bcast(buf, n, FOLD_INT32, size - 1, w) == FOLD_OK;
    for (size_t i = 0; i < n && ok; i++) {
        ok = buf[i] == (int32_t)i;
    }
    check(ok, "bcast from the last rank");
    check(fold_barrier(w) == FOLD_OK, "barrier");

    float a[1000], b[1000];
    for (int i = 0; i < 1000; i++) {
        a[i] = (float)(rank + i);
    }
    fold_request_h req;
    ok = fold_iallreduce(a, b, 1000, FOLD_FLOAT32, FOLD_OP_SUM, w, &req) == FOLD_OK &&
         fold_wait(req) == FOLD_OK && fold_request_free(req) == FOLD_OK;
    for (int i = 0; i < 1000 && ok; i++) {
        ok = b[i] == (float)(size * i + size * (size - 1) / 2);
    }
    check(ok, "iallreduce");
    free(buf);
}

int main(int argc, char **argv)
{
    int slice = !(argc > 1 && strcmp(argv[1], "full") == 0);
    fold_context_h ctx;
    int st = fold_init(NULL, &ctx);
    if (st != FOLD_OK) {
        fprintf(stderr, "mp_coll: fold_init failed: %s\n", fold_status_string(st));
        return 1;
    }
    fold_comm_rank(fold_comm_world(ctx), &rank);
    fold_comm_size(fold_comm_world(ctx), &size);
    fold_op_t affine;
    fold_op_create(ref_affine_fn, NULL, 0, &affine);
    expected = malloc(LARGE_COUNT * 16);   /* up to 16-byte elements */

    run_matrix(ctx, affine, slice);
    run_sparse(ctx, slice);
    run_others(ctx);

    free(expected);
    fold_op_free(affine);
    st = fold_finalize(ctx);
    check(st == FOLD_OK, "finalize");
    if (rank == 0 || failed) {
        printf("mp_coll rank %d of %d (%s): %d passed, %d failed\n", rank, size,
               slice ? "slice" : "full matrix", passed, failed);
    }
    return failed ? 1 : 0;
}
