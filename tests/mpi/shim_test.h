/*
 * Helpers shared by the MPI test programs of the fold MPI shim. The programs are plain
 * MPI: they run the same with and without LD_PRELOAD=libfold-mpi.so, and print
 *
 *   digest: <one hash per rank over every result>   (must not change with the shim)
 *   expect: fold=N (allreduce=A reduce=R) pmpi=M (reason=K ...)
 *
 * the second (when the program recorded expectations) in the format of the shim's
 * FOLD_MPI_VERBOSE totals, with where each call should go.
 */
#ifndef FOLD_SHIM_TEST_H
#define FOLD_SHIM_TEST_H

#include <mpi.h>

#include <stddef.h>
#include <stdint.h>

typedef enum test_kind {
    KIND_SIGNED, KIND_UNSIGNED, KIND_FLOAT, KIND_BOOL, KIND_BYTE
} test_kind_t;

/* MPI's datatype groups for reductions (MPI 4.0, 6.9.2); MPI_CHAR counts as C. */
typedef enum test_group {
    GROUP_C_INTEGER, GROUP_F_INTEGER, GROUP_FLOAT, GROUP_LOGICAL, GROUP_BYTE
} test_group_t;

typedef struct test_type {
    const char  *name;
    MPI_Datatype type;
    size_t       size;
    test_kind_t  kind;
    test_group_t group;
} test_type_t;

typedef enum test_op {
    OP_SUM, OP_PROD, OP_MIN, OP_MAX, OP_BAND, OP_BOR, OP_BXOR, OP_LAND, OP_LOR, OP_LXOR,
    OP_COUNT
} test_op_t;

/* The routes the shim reports, in its order and spelling. */
typedef enum test_route {
    ROUTE_FOLD, ROUTE_OFF, ROUTE_ARGS, ROUTE_DATATYPE, ROUTE_OP, ROUTE_DTYPE_OP, ROUTE_DERIVED,
    ROUTE_USER_OP, ROUTE_USER_OP_DERIVED, ROUTE_SMALL, ROUTE_LARGE, ROUTE_MPI_FASTER,
    ROUTE_INTERCOMM, ROUTE_FOREIGN, ROUTE_COMM_FAILED, ROUTE_COMM_BUSY,
    ROUTE_COUNT
} test_route_t;

typedef enum test_coll { COLL_ALLREDUCE, COLL_REDUCE } test_coll_t;

/* Every predefined type the shim serves; filled after MPI_Init. */
extern test_type_t test_types[];
extern int test_ntypes;
void test_types_init(void);
const test_type_t *test_type_named(const char *name);

MPI_Op test_mpi_op(test_op_t op);
const char *test_op_name(test_op_t op);
/* Whether MPI defines op for the type's group. */
int test_op_valid(const test_type_t *t, test_op_t op);

/* A hash of (seed, rank, i), for test inputs. */
uint32_t test_mix(uint32_t seed, int rank, size_t i);

/* Input element i of comm rank r for call `seed`: an integer small enough that every
 * reduction over at most 8 ranks is exact in any type and order. */
int64_t test_value(const test_type_t *t, test_op_t op, uint32_t seed, int rank, size_t i);
/* Fills buf (count elements) with rank r's input. */
void test_fill(const test_type_t *t, test_op_t op, uint32_t seed, int rank, void *buf,
               size_t count);
/* The reduction over ranks 0..size-1, in order, as the type stores it. */
void test_reference(const test_type_t *t, test_op_t op, uint32_t seed, int size, void *buf,
                    size_t count);

/* Compares count elements; prints the first mismatch with `what`; 1 on mismatch. */
int test_compare(const test_type_t *t, const void *got, const void *want, size_t count,
                 const char *what);

/* The running digest of results (FNV-1a). */
void test_digest(const void *buf, size_t len);

/* An output buffer of `bytes` for one call, poisoned so that what the call leaves
 * unwritten shows; in place (`in_place`: a rank with an output), holding `in` and
 * *sendbuf set to MPI_IN_PLACE, else *sendbuf = in. Free with free(). */
char *test_output(const void *in, size_t bytes, int in_place, const void **sendbuf);
/* Expected route of one call. */
void test_expect(test_coll_t coll, test_route_t route);
/* Collective over MPI_COMM_WORLD, without MPI_Allreduce / MPI_Reduce: prints the
 * digest and expectation lines on rank 0; returns 1 on every rank if any rank
 * reported a failure. */
int test_finish(int failures);

#endif
