/*
 * A rank whose single-copy read of another rank's buffer fails (the kernel says the
 * address is bad: an input shorter than the count) fails its call, and tells the
 * node: the other rank, waiting for it to finish, fails within moments instead of
 * waiting out FOLD_TIMEOUT. A rank that gives a call up returns only once no other
 * rank is inside a copy of its buffers. Ranks are threads of one process here, whose
 * kernel copies read and write their own process (node/peer.c).
 */
#define _GNU_SOURCE
#include "loopback_harness.h"
#include "util/clock.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <fold/fold.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define COUNT (256 * 1024)   /* 1 MiB of float32 */

typedef struct fault_case {
    int    status[2];
    double seconds[2];
} fault_case_t;

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
    double start = fold_util_time_now();
    c->status[rank] = fold_allreduce(in, out, COUNT, FOLD_FLOAT32, FOLD_OP_SUM,
                                     fold_comm_world(ctx));
    c->seconds[rank] = fold_util_time_now() - start;
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
    cr_expect(strstr(log, "gave the node segment up") != NULL ||
                  strstr(log, "local rank 0 gave the call up and took its buffers back") != NULL,
              "rank 1 says why:\n%s", log);
    free(log);
}

/* Rank 1's kernel write of its block into rank 0's OUT stalls on a page that a
 * userfaultfd holds back for HOLD_S; rank 0, done with its own block, waits for rank 1
 * until FOLD_TIMEOUT (1 s) and gives the call up. It must not return while rank 1 is
 * still inside that write: its application may free OUT at once (here it makes OUT
 * unreachable, so that a late write fails rank 1 with "Bad address"). */
#define HOLD_S 1.5

typedef struct stall_case {
    int    uffd;
    float *out0;           /* rank 0's OUT: its second half registered */
    size_t held_bytes;
    double released_at;    /* when the fault was let go */
    double returned_at[2];
    int    status[2];
    int    faults;
} stall_case_t;

static void *hold_fault(void *arg)
{
    stall_case_t *c = arg;
    struct pollfd p = {.fd = c->uffd, .events = POLLIN};
    if (poll(&p, 1, 10000) == 1) {
        struct uffd_msg msg;
        if (read(c->uffd, &msg, sizeof(msg)) == (ssize_t)sizeof(msg) &&
            msg.event == UFFD_EVENT_PAGEFAULT) {
            c->faults++;
            double until = fold_util_time_now() + HOLD_S;
            while (fold_util_time_now() < until) {
                usleep(10000);
            }
        }
    }
    c->released_at = fold_util_time_now();
    /* Unregistering wakes the stalled write; its pages then fault in as any do. */
    struct uffdio_range range = {(uintptr_t)((char *)c->out0 + c->held_bytes), c->held_bytes};
    ioctl(c->uffd, UFFDIO_UNREGISTER, &range);
    return NULL;
}

static int stalled_writer_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    stall_case_t *c = arg;
    (void)size;
    fold_config_set(ctx, "ALLREDUCE_ALG", "cma@512k");
    fold_config_set(ctx, "DPML_LEADERS", "2");   /* rank 1 owns the second half */
    fold_config_set(ctx, "CODEC", "none");
    fold_config_set(ctx, "TIMEOUT", "1");
    const size_t bytes = COUNT * sizeof(float);
    float *in = malloc(bytes), *out = rank == 0 ? c->out0 : calloc(COUNT, sizeof(float));
    if (in == NULL || out == NULL) {
        return 1;
    }
    for (size_t i = 0; i < COUNT; i++) {
        in[i] = 1.0f;
    }
    lh_barrier(ctx);
    c->status[rank] = fold_allreduce(in, out, COUNT, FOLD_FLOAT32, FOLD_OP_SUM,
                                     fold_comm_world(ctx));
    c->returned_at[rank] = fold_util_time_now();
    if (rank == 0) {
        /* What an application may do with a buffer once the call returned. */
        mprotect(out, bytes, PROT_NONE);
    }
    lh_barrier(ctx);   /* both returned */
    free(in);
    if (rank != 0) {
        free(out);
    }
    return 0;
}

Test(peer_fault, a_rank_that_gives_up_returns_after_the_copies_of_its_buffers)
{
    setenv("FOLD_WORLD_SETUP", "lazy", 1);
    stall_case_t c;
    memset(&c, 0, sizeof(c));
    const size_t bytes = COUNT * sizeof(float);
    c.held_bytes = bytes / 2;
    c.uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    cr_assert_geq(c.uffd, 0, "userfaultfd: %s (the test runs as root, or with "
                  "vm.unprivileged_userfaultfd = 1)", strerror(errno));
    struct uffdio_api api = {.api = UFFD_API};
    cr_assert_eq(ioctl(c.uffd, UFFDIO_API, &api), 0, "UFFDIO_API: %s", strerror(errno));
    c.out0 = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(c.out0, MAP_FAILED);
    memset(c.out0, 0, c.held_bytes);   /* rank 0's own half: present */
    struct uffdio_register reg = {
        .range = {(uintptr_t)((char *)c.out0 + c.held_bytes), c.held_bytes},
        .mode  = UFFDIO_REGISTER_MODE_MISSING};
    cr_assert_eq(ioctl(c.uffd, UFFDIO_REGISTER, &reg), 0, "UFFDIO_REGISTER: %s",
                 strerror(errno));
    pthread_t holder;
    cr_assert_eq(pthread_create(&holder, NULL, hold_fault, &c), 0);

    int result;
    char *log = lh_run_logged(2, stalled_writer_rank, &c, &result);
    pthread_join(holder, NULL);
    unsetenv("FOLD_WORLD_SETUP");
    cr_assert_eq(result, 0, "%s", log);
    cr_expect_eq(c.faults, 1, "rank 1's write into rank 0's OUT did not stall:\n%s", log);
    cr_expect_eq(c.status[0], FOLD_ERR_TIMEOUT, "rank 0: %s\n%s",
                 fold_status_string(c.status[0]), log);
    cr_expect_geq(c.returned_at[0], c.released_at,
                  "rank 0 returned %.3f s before rank 1's write into its OUT ended\n%s",
                  c.released_at - c.returned_at[0], log);
    cr_expect(c.status[1] == FOLD_OK || c.status[1] == FOLD_ERR_PEER_FAILED,
              "rank 1: %s (its write went on after rank 0 returned?)\n%s",
              fold_status_string(c.status[1]), log);
    munmap(c.out0, bytes);
    close(c.uffd);
    free(log);
}
