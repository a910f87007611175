/*
 * A rank whose single-copy read of another rank's buffer fails (the kernel says the
 * address is bad: an input shorter than the count) fails its call, and tells the
 * node: the other rank, waiting for it to finish, fails within moments instead of
 * waiting out FOLD_TIMEOUT. Ranks are threads of one process here, whose kernel
 * copies read their own process (node/peer.c).
 */
#include "loopback_harness.h"

#include <criterion/criterion.h>
#include <fold/fold.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define COUNT (256 * 1024)   /* 1 MiB of float32 */

typedef struct fault_case {
    int    status[2];
    double seconds[2];
} fault_case_t;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Rank 1's input has its first half unreadable (PROT_NONE, so that no allocation of
 * the other thread takes its place): rank 0 reads it (it owns the first block, or all
 * of it with one owner); rank 1 itself touches only the second half. */
static int bad_input_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    fault_case_t *c = arg;
    (void)size;
    fold_config_set(ctx, "ALLREDUCE_ALG", "cma");
    fold_config_set(ctx, "CODEC", "none");   /* nothing may scan the input first */
    const size_t bytes = COUNT * sizeof(float);
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    char *region = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    float *out = calloc(COUNT, sizeof(float));
    if (region == MAP_FAILED || out == NULL) {
        free(out);
        return 1;
    }
    float *in = (float *)region;
    for (size_t i = 0; i < COUNT; i++) {
        in[i] = 1.0f;
    }
    if (rank == 1) {
        mprotect(region, bytes / 2 / page * page, PROT_NONE);
    }
    double start = now_s();
    c->status[rank] = fold_allreduce(in, out, COUNT, FOLD_FLOAT32, FOLD_OP_SUM,
                                     fold_comm_world(ctx));
    c->seconds[rank] = now_s() - start;
    lh_barrier(ctx);   /* a rank that failed may return while the other still reads */
    munmap(region, bytes);
    free(out);
    return 0;
}

Test(peer_fault, a_failed_kernel_copy_fails_every_rank_at_once)
{
    setenv("FOLD_TIMEOUT", "60", 1);
    setenv("FOLD_WORLD_SETUP", "lazy", 1);
    fault_case_t c;
    memset(&c, 0, sizeof(c));
    int result;
    char *log = lh_run_logged(2, bad_input_rank, &c, &result);
    unsetenv("FOLD_TIMEOUT");
    unsetenv("FOLD_WORLD_SETUP");
    cr_assert_eq(result, 0, "%s", log);
    cr_expect_eq(c.status[0], FOLD_ERR_TRANSPORT, "rank 0: %s\n%s",
                 fold_status_string(c.status[0]), log);
    cr_expect_eq(c.status[1], FOLD_ERR_PEER_FAILED, "rank 1: %s (not told?)\n%s",
                 fold_status_string(c.status[1]), log);
    cr_expect_lt(c.seconds[1], 20.0, "rank 1 took %.1f s (FOLD_TIMEOUT=60)\n%s", c.seconds[1],
                 log);
    cr_expect(strstr(log, "process_vm_readv") != NULL, "the log names the kernel's call:\n%s",
              log);
    cr_expect(strstr(log, "gave the node segment up") != NULL, "rank 1 says why:\n%s", log);
    free(log);
}
