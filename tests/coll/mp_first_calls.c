/*
 * What runs inside an application's first calls of a size (issue: learning is paid
 * inside the user's calls only where those calls earn it back): real processes, one
 * buffer pair per size, sizes ascending from 4 KiB to 8 MiB, FIRST_CALLS blocking
 * allreduces and reduces each with inputs rewritten before every call, as an
 * application's. Then, per size:
 *   - no online trial ran: every set of arguments still runs the model's pick
 *     (fold_selection_trying says no, fold_selected_algorithm says the pick);
 *   - the buffers moved into fold memory only where selection priced adopting to pay
 *     by then (fold_select_adopt_passes at most FIRST_CALLS), never earlier, and no
 *     call moved more than its share of them (fold_select_adopt_steps);
 *   - no node was set up inside the calls (the world's was, at fold_init).
 * Every result is checked. Exits 0 when all holds.
 */
#include "comm.h"
#include "mem.h"

#include <fold/fold.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FIRST_CALLS 10
#define MIN_BYTES   ((size_t)4 << 10)
#define MAX_BYTES   ((size_t)8 << 20)

static int rank, size, failures;

static void fail(const char *what, size_t bytes, const char *how)
{
    fprintf(stderr, "rank %d: %s of %zu B: %s\n", rank, what, bytes, how);
    failures++;
}

/* in[i] = (rank + 1) * (c + 1) + i % 5: sums exact in float. */
static void fill(float *in, size_t n, int c)
{
    for (size_t i = 0; i < n; i++) {
        in[i] = (float)((rank + 1) * (c + 1) + (int)(i % 5));
    }
}

static int sum_ok(const float *out, size_t n, int c)
{
    for (size_t i = 0; i < n; i++) {
        float want = (float)(size * (size + 1) / 2 * (c + 1) + size * (int)(i % 5));
        if (out[i] != want) {
            return 0;
        }
    }
    return 1;
}

static int lies_in_fold_memory(const void *buf, size_t bytes)
{
    return fold_mem_adopt_would_after(buf, bytes, 0);
}

/* What one call may move into fold memory: its share of IN and OUT, whole pages. */
static uint64_t share_of(size_t bytes, int steps)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t share = steps > 1 ? (bytes / (size_t)steps + page - 1) / page * page : bytes;
    return 2 * (uint64_t)share;
}

static void first_calls_of(fold_comm_h w, fold_coll_t coll, size_t bytes, float *in,
                           float *out)
{
    const char *name = coll == FOLD_COLL_ALLREDUCE ? "allreduce" : "reduce";
    const size_t n = bytes / sizeof(float);
    fold_comm_t *comm = (fold_comm_t *)w;
    const char *pick = fold_selected_algorithm(w, name, n, FOLD_FLOAT32);
    char picked[64];
    snprintf(picked, sizeof(picked), "%s", pick != NULL ? pick : "?");
    for (int c = 0; c < FIRST_CALLS; c++) {
        fill(in, n, c);
        memset(out, 0, bytes);
        fold_mem_adopt_stats_t before, after;
        fold_mem_adopt_stats(&before);
        int st = coll == FOLD_COLL_ALLREDUCE
                     ? fold_allreduce(in, out, n, FOLD_FLOAT32, FOLD_OP_SUM, w)
                     : fold_reduce(in, out, n, FOLD_FLOAT32, FOLD_OP_SUM, 0, w);
        if (st != FOLD_OK) {
            fail(name, bytes, fold_status_string(st));
            return;
        }
        fold_mem_adopt_stats(&after);
        const uint64_t moved = after.adopted_bytes - before.adopted_bytes;
        if (moved > share_of(bytes, fold_select_adopt_steps(comm, coll, n, FOLD_FLOAT32))) {
            char why[96];
            snprintf(why, sizeof(why), "call %d moved %llu bytes into fold memory", c + 1,
                     (unsigned long long)moved);
            fail(name, bytes, why);
        }
        if ((coll == FOLD_COLL_ALLREDUCE || rank == 0) && !sum_ok(out, n, c)) {
            fail(name, bytes, "wrong sum");
            return;
        }
    }
    int trying = -1;
    if (fold_selection_trying(w, name, n, FOLD_FLOAT32, FOLD_OP_SUM, 0, &trying) != FOLD_OK ||
        trying != 0) {
        fail(name, bytes, "online trials run inside the first calls");
    }
    pick = fold_selected_algorithm(w, name, n, FOLD_FLOAT32);
    if (pick == NULL || strcmp(pick, picked) != 0) {
        fail(name, bytes, "the choice changed inside the first calls");
    }
    const int passes = fold_select_adopt_passes(comm, coll, n, FOLD_FLOAT32, FOLD_OP_SUM);
    const int moved = lies_in_fold_memory(in, bytes);
    if (moved && (passes <= 0 || passes > FIRST_CALLS)) {
        char why[96];
        snprintf(why, sizeof(why), "adopted, priced to pay at pass %d", passes);
        fail(name, bytes, why);
    }
}

int main(void)
{
    fold_context_h ctx;
    if (fold_init(NULL, &ctx) != FOLD_OK) {
        fprintf(stderr, "fold_init failed\n");
        return 1;
    }
    fold_comm_h w = fold_comm_world(ctx);
    if (fold_comm_rank(w, &rank) != FOLD_OK || fold_comm_size(w, &size) != FOLD_OK) {
        return 1;
    }
    const fold_node_t *node_at_init = ((fold_comm_t *)w)->node;
    for (int c = 0; c < 2; c++) {
        const fold_coll_t coll = c == 0 ? FOLD_COLL_ALLREDUCE : FOLD_COLL_REDUCE;
        for (size_t bytes = MIN_BYTES; bytes <= MAX_BYTES; bytes *= 4) {
            /* A pair of its own per size, whole pages, as an application's arrays. */
            float *in = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            float *out = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (in == MAP_FAILED || out == MAP_FAILED) {
                fail("mmap", bytes, "failed");
                break;
            }
            first_calls_of(w, coll, bytes, in, out);
            munmap(in, bytes);
            munmap(out, bytes);
        }
    }
    if (((fold_comm_t *)w)->node != node_at_init) {
        fail("the world's node", 0, "set up inside the calls");
    }
    fold_finalize(ctx);
    if (rank == 0) {
        printf("mp_first_calls: %s\n", failures ? "FAILED" : "ok");
    }
    return failures != 0;
}
