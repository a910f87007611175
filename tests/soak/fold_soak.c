/*
 * fold_soak: many randomly mixed calls checked against a reference (issue 16).
 *
 *   mpirun -n 3 fold_soak [calls] [seed] [max bytes]     (defaults 2000, 1, 1 MiB)
 *
 * Every rank draws the same sequence from the seed: allreduce, reduce, bcast or
 * barrier; blocking, or one to three non-blocking calls in flight finished in turn
 * by fold_wait or fold_test; int8/int32/int64/uint8/uint64/float32/float64 with every
 * op the type takes (prod on a few elements of small values, so nothing overflows a
 * float); log-uniform sizes up to the maximum; in place or not; any root; a forced
 * algorithm or auto; a forced sparse codec (bits, idx, rle), none or auto; dense or
 * sparse inputs (a third of the calls: 90% zeros, or one rank dense and the others
 * sparse); and now and then a new communicator (the world in reverse, or halves)
 * with the old one freed. Inputs are small integers made from (context rank, index,
 * call), so every rank computes the exact expected result itself.
 * Prints one line, with the resident memory after the first tenth of the calls and
 * at the end (a soak must not grow), and exits 0 when every call succeeded with the
 * expected result.
 */
#include <fold/fold.h>

#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t rng_state;

static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}

static const char *const allreduce_algs[] = {"auto", "recursive_doubling", "rabenseifner",
                                             "ring", "dpml", "dpml_pipelined", "shm_flat",
                                             "cma"};
static const char *const reduce_algs[] = {"auto", "binomial", "rabenseifner", "ring", "chain",
                                          "bintree", "greedy", "dpml", "dpml_pipelined",
                                          "shm_flat", "cma"};
static const char *const codecs[] = {"auto", "none", "bits", "idx", "rle"};
#define NCODECS (sizeof(codecs) / sizeof(codecs[0]))
static const fold_dtype_t dtypes[] = {FOLD_INT8, FOLD_INT32, FOLD_INT64, FOLD_UINT8,
                                      FOLD_UINT64, FOLD_FLOAT32, FOLD_FLOAT64};
#define NDTYPES (sizeof(dtypes) / sizeof(dtypes[0]))
#define NALLRED (sizeof(allreduce_algs) / sizeof(allreduce_algs[0]))
#define NRED    (sizeof(reduce_algs) / sizeof(reduce_algs[0]))

/* How call k's inputs are spread: dense, sparse on every rank, or dense on rank 0
 * only (the density imbalance the codecs meet in practice). */
static int sparsity_of(int k)
{
    return k % 3;
}

/* Input of context rank r at element i of call k: 1..5 (prod: 1..2), or 0 at nine
 * elements in ten where the call is sparse for that rank. */
static int64_t input(int r, size_t i, int k, fold_op_t op)
{
    uint64_t h = (uint64_t)r * 0x9e3779b97f4a7c15ULL ^ (uint64_t)i * 0xbf58476d1ce4e5b9ULL ^
                 (uint64_t)k * 0x94d049bb133111ebULL;
    h ^= h >> 31;
    int sparse = sparsity_of(k) == 1 || (sparsity_of(k) == 2 && r != 0);
    if (sparse && (h >> 40) % 10 != 0) {
        return 0;
    }
    return op == FOLD_OP_PROD ? (int64_t)(h % 2) + 1 : (int64_t)(h % 5) + 1;
}

/* This process's resident memory in KiB, or -1. */
static long resident_kib(void)
{
    long pages = -1, resident = -1;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f != NULL) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2) {
            resident = -1;
        }
        fclose(f);
    }
    return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static void store(void *buf, fold_dtype_t dt, size_t i, int64_t v)
{
    switch (dt) {
    case FOLD_INT8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case FOLD_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case FOLD_INT64: ((int64_t *)buf)[i] = v; break;
    case FOLD_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case FOLD_UINT64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
    case FOLD_FLOAT32: ((float *)buf)[i] = (float)v; break;
    default: ((double *)buf)[i] = (double)v; break;
    }
}

/* Applies op in the datatype's own arithmetic (int8/uint8 wrap). */
static int64_t apply(fold_dtype_t dt, fold_op_t op, int64_t a, int64_t b)
{
    int64_t r;
    switch (op) {
    case FOLD_OP_SUM: r = a + b; break;
    case FOLD_OP_PROD: r = a * b; break;
    case FOLD_OP_MIN: r = a < b ? a : b; break;
    case FOLD_OP_MAX: r = a > b ? a : b; break;
    case FOLD_OP_BAND: r = a & b; break;
    case FOLD_OP_BOR: r = a | b; break;
    default: r = a ^ b; break;
    }
    if (dt == FOLD_INT8) {
        r = (int8_t)r;
    } else if (dt == FOLD_UINT8) {
        r = (uint8_t)r;
    }
    return r;
}

static int64_t load(const void *buf, fold_dtype_t dt, size_t i)
{
    switch (dt) {
    case FOLD_INT8: return ((const int8_t *)buf)[i];
    case FOLD_INT32: return ((const int32_t *)buf)[i];
    case FOLD_INT64: return ((const int64_t *)buf)[i];
    case FOLD_UINT8: return ((const uint8_t *)buf)[i];
    case FOLD_UINT64: return (int64_t)((const uint64_t *)buf)[i];
    case FOLD_FLOAT32: return (int64_t)llrintf(((const float *)buf)[i]);
    default: return (int64_t)llrint(((const double *)buf)[i]);
    }
}

typedef struct call {
    int           coll;     /* 0 allreduce, 1 reduce, 2 bcast, 3 barrier */
    fold_dtype_t  dtype;
    fold_op_t     op;
    size_t        count;
    int           inplace, root;
    void         *in, *out;
    fold_request_h req;
} call_t;

static int check(const call_t *c, fold_comm_h comm, int k, int me, int size, const int *members)
{
    (void)comm;
    if (c->coll == 3 || (c->coll == 1 && me != c->root)) {
        return 0;
    }
    const void *res = c->coll == 2 ? c->in : c->out;
    for (size_t i = 0; i < c->count; i++) {
        int64_t expect;
        if (c->coll == 2) {
            expect = input(members[c->root], i, k, FOLD_OP_SUM);
        } else {
            expect = input(members[0], i, k, c->op);
            for (int r = 1; r < size; r++) {
                expect = apply(c->dtype, c->op, expect, input(members[r], i, k, c->op));
            }
        }
        int64_t got = load(res, c->dtype, i);
        if (got != expect) {
            fprintf(stderr, "fold_soak: call %d (%s, %s, %s, count %zu, root %d, %s): element "
                    "%zu is %lld, expected %lld\n", k,
                    c->coll == 0 ? "allreduce" : c->coll == 1 ? "reduce" : "bcast",
                    fold_dtype_name(c->dtype), fold_op_name(c->op), c->count, c->root,
                    c->inplace ? "in place" : "out of place", i, (long long)got,
                    (long long)expect);
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    int ncalls = argc > 1 ? atoi(argv[1]) : 2000;
    unsigned seed = argc > 2 ? (unsigned)atoi(argv[2]) : 1;
    size_t max_bytes = argc > 3 ? strtoull(argv[3], NULL, 0) : (1u << 20);
    rng_state = 0x2545f4914f6cdd1dULL ^ (uint64_t)seed * 0x9e3779b97f4a7c15ULL;

    fold_context_h ctx;
    int st = fold_init(NULL, &ctx);
    if (st != FOLD_OK) {
        fprintf(stderr, "fold_soak: fold_init: %s\n", fold_status_string(st));
        return 1;
    }
    fold_comm_h world = fold_comm_world(ctx), comm = world;
    int wrank, wsize;
    fold_comm_rank(world, &wrank);
    fold_comm_size(world, &wsize);
    int *members = malloc((size_t)wsize * sizeof(int));
    int errors = 0, splits = 0, nb_calls = 0, k = 0;
    long rss_warm = -1;

    while (k < ncalls && errors == 0) {
        if (rss_warm < 0 && k >= ncalls / 10) {
            rss_warm = resident_kib();
        }
        /* Now and then a new communicator. */
        if (rnd() % 16 == 0) {
            fold_comm_h next = NULL;
            int halves = wsize > 2 && rnd() % 2;
            st = fold_comm_split(world, halves ? wrank % 2 : 0, halves ? wrank : -wrank, &next);
            if (comm != world) {
                st = st != FOLD_OK ? st : fold_comm_free(&comm);
            }
            if (st != FOLD_OK) {
                fprintf(stderr, "fold_soak: split/free: %s\n", fold_status_string(st));
                errors++;
                break;
            }
            comm = next;
            splits++;
        }
        int me, size;
        fold_comm_rank(comm, &me);
        fold_comm_size(comm, &size);
        for (int r = 0; r < size; r++) {
            fold_comm_context_rank(comm, r, &members[r]);
        }

        int coll = (int)(rnd() % 8);
        coll = coll < 3 ? 0 : coll < 6 ? 1 : coll < 7 ? 2 : 3;
        const char *alg = coll == 0 ? allreduce_algs[rnd() % NALLRED]
                                    : reduce_algs[rnd() % NRED];
        if (rnd() % 2) {
            alg = "auto";
        }
        const char *codec = codecs[rnd() % NCODECS];
        if (coll <= 1) {
            fold_config_set(ctx, coll == 0 ? "ALLREDUCE_ALG" : "REDUCE_ALG", alg);
            fold_config_set(ctx, "CODEC", codec);
        }
        int inflight = coll <= 1 && rnd() % 3 == 0 ? 1 + (int)(rnd() % 3) : 0;
        int n = inflight ? inflight : 1;
        call_t calls[3];
        for (int j = 0; j < n; j++, k++) {
            call_t *c = &calls[j];
            memset(c, 0, sizeof(*c));
            c->coll = coll;
            c->dtype = dtypes[rnd() % NDTYPES];
            int is_float = c->dtype == FOLD_FLOAT32 || c->dtype == FOLD_FLOAT64;
            int nops = is_float ? 4 : 7;
            c->op = (fold_op_t)(rnd() % (uint64_t)nops);
            size_t esize = fold_dtype_size(c->dtype), max_count = max_bytes / esize;
            int bits = 0;
            while (((size_t)2 << bits) <= max_count) {
                bits++;
            }
            c->count = ((size_t)1 << (rnd() % (uint64_t)(bits + 1))) - 1 + rnd() % 2;
            if (c->op == FOLD_OP_PROD && c->count > 4) {
                c->count = 4;   /* 2^(ranks) at most, exact everywhere */
            }
            c->inplace = rnd() % 3 == 0;
            c->root = (int)(rnd() % (uint64_t)size);
            size_t bytes = c->count * esize + 1;
            c->in = malloc(bytes);
            c->out = malloc(bytes);
            memset(c->out, 0x5a, bytes);
            for (size_t i = 0; i < c->count; i++) {
                store(c->in, c->dtype, i,
                      coll == 2 ? (me == c->root ? input(wrank, i, k, FOLD_OP_SUM) : 99)
                                : input(wrank, i, k, c->op));
            }
            const void *send = c->in;
            if (c->inplace && coll <= 1) {
                memcpy(c->out, c->in, c->count * esize);
                send = FOLD_IN_PLACE;
            }
            if (coll == 0) {
                st = inflight ? fold_iallreduce(send, c->out, c->count, c->dtype, c->op, comm,
                                                &c->req)
                              : fold_allreduce(send, c->out, c->count, c->dtype, c->op, comm);
            } else if (coll == 1) {
                st = inflight ? fold_ireduce(send, c->out, c->count, c->dtype, c->op, c->root,
                                             comm, &c->req)
                              : fold_reduce(send, c->out, c->count, c->dtype, c->op, c->root,
                                            comm);
            } else if (coll == 2) {
                st = fold_bcast(c->in, c->count, c->dtype, c->root, comm);
            } else {
                st = fold_barrier(comm);
            }
            if (st != FOLD_OK) {
                fprintf(stderr, "fold_soak: call %d (coll %d, alg %s, codec %s, %s, %s, count "
                        "%zu): %s\n", k, coll, alg, codec, fold_dtype_name(c->dtype),
                        fold_op_name(c->op), c->count, fold_status_string(st));
                errors++;
            }
        }
        for (int j = 0; j < n; j++) {
            call_t *c = &calls[j];
            if (inflight && c->req != NULL) {
                if (j % 2 == 0) {
                    st = fold_wait(c->req);
                } else {
                    while ((st = fold_test(c->req)) == FOLD_INPROGRESS) {
                        sched_yield();
                    }
                }
                fold_request_free(c->req);
                nb_calls++;
                if (st != FOLD_OK) {
                    fprintf(stderr, "fold_soak: non-blocking call: %s\n",
                            fold_status_string(st));
                    errors++;
                }
            }
            if (errors == 0) {
                errors += check(c, comm, k - n + j, me, size, members);
            }
            free(c->in);
            free(c->out);
        }
    }
    if (comm != world) {
        fold_comm_free(&comm);
    }
    long rss_end = resident_kib();
    st = fold_finalize(ctx);
    if (wrank == 0 || errors != 0) {
        printf("fold_soak: rank %d: %d calls (%d non-blocking), %d communicators, %d errors, "
               "finalize %s; resident %ld KiB after a tenth of the calls, %ld KiB at the end\n",
               wrank, k, nb_calls, splits, errors, fold_status_string(st), rss_warm, rss_end);
    }
    free(members);
    return errors != 0 || st != FOLD_OK;
}
