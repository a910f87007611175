/*
 * Communicators drawing on the node's /dev/shm budget, over real processes
 * (tests/shm_ns_test.sh runs it on small private tmpfs mounts):
 *
 *   hold N   N communicators split from the world and all kept, each reducing 1 MiB
 *            (allreduce, then reduce to a rotating root), checked. The ranks must
 *            agree on which of them had node shared memory, and once one went
 *            without, every later one must too (nothing was freed). After freeing
 *            them all, a new communicator must get it back iff the first one had it.
 *   churn N  N times: split, allreduce 64 floats (1 MiB every 1000th), free. Every
 *            communicator must have node shared memory when the first had it: each
 *            free gives its segment back.
 *   reuse N  N communicators in turn: the whole world twice, then all ranks but the
 *            last, each freed before the next, running a tiny call, a scheduled one
 *            and (every third) 1 MiB, with a different algorithm forced each time,
 *            checked. A communicator of the same ranks as the one freed just before
 *            takes its kept segment (node/pool.c), cleared: at least N / 3 setups must
 *            have, and none of another membership.
 *
 * Exits 0 when everything held, 1 otherwise; rank 0 prints what it saw.
 */
#include <fold/fold.h>

#include "context.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BIG   (256 * 1024)   /* floats: 1 MiB */
#define SMALL 64

static int rank, size, failed;

static void check(int ok, const char *what, int k)
{
    if (!ok) {
        fprintf(stderr, "mp_shm_budget rank %d: %s (communicator %d)\n", rank, what, k);
        failed = 1;
    }
}

static float input(int k, int r, size_t i)
{
    return (float)((k + r + (int)(i % 13)) % 17);
}

/* Whether the algorithm selection ran for n floats needs node shared memory. */
static int ran_node_aware(fold_comm_h comm, size_t n)
{
    static const char *const node_aware[] = {"shm_flat", "dpml", "dpml_pipelined", "cma"};
    const char *alg = fold_selected_algorithm(comm, "allreduce", n, FOLD_FLOAT32);
    for (size_t i = 0; alg != NULL && i < sizeof(node_aware) / sizeof(node_aware[0]); i++) {
        if (strcmp(alg, node_aware[i]) == 0) {
            return 1;
        }
    }
    return 0;
}

/* An allreduce (and a reduce when `reduce`) of n floats on comm, checked; returns
 * whether it ran with node shared memory, the same on every rank (checked too). */
static int reduce_on(fold_comm_h world, fold_comm_h comm, int k, size_t n, int reduce,
                     float *in, float *out)
{
    for (size_t i = 0; i < n; i++) {
        in[i] = input(k, rank, i);
    }
    int bad = 0;
    check(fold_allreduce(in, out, n, FOLD_FLOAT32, FOLD_OP_SUM, comm) == FOLD_OK,
          "allreduce failed", k);
    for (size_t i = 0; i < n && !bad; i++) {
        float want = 0;
        for (int r = 0; r < size; r++) {
            want += input(k, r, i);
        }
        bad = out[i] != want;
    }
    check(!bad, "allreduce: wrong result", k);
    int root = k % size;
    if (reduce) {
        check(fold_reduce(in, out, n, FOLD_FLOAT32, FOLD_OP_SUM, root, comm) == FOLD_OK,
              "reduce failed", k);
        for (size_t i = 0; rank == root && i < n && !bad; i++) {
            float want = 0;
            for (int r = 0; r < size; r++) {
                want += input(k, r, i);
            }
            bad = out[i] != want;
        }
        check(!bad, "reduce: wrong result", k);
    }
    int node = ran_node_aware(comm, n), mine[2] = {node, -node}, least[2];
    fold_allreduce(mine, least, 2, FOLD_INT32, FOLD_OP_MIN, world);
    check(least[0] == -least[1], "the ranks disagree on node shared memory", k);
    return node;
}

static fold_comm_h split(fold_comm_h world, int k)
{
    fold_comm_h comm = NULL;
    check(fold_comm_split(world, 0, rank, &comm) == FOLD_OK, "split failed", k);
    return comm;
}

static void hold(fold_comm_h world, int n, float *in, float *out)
{
    fold_comm_h *comms = calloc((size_t)n, sizeof(*comms));
    int with = 0, first = -1, went_without = 0;
    for (int k = 0; k < n; k++) {
        comms[k] = split(world, k);
        int node = reduce_on(world, comms[k], k, BIG, 1, in, out);
        check(!(node && went_without), "node shared memory after a communicator went "
              "without it, though nothing was freed", k);
        went_without |= !node;
        first = first < 0 ? node : first;
        with += node;
    }
    for (int k = 0; k < n; k++) {
        fold_comm_free(&comms[k]);
    }
    fold_comm_h again = split(world, n);
    int node = reduce_on(world, again, n, BIG, 1, in, out);
    check(node == first, "after freeing every communicator, a new one differs from the "
          "first one on node shared memory", n);
    fold_comm_free(&again);
    free(comms);
    if (rank == 0) {
        printf("hold: %d of %d communicators had node shared memory; after freeing them, "
               "a new one %s\n", with, n, node ? "has it" : "has not");
    }
}

static void churn(fold_comm_h world, int n, float *in, float *out)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int with = 0, first = -1;
    for (int k = 0; k < n; k++) {
        fold_comm_h comm = split(world, k);
        int node = reduce_on(world, comm, k, k % 1000 == 999 ? BIG : SMALL, 0, in, out);
        first = first < 0 ? node : first;
        check(node == first, "a communicator differs from the first one on node shared "
              "memory", k);
        with += node;
        fold_comm_free(&comm);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (rank == 0) {
        printf("churn: %d communicators created and freed, %d with node shared memory, "
               "%.1f s\n", n, with,
               (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
    }
}

/* Every member reduces ones: the total is the communicator's size. */
static void count_members(fold_comm_h comm, int k)
{
    int members = 0;
    fold_comm_size(comm, &members);
    float one[SMALL], total[SMALL];
    for (int i = 0; i < SMALL; i++) {
        one[i] = 1.0f;
    }
    check(fold_allreduce(one, total, SMALL, FOLD_FLOAT32, FOLD_OP_SUM, comm) == FOLD_OK,
          "allreduce on the part failed", k);
    for (int i = 0; i < SMALL; i++) {
        check(total[i] == (float)members, "allreduce on the part: wrong result", k);
    }
}

static void reuse(fold_context_h ctx, fold_comm_h world, int n, float *in, float *out)
{
    static const char *const algs[] = {"auto", "shm_flat", "dpml", "dpml_pipelined"};
    unsigned long before = ctx->node_pool.reuses;
    int first = -1;
    for (int k = 0; k < n; k++) {
        fold_config_set(ctx, "FOLD_ALLREDUCE_ALG", algs[k % 4]);
        fold_config_set(ctx, "FOLD_REDUCE_ALG", algs[(k + 1) % 4]);
        fold_comm_h comm = NULL;
        int part = k % 3 == 2, color = part && rank == size - 1 ? 1 : 0;
        check(fold_comm_split(world, color, rank, &comm) == FOLD_OK, "split failed", k);
        if (part) {
            count_members(comm, k);
        } else {
            reduce_on(world, comm, k, SMALL, 1, in, out);
            reduce_on(world, comm, k, 16384, 1, in, out);   /* above the tiny path */
            int node = reduce_on(world, comm, k, k % 3 == 0 ? BIG : 65536, 1, in, out);
            first = first < 0 ? node : first;
        }
        fold_comm_free(&comm);
    }
    fold_config_set(ctx, "FOLD_ALLREDUCE_ALG", "auto");
    fold_config_set(ctx, "FOLD_REDUCE_ALG", "auto");
    unsigned long reused = ctx->node_pool.reuses - before;
    if (first == 1 && size > 1) {
        check(reused >= (unsigned long)(n / 3), "too few setups took the kept segment", n);
    }
    if (rank == 0) {
        printf("reuse: %d communicators, %lu setups took the kept segment\n", n, reused);
    }
}

int main(int argc, char **argv)
{
    if (argc != 3 ||
        (strcmp(argv[1], "hold") != 0 && strcmp(argv[1], "churn") != 0 &&
         strcmp(argv[1], "reuse") != 0) ||
        atoi(argv[2]) < 1) {
        fprintf(stderr, "usage: mp_shm_budget hold|churn|reuse N\n");
        return 2;
    }
    fold_context_h ctx;
    int st = fold_init(NULL, &ctx);
    if (st != FOLD_OK) {
        fprintf(stderr, "mp_shm_budget: fold_init failed: %s\n", fold_status_string(st));
        return 1;
    }
    fold_comm_h world = fold_comm_world(ctx);
    fold_comm_rank(world, &rank);
    fold_comm_size(world, &size);
    float *in = malloc(BIG * sizeof(float)), *out = malloc(BIG * sizeof(float));
    if (in == NULL || out == NULL) {
        fprintf(stderr, "mp_shm_budget: out of memory\n");
        return 1;
    }
    if (strcmp(argv[1], "hold") == 0) {
        hold(world, atoi(argv[2]), in, out);
    } else if (strcmp(argv[1], "reuse") == 0) {
        reuse(ctx, world, atoi(argv[2]), in, out);
    } else {
        churn(world, atoi(argv[2]), in, out);
    }
    free(in);
    free(out);
    check(fold_finalize(ctx) == FOLD_OK, "finalize failed", -1);
    return failed ? 1 : 0;
}
