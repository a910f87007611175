/*
 * fold memory (fold_mem_alloc, runtime/mem.c): what the allocator gives and takes
 * back, the lookup single copy makes per call, bad arguments, descriptors and
 * threads. Mapping it from other ranks is test_mem_map's.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>

#include "dir_entries.h"
#include "mem.h"
#include "stderr_capture.h"

#include <fold/fold.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

Test(mem, gives_whole_pages_that_the_lookup_finds)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    char *p = NULL;
    cr_assert_eq(fold_mem_alloc(5000, (void **)&p), FOLD_OK);
    cr_assert_not_null(p);
    cr_expect_eq((uintptr_t)p % page, 0);
    memset(p, 0x5a, 2 * page);   /* 5000 bytes round up to two 4 KiB pages */

    fold_mem_place_t where;
    cr_expect(fold_mem_find(p + 100, 4000, &where));
    cr_expect_eq(where.off, 100);
    cr_expect_eq(where.bytes, 2 * page);
    cr_expect_geq(where.fd, 0);
    cr_expect_neq(where.ino, 0);
    cr_expect(fold_mem_find(p, 2 * page, &where), "the whole allocation");
    cr_expect_not(fold_mem_find(p + 1, 2 * page, &where), "one byte past its end");
    cr_expect_eq(where.fd, -1);
    cr_expect_not(fold_mem_find(p - 1, 8, &where), "starts before it");
    char stack[64];
    cr_expect_not(fold_mem_find(stack, sizeof(stack), &where), "not fold memory");
    cr_expect_not(fold_mem_find(NULL, 0, &where));
    cr_expect_eq(fold_mem_free(p), FOLD_OK);
    cr_expect_not(fold_mem_find(p, 8, &where), "freed");
}

/* The public question (the MPI shim's MPI_Free_mem asks it of any pointer). */
Test(mem, contains_says_whether_a_pointer_is_fold_memory_without_a_word,
     .init = cr_redirect_stderr)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    char *p = NULL;
    cr_assert_eq(fold_mem_alloc(page + 1, (void **)&p), FOLD_OK);
    cr_expect_eq(fold_mem_contains(p), 1);
    cr_expect_eq(fold_mem_contains(p + page), 1, "inside, past its first page");
    cr_expect_eq(fold_mem_contains(p + 2 * page - 1), 1, "its last byte");
    cr_expect_eq(fold_mem_contains(p + 2 * page), 0, "one past its end");
    char *heap = malloc(64);
    cr_assert_not_null(heap);
    cr_expect_eq(fold_mem_contains(heap), 0);
    cr_expect_eq(fold_mem_contains(NULL), 0);
    cr_expect_eq(fold_mem_free(p), FOLD_OK);
    cr_expect_eq(fold_mem_contains(p), 0, "freed");
    free(heap);
    char *logged = stderr_redirected();
    cr_expect_str_empty(logged, "it logged: %s", logged);
    free(logged);
}

Test(mem, refuses_bad_arguments_with_a_message, .init = cr_redirect_stderr)
{
    void *p = NULL;
    cr_expect_eq(fold_mem_alloc(0, &p), FOLD_ERR_INVALID_ARG);
    cr_expect_eq(fold_mem_alloc(64, NULL), FOLD_ERR_INVALID_ARG);
    cr_expect_eq(fold_mem_alloc(SIZE_MAX, &p), FOLD_ERR_NO_MEMORY);
    cr_expect_null(p, "outputs are written only on success");

    cr_assert_eq(fold_mem_alloc(64, &p), FOLD_OK);
    char stack[8];
    cr_expect_eq(fold_mem_free(stack), FOLD_ERR_INVALID_ARG);
    cr_expect_eq(fold_mem_free((char *)p + 8), FOLD_ERR_INVALID_ARG, "not its start");
    cr_expect_eq(fold_mem_free(NULL), FOLD_OK);
    cr_expect_eq(fold_mem_free(p), FOLD_OK);
    cr_expect_eq(fold_mem_free(p), FOLD_ERR_INVALID_ARG, "freed twice");
    char *log = stderr_redirected();
    EXPECT_LOG_HAS(log, "fold_mem_alloc: 0 bytes asked");
    EXPECT_LOG_HAS(log, "is not the start of memory from fold_mem_alloc");
    free(log);
}

/* Each free moves the count peers watch to drop their mappings; nothing stays open. */
Test(mem, frees_are_counted_and_leave_no_descriptor)
{
    const int before = dir_entries("/proc/self/fd");
    const uint64_t freed = fold_mem_frees();
    void *p[100];
    for (int i = 0; i < 100; i++) {
        cr_assert_eq(fold_mem_alloc((size_t)(i + 1) * 1000, &p[i]), FOLD_OK);
    }
    cr_expect_eq(dir_entries("/proc/self/fd"), before + 100);
    for (int i = 0; i < 100; i++) {
        cr_assert_eq(fold_mem_free(p[i]), FOLD_OK);
    }
    cr_expect_eq(fold_mem_frees(), freed + 100);
    cr_expect_eq(dir_entries("/proc/self/fd"), before);
}

static void *churn(void *arg)
{
    long bad = 0;
    for (int i = 0; i < 200; i++) {
        char *p = NULL;
        fold_mem_place_t where;
        if (fold_mem_alloc(4096 * (size_t)(1 + i % 3), (void **)&p) != FOLD_OK) {
            bad++;
            continue;
        }
        p[0] = (char)(intptr_t)arg;
        bad += !fold_mem_find(p, 4096, &where) || where.off != 0;
        bad += fold_mem_free(p) != FOLD_OK;
    }
    return (void *)bad;
}

Test(mem, threads_allocate_and_free_at_once)
{
    pthread_t t[4];
    for (long i = 0; i < 4; i++) {
        cr_assert_eq(pthread_create(&t[i], NULL, churn, (void *)i), 0);
    }
    for (int i = 0; i < 4; i++) {
        void *bad;
        pthread_join(t[i], &bad);
        cr_expect_eq((long)bad, 0, "thread %d", i);
    }
}
