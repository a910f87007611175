/*
 * Derived datatypes fold serves: those whose type map is n copies of one datatype in
 * the shim's table (its base), back to back from offset 0, each a base extent after
 * the one before; and, for user ops, those whose members of several types lie back
 * to back from offset 0 without a hole (SHIM_MIXED: a struct of a double and an int
 * with no padding, three floats and a long), which fold reduces as opaque elements
 * of the type's size. MPI_Type_contiguous; a vector or hvector whose stride is its block
 * length (no gaps); an indexed, hindexed, indexed-block, hindexed-block or struct
 * type whose blocks follow one another in order; MPI_Type_dup; a resized type with
 * lower bound 0 and extent n base extents; and any nesting of these. fold then
 * reduces count * n elements of the base. Anything else goes to MPI: holes or gaps,
 * a nonzero lower bound, blocks out of order or overlapping (SHIM_ROUTE_DERIVED),
 * mixed base types with a predefined op (SHIM_ROUTE_DERIVED), copies of a type fold
 * does not serve with a predefined op (SHIM_ROUTE_DATATYPE), subarray, darray and the
 * other constructors. A predefined type the table does not hold is a member of a
 * mixed layout where its size is its extent (long double), else SHIM_ROUTE_DATATYPE.
 *
 * The layout is read level by level from MPI_Type_get_envelope and
 * MPI_Type_get_contents, and each level's verdict checked against the library's own
 * size, lower bound and extent for it. The answer is cached on the datatype as an
 * attribute: MPI deletes it when the type is destroyed (MPI_Type_free from C and from
 * Fortran alike), so a handle reused for a new type is decoded afresh. The attribute
 * holds the answer itself as an integer, so there is nothing to free: a route below
 * SHIM_ROUTE_COUNT for a refusal, else n << 9 | foreign << 8 | base (SHIM_MIXED: 0xff).
 */
#include "shim.h"

#include <stdint.h>
#include <stdlib.h>

/* Deeper nesting than any real program's goes to MPI. */
#define MAX_DEPTH 32

static int keyval = MPI_KEYVAL_INVALID;

void shim_derived_start(void)
{
    if (PMPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, &keyval,
                                NULL) != MPI_SUCCESS) {
        keyval = MPI_KEYVAL_INVALID;   /* decoded on every call instead */
    }
}

void shim_derived_stop(void)
{
    if (keyval != MPI_KEYVAL_INVALID) {
        PMPI_Type_free_keyval(&keyval);
    }
}

typedef shim_layout_t dense_t;

/* What MPI_Type_get_contents gives for one constructor. */
typedef struct contents {
    int           combiner;
    int           ni, na, nd;
    int          *ints;
    MPI_Aint     *addrs;
    MPI_Datatype *types;
} contents_t;

static int is_named(MPI_Datatype datatype)
{
    int ni, na, nd, combiner;
    return PMPI_Type_get_envelope(datatype, &ni, &na, &nd, &combiner) == MPI_SUCCESS &&
           combiner == MPI_COMBINER_NAMED;
}

static void contents_free(contents_t *c)
{
    /* The derived types MPI hands back are the caller's to free. */
    for (int i = 0; c->types != NULL && i < c->nd; i++) {
        if (!is_named(c->types[i])) {
            PMPI_Type_free(&c->types[i]);
        }
    }
    free(c->ints);
    free(c->addrs);
    free(c->types);
}

/* 0 when out of memory or MPI refuses. */
static int contents_get(MPI_Datatype datatype, contents_t *c)
{
    c->ints = malloc(((size_t)c->ni + 1) * sizeof(int));
    c->addrs = malloc(((size_t)c->na + 1) * sizeof(MPI_Aint));
    c->types = malloc(((size_t)c->nd + 1) * sizeof(MPI_Datatype));
    if (c->ints == NULL || c->addrs == NULL || c->types == NULL ||
        PMPI_Type_get_contents(datatype, c->ni, c->na, c->nd, c->ints, c->addrs,
                               c->types) != MPI_SUCCESS) {
        free(c->types);
        c->types = NULL;
        contents_free(c);
        return 0;
    }
    return 1;
}

/* Bytes from one base element to the next. */
static size_t base_extent(int base)
{
    return fold_dtype_size(shim_types_dtype(base));
}

size_t shim_layout_bytes(const shim_layout_t *layout)
{
    return layout->base == SHIM_MIXED ? layout->n : layout->n * base_extent(layout->base);
}

/* Blocks appended in order, each where the one before ended. */
#define NO_BASE (-1)
typedef struct run {
    int      base;     /* NO_BASE until the first block; SHIM_MIXED once two differ */
    int      foreign;
    MPI_Aint next;     /* byte offset the next block must start at: the bytes so far */
} run_t;

static shim_route_t append(run_t *run, MPI_Aint disp, MPI_Aint count, const dense_t *child)
{
    if (count == 0) {
        return SHIM_ROUTE_FOLD;   /* an empty block takes no room wherever it is */
    }
    size_t bytes;
    if (count < 0 || disp != run->next ||
        __builtin_mul_overflow((size_t)count, shim_layout_bytes(child), &bytes) ||
        bytes > (size_t)INT32_MAX - (size_t)run->next) {
        return SHIM_ROUTE_DERIVED;
    }
    run->base = run->base == NO_BASE || run->base == child->base ? child->base : SHIM_MIXED;
    run->foreign |= child->foreign;
    run->next += (MPI_Aint)bytes;
    return SHIM_ROUTE_FOLD;
}

/* The run as a layout: copies of its base, or bytes where its bases differ. */
static dense_t run_layout(const run_t *run)
{
    size_t bytes = (size_t)run->next;
    return (dense_t){run->base, run->base == SHIM_MIXED ? bytes : bytes / base_extent(run->base),
                     run->foreign};
}

static shim_route_t decode(MPI_Datatype datatype, int depth, dense_t *out);
static shim_route_t decode_level(MPI_Datatype datatype, int depth, dense_t *out, int whole);

/* Block k of an indexed-like constructor: its length and byte displacement. */
static void block(const contents_t *c, int k, MPI_Aint child_extent, MPI_Aint *len,
                  MPI_Aint *disp)
{
    int count = c->ints[0];
    switch (c->combiner) {
    case MPI_COMBINER_INDEXED:
        *len = c->ints[1 + k];
        *disp = (MPI_Aint)c->ints[1 + count + k] * child_extent;
        break;
    case MPI_COMBINER_INDEXED_BLOCK:
        *len = c->ints[1];
        *disp = (MPI_Aint)c->ints[2 + k] * child_extent;
        break;
    case MPI_COMBINER_HINDEXED_BLOCK:
        *len = c->ints[1];
        *disp = c->addrs[k];
        break;
    default:   /* hindexed, struct */
        *len = c->ints[1 + k];
        *disp = c->addrs[k];
        break;
    }
}

/* The blocks of an indexed-like or struct constructor, which must follow one another. */
static shim_route_t decode_blocks(const contents_t *c, int depth, run_t *run)
{
    dense_t child = {0, 0, 0};
    shim_route_t route = SHIM_ROUTE_FOLD;
    int is_struct = c->combiner == MPI_COMBINER_STRUCT;
    for (int k = 0; k < c->ints[0] && route == SHIM_ROUTE_FOLD; k++) {
        if ((is_struct || k == 0) &&
            (route = decode(c->types[is_struct ? k : 0], depth + 1, &child)) !=
                SHIM_ROUTE_FOLD) {
            break;
        }
        MPI_Aint len, disp;
        block(c, k, (MPI_Aint)shim_layout_bytes(&child), &len, &disp);
        route = append(run, disp, len, &child);
    }
    return route;
}

static shim_route_t decode_contents(const contents_t *c, int depth, dense_t *out)
{
    run_t run = {NO_BASE, 0, 0};
    dense_t child;
    shim_route_t route;
    switch (c->combiner) {
    case MPI_COMBINER_DUP:
        return decode(c->types[0], depth + 1, out);
    case MPI_COMBINER_CONTIGUOUS:
    case MPI_COMBINER_VECTOR:
    case MPI_COMBINER_HVECTOR: {
        if ((route = decode(c->types[0], depth + 1, &child)) != SHIM_ROUTE_FOLD) {
            return route;
        }
        /* count blocks of `length` children; without gaps they are one block */
        MPI_Aint count = c->ints[0], length = 1, gap = 0;
        MPI_Aint child_extent = (MPI_Aint)shim_layout_bytes(&child);
        if (c->combiner == MPI_COMBINER_VECTOR) {
            length = c->ints[1];
            gap = ((MPI_Aint)c->ints[2] - length) * child_extent;
        } else if (c->combiner == MPI_COMBINER_HVECTOR) {
            length = c->ints[1];
            gap = c->addrs[0] - length * child_extent;
        }
        if (count > 1 && length > 0 && gap != 0) {
            return SHIM_ROUTE_DERIVED;
        }
        route = append(&run, 0, count * length, &child);
        break;
    }
    case MPI_COMBINER_INDEXED:
    case MPI_COMBINER_HINDEXED:
    case MPI_COMBINER_INDEXED_BLOCK:
    case MPI_COMBINER_HINDEXED_BLOCK:
    case MPI_COMBINER_STRUCT:
        route = decode_blocks(c, depth, &run);
        break;
    case MPI_COMBINER_RESIZED:
        /* The new extent replaces the child's: a struct whose extent MPI rounded up to
         * its alignment is data back to back once resized to its data. */
        if ((route = decode_level(c->types[0], depth + 1, &child, 0)) != SHIM_ROUTE_FOLD) {
            return route;
        }
        if (c->addrs[0] != 0 || (size_t)c->addrs[1] != shim_layout_bytes(&child)) {
            return SHIM_ROUTE_DERIVED;
        }
        *out = child;
        return SHIM_ROUTE_FOLD;
    default:   /* subarray, darray, f90 types */
        return SHIM_ROUTE_DERIVED;
    }
    if (route == SHIM_ROUTE_FOLD && run.next == 0) {
        route = SHIM_ROUTE_DERIVED;   /* an empty type: nothing to reduce, MPI decides */
    }
    if (route == SHIM_ROUTE_FOLD) {
        *out = run_layout(&run);
    }
    return route;
}

/* The library's own size, bounds and extent must be those of n base elements, or
 * for a mixed layout of its bytes, every one of them data (no hole); a type about to
 * be resized (whole 0) need not have that extent, only that data from offset 0. */
static int library_agrees(MPI_Datatype datatype, const dense_t *d, int whole)
{
    int size = 0, base_size = 1;
    MPI_Aint lb = -1, extent = 0, true_lb = -1, true_extent = 0;
    if (PMPI_Type_size(datatype, &size) != MPI_SUCCESS || size == MPI_UNDEFINED ||
        (d->base != SHIM_MIXED &&
         PMPI_Type_size(shim_types_handle(d->base), &base_size) != MPI_SUCCESS) ||
        PMPI_Type_get_extent(datatype, &lb, &extent) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent(datatype, &true_lb, &true_extent) != MPI_SUCCESS) {
        return 0;
    }
    size_t bytes = shim_layout_bytes(d);
    return (size_t)size == d->n * (size_t)base_size && true_lb == 0 &&
           (!whole || (lb == 0 && (size_t)extent == bytes)) &&
           (d->base != SHIM_MIXED || (size_t)true_extent == bytes);
}

/* A predefined type the table does not hold: a mixed layout's member where it is
 * data from its lower bound 0 to its extent, else not one fold can place. */
static shim_route_t decode_foreign(MPI_Datatype datatype, dense_t *out)
{
    int size = 0;
    MPI_Aint lb = -1, extent = 0;
    if (PMPI_Type_size(datatype, &size) != MPI_SUCCESS || size <= 0 ||
        PMPI_Type_get_extent(datatype, &lb, &extent) != MPI_SUCCESS || lb != 0 ||
        extent != size) {
        return SHIM_ROUTE_DATATYPE;
    }
    *out = (dense_t){SHIM_MIXED, (size_t)size, 1};
    return SHIM_ROUTE_FOLD;
}

static shim_route_t decode(MPI_Datatype datatype, int depth, dense_t *out)
{
    return decode_level(datatype, depth, out, 1);
}

static shim_route_t decode_level(MPI_Datatype datatype, int depth, dense_t *out, int whole)
{
    contents_t c;
    if (PMPI_Type_get_envelope(datatype, &c.ni, &c.na, &c.nd, &c.combiner) != MPI_SUCCESS) {
        return SHIM_ROUTE_DATATYPE;
    }
    if (c.combiner == MPI_COMBINER_NAMED) {
        int base = shim_types_find(datatype);
        if (base < 0) {
            return decode_foreign(datatype, out);
        }
        *out = (dense_t){base, 1, 0};
        return SHIM_ROUTE_FOLD;
    }
    if (depth >= MAX_DEPTH || !contents_get(datatype, &c)) {
        return SHIM_ROUTE_DERIVED;
    }
    shim_route_t route = decode_contents(&c, depth, out);
    contents_free(&c);
    if (route == SHIM_ROUTE_FOLD && !library_agrees(datatype, out, whole)) {
        route = SHIM_ROUTE_DERIVED;
    }
    return route;
}

shim_route_t shim_derived_decode(MPI_Datatype datatype, shim_layout_t *layout)
{
    if (datatype == MPI_DATATYPE_NULL) {
        return SHIM_ROUTE_DATATYPE;
    }
    if (is_named(datatype)) {
        return decode_foreign(datatype, layout);   /* not in the table: never cached */
    }
    void *attr = NULL;
    int found = 0;
    if (keyval != MPI_KEYVAL_INVALID) {
        PMPI_Type_get_attr(datatype, keyval, &attr, &found);
    }
    uintptr_t answer = (uintptr_t)attr;
    if (!found) {
        dense_t d;
        shim_route_t route = decode(datatype, 0, &d);
        answer = route == SHIM_ROUTE_FOLD ? (uintptr_t)d.n << 9 | (uintptr_t)d.foreign << 8 |
                                                (uintptr_t)(d.base == SHIM_MIXED ? 0xff : d.base)
                                          : (uintptr_t)route;
        if (keyval != MPI_KEYVAL_INVALID) {
            PMPI_Type_set_attr(datatype, keyval, (void *)answer);
        }
    }
    if (answer < SHIM_ROUTE_COUNT) {
        return (shim_route_t)answer;
    }
    int base = (int)(answer & 0xff);
    *layout = (shim_layout_t){base == 0xff ? SHIM_MIXED : base, answer >> 9,
                              (int)(answer >> 8 & 1)};
    return SHIM_ROUTE_FOLD;
}
