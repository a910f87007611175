#include "fingerprint.h"

#include <fold/fold.h>
#include <stdio.h>
#include <string.h>

enum { F_COLL, F_COUNT, F_DTYPE, F_OP, F_ROOT, F_INPLACE, F_CALL, F_MEMORY, F_FIELDS };
_Static_assert(F_FIELDS == FOLD_FINGERPRINT_FIELDS, "fingerprint.h's field count");

static const char *const field_names[F_FIELDS] = {
    [F_COLL] = "collective", [F_COUNT] = "count", [F_DTYPE] = "datatype", [F_OP] = "op",
    [F_ROOT] = "root", [F_INPLACE] = "in place", [F_CALL] = "call number",
    [F_MEMORY] = "buffers in fold memory"};

/* The fields the last difference this thread found was in (fold_mismatch_fields). */
static _Thread_local unsigned last_fields;

_Static_assert(FOLD_MISMATCH_COLLECTIVE == 1u << F_COLL && FOLD_MISMATCH_COUNT == 1u << F_COUNT &&
                   FOLD_MISMATCH_DATATYPE == 1u << F_DTYPE && FOLD_MISMATCH_OP == 1u << F_OP &&
                   FOLD_MISMATCH_ROOT == 1u << F_ROOT &&
                   FOLD_MISMATCH_IN_PLACE == 1u << F_INPLACE && FOLD_MISMATCH_CALL == 1u << F_CALL &&
                   FOLD_MISMATCH_MEMORY == 1u << F_MEMORY,
               "the public bits follow the fields");

unsigned fold_mismatch_fields(void)
{
    unsigned fields = last_fields;
    last_fields = 0;
    return fields;
}

void fold_fingerprint_fields(const fold_fingerprint_t *f, int64_t *v)
{
    v[F_COLL]    = f->allreduce;
    v[F_COUNT]   = (int64_t)f->count;
    v[F_DTYPE]   = f->dtype;
    v[F_OP]      = f->op;
    v[F_ROOT]    = f->root;
    v[F_INPLACE] = f->inplace;
    v[F_CALL]    = (int64_t)f->call;
    v[F_MEMORY]  = f->memory;
}

static void describe(int which, int64_t v, char *buf, size_t len)
{
    switch (which) {
    case F_COLL:    snprintf(buf, len, "%s", v ? "allreduce" : "reduce"); break;
    case F_DTYPE:
        if (strcmp(fold_dtype_name((fold_dtype_t)v), "opaque") == 0) {
            snprintf(buf, len, "opaque of %zu bytes", fold_dtype_size((fold_dtype_t)v));
        } else {
            snprintf(buf, len, "%s", fold_dtype_name((fold_dtype_t)v));
        }
        break;
    case F_OP:      snprintf(buf, len, "%s", fold_op_name((fold_op_t)v)); break;
    case F_INPLACE:
    case F_MEMORY:  snprintf(buf, len, "%s", v ? "yes" : "no"); break;
    default:        snprintf(buf, len, "%lld", (long long)v); break;
    }
}

int fold_fingerprint_diff(const fold_fingerprint_t *a, int rank_a, const fold_fingerprint_t *b,
                          int rank_b, char *buf, size_t len)
{
    int64_t fa[F_FIELDS], fb[F_FIELDS];
    fold_fingerprint_fields(a, fa);
    fold_fingerprint_fields(b, fb);
    size_t at = strlen(buf);
    int differ = 0;
    unsigned fields = 0;
    for (int w = 0; w < F_FIELDS; w++) {
        if (fa[w] == fb[w]) {
            continue;
        }
        fields |= 1u << w;
        char ta[48], tb[48];
        describe(w, fa[w], ta, sizeof(ta));
        describe(w, fb[w], tb, sizeof(tb));
        if (at < len) {
            at += (size_t)snprintf(buf + at, len - at, "%srank %d passed %s %s, rank %d passed %s",
                                   differ ? "; " : "", rank_a, field_names[w], ta, rank_b, tb);
        }
        differ++;
    }
    if (fields != 0) {
        last_fields = fields;
    }
    return differ;
}

_Static_assert(FOLD_DTYPE_OPAQUE_FIRST + FOLD_OPAQUE_MAX_SIZE <= 0x2000 &&
                   FOLD_OP_USER_FIRST + 256 <= 0x200,
               "every datatype and op fits its packed field");

fold_fingerprint_t fold_fingerprint_unpack(uint64_t bits)
{
    return (fold_fingerprint_t){
        .allreduce = (int)(bits & 1), .inplace = (int)(bits >> 1 & 1),
        .dtype = (int)(bits >> 2 & 0x1fff), .op = (int)(bits >> 15 & 0x1ff),
        .root = (int)(bits >> 24 & 0xfffff), .count = (size_t)(bits >> 44 & 0xfffff)};
}
