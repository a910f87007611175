/*
 * Huge pages under the buffers peers copy through the kernel (node/huge.c): the whole
 * huge pages inside a buffer are backed with them, the second time it is passed, and
 * nothing around it; its bytes stay; a buffer passed once is never backed, one backed
 * is not asked for again, and a node stops after buffers that were backed and not
 * passed again. Where the kernel backs no memory with huge pages (THP off, an old
 * kernel), the tests say so and skip. A kernel of the tests' own decides what happens
 * when the real one is short of huge pages or refuses: asking stops for the buffer at
 * ENOMEM, goes on past a transient refusal, and stops for good at EINVAL.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include "node/node.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#define MIB ((size_t)1 << 20)

/* AnonHugePages of the mapping holding addr, in bytes (/proc/self/smaps). */
static size_t huge_bytes_at(const void *addr)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    cr_assert_not_null(f);
    char text[512];
    int inside = 0;
    size_t kib = 0;
    while (fgets(text, sizeof(text), f) != NULL) {
        unsigned long lo, hi;
        if (sscanf(text, "%lx-%lx ", &lo, &hi) == 2 && strchr(text, ':') != NULL &&
            strchr(text, '-') < strchr(text, ' ')) {
            inside = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
            continue;
        }
        if (inside && sscanf(text, "AnonHugePages: %zu kB", &kib) == 1) {
            break;
        }
    }
    fclose(f);
    return kib << 10;
}

/* A mapping of `pages` huge pages plus one, filled with a pattern, and its first whole
 * huge page; the test is skipped where the system gave it huge pages on first touch
 * (THP "always"): what is collapsed could not be told from what was not. */
typedef struct region {
    char  *raw, *first;   /* the mapping, its first whole huge page */
    size_t len, page;
} region_t;

static region_t map_region(size_t pages)
{
    region_t r = {.page = fold_node_huge_page_bytes()};
    if (r.page == 0 || r.page > 4 * MIB) {
        cr_skip_test("no transparent huge pages of at most 4 MiB here");
    }
    r.len = (pages + 1) * r.page;
    r.raw = mmap(NULL, r.len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(r.raw, MAP_FAILED);
    r.first = (char *)(((uintptr_t)r.raw + r.page - 1) & ~(uintptr_t)(r.page - 1));
    for (size_t i = 0; i < r.len; i++) {
        r.raw[i] = (char)(i * 7 + 3);
    }
    if (huge_bytes_at(r.first) != 0) {
        cr_skip_test("this system backs new memory with huge pages itself (THP always)");
    }
    return r;
}

static void check_bytes(const region_t *r)
{
    for (size_t i = 0; i < r->len; i++) {
        if (r->raw[i] != (char)(i * 7 + 3)) {
            cr_assert_fail("byte %zu of the mapping changed", i);
        }
    }
}

/* What was asked for is accounted as backed or short, and where the kernel was short of
 * free huge pages the test cannot tell more: it says so and skips. */
static void skip_if_short(const fold_node_huge_t *h, size_t asked)
{
    cr_expect_eq(h->backed_bytes + h->short_bytes, asked, "%zu bytes backed and %zu short "
                 "of %zu asked for", h->backed_bytes, h->short_bytes, asked);
    if (h->short_bytes != 0) {
        cr_skip_test("the kernel had no free huge page for %zu of %zu KiB",
                     h->short_bytes >> 10, asked >> 10);
    }
}

/* Whether the kernel collapses memory here at all (MADV_COLLAPSE, Linux 6.1). */
static void skip_unless_collapsing(void)
{
    region_t probe = map_region(1);
    int ok = fold_node_huge_collapse(probe.first, probe.page) == 0;
    munmap(probe.raw, probe.len);
    if (!ok) {
        cr_skip_test("the kernel collapses no memory into huge pages here");
    }
}

Test(node_huge, backs_the_whole_pages_inside_a_buffer_and_keeps_its_bytes)
{
    skip_unless_collapsing();
    region_t r = map_region(4);
    fold_node_huge_t h;
    fold_node_huge_init(&h, 1);
    cr_assert(h.on);
    /* A buffer from 4 KiB into the first whole page to 4 KiB into the fourth: the
     * second and third pages are whole inside it, the first and fourth are not. */
    char *buf = r.first + 4096;
    fold_node_huge_back(&h, buf, 3 * r.page, 2);
    cr_expect_eq(h.backed_bytes, 0, "backed at its first call");
    cr_expect_eq(huge_bytes_at(buf), 0);
    fold_node_huge_back(&h, buf, 3 * r.page, 2);
    check_bytes(&r);
    cr_expect_eq(huge_bytes_at(buf), h.backed_bytes);
    skip_if_short(&h, 2 * r.page);
    cr_expect_eq(h.backed_bytes, 2 * r.page);
    cr_expect_eq(huge_bytes_at(buf), 2 * r.page, "%zu bytes of the mapping are huge, "
                 "not the two whole pages inside the buffer", huge_bytes_at(buf));
    check_bytes(&r);
    munmap(r.raw, r.len);
}

Test(node_huge, a_buffer_passed_again_is_not_asked_for_again)
{
    skip_unless_collapsing();
    region_t r = map_region(2);
    fold_node_huge_t h;
    fold_node_huge_init(&h, 1);
    for (int call = 0; call < 4; call++) {
        fold_node_huge_back(&h, r.first, 2 * r.page, 2);
    }
    check_bytes(&r);
    cr_expect_eq(h.range[0].uses, 4);
    cr_expect(h.on);
    skip_if_short(&h, 2 * r.page);
    cr_expect_eq(h.backed_bytes, 2 * r.page);
    munmap(r.raw, r.len);
}

/* n buffers of one huge page each, the whole pages of r from its first, each passed
 * `passes` times in a row. */
static void pass_pages(fold_node_huge_t *h, const region_t *r, size_t n, int passes)
{
    for (size_t i = 0; i < n; i++) {
        for (int call = 0; call < passes; call++) {
            fold_node_huge_back(h, r->first + i * r->page, r->page, 2);
        }
    }
}

Test(node_huge, buffers_passed_once_are_never_backed)
{
    skip_unless_collapsing();
    const size_t n = FOLD_NODE_HUGE_RANGES + 8;
    region_t r = map_region(n);
    fold_node_huge_t h;
    fold_node_huge_init(&h, 1);
    pass_pages(&h, &r, n, 1);
    cr_expect_eq(h.backed_bytes, 0);
    cr_expect_eq(huge_bytes_at(r.first), 0);
    cr_expect(h.on, "buffers that cost nothing stopped the node");
    munmap(r.raw, r.len);
}

Test(node_huge, stops_after_buffers_backed_and_not_passed_again)
{
    skip_unless_collapsing();
    const size_t n = FOLD_NODE_HUGE_RANGES + 4;
    region_t r = map_region(n);
    fold_node_huge_t h;
    fold_node_huge_init(&h, 1);
    /* Each buffer passed twice (backed at the second): the table holds
     * FOLD_NODE_HUGE_RANGES; each new one after that forgets one backed and unused
     * since, and the fourth so forgotten stops the node before that new one is
     * backed. */
    pass_pages(&h, &r, n, 2);
    cr_expect_not(h.on);
    cr_expect_eq(h.unused, 4);
    check_bytes(&r);
    skip_if_short(&h, (FOLD_NODE_HUGE_RANGES + 3) * r.page);
    munmap(r.raw, r.len);
}

Test(node_huge, off_or_small_leaves_buffers_as_they_are)
{
    region_t r = map_region(2);
    fold_node_huge_t off, on;
    fold_node_huge_init(&off, 0);
    fold_node_huge_init(&on, 1);
    /* no whole page inside: from 4 KiB into one page to 4 KiB short of the next's end */
    for (int call = 0; call < 2; call++) {
        fold_node_huge_back(&off, r.first, 2 * r.page, 2);
        fold_node_huge_back(&on, r.first + 4096, 2 * r.page - 8192, 2);
    }
    cr_expect_eq(off.backed_bytes, 0);
    cr_expect_eq(on.backed_bytes, 0);
    cr_expect_eq(huge_bytes_at(r.first), 0);
    check_bytes(&r);
    munmap(r.raw, r.len);
}

/* A kernel of the test's own (fold_node_huge_t's collapse): it backs pages until the
 * one numbered fail_at and then fails with fail_errno; it only counts, touching no
 * memory, so the buffers below need not exist. */
static int fake_calls, fake_fail_at, fake_errno;

static int fake_collapse(void *lo, size_t len)
{
    (void)lo;
    (void)len;
    if (fake_calls++ < fake_fail_at) {
        return 0;
    }
    errno = fake_errno;
    return -1;
}

/* Backs 8 whole huge pages at a made-up, aligned address with the fake kernel. */
static fold_node_huge_t back_with_fake(int fail_at, int err)
{
    const size_t page = fold_node_huge_page_bytes();
    if (page == 0) {
        cr_skip_test("this system has no transparent huge pages");
    }
    fold_node_huge_t h;
    fold_node_huge_init(&h, 1);
    h.collapse = fake_collapse;
    fake_calls = 0;
    fake_fail_at = fail_at;
    fake_errno = err;
    const void *buf = (const void *)(uintptr_t)(page * 64);
    fold_node_huge_back(&h, buf, 8 * page, 2);   /* first seen: nothing asked */
    cr_expect_eq(fake_calls, 0, "asked at the buffer's first pass");
    fold_node_huge_back(&h, buf, 8 * page, 2);
    return h;
}

Test(node_huge, stops_asking_for_a_buffer_once_the_kernel_has_no_huge_page)
{
    fold_node_huge_t h = back_with_fake(3, ENOMEM);
    const size_t page = fold_node_huge_page_bytes();
    cr_expect_eq(fake_calls, 4, "asked %d times: 3 backed, the 4th failed, no more", fake_calls);
    cr_expect_eq(h.backed_bytes, 3 * page);
    cr_expect_eq(h.short_bytes, 5 * page, "the 5 pages from the failed one are short");
    cr_expect(h.on, "a shortage does not turn backing off");
}

Test(node_huge, asks_for_every_page_past_a_transient_refusal)
{
    fold_node_huge_t h = back_with_fake(2, EAGAIN);
    const size_t page = fold_node_huge_page_bytes();
    cr_expect_eq(fake_calls, 8, "asked %d times for 8 pages", fake_calls);
    cr_expect_eq(h.backed_bytes, 2 * page);
    cr_expect_eq(h.short_bytes, 6 * page);
    cr_expect(h.on);
}

Test(node_huge, a_kernel_without_the_advice_turns_backing_off)
{
    fold_node_huge_t h = back_with_fake(1, EINVAL);
    const size_t page = fold_node_huge_page_bytes();
    cr_expect_eq(fake_calls, 2);
    cr_expect_eq(h.backed_bytes, page);
    cr_expect_eq(h.short_bytes, 0);
    cr_expect_not(h.on, "EINVAL means never: backing stays off");
}
