/*
 * MPI predefined datatypes and ops -> fold's, with MPI's rules for which op applies
 * to which datatype class (MPI 4.0, section 6.9.2). Anything not listed (derived
 * types, long double, complex, pair types, MPI_LOGICAL, user ops, MINLOC/MAXLOC,
 * REPLACE, NO_OP) and any combination MPI does not define goes to the MPI library,
 * which then answers exactly as it would without the shim.
 */
#include "shim.h"

#include <limits.h>
#include <stdbool.h>

/* MPI's datatype classes, as far as reductions are concerned. */
typedef enum type_class {
    CLASS_C_INTEGER, /* every predefined op */
    CLASS_INTEGER,   /* Fortran integers, MPI_AINT, MPI_COUNT: arithmetic and bitwise */
    CLASS_FLOAT,     /* sum, prod, min, max */
    CLASS_LOGICAL,   /* C bool: land, lor, lxor */
    CLASS_BYTE,      /* MPI_BYTE: band, bor, bxor */
} type_class_t;

typedef struct type_entry {
    MPI_Datatype handle;
    fold_dtype_t dtype;
    type_class_t cls;
} type_entry_t;

/* Handles are link-time objects in Open MPI and constants in MPICH; either way they
 * are only compared, so a table filled at start-up serves both. */
static type_entry_t types[48];
static int ntypes;

static const fold_dtype_t signed_of_size[9] = {
    [1] = FOLD_INT8, [2] = FOLD_INT16, [4] = FOLD_INT32, [8] = FOLD_INT64};
static const fold_dtype_t unsigned_of_size[9] = {
    [1] = FOLD_UINT8, [2] = FOLD_UINT16, [4] = FOLD_UINT32, [8] = FOLD_UINT64};

/* Adds a type whose fold equivalent follows from its size as the MPI library reports
 * it, so that Fortran types built with unusual kinds are matched or left out. */
static void add_type(MPI_Datatype handle, type_class_t cls, int is_signed)
{
    int size = 0;
    if (handle == MPI_DATATYPE_NULL || PMPI_Type_size(handle, &size) != MPI_SUCCESS) {
        return;
    }
    fold_dtype_t dtype;
    if (cls == CLASS_FLOAT) {
        if (size != 4 && size != 8) {
            return;
        }
        dtype = size == 4 ? FOLD_FLOAT32 : FOLD_FLOAT64;
    } else {
        if (size != 1 && size != 2 && size != 4 && size != 8) {
            return;
        }
        dtype = is_signed ? signed_of_size[size] : unsigned_of_size[size];
    }
    if (ntypes < (int)(sizeof(types) / sizeof(types[0]))) {
        types[ntypes++] = (type_entry_t){handle, dtype, cls};
    }
}

void shim_types_init(void)
{
    ntypes = 0;
    /* The most common first: the lookup is a linear scan. */
    add_type(MPI_DOUBLE, CLASS_FLOAT, 1);
    add_type(MPI_FLOAT, CLASS_FLOAT, 1);
    add_type(MPI_INT, CLASS_C_INTEGER, 1);
    add_type(MPI_LONG, CLASS_C_INTEGER, 1);
    add_type(MPI_LONG_LONG, CLASS_C_INTEGER, 1);
    add_type(MPI_UNSIGNED, CLASS_C_INTEGER, 0);
    add_type(MPI_UNSIGNED_LONG, CLASS_C_INTEGER, 0);
    add_type(MPI_UNSIGNED_LONG_LONG, CLASS_C_INTEGER, 0);
    add_type(MPI_INT64_T, CLASS_C_INTEGER, 1);
    add_type(MPI_INT32_T, CLASS_C_INTEGER, 1);
    add_type(MPI_UINT64_T, CLASS_C_INTEGER, 0);
    add_type(MPI_UINT32_T, CLASS_C_INTEGER, 0);
    add_type(MPI_SHORT, CLASS_C_INTEGER, 1);
    add_type(MPI_UNSIGNED_SHORT, CLASS_C_INTEGER, 0);
    add_type(MPI_INT16_T, CLASS_C_INTEGER, 1);
    add_type(MPI_UINT16_T, CLASS_C_INTEGER, 0);
    add_type(MPI_INT8_T, CLASS_C_INTEGER, 1);
    add_type(MPI_UINT8_T, CLASS_C_INTEGER, 0);
    add_type(MPI_SIGNED_CHAR, CLASS_C_INTEGER, 1);
    add_type(MPI_UNSIGNED_CHAR, CLASS_C_INTEGER, 0);
    /* Not in MPI's integer class, but Open MPI and MPICH reduce it as one. */
    add_type(MPI_CHAR, CLASS_C_INTEGER, CHAR_MIN < 0);
    /* MPI_OFFSET stays with MPI: Open MPI 4.1 takes its min and max as unsigned, and
     * the shim must not change an application's results. */
    add_type(MPI_AINT, CLASS_INTEGER, 1);
    add_type(MPI_COUNT, CLASS_INTEGER, 1);
    add_type(MPI_BYTE, CLASS_BYTE, 0);
    if (sizeof(bool) == 1) {
        add_type(MPI_C_BOOL, CLASS_LOGICAL, 0);
    }
    /* Fortran types, reached from C. MPI_LOGICAL stays with MPI: its true value is the
     * compiler's, not necessarily 1. */
    add_type(MPI_INTEGER, CLASS_INTEGER, 1);
    add_type(MPI_INTEGER1, CLASS_INTEGER, 1);
    add_type(MPI_INTEGER2, CLASS_INTEGER, 1);
    add_type(MPI_INTEGER4, CLASS_INTEGER, 1);
    add_type(MPI_INTEGER8, CLASS_INTEGER, 1);
    add_type(MPI_REAL, CLASS_FLOAT, 1);
    add_type(MPI_DOUBLE_PRECISION, CLASS_FLOAT, 1);
    add_type(MPI_REAL4, CLASS_FLOAT, 1);
    add_type(MPI_REAL8, CLASS_FLOAT, 1);
}

static int map_op(MPI_Op op, fold_op_t *fop)
{
    if (op == MPI_SUM)       *fop = FOLD_OP_SUM;
    else if (op == MPI_MAX)  *fop = FOLD_OP_MAX;
    else if (op == MPI_MIN)  *fop = FOLD_OP_MIN;
    else if (op == MPI_PROD) *fop = FOLD_OP_PROD;
    else if (op == MPI_BAND) *fop = FOLD_OP_BAND;
    else if (op == MPI_BOR)  *fop = FOLD_OP_BOR;
    else if (op == MPI_BXOR) *fop = FOLD_OP_BXOR;
    else if (op == MPI_LAND) *fop = FOLD_OP_LAND;
    else if (op == MPI_LOR)  *fop = FOLD_OP_LOR;
    else if (op == MPI_LXOR) *fop = FOLD_OP_LXOR;
    else                     return 0;
    return 1;
}

static int class_allows(type_class_t cls, fold_op_t op)
{
    int arithmetic = op == FOLD_OP_SUM || op == FOLD_OP_PROD || op == FOLD_OP_MIN ||
                     op == FOLD_OP_MAX;
    int bitwise = op == FOLD_OP_BAND || op == FOLD_OP_BOR || op == FOLD_OP_BXOR;
    switch (cls) {
    case CLASS_C_INTEGER: return 1;
    case CLASS_INTEGER:   return arithmetic || bitwise;
    case CLASS_FLOAT:     return arithmetic;
    case CLASS_LOGICAL:   return !arithmetic && !bitwise;
    case CLASS_BYTE:      return bitwise;
    }
    return 0;
}

shim_route_t shim_types_map(MPI_Datatype datatype, MPI_Op op, fold_dtype_t *dtype,
                            fold_op_t *fop)
{
    const type_entry_t *entry = NULL;
    for (int i = 0; i < ntypes && entry == NULL; i++) {
        if (types[i].handle == datatype) {
            entry = &types[i];
        }
    }
    if (entry == NULL) {
        return SHIM_ROUTE_DATATYPE;
    }
    if (!map_op(op, fop)) {
        return SHIM_ROUTE_OP;
    }
    if (!class_allows(entry->cls, *fop)) {
        return SHIM_ROUTE_DTYPE_OP;
    }
    *dtype = entry->dtype;
    return SHIM_ROUTE_FOLD;
}
