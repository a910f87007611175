/*
 * Huge pages under the buffers a peer copies through the kernel.
 *
 * process_vm_readv and process_vm_writev pin the other process's pages one by one.
 * Over 4 KiB pages that walk costs as much as the copy itself once the region
 * outgrows the caches, and much less over 2 MiB pages; which pages the copier's own
 * buffers lie in makes no difference (docs/results/node-data-path.md, "Huge pages
 * under the kernel's copies"). So before a rank publishes buffers the kernel will
 * copy, it asks the kernel to back their whole huge pages with huge pages (madvise
 * MADV_COLLAPSE, Linux 6.1): the bytes stay as they are, nothing outside the buffer is
 * touched, and the kernel refuses where the program said MADV_NOHUGEPAGE or has THP
 * disabled, and moves no page that something holds pinned (a NIC's registration, a
 * device's): those stay.
 *
 * Backing costs about what touching the buffer the first time did, more than the call
 * it would speed up: a buffer is backed when it is passed a second time, never for a
 * call that uses it once. The last FOLD_NODE_HUGE_RANGES buffers are remembered (a
 * model's gradient buckets, say), and one backed is not asked for again. A program
 * that passes each new buffer exactly twice would pay without gain, so the node stops
 * after HUGE_UNUSED_LIMIT backed ranges were forgotten without having been passed
 * again.
 */
#define _GNU_SOURCE
#include "node/node.h"
#include "log.h"
#include "mem.h"
#include "util/clock.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25   /* Linux 6.1; older headers lack it, older kernels say EINVAL */
#endif

/* Ranges forgotten unused before the node stops asking. */
#define HUGE_UNUSED_LIMIT 4

static size_t huge_page_bytes;

#define THP_DIR "/sys/kernel/mm/transparent_hugepage/"

/* Whether the system's administrator turned transparent huge pages off ("[never]"):
 * MADV_COLLAPSE would make them all the same on some kernels. */
static int thp_never(void)
{
    FILE *f = fopen(THP_DIR "enabled", "r");
    char text[128] = "";
    if (f != NULL) {
        if (fgets(text, sizeof(text), f) == NULL) {
            text[0] = '\0';
        }
        fclose(f);
    }
    return strstr(text, "[never]") != NULL;
}

/* The kernel's transparent huge page size (2 MiB on x86-64), 0 where it has none or
 * they are off. */
static void read_huge_page_bytes(void)
{
    FILE *f = fopen(THP_DIR "hpage_pmd_size", "r");
    unsigned long long v = 0;
    if (f != NULL) {
        if (fscanf(f, "%llu", &v) != 1) {
            v = 0;
        }
        fclose(f);
    }
    huge_page_bytes = thp_never() ? 0 : (size_t)v;
}

size_t fold_node_huge_page_bytes(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, read_huge_page_bytes);
    return huge_page_bytes;
}

int fold_node_huge_collapse(void *lo, size_t len)
{
    return madvise(lo, len, MADV_COLLAPSE);
}

void fold_node_huge_init(fold_node_huge_t *h, int on)
{
    *h = (fold_node_huge_t){.on = on && fold_node_huge_page_bytes() > 0,
                            .collapse = fold_node_huge_collapse};
}

/* The entry holding [lo, hi), or NULL. */
static struct fold_node_huge_range *find(fold_node_huge_t *h, uintptr_t lo, uintptr_t hi)
{
    for (int i = 0; i < FOLD_NODE_HUGE_RANGES; i++) {
        if (h->range[i].lo == lo && h->range[i].hi == hi) {
            return &h->range[i];
        }
    }
    return NULL;
}

/* The entry a new range takes; counts the one it forgets if that was backed and never
 * passed again (a range seen once cost nothing). */
static struct fold_node_huge_range *take_entry(fold_node_huge_t *h)
{
    struct fold_node_huge_range *r = &h->range[h->next];
    h->next = (h->next + 1) % FOLD_NODE_HUGE_RANGES;
    if (r->hi != 0 && r->backed_at != 0 && r->uses == r->backed_at &&
        ++h->unused >= HUGE_UNUSED_LIMIT) {
        h->on = 0;
        fold_debug("huge pages: %u buffers were backed and not passed again; no more are "
                   "backed", h->unused);
    }
    return r;
}

/* Asks the kernel for huge pages under [lo, hi), one page at a time: a kernel short of
 * free huge pages collapses some and not others, and each one backed counts. Once it
 * could not allocate one (ENOMEM, after trying to compact memory for it), the rest of
 * the range is counted short without asking: each further try would cost the call
 * another compaction. Stops the node where it never will. */
static void back(fold_node_huge_t *h, uintptr_t lo, uintptr_t hi)
{
    const size_t page = fold_node_huge_page_bytes();
    const double t0 = fold_util_time_now();
    size_t backed = 0;
    for (uintptr_t at = lo; at < hi && h->on; at += page) {
        if (h->collapse((void *)at, page) == 0) {
            backed += page;
            continue;
        }
        if (errno == EINVAL || errno == ENOSYS || errno == EPERM) {
            h->on = 0;   /* no such advice, or not for this process: never again */
        } else if (errno == ENOMEM) {
            h->short_bytes += hi - at;
            fold_debug("huge pages: no free huge page for %zu KiB at %p; the rest of the "
                       "buffer is not asked for", (size_t)(hi - at) >> 10, (void *)at);
            break;
        } else {
            h->short_bytes += page;
        }
        fold_debug("huge pages: backing %zu KiB at %p: %s%s", page >> 10, (void *)at,
                   strerror(errno), h->on ? "" : "; no more are asked for");
    }
    h->backed_bytes += backed;
    fold_debug("huge pages: backed %zu of %zu KiB at %p in %.2f ms", backed >> 10,
               (size_t)(hi - lo) >> 10, (void *)lo, (fold_util_time_now() - t0) * 1e3);
}

void fold_node_huge_back(fold_node_huge_t *h, const void *buf, size_t bytes, int passes)
{
    const size_t page = fold_node_huge_page_bytes();
    if (!h->on || buf == NULL || bytes < page || passes <= 0) {
        return;
    }
    uintptr_t lo, hi;
    fold_mem_whole_pages((uintptr_t)buf, bytes, page, &lo, &hi);
    if (hi <= lo) {
        return;   /* no whole huge page inside */
    }
    struct fold_node_huge_range *r = find(h, lo, hi);
    if (r == NULL) {
        r = take_entry(h);
        *r = (struct fold_node_huge_range){.lo = lo, .hi = hi, .uses = 1};
        return;   /* first seen: a buffer passed once is not worth it */
    }
    /* Collapsing copies the pages into new ones, as adopting does, and gains no more:
     * it waits for the pass at which adopting would have paid. */
    if (++r->uses == (unsigned)(passes < 2 ? 2 : passes)) {
        r->backed_at = r->uses;
        back(h, lo, hi);
    }
}
