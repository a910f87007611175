/*
 * MPI predefined datatypes and ops -> fold's, with MPI's rules for which op applies
 * to which datatype class (MPI 4.0, section 6.9.2). Served: the C and Fortran
 * integer, floating and logical types, MPI_BYTE; the pair types MPI_FLOAT_INT,
 * MPI_DOUBLE_INT, MPI_LONG_INT, MPI_2INT, MPI_SHORT_INT and MPI_2INTEGER with
 * MPI_MAXLOC / MPI_MINLOC; the complex types MPI_C_FLOAT_COMPLEX (MPI_C_COMPLEX),
 * MPI_C_DOUBLE_COMPLEX, MPI_COMPLEX, MPI_DOUBLE_COMPLEX, MPI_COMPLEX8,
 * MPI_COMPLEX16, MPI_CXX_FLOAT_COMPLEX and MPI_CXX_DOUBLE_COMPLEX with MPI_SUM /
 * MPI_PROD. Each is checked against fold's layout through the MPI library's own
 * size (and, for pairs, extent), so a kind the library built differently is left
 * out. A derived type made of copies of one of these back to back is served as
 * that many of it (shim_derived.c); user ops created through the shim run in fold
 * on any of these (shim_userop.c), and on any derived type without holes, whatever
 * types it mixes, and on predefined types the table leaves out whose size is their
 * extent (long double): fold reduces those as opaque elements of the type's size.
 * Everything else goes to the MPI library, which
 * then answers exactly as it would without the shim: long double (and its pair and
 * complex types), MPI_2REAL / MPI_2DOUBLE_PRECISION, MPI_LOGICAL and MPI_OFFSET (see
 * below), derived types with holes, REPLACE, NO_OP, and any combination MPI does not
 * define.
 */
#include "shim.h"

#include <limits.h>
#include <stdbool.h>

/* MPI's datatype classes, as far as reductions are concerned. */
typedef enum type_class {
    CLASS_C_INTEGER, /* every predefined op but maxloc, minloc */
    CLASS_INTEGER,   /* Fortran integers, MPI_AINT, MPI_COUNT: arithmetic and bitwise */
    CLASS_FLOAT,     /* sum, prod, min, max */
    CLASS_LOGICAL,   /* C bool: land, lor, lxor */
    CLASS_BYTE,      /* MPI_BYTE: band, bor, bxor */
    CLASS_PAIR,      /* value-index pairs: maxloc, minloc */
    CLASS_COMPLEX,   /* sum, prod */
} type_class_t;

typedef struct type_entry {
    MPI_Datatype handle;
    fold_dtype_t dtype;
    type_class_t cls;
} type_entry_t;

/* Handles are link-time objects in Open MPI and constants in MPICH; either way they
 * are only compared, so a table filled at start-up serves both. */
static type_entry_t types[64];
static int ntypes;

static const fold_dtype_t signed_of_size[9] = {
    [1] = FOLD_INT8, [2] = FOLD_INT16, [4] = FOLD_INT32, [8] = FOLD_INT64};
static const fold_dtype_t unsigned_of_size[9] = {
    [1] = FOLD_UINT8, [2] = FOLD_UINT16, [4] = FOLD_UINT32, [8] = FOLD_UINT64};

static void add_entry(MPI_Datatype handle, fold_dtype_t dtype, type_class_t cls)
{
    for (int i = 0; i < ntypes; i++) {
        if (types[i].handle == handle) {
            return;   /* an alias (MPI_C_COMPLEX is MPI_C_FLOAT_COMPLEX in Open MPI) */
        }
    }
    if (ntypes < (int)(sizeof(types) / sizeof(types[0]))) {
        types[ntypes++] = (type_entry_t){handle, dtype, cls};
    }
}

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
    add_entry(handle, dtype, cls);
}

/* A pair type: the MPI library's size must be the value's and an int's, and its
 * extent (lower bound 0) fold's struct size, padding included. */
static void add_pair(MPI_Datatype handle, fold_dtype_t dtype, size_t value_size)
{
    int size = 0;
    MPI_Aint lb = -1, extent = 0;
    if (handle == MPI_DATATYPE_NULL || PMPI_Type_size(handle, &size) != MPI_SUCCESS ||
        PMPI_Type_get_extent(handle, &lb, &extent) != MPI_SUCCESS) {
        return;
    }
    if ((size_t)size == value_size + sizeof(int) && lb == 0 &&
        (size_t)extent == fold_dtype_size(dtype)) {
        add_entry(handle, dtype, CLASS_PAIR);
    }
}

/* A complex type: two floats or two doubles, by the MPI library's size. */
static void add_complex(MPI_Datatype handle)
{
    int size = 0;
    if (handle == MPI_DATATYPE_NULL || PMPI_Type_size(handle, &size) != MPI_SUCCESS ||
        (size != 8 && size != 16)) {
        return;
    }
    add_entry(handle, size == 8 ? FOLD_COMPLEX_FLOAT32 : FOLD_COMPLEX_FLOAT64, CLASS_COMPLEX);
}

/* The pair and complex types, each where the MPI library defines it. */
static void add_pairs_and_complex(void)
{
    add_pair(MPI_DOUBLE_INT, FOLD_DOUBLE_INT, sizeof(double));
    add_pair(MPI_2INT, FOLD_2INT, sizeof(int));
    add_pair(MPI_FLOAT_INT, FOLD_FLOAT_INT, sizeof(float));
    add_pair(MPI_LONG_INT, FOLD_LONG_INT, sizeof(long));
    add_pair(MPI_SHORT_INT, FOLD_SHORT_INT, sizeof(short));
    /* Fortran's pair of INTEGERs is 2int where INTEGER is a C int. */
    add_pair(MPI_2INTEGER, FOLD_2INT, sizeof(int));
#ifdef MPI_C_FLOAT_COMPLEX
    add_complex(MPI_C_FLOAT_COMPLEX);
#endif
#ifdef MPI_C_COMPLEX
    add_complex(MPI_C_COMPLEX);
#endif
#ifdef MPI_C_DOUBLE_COMPLEX
    add_complex(MPI_C_DOUBLE_COMPLEX);
#endif
    add_complex(MPI_COMPLEX);
    add_complex(MPI_DOUBLE_COMPLEX);
#ifdef MPI_COMPLEX8
    add_complex(MPI_COMPLEX8);
#endif
#ifdef MPI_COMPLEX16
    add_complex(MPI_COMPLEX16);
#endif
    /* The C++ names are handles a C program can pass too (Open MPI, MPICH). */
#ifdef MPI_CXX_FLOAT_COMPLEX
    add_complex(MPI_CXX_FLOAT_COMPLEX);
#endif
#ifdef MPI_CXX_DOUBLE_COMPLEX
    add_complex(MPI_CXX_DOUBLE_COMPLEX);
#endif
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
    add_pairs_and_complex();
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
    else if (op == MPI_MAXLOC) *fop = FOLD_OP_MAXLOC;
    else if (op == MPI_MINLOC) *fop = FOLD_OP_MINLOC;
    else                     return 0;
    return 1;
}

static int class_allows(type_class_t cls, fold_op_t op)
{
    int arithmetic = op == FOLD_OP_SUM || op == FOLD_OP_PROD || op == FOLD_OP_MIN ||
                     op == FOLD_OP_MAX;
    int bitwise = op == FOLD_OP_BAND || op == FOLD_OP_BOR || op == FOLD_OP_BXOR;
    int loc = op == FOLD_OP_MAXLOC || op == FOLD_OP_MINLOC;
    switch (cls) {
    case CLASS_C_INTEGER: return !loc;
    case CLASS_INTEGER:   return arithmetic || bitwise;
    case CLASS_FLOAT:     return arithmetic;
    case CLASS_LOGICAL:   return !arithmetic && !bitwise && !loc;
    case CLASS_BYTE:      return bitwise;
    case CLASS_PAIR:      return loc;
    case CLASS_COMPLEX:   return op == FOLD_OP_SUM || op == FOLD_OP_PROD;
    }
    return 0;
}

int shim_types_find(MPI_Datatype datatype)
{
    for (int i = 0; i < ntypes; i++) {
        if (types[i].handle == datatype) {
            return i;
        }
    }
    return -1;
}

MPI_Datatype shim_types_handle(int index)
{
    return types[index].handle;
}

fold_dtype_t shim_types_dtype(int index)
{
    return types[index].dtype;
}

/* A user op on a datatype: its elements, or whole elements of a derived one as opaque
 * elements of its size. */
static shim_route_t map_user_op(MPI_Datatype datatype, MPI_Op op, int index,
                                const shim_layout_t *layout, shim_typemap_t *map)
{
    fold_op_t fop;
    shim_route_t route = shim_userop_get(op, &fop);
    if (route != SHIM_ROUTE_FOLD) {
        return route;
    }
    if (index >= 0) {   /* a predefined type, or a dup or resized copy of one */
        *map = (shim_typemap_t){.dtype = types[index].dtype, .op = fop, .elements = 1,
                                .base = types[index].handle,
                                .derived = types[index].handle != datatype};
        return SHIM_ROUTE_FOLD;
    }
    fold_dtype_t opaque;
    if (fold_dtype_opaque(shim_layout_bytes(layout), &opaque) != FOLD_OK) {
        return SHIM_ROUTE_USER_OP_DERIVED;   /* larger than fold's opaque elements */
    }
    *map = (shim_typemap_t){.dtype = opaque, .op = fop, .elements = 1,
                            .base = MPI_DATATYPE_NULL, .derived = 1};
    return SHIM_ROUTE_FOLD;
}

shim_route_t shim_types_map(MPI_Datatype datatype, MPI_Op op, shim_typemap_t *map)
{
    int index = shim_types_find(datatype);
    shim_layout_t layout = {index, 1, 0};
    shim_route_t route = SHIM_ROUTE_FOLD;
    if (index < 0) {
        route = shim_derived_decode(datatype, &layout);
    }
    fold_op_t fop;
    if (!map_op(op, &fop)) {
        /* A user op (or an op MPI defines and fold does not: shim_userop_get says). */
        if (route == SHIM_ROUTE_DERIVED && shim_userop_get(op, &fop) == SHIM_ROUTE_FOLD) {
            return SHIM_ROUTE_USER_OP_DERIVED;   /* holes, gaps, subarray, ... */
        }
        if (route != SHIM_ROUTE_FOLD) {
            return route;
        }
        if (layout.base >= 0 && layout.n == 1) {
            index = layout.base;   /* a dup or resized copy of a predefined type */
        }
        return map_user_op(datatype, op, index, &layout, map);
    }
    if (route != SHIM_ROUTE_FOLD) {
        return route;
    }
    if (layout.base == SHIM_MIXED) {
        /* Predefined ops take one type: copies of one the table leaves out, or several. */
        return layout.foreign ? SHIM_ROUTE_DATATYPE : SHIM_ROUTE_DERIVED;
    }
    const type_entry_t *entry = &types[layout.base];
    if (!class_allows(entry->cls, fop)) {
        return SHIM_ROUTE_DTYPE_OP;
    }
    *map = (shim_typemap_t){.dtype = entry->dtype, .op = fop, .elements = layout.n,
                            .base = entry->handle, .derived = entry->handle != datatype};
    return SHIM_ROUTE_FOLD;
}
