/*
 * MPI_Allreduce and MPI_Reduce over every datatype and op the fold MPI shim serves,
 * on MPI_COMM_WORLD, MPI_COMM_SELF and dup'ed, split, group-created and
 * MPI_Comm_create_group communicators, over sizes from 0 elements to 1M, every root,
 * in and out of place. Each result is checked against a reference computed locally;
 * inputs are integers (integer-valued for floats), so the result is exact whichever
 * order the MPI library or fold reduces in. Plain MPI: shim_run.sh runs it with and
 * without the shim.
 */
#include "shim_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct test_comm {
    const char *name;
    MPI_Comm    comm;
    int         rank, size;
    uint32_t    ncases;   /* seeds inputs; members count their cases alike */
} test_comm_t;

static int failures;

static void run_case(test_comm_t *c, const test_type_t *t, test_op_t op, test_coll_t coll,
                     int root, size_t count, int inplace)
{
    uint32_t seed = ++c->ncases;
    size_t bytes = count * t->size, alloc = bytes ? bytes : 1;
    char *send = malloc(alloc), *recv = malloc(alloc), *want = malloc(alloc);
    char what[160];
    snprintf(what, sizeof(what), "%s %s %s, count %zu, root %d%s, on %s",
             coll == COLL_ALLREDUCE ? "MPI_Allreduce" : "MPI_Reduce", t->name,
             test_op_name(op), count, root, inplace ? ", in place" : "", c->name);
    test_fill(t, op, seed, c->rank, send, count);
    int has_out = coll == COLL_ALLREDUCE || c->rank == root;
    const void *in = send;
    void *out = recv;
    if (inplace && has_out) {
        memcpy(recv, send, bytes);
        in = MPI_IN_PLACE;
    } else {
        memset(recv, 0xa5, alloc);
    }
    if (!has_out) {
        /* MPI ignores recvbuf at a reduce non-root: NULL or even sendbuf are fine. */
        out = seed % 3 == 0 ? NULL : seed % 3 == 1 ? send : recv;
    }
    int rc = coll == COLL_ALLREDUCE
                 ? MPI_Allreduce(in, out, (int)count, t->type, test_mpi_op(op), c->comm)
                 : MPI_Reduce(in, out, (int)count, t->type, test_mpi_op(op), root, c->comm);
    test_expect(coll, ROUTE_FOLD);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "%s: returned %d\n", what, rc);
        failures++;
    } else if (has_out) {
        test_reference(t, op, seed, c->size, want, count);
        failures += test_compare(t, recv, want, count, what);
        test_digest(recv, bytes);
    }
    if (!(inplace && has_out)) {
        test_fill(t, op, seed, c->rank, want, count);
        if (test_compare(t, send, want, count, what) != 0) {
            fprintf(stderr, "  (the send buffer changed)\n");
            failures++;
        }
    }
    free(send);
    free(recv);
    free(want);
}

/* Every datatype with every op MPI defines for it. */
static void all_types_and_ops(test_comm_t *c)
{
    for (int k = 0; k < test_ntypes; k++) {
        for (int op = 0; op < OP_COUNT; op++) {
            if (!test_op_valid(&test_types[k], (test_op_t)op)) {
                continue;
            }
            run_case(c, &test_types[k], (test_op_t)op, COLL_ALLREDUCE, 0, 37, op == OP_SUM);
            run_case(c, &test_types[k], (test_op_t)op, COLL_REDUCE, c->size - 1, 37,
                     op == OP_MAX);
        }
    }
}

/* A few types, every op, both collectives. */
static void some_types(test_comm_t *c)
{
    static const char *const names[] = {"int", "double", "float", "int8", "uint64", "c_bool",
                                        "byte"};
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        const test_type_t *t = test_type_named(names[k]);
        for (int op = 0; op < OP_COUNT; op++) {
            if (test_op_valid(t, (test_op_t)op)) {
                run_case(c, t, (test_op_t)op, COLL_ALLREDUCE, 0, 100, op == OP_BOR);
                run_case(c, t, (test_op_t)op, COLL_REDUCE, (int)k % c->size, 100, op == OP_MIN);
            }
        }
    }
}

/* Counts around algorithm and segment boundaries, in and out of place; every root for
 * the smaller counts on a full sweep, else the first and last. */
static void sizes(test_comm_t *c, int full)
{
    static const size_t counts[] = {0, 1, 2, 3, 17, 1024, 4097, 65536, 262145};
    const test_type_t *dbl = test_type_named("double"), *i32 = test_type_named("int");
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
        size_t n = counts[k];
        if (!full && (k % 2 == 1 || n > 65536)) {
            continue;
        }
        for (int inplace = 0; inplace <= 1; inplace++) {
            run_case(c, dbl, OP_SUM, COLL_ALLREDUCE, 0, n, inplace);
            run_case(c, i32, OP_MAX, COLL_ALLREDUCE, 0, n, !inplace);
            for (int root = 0; root < c->size; root++) {
                if ((full && n <= 4097) || root == 0 || root == c->size - 1) {
                    run_case(c, dbl, OP_SUM, COLL_REDUCE, root, n, inplace);
                    run_case(c, i32, OP_MIN, COLL_REDUCE, root, n, !inplace);
                }
            }
        }
    }
    if (full) {
        run_case(c, test_type_named("float"), OP_SUM, COLL_ALLREDUCE, 0, (1u << 20) + 3, 0);
        run_case(c, test_type_named("int64"), OP_BXOR, COLL_REDUCE, c->size / 2, 1u << 20, 1);
    }
}

static test_comm_t wrap(const char *name, MPI_Comm comm)
{
    test_comm_t c = {name, comm, -1, 0, 0};
    if (comm != MPI_COMM_NULL) {
        MPI_Comm_rank(comm, &c.rank);
        MPI_Comm_size(comm, &c.size);
    }
    return c;
}

/* World ranks in reverse order, without rank 0 when there are more than two. */
static MPI_Group reversed_group(int world_size)
{
    MPI_Group world, group;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int n = world_size > 2 ? world_size - 1 : world_size, *ranks = malloc((size_t)n * sizeof(int));
    for (int i = 0; i < n; i++) {
        ranks[i] = world_size - 1 - i;
    }
    MPI_Group_incl(world, n, ranks, &group);
    MPI_Group_free(&world);
    free(ranks);
    return group;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_types_init();
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    MPI_Comm dup, split, created, from_group = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &split);   /* reversed within a color */
    MPI_Group group = reversed_group(size);
    int in_group;
    MPI_Group_rank(group, &in_group);
    MPI_Comm_create(MPI_COMM_WORLD, group, &created);
    if (in_group != MPI_UNDEFINED) {
        MPI_Comm_create_group(MPI_COMM_WORLD, group, 7, &from_group);
    }
    MPI_Group_free(&group);

    test_comm_t comms[] = {wrap("MPI_COMM_WORLD", MPI_COMM_WORLD), wrap("dup", dup),
                           wrap("split", split), wrap("MPI_Comm_create", created),
                           wrap("MPI_Comm_create_group", from_group),
                           wrap("MPI_COMM_SELF", MPI_COMM_SELF)};
    all_types_and_ops(&comms[0]);
    sizes(&comms[0], 1);
    for (size_t i = 1; i < sizeof(comms) / sizeof(comms[0]); i++) {
        if (comms[i].comm != MPI_COMM_NULL) {
            some_types(&comms[i]);
            sizes(&comms[i], 0);
        }
    }

    /* Freeing communicators frees fold's; new ones after that still work. */
    for (size_t i = 1; i < sizeof(comms) / sizeof(comms[0]); i++) {
        if (comms[i].comm != MPI_COMM_NULL && comms[i].comm != MPI_COMM_SELF) {
            MPI_Comm_free(&comms[i].comm);
        }
    }
    for (int round = 0; round < 3; round++) {
        MPI_Comm again;
        MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &again);
        test_comm_t c = wrap("split after frees", again);
        run_case(&c, test_type_named("long"), OP_SUM, COLL_ALLREDUCE, 0, 1000, 0);
        run_case(&c, test_type_named("long"), OP_SUM, COLL_REDUCE, size - 1, 1000, 1);
        MPI_Comm_free(&again);
    }

    int failed = test_finish(failures);
    MPI_Finalize();
    return failed;
}
