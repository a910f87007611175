/*
 * Datatypes and ops as the API names them (runtime/dtype.c, runtime/op.c): sizes,
 * names and their aliases, the user-op registry (argument errors, a full table and
 * reused slots, creation from several threads) and opaque datatypes. What the kernels
 * compute with a user op is tests/codec/test_kernels.c's.
 */
#include <criterion/criterion.h>

#include "codec/reduce_kernel.h"
#include "log.h"

#include <fold/fold.h>

#include <pthread.h>
#include <stdint.h>
#include <string.h>

static void quiet_logs(void)
{
    fold_log_level = FOLD_LOG_ERROR - 1;   /* these tests provoke errors on purpose */
}

/* Ops that are created, never run. */
static void some_op(const void *in, void *inout, size_t count, fold_dtype_t dtype, void *arg)
{
    (void)in, (void)inout, (void)count, (void)dtype, (void)arg;
}

static void other_op(const void *in, void *inout, size_t count, fold_dtype_t dtype, void *arg)
{
    some_op(in, inout, count, dtype, arg);
}

/* ---- The user-op registry ---------------------------------------------------- */

Test(op_registry, create_and_free_errors, .init = quiet_logs)
{
    fold_op_t op;
    cr_assert_eq(fold_op_create(NULL, NULL, 1, &op), FOLD_ERR_INVALID_ARG);
    cr_assert_eq(fold_op_create(some_op, NULL, 1, NULL), FOLD_ERR_INVALID_ARG);
    cr_assert_eq(fold_op_free(FOLD_OP_SUM), FOLD_ERR_INVALID_ARG);
    cr_assert_eq(fold_op_free(FOLD_OP_LXOR), FOLD_ERR_INVALID_ARG);
    cr_assert_eq(fold_op_free((fold_op_t)-5), FOLD_ERR_INVALID_ARG);
    cr_assert_eq(fold_op_free(FOLD_OP_USER_FIRST), FOLD_ERR_INVALID_ARG);   /* never made */
    cr_assert_eq(fold_op_free((fold_op_t)(FOLD_OP_USER_FIRST + 100000)), FOLD_ERR_INVALID_ARG);

    cr_assert_eq(fold_op_create(some_op, NULL, 1, &op), FOLD_OK);
    cr_assert_eq(fold_op_free(op), FOLD_OK);
    cr_assert_eq(fold_op_free(op), FOLD_ERR_INVALID_ARG);                   /* twice */
    cr_assert_str_eq(fold_op_name(op), "unknown");
    cr_assert_not(fold_op_is_commutative(op));

    fold_user_op_fn fn = NULL;
    void *arg = NULL;
    int commutative = 7;
    cr_assert_neq(fold_user_op_lookup(op, &fn, &arg, &commutative), FOLD_OK);
    cr_assert(fn == NULL && commutative == 7, "lookup wrote outputs on failure");
}

Test(op_registry, table_fills_and_slots_are_reused, .init = quiet_logs)
{
    enum { MAX_TRY = 4096 };
    static fold_op_t ops[MAX_TRY];
    int made = 0, rc = FOLD_OK;
    while (made < MAX_TRY && (rc = fold_op_create(some_op, NULL, 0, &ops[made])) == FOLD_OK) {
        for (int i = 0; i < made; i++) {
            cr_assert_neq(ops[i], ops[made], "op value handed out twice");
        }
        made++;
    }
    cr_assert(made >= 64 && made < MAX_TRY, "made %d ops", made);
    cr_assert_eq(rc, FOLD_ERR_NO_MEMORY);

    fold_op_t freed = ops[made / 2];
    cr_assert_eq(fold_op_free(freed), FOLD_OK);
    cr_assert_eq(fold_op_create(other_op, NULL, 1, &ops[made / 2]), FOLD_OK);
    cr_assert_eq(ops[made / 2], freed, "a freed slot is reused");
    cr_assert(fold_op_is_commutative(freed), "the reused slot has the new op's flags");
    for (int i = 0; i < made; i++) {
        cr_assert_eq(fold_op_free(ops[i]), FOLD_OK);
    }
}

static void *create_many(void *arg)
{
    fold_op_t *ops = arg;
    for (int i = 0; i < 50; i++) {
        if (fold_op_create(other_op, NULL, i & 1, &ops[i]) != FOLD_OK) {
            ops[i] = (fold_op_t)-1;
        }
    }
    return NULL;
}

Test(op_registry, concurrent_create)
{
    enum { THREADS = 4, EACH = 50 };
    static fold_op_t ops[THREADS][EACH];
    pthread_t threads[THREADS];
    for (int t = 0; t < THREADS; t++) {
        cr_assert_eq(pthread_create(&threads[t], NULL, create_many, ops[t]), 0);
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(threads[t], NULL);
    }
    fold_op_t *all = &ops[0][0];
    for (int i = 0; i < THREADS * EACH; i++) {
        cr_assert_geq(all[i], FOLD_OP_USER_FIRST, "create failed under contention");
        for (int j = 0; j < i; j++) {
            cr_assert_neq(all[i], all[j], "two threads got the same op");
        }
    }
    for (int i = 0; i < THREADS * EACH; i++) {
        cr_assert_eq(fold_op_free(all[i]), FOLD_OK);
    }
}

/* ---- Names and sizes --------------------------------------------------------- */

Test(names, dtypes)
{
    /* The pair types' sizes are the C structs' (padding included), as MPI's. */
    struct float_int { float v; int i; };
    struct double_int { double v; int i; };
    struct long_int { long v; int i; };
    struct short_int { short v; int i; };
    const size_t sizes[FOLD_DTYPE_COUNT] = {
        1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8,
        sizeof(struct float_int), sizeof(struct double_int), sizeof(struct long_int), 8,
        sizeof(struct short_int), 8, 16};
    const char *const names[FOLD_DTYPE_COUNT] = {
        "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float16", "bfloat16", "float32", "float64", "float_int", "double_int", "long_int",
        "2int", "short_int", "complex_float32", "complex_float64"};
    for (int i = 0; i < FOLD_DTYPE_COUNT; i++) {
        fold_dtype_t dt = (fold_dtype_t)-1;
        cr_assert_eq(fold_dtype_size((fold_dtype_t)i), sizes[i]);
        cr_assert_str_eq(fold_dtype_name((fold_dtype_t)i), names[i]);
        cr_assert_eq(fold_dtype_from_name(names[i], &dt), FOLD_OK);
        cr_assert_eq(dt, i);
    }
    const struct { const char *name; fold_dtype_t dt; } aliases[] = {
        {"float", FOLD_FLOAT32}, {"double", FOLD_FLOAT64}, {"half", FOLD_FLOAT16},
        {"bf16", FOLD_BFLOAT16}, {"int", FOLD_INT32}, {"FLOAT32", FOLD_FLOAT32},
        {"Double", FOLD_FLOAT64}, {"complex64", FOLD_COMPLEX_FLOAT32},
        {"complex128", FOLD_COMPLEX_FLOAT64}, {"Double_Complex", FOLD_COMPLEX_FLOAT64},
        {"float_complex", FOLD_COMPLEX_FLOAT32}, {"2INT", FOLD_2INT}};
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
        fold_dtype_t dt;
        cr_assert_eq(fold_dtype_from_name(aliases[i].name, &dt), FOLD_OK, "%s", aliases[i].name);
        cr_assert_eq(dt, aliases[i].dt, "%s", aliases[i].name);
    }
    fold_dtype_t dt = FOLD_INT8;
    cr_assert_eq(fold_dtype_from_name("float128", &dt), FOLD_ERR_NOT_FOUND);
    cr_assert_eq(fold_dtype_from_name("", &dt), FOLD_ERR_NOT_FOUND);
    cr_assert_eq(dt, FOLD_INT8, "output written on failure");
    cr_assert_eq(fold_dtype_from_name(NULL, &dt), FOLD_ERR_INVALID_ARG);
    cr_assert_eq(fold_dtype_from_name("int8", NULL), FOLD_ERR_INVALID_ARG);
    cr_assert_eq(fold_dtype_size((fold_dtype_t)99), 0);
    cr_assert_eq(fold_dtype_size((fold_dtype_t)-1), 0);
    cr_assert_str_eq(fold_dtype_name((fold_dtype_t)99), "unknown");
    cr_assert_str_eq(fold_dtype_name(FOLD_DTYPE_COUNT), "unknown");
}

Test(names, ops)
{
    const char *const names[FOLD_OP_PREDEFINED_COUNT] = {
        "sum", "prod", "min", "max", "band", "bor", "bxor", "land", "lor", "lxor",
        "maxloc", "minloc"};
    for (int i = 0; i < FOLD_OP_PREDEFINED_COUNT; i++) {
        fold_op_t op = (fold_op_t)-1;
        cr_assert_str_eq(fold_op_name((fold_op_t)i), names[i]);
        cr_assert_eq(fold_op_from_name(names[i], &op), FOLD_OK);
        cr_assert_eq(op, i);
        cr_assert(fold_op_is_commutative(op));
    }
    fold_op_t op = FOLD_OP_SUM;
    cr_assert_eq(fold_op_from_name("MAX", &op), FOLD_OK);
    cr_assert_eq(op, FOLD_OP_MAX);
    cr_assert_eq(fold_op_from_name("user", &op), FOLD_ERR_NOT_FOUND);
    cr_assert_eq(fold_op_from_name("avg", &op), FOLD_ERR_NOT_FOUND);
    cr_assert_eq(op, FOLD_OP_MAX, "output written on failure");
    cr_assert_eq(fold_op_from_name(NULL, &op), FOLD_ERR_INVALID_ARG);
    cr_assert_eq(fold_op_from_name("sum", NULL), FOLD_ERR_INVALID_ARG);
    cr_assert_str_eq(fold_op_name(FOLD_OP_PREDEFINED_COUNT), "unknown");
    cr_assert_str_eq(fold_op_name((fold_op_t)-3), "unknown");
    cr_assert_str_eq(fold_op_name(FOLD_OP_USER_FIRST), "unknown");
    cr_assert_not(fold_op_is_commutative(FOLD_OP_USER_FIRST));
}

/* ---- Opaque datatypes ---------------------------------------------------------- */

/* Sums each element's first byte into the other's, leaving the rest as inout had it. */
static void first_byte_sum(const void *in, void *inout, size_t count, fold_dtype_t dtype,
                           void *arg)
{
    size_t size = fold_dtype_size(dtype);
    (void)arg;
    for (size_t i = 0; i < count; i++) {
        ((unsigned char *)inout)[i * size] += ((const unsigned char *)in)[i * size];
    }
}

Test(opaque, sizes_names_and_bounds, .init = quiet_logs)
{
    static const size_t sizes[] = {1, 3, 12, 24, 100, FOLD_OPAQUE_MAX_SIZE};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        fold_dtype_t dt = FOLD_INT8, again = FOLD_INT8;
        cr_assert_eq(fold_dtype_opaque(sizes[k], &dt), FOLD_OK);
        cr_assert_eq(fold_dtype_opaque(sizes[k], &again), FOLD_OK);
        cr_assert_eq(dt, again, "the value depends on the size alone");
        cr_assert_geq((int)dt, FOLD_DTYPE_OPAQUE_FIRST);
        cr_assert_eq(fold_dtype_size(dt), sizes[k]);
        cr_assert_str_eq(fold_dtype_name(dt), "opaque");
        cr_assert_not(fold_op_dtype_valid(FOLD_OP_SUM, dt));
        cr_assert_not(fold_op_dtype_valid(FOLD_OP_MAXLOC, dt));
    }
    fold_dtype_t dt = FOLD_INT8;
    cr_assert_eq(fold_dtype_opaque(0, &dt), FOLD_ERR_INVALID_ARG);
    cr_assert_eq(fold_dtype_opaque(FOLD_OPAQUE_MAX_SIZE + 1, &dt), FOLD_ERR_INVALID_ARG);
    cr_assert_eq(fold_dtype_opaque(SIZE_MAX, &dt), FOLD_ERR_INVALID_ARG);
    cr_assert_eq(fold_dtype_opaque(8, NULL), FOLD_ERR_INVALID_ARG);
    cr_assert_eq(dt, FOLD_INT8, "output written on failure");
    cr_assert_eq(fold_dtype_size((fold_dtype_t)(FOLD_DTYPE_OPAQUE_FIRST - 1)), 0);
    cr_assert_eq(fold_dtype_size((fold_dtype_t)(FOLD_DTYPE_OPAQUE_FIRST +
                                                FOLD_OPAQUE_MAX_SIZE)), 0);
    cr_assert_str_eq(fold_dtype_name((fold_dtype_t)(FOLD_DTYPE_OPAQUE_FIRST - 1)), "unknown");
}

/* The local reduction takes user ops on opaque elements, whole ones at a time, and
 * refuses predefined ops on them with an error rather than a table lookup. */
Test(opaque, local_reduction_takes_user_ops_only, .init = quiet_logs)
{
    enum { SIZE = 24, N = 1000 };
    fold_dtype_t dt;
    fold_op_t op;
    cr_assert_eq(fold_dtype_opaque(SIZE, &dt), FOLD_OK);
    cr_assert_eq(fold_op_create(first_byte_sum, NULL, 0, &op), FOLD_OK);
    cr_assert(fold_op_dtype_valid(op, dt));
    static unsigned char left[N * SIZE], right[N * SIZE], dst[N * SIZE];
    for (size_t i = 0; i < sizeof(left); i++) {
        left[i] = (unsigned char)(i % 7);
        right[i] = (unsigned char)(i % 11 + 1);
    }
    cr_assert_eq(fold_reduce_local(op, dt, left, right, dst, N, 1, SIZE_MAX), FOLD_OK);
    for (size_t i = 0; i < sizeof(dst); i++) {
        unsigned char want = i % SIZE == 0 ? (unsigned char)(left[i] + right[i]) : right[i];
        cr_assert_eq(dst[i], want, "byte %zu", i);
    }
    /* In place on the left operand, order kept: staged through the scratch. */
    memcpy(dst, left, sizeof(dst));
    cr_assert_eq(fold_reduce_local(op, dt, dst, right, dst, N, 1, SIZE_MAX), FOLD_OK);
    for (size_t i = 0; i < sizeof(dst); i++) {
        unsigned char want = i % SIZE == 0 ? (unsigned char)(left[i] + right[i]) : right[i];
        cr_assert_eq(dst[i], want, "byte %zu in place", i);
    }
    cr_assert_eq(fold_reduce_local(FOLD_OP_SUM, dt, left, right, dst, N, 1, SIZE_MAX),
                 FOLD_ERR_INVALID_ARG);
    cr_assert_eq(fold_op_free(op), FOLD_OK);
}
