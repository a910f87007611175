/*
 * Derived datatypes fold serves: those whose type map is n copies of one datatype in
 * the shim's table (its base), back to back from offset 0, each a base extent after
 * the one before. MPI_Type_contiguous; a vector or hvector whose stride is its block
 * length (no gaps); an indexed, hindexed, indexed-block, hindexed-block or struct
 * type whose blocks follow one another in order; MPI_Type_dup; a resized type with
 * lower bound 0 and extent n base extents; and any nesting of these. fold then
 * reduces count * n elements of the base. Anything else goes to MPI: holes or gaps,
 * a nonzero lower bound, blocks out of order or overlapping, mixed base types
 * (SHIM_ROUTE_DERIVED), copies of a type fold does not serve (SHIM_ROUTE_DATATYPE),
 * subarray, darray and the other constructors.
 *
 * The layout is read level by level from MPI_Type_get_envelope and
 * MPI_Type_get_contents, and each level's verdict checked against the library's own
 * size, lower bound and extent for it. The answer is cached on the datatype as an
 * attribute: MPI deletes it when the type is destroyed (MPI_Type_free from C and from
 * Fortran alike), so a handle reused for a new type is decoded afresh. The attribute
 * holds the answer itself as an integer, so there is nothing to free: a route below
 * SHIM_ROUTE_COUNT for a refusal, else n << 8 | base.
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

/* n copies of the table's entry `base`. */
typedef struct dense {
    int    base;
    size_t n;
} dense_t;

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

/* Blocks appended in order, each where the one before ended. */
typedef struct run {
    int      base;    /* -1 until the first block */
    size_t   n;
    MPI_Aint next;    /* byte offset the next block must start at */
} run_t;

static shim_route_t append(run_t *run, MPI_Aint disp, MPI_Aint count, const dense_t *child)
{
    if (count == 0) {
        return SHIM_ROUTE_FOLD;   /* an empty block takes no room wherever it is */
    }
    size_t elements, bytes;
    if (count < 0 || (run->base >= 0 && run->base != child->base) || disp != run->next ||
        __builtin_mul_overflow((size_t)count, child->n, &elements) ||
        __builtin_mul_overflow(elements, base_extent(child->base), &bytes) ||
        bytes > (size_t)INT32_MAX) {
        return SHIM_ROUTE_DERIVED;
    }
    run->base = child->base;
    run->n += elements;
    run->next += (MPI_Aint)bytes;
    return SHIM_ROUTE_FOLD;
}

static shim_route_t decode(MPI_Datatype datatype, int depth, dense_t *out);

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
    dense_t child = {0, 0};
    shim_route_t route = SHIM_ROUTE_FOLD;
    int is_struct = c->combiner == MPI_COMBINER_STRUCT;
    for (int k = 0; k < c->ints[0] && route == SHIM_ROUTE_FOLD; k++) {
        if ((is_struct || k == 0) &&
            (route = decode(c->types[is_struct ? k : 0], depth + 1, &child)) !=
                SHIM_ROUTE_FOLD) {
            break;
        }
        MPI_Aint len, disp;
        block(c, k, (MPI_Aint)(child.n * base_extent(child.base)), &len, &disp);
        route = append(run, disp, len, &child);
    }
    return route;
}

static shim_route_t decode_contents(const contents_t *c, int depth, dense_t *out)
{
    run_t run = {-1, 0, 0};
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
        MPI_Aint child_extent = (MPI_Aint)(child.n * base_extent(child.base));
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
        if ((route = decode(c->types[0], depth + 1, &child)) != SHIM_ROUTE_FOLD) {
            return route;
        }
        if (c->addrs[0] != 0 || (size_t)c->addrs[1] != child.n * base_extent(child.base)) {
            return SHIM_ROUTE_DERIVED;
        }
        *out = child;
        return SHIM_ROUTE_FOLD;
    default:   /* subarray, darray, f90 types */
        return SHIM_ROUTE_DERIVED;
    }
    if (route == SHIM_ROUTE_FOLD && run.n == 0) {
        route = SHIM_ROUTE_DERIVED;   /* an empty type: nothing to reduce, MPI decides */
    }
    *out = (dense_t){run.base, run.n};
    return route;
}

/* The library's own size, bounds and extent must be those of n base elements. */
static int library_agrees(MPI_Datatype datatype, const dense_t *d)
{
    int size = 0, base_size = 0;
    MPI_Aint lb = -1, extent = 0, true_lb = -1, true_extent = 0;
    if (PMPI_Type_size(datatype, &size) != MPI_SUCCESS || size == MPI_UNDEFINED ||
        PMPI_Type_size(shim_types_handle(d->base), &base_size) != MPI_SUCCESS ||
        PMPI_Type_get_extent(datatype, &lb, &extent) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent(datatype, &true_lb, &true_extent) != MPI_SUCCESS) {
        return 0;
    }
    return (size_t)size == d->n * (size_t)base_size && lb == 0 && true_lb == 0 &&
           (size_t)extent == d->n * base_extent(d->base);
}

static shim_route_t decode(MPI_Datatype datatype, int depth, dense_t *out)
{
    contents_t c;
    if (PMPI_Type_get_envelope(datatype, &c.ni, &c.na, &c.nd, &c.combiner) != MPI_SUCCESS) {
        return SHIM_ROUTE_DATATYPE;
    }
    if (c.combiner == MPI_COMBINER_NAMED) {
        out->base = shim_types_find(datatype);
        out->n = 1;
        return out->base >= 0 ? SHIM_ROUTE_FOLD : SHIM_ROUTE_DATATYPE;
    }
    if (depth >= MAX_DEPTH || !contents_get(datatype, &c)) {
        return SHIM_ROUTE_DERIVED;
    }
    shim_route_t route = decode_contents(&c, depth, out);
    contents_free(&c);
    if (route == SHIM_ROUTE_FOLD && !library_agrees(datatype, out)) {
        route = SHIM_ROUTE_DERIVED;
    }
    return route;
}

shim_route_t shim_derived_decode(MPI_Datatype datatype, int *base, size_t *n)
{
    if (datatype == MPI_DATATYPE_NULL || is_named(datatype)) {
        return SHIM_ROUTE_DATATYPE;   /* a predefined type not in the table */
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
        answer = route == SHIM_ROUTE_FOLD ? (uintptr_t)d.n << 8 | (uintptr_t)d.base
                                          : (uintptr_t)route;
        if (keyval != MPI_KEYVAL_INVALID) {
            PMPI_Type_set_attr(datatype, keyval, (void *)answer);
        }
    }
    if (answer < SHIM_ROUTE_COUNT) {
        return (shim_route_t)answer;
    }
    *base = (int)(answer & 0xff);
    *n = answer >> 8;
    return SHIM_ROUTE_FOLD;
}
