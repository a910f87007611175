/*
 * MPI_THREAD_MULTIPLE: several threads per process, each reducing on its own copy of
 * MPI_COMM_WORLD at the same time as the others, in whatever order the scheduler
 * picks on each process. With the shim this is where a lock held across a blocking
 * fold call would deadlock, and where first uses of several communicators meet.
 *
 *   phase 1: every thread starts at once: first uses race (the shim may hand some to
 *            MPI as comm_busy and map the communicator on a later call)
 *   phase 2: the main thread reduces once on every communicator: all are mapped
 *   phase 3: every thread again, now all served by fold
 *
 * Each round adds a user op's sum on the thread's own dup of MPI_INT: the op must
 * receive the datatype of the call its thread is making.
 *
 * Prints "expect-min: fold=N": calls of phases 2 and 3 (fold must serve them all);
 * phase 1's may go either way, but only as comm_busy. Exits 77 without
 * MPI_THREAD_MULTIPLE.
 */
#include "shim_test.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 3
#define ROUNDS  12

typedef struct worker {
    int          id;
    MPI_Comm     comm;
    MPI_Datatype type;   /* its own dup of MPI_INT */
    int          failures;
    unsigned     calls;
} worker_t;

static int rank, size;
static pthread_barrier_t start_line;
static MPI_Op add_op;
static _Thread_local MPI_Datatype my_type;
static _Thread_local int wrong_types;

static void add_ints(void *in, void *inout, int *len, MPI_Datatype *type)
{
    wrong_types += *type != my_type;
    for (int i = 0; i < *len; i++) {
        ((int *)inout)[i] += ((int *)in)[i];
    }
}

static int value(int r, int i, int round, int id)
{
    return (r * 5 + i + round * 3 + id * 11) % 13 - 6;
}

/* One allreduce and one reduce of a size that depends on the thread. */
static void reduce_once(worker_t *w, int round)
{
    int count = 1000 * (w->id + 1) + round;
    int *in = calloc((size_t)count, sizeof(int)), *out = calloc((size_t)count, sizeof(int));
    for (int i = 0; i < count; i++) {
        in[i] = value(rank, i, round, w->id);
    }
    int root = round % size, ok_all = 1, ok_root = 1;
    MPI_Allreduce(in, out, count, MPI_INT, MPI_SUM, w->comm);
    for (int i = 0; i < count; i++) {
        int want = 0;
        for (int r = 0; r < size; r++) {
            want += value(r, i, round, w->id);
        }
        ok_all &= out[i] == want;
    }
    MPI_Reduce(in, out, count, MPI_INT, MPI_MAX, root, w->comm);
    for (int i = 0; rank == root && i < count; i++) {
        int want = value(0, i, round, w->id);
        for (int r = 1; r < size; r++) {
            want = value(r, i, round, w->id) > want ? value(r, i, round, w->id) : want;
        }
        ok_root &= out[i] == want;
    }
    my_type = w->type;
    wrong_types = 0;
    int ok_user = 1;
    MPI_Allreduce(in, out, count, w->type, add_op, w->comm);
    for (int i = 0; i < count; i++) {
        int want = 0;
        for (int r = 0; r < size; r++) {
            want += value(r, i, round, w->id);
        }
        ok_user &= out[i] == want && wrong_types == 0;
    }
    if (!ok_all || !ok_root || !ok_user) {
        fprintf(stderr, "rank %d thread %d round %d: wrong %s\n", rank, w->id, round,
                !ok_all ? "allreduce" : !ok_root ? "reduce" : "user-op allreduce");
        w->failures++;
    }
    w->calls += 3;
    free(in);
    free(out);
}

static void *work(void *arg)
{
    worker_t *w = arg;
    pthread_barrier_wait(&start_line);
    for (int round = 0; round < ROUNDS; round++) {
        reduce_once(w, round);
    }
    return NULL;
}

static void run_threads(worker_t *workers)
{
    pthread_t threads[THREADS];
    pthread_barrier_init(&start_line, NULL, THREADS);
    /* Odd ranks start their threads in the opposite order. */
    for (int k = 0; k < THREADS; k++) {
        int t = rank % 2 ? THREADS - 1 - k : k;
        pthread_create(&threads[t], NULL, work, &workers[t]);
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(threads[t], NULL);
    }
    pthread_barrier_destroy(&start_line);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0) {
            printf("skipped: the MPI library does not provide MPI_THREAD_MULTIPLE\n");
        }
        MPI_Finalize();
        return 77;
    }
    worker_t workers[THREADS];
    MPI_Op_create(add_ints, 1, &add_op);
    for (int t = 0; t < THREADS; t++) {
        workers[t] = (worker_t){t, MPI_COMM_NULL, MPI_DATATYPE_NULL, 0, 0};
        MPI_Comm_dup(MPI_COMM_WORLD, &workers[t].comm);
        MPI_Type_dup(MPI_INT, &workers[t].type);
        MPI_Type_commit(&workers[t].type);
    }
    run_threads(workers);                               /* phase 1 */
    unsigned racing = 0;
    for (int t = 0; t < THREADS; t++) {
        racing += workers[t].calls;
        reduce_once(&workers[t], ROUNDS);               /* phase 2 */
    }
    run_threads(workers);                               /* phase 3 */

    int failures = 0;
    unsigned served = 0;
    for (int t = 0; t < THREADS; t++) {
        failures += workers[t].failures;
        served += workers[t].calls;
        MPI_Comm_free(&workers[t].comm);
        MPI_Type_free(&workers[t].type);
    }
    MPI_Op_free(&add_op);
    served -= racing;
    unsigned total = 0;
    MPI_Reduce(&served, &total, 1, MPI_UNSIGNED, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("expect-min: fold=%u\n", total);
        printf("allow: comm_busy small\n");
    }
    failures = test_finish(failures);
    MPI_Finalize();
    return failures;
}
