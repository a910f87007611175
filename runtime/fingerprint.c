#include "fingerprint.h"

#include <fold/fold.h>
#include <stdio.h>
#include <string.h>

enum { F_COLL, F_COUNT, F_DTYPE, F_OP, F_ROOT, F_INPLACE, F_CALL, F_FIELDS };

static const char *const field_names[F_FIELDS] = {
    [F_COLL] = "collective", [F_COUNT] = "count", [F_DTYPE] = "datatype", [F_OP] = "op",
    [F_ROOT] = "root", [F_INPLACE] = "in place", [F_CALL] = "call number"};

static int64_t field(const fold_fingerprint_t *f, int which)
{
    switch (which) {
    case F_COLL:    return f->allreduce;
    case F_COUNT:   return (int64_t)f->count;
    case F_DTYPE:   return f->dtype;
    case F_OP:      return f->op;
    case F_ROOT:    return f->root;
    case F_INPLACE: return f->inplace;
    default:        return (int64_t)f->call;
    }
}

static void describe(int which, int64_t v, char *buf, size_t len)
{
    switch (which) {
    case F_COLL:    snprintf(buf, len, "%s", v ? "allreduce" : "reduce"); break;
    case F_DTYPE:   snprintf(buf, len, "%s", fold_dtype_name((fold_dtype_t)v)); break;
    case F_OP:      snprintf(buf, len, "%s", fold_op_name((fold_op_t)v)); break;
    case F_INPLACE: snprintf(buf, len, "%s", v ? "yes" : "no"); break;
    default:        snprintf(buf, len, "%lld", (long long)v); break;
    }
}

int fold_fingerprint_diff(const fold_fingerprint_t *a, int rank_a, const fold_fingerprint_t *b,
                          int rank_b, char *buf, size_t len)
{
    size_t at = strlen(buf);
    int differ = 0;
    for (int w = 0; w < F_FIELDS; w++) {
        if (field(a, w) == field(b, w)) {
            continue;
        }
        char va[48], vb[48];
        describe(w, field(a, w), va, sizeof(va));
        describe(w, field(b, w), vb, sizeof(vb));
        if (at < len) {
            at += (size_t)snprintf(buf + at, len - at, "%srank %d passed %s %s, rank %d passed %s",
                                   differ ? "; " : "", rank_a, field_names[w], va, rank_b, vb);
        }
        differ++;
    }
    return differ;
}

uint64_t fold_fingerprint_pack(const fold_fingerprint_t *f)
{
    return (uint64_t)(f->allreduce & 1) | (uint64_t)(f->inplace & 1) << 1 |
           (uint64_t)(f->dtype & 0x3f) << 2 | (uint64_t)(f->op & 0xffff) << 8 |
           (uint64_t)(f->root & 0xfffff) << 24 | (uint64_t)(f->count & 0xfffff) << 44;
}

fold_fingerprint_t fold_fingerprint_unpack(uint64_t bits)
{
    return (fold_fingerprint_t){
        .allreduce = (int)(bits & 1), .inplace = (int)(bits >> 1 & 1),
        .dtype = (int)(bits >> 2 & 0x3f), .op = (int)(bits >> 8 & 0xffff),
        .root = (int)(bits >> 24 & 0xfffff), .count = (size_t)(bits >> 44 & 0xfffff)};
}
