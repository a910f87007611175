/*
 * MPI_Allreduce and MPI_Reduce on buffers from MPI_Alloc_mem, freed with
 * MPI_Free_mem: with the fold MPI shim and FOLD_MPI_ALLOC_MEM=1 the blocks must be
 * fold memory (a "memfd:fold-mem" mapping in /proc/self/maps), and MPI_Free_mem must
 * take them back; otherwise they must not be. Results are checked against a
 * reference computed locally, in and out of place, for every root, from 1 element to
 * 4 MiB. A block of 0 bytes and heap buffers beside the MPI_Alloc_mem ones go through
 * too. Plain MPI: shim_run.sh runs it with and without the shim.
 */
#include "shim_test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

/* Whether p lies in a mapping of fold memory, from /proc/self/maps. */
static int in_fold_memory(const void *p)
{
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[512];
    int found = 0;
    while (maps != NULL && !found && fgets(line, sizeof(line), maps) != NULL) {
        uintptr_t lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && (uintptr_t)p >= lo &&
            (uintptr_t)p < hi) {
            found = strstr(line, "fold-mem") != NULL;
            break;
        }
    }
    if (maps != NULL) {
        fclose(maps);
    }
    return found;
}

/* The shim and FOLD_MPI_ALLOC_MEM=1: what this run should give. */
static int expect_fold_memory(void)
{
    const char *preload = getenv("LD_PRELOAD"), *on = getenv("FOLD_MPI_ALLOC_MEM");
    return preload != NULL && strstr(preload, "fold-mpi") != NULL && on != NULL &&
           strcmp(on, "1") == 0;
}

static void *alloc_mem(size_t bytes, const char *what)
{
    void *p = NULL;
    if (MPI_Alloc_mem((MPI_Aint)bytes, MPI_INFO_NULL, &p) != MPI_SUCCESS || p == NULL) {
        fprintf(stderr, "MPI_Alloc_mem of %zu bytes (%s) failed\n", bytes, what);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (in_fold_memory(p) != expect_fold_memory()) {
        fprintf(stderr, "MPI_Alloc_mem of %zu bytes (%s): %s fold memory, expected %s\n",
                bytes, what, in_fold_memory(p) ? "in" : "not in",
                expect_fold_memory() ? "fold memory" : "other memory");
        failures++;
    }
    return p;
}

static void one_call(const test_type_t *t, test_coll_t coll, int root, size_t count,
                     int inplace, char *send, char *recv, char *want, int rank, int size)
{
    static uint32_t seed;
    seed++;
    size_t bytes = count * t->size;
    int has_out = coll == COLL_ALLREDUCE || rank == root;
    test_fill(t, OP_SUM, seed, rank, send, count);
    const void *in = send;
    if (inplace && has_out) {
        memcpy(recv, send, bytes);
        in = MPI_IN_PLACE;
    } else {
        memset(recv, 0xa5, bytes);
    }
    int rc = coll == COLL_ALLREDUCE
                 ? MPI_Allreduce(in, recv, (int)count, t->type, MPI_SUM, MPI_COMM_WORLD)
                 : MPI_Reduce(in, has_out ? recv : NULL, (int)count, t->type, MPI_SUM, root,
                              MPI_COMM_WORLD);
    test_expect(coll, ROUTE_FOLD);
    char what[128];
    snprintf(what, sizeof(what), "%s of %zu floats, root %d%s",
             coll == COLL_ALLREDUCE ? "MPI_Allreduce" : "MPI_Reduce", count, root,
             inplace ? ", in place" : "");
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "%s: returned %d\n", what, rc);
        failures++;
    } else if (has_out) {
        test_reference(t, OP_SUM, seed, size, want, count);
        failures += test_compare(t, recv, want, count, what);
        test_digest(recv, bytes);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_types_init();
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const test_type_t *t = test_type_named("float");
    static const size_t counts[] = {1, 1000, 16384, 262144, (size_t)1 << 20};
    const size_t most = ((size_t)1 << 20) * sizeof(float);
    char *send = alloc_mem(most, "send"), *recv = alloc_mem(most, "receive");
    char *want = malloc(most), *heap = malloc(most);
    if (want == NULL || heap == NULL) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
        for (int inplace = 0; inplace < 2; inplace++) {
            one_call(t, COLL_ALLREDUCE, 0, counts[k], inplace, send, recv, want, rank, size);
            for (int root = 0; root < size; root++) {
                one_call(t, COLL_REDUCE, root, counts[k], inplace, send, recv, want, rank,
                         size);
            }
        }
        /* heap output beside an MPI_Alloc_mem input, alike on every rank */
        one_call(t, COLL_ALLREDUCE, 0, counts[k], 0, send, heap, want, rank, size);
    }
    /* 0 bytes: MPI's own answer, and MPI_Free_mem takes it back */
    void *none = NULL;
    if (MPI_Alloc_mem(0, MPI_INFO_NULL, &none) != MPI_SUCCESS ||
        MPI_Free_mem(none) != MPI_SUCCESS) {
        fprintf(stderr, "MPI_Alloc_mem / MPI_Free_mem of 0 bytes failed\n");
        failures++;
    }
    if (MPI_Free_mem(send) != MPI_SUCCESS || MPI_Free_mem(recv) != MPI_SUCCESS) {
        fprintf(stderr, "MPI_Free_mem failed\n");
        failures++;
    }
    if (in_fold_memory(send) || in_fold_memory(recv)) {
        fprintf(stderr, "fold memory still mapped after MPI_Free_mem\n");
        failures++;
    }
    free(want);
    free(heap);
    int failed = test_finish(failures);
    MPI_Finalize();
    return failed;
}
