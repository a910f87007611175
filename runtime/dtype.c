/*
 * Datatype and operation names and sizes: the strings used in configuration,
 * logs and tools, and the opaque datatypes, whose value says their size. Name lookups
 * ignore case, so "FLOAT32" from an environment variable works as well as "float32".
 */
#include "codec/reduce_kernel.h"
#include "log.h"

#include <fold/fold.h>

#include <strings.h>

static const struct {
    const char *name;
    size_t      size;
} dtype_table[FOLD_DTYPE_COUNT] = {
    [FOLD_INT8]     = {"int8", 1},     [FOLD_INT16]    = {"int16", 2},
    [FOLD_INT32]    = {"int32", 4},    [FOLD_INT64]    = {"int64", 8},
    [FOLD_UINT8]    = {"uint8", 1},    [FOLD_UINT16]   = {"uint16", 2},
    [FOLD_UINT32]   = {"uint32", 4},   [FOLD_UINT64]   = {"uint64", 8},
    [FOLD_FLOAT16]  = {"float16", 2},  [FOLD_BFLOAT16] = {"bfloat16", 2},
    [FOLD_FLOAT32]  = {"float32", 4},  [FOLD_FLOAT64]  = {"float64", 8},
    [FOLD_FLOAT_INT]  = {"float_int", sizeof(fold_float_int_t)},
    [FOLD_DOUBLE_INT] = {"double_int", sizeof(fold_double_int_t)},
    [FOLD_LONG_INT]   = {"long_int", sizeof(fold_long_int_t)},
    [FOLD_2INT]       = {"2int", sizeof(fold_2int_t)},
    [FOLD_SHORT_INT]  = {"short_int", sizeof(fold_short_int_t)},
    [FOLD_COMPLEX_FLOAT32] = {"complex_float32", 8},
    [FOLD_COMPLEX_FLOAT64] = {"complex_float64", 16},
};

/* Other spellings people use for the same types (C and ML names). */
static const struct {
    const char  *name;
    fold_dtype_t dtype;
} dtype_aliases[] = {
    {"int", FOLD_INT32},       {"float", FOLD_FLOAT32}, {"double", FOLD_FLOAT64},
    {"half", FOLD_FLOAT16},    {"bf16", FOLD_BFLOAT16},
    {"complex64", FOLD_COMPLEX_FLOAT32}, {"complex128", FOLD_COMPLEX_FLOAT64},
    {"float_complex", FOLD_COMPLEX_FLOAT32}, {"double_complex", FOLD_COMPLEX_FLOAT64},
};

static const char *const op_names[FOLD_OP_PREDEFINED_COUNT] = {
    [FOLD_OP_SUM] = "sum",   [FOLD_OP_PROD] = "prod", [FOLD_OP_MIN] = "min",
    [FOLD_OP_MAX] = "max",   [FOLD_OP_BAND] = "band", [FOLD_OP_BOR] = "bor",
    [FOLD_OP_BXOR] = "bxor", [FOLD_OP_LAND] = "land", [FOLD_OP_LOR] = "lor",
    [FOLD_OP_LXOR] = "lxor", [FOLD_OP_MAXLOC] = "maxloc", [FOLD_OP_MINLOC] = "minloc",
};

_Static_assert(FOLD_DTYPE_COUNT <= FOLD_DTYPE_OPAQUE_FIRST, "opaque values follow the others");

static int dtype_is_known(fold_dtype_t dtype)
{
    return (int)dtype >= 0 && dtype < FOLD_DTYPE_COUNT;
}

/* An opaque datatype's size, or 0 for any other value. */
static size_t opaque_size(fold_dtype_t dtype)
{
    long size = (long)dtype - FOLD_DTYPE_OPAQUE_FIRST + 1;
    return size >= 1 && size <= FOLD_OPAQUE_MAX_SIZE ? (size_t)size : 0;
}

int fold_dtype_opaque(size_t size, fold_dtype_t *dtype)
{
    if (dtype == NULL || size == 0 || size > FOLD_OPAQUE_MAX_SIZE) {
        fold_error("fold_dtype_opaque: %s", dtype == NULL ? "dtype is NULL"
                                            : "the size must be 1 .. FOLD_OPAQUE_MAX_SIZE");
        return FOLD_ERR_INVALID_ARG;
    }
    *dtype = (fold_dtype_t)(FOLD_DTYPE_OPAQUE_FIRST + (int)size - 1);
    return FOLD_OK;
}

size_t fold_dtype_size(fold_dtype_t dtype)
{
    return dtype_is_known(dtype) ? dtype_table[dtype].size : opaque_size(dtype);
}

const char *fold_dtype_name(fold_dtype_t dtype)
{
    return dtype_is_known(dtype) ? dtype_table[dtype].name
         : opaque_size(dtype) != 0 ? "opaque"
                                   : "unknown";
}

int fold_dtype_from_name(const char *name, fold_dtype_t *dtype)
{
    if (name == NULL || dtype == NULL) {
        return FOLD_ERR_INVALID_ARG;
    }
    for (int i = 0; i < FOLD_DTYPE_COUNT; i++) {
        if (strcasecmp(name, dtype_table[i].name) == 0) {
            *dtype = (fold_dtype_t)i;
            return FOLD_OK;
        }
    }
    for (size_t i = 0; i < sizeof(dtype_aliases) / sizeof(dtype_aliases[0]); i++) {
        if (strcasecmp(name, dtype_aliases[i].name) == 0) {
            *dtype = dtype_aliases[i].dtype;
            return FOLD_OK;
        }
    }
    return FOLD_ERR_NOT_FOUND;
}

const char *fold_op_name(fold_op_t op)
{
    if ((int)op >= 0 && op < FOLD_OP_PREDEFINED_COUNT) {
        return op_names[op];
    }
    fold_user_op_fn fn;
    void *arg;
    int commutative;
    if (fold_user_op_lookup(op, &fn, &arg, &commutative) == FOLD_OK) {
        return "user";
    }
    return "unknown";
}

int fold_op_from_name(const char *name, fold_op_t *op)
{
    if (name == NULL || op == NULL) {
        return FOLD_ERR_INVALID_ARG;
    }
    for (int i = 0; i < FOLD_OP_PREDEFINED_COUNT; i++) {
        if (strcasecmp(name, op_names[i]) == 0) {
            *op = (fold_op_t)i;
            return FOLD_OK;
        }
    }
    return FOLD_ERR_NOT_FOUND;
}
