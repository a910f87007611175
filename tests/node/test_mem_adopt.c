/*
 * Adopted buffers (runtime/mem_adopt.c): a page-aligned buffer of whole pages, passed
 * the second time, moves into fold memory at its own address with its bytes; what
 * only private memory does stays true afterwards (madvise DONTNEED reads zeros, a
 * forked child writes its own copy, mremap and munmap keep or drop the bytes as
 * asked); other memory is never adopted; and single copy between ranks (threads on
 * the loopback fabric, mapping each other through /proc/self/fd as processes do)
 * gives the reference's results call after call on adopted buffers whose inputs
 * change between calls. Under a sanitizer (its own malloc) adoption stays off, and
 * the tests on memory they map themselves run with the allocator's check skipped.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include "coll_reference.h"
#include "loopback_harness.h"
#include "comm.h"
#include "mem.h"
#include "node/node.h"

#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAGES 16

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZER_MALLOC 1   /* the sanitizer's allocator stands in for glibc's */
#else
#define SANITIZER_MALLOC 0
#endif

/* Tests on pages they map themselves: under a sanitizer, trust its allocator. */
static void own_pages(void)
{
    if (SANITIZER_MALLOC) {
        fold_mem_adopt_trust_any_allocator();
    }
}

static size_t page(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

static void fill(unsigned char *p, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++) {
        p[i] = (unsigned char)(i * 7 + seed);
    }
}

static int filled(const unsigned char *p, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++) {
        if (p[i] != (unsigned char)(i * 7 + seed)) {
            return 0;
        }
    }
    return 1;
}

static int all_zero(const unsigned char *p, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (p[i] != 0) {
            return 0;
        }
    }
    return 1;
}

static void fill_from(unsigned char *p, size_t len, size_t first, unsigned seed)
{
    for (size_t i = 0; i < len; i++) {
        p[i] = (unsigned char)((first + i) * 7 + seed);
    }
}

static int filled_from(const unsigned char *p, size_t len, size_t first, unsigned seed)
{
    unsigned char *want = malloc(len);
    fill_from(want, len, first, seed);
    int same = memcmp(p, want, len) == 0;
    free(want);
    return same;
}

/* The /proc/self/maps permissions of the mapping holding p ("rw-s"), or "". */
static void perms_at(const void *p, char perms[8])
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    strcpy(perms, "");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        unsigned long a, b;
        char pm[8];
        if (sscanf(line, "%lx-%lx %7s", &a, &b, pm) == 3 && a <= (unsigned long)p &&
            (unsigned long)p < b) {
            strcpy(perms, pm);
        }
    }
    if (f != NULL) {
        fclose(f);
    }
}

/* Adopts [p, p + len) (two passes); asserts it worked. */
static fold_mem_place_t adopt(void *p, size_t len)
{
    fold_mem_place_t place;
    cr_assert_eq(fold_mem_adopt(p, len, &place), 0, "adopted on the first pass");
    cr_assert_eq(place.fd, -1);
    cr_assert_eq(fold_mem_adopt(p, len, &place), 1, "not adopted on the second pass");
    cr_assert_geq(place.fd, 0);
    return place;
}

static void *fresh_pages(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(p, MAP_FAILED);
    return p;
}

/* The adopted file mapped as a peer maps it (/proc/<pid>/fd/<n>), len bytes. */
static unsigned char *peer_view(const fold_mem_place_t *place, size_t len)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", place->fd);
    int fd = open(path, O_RDWR);
    cr_assert_geq(fd, 0);
    unsigned char *view = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    cr_assert_neq(view, MAP_FAILED);
    return view;
}

/* len bytes of fresh pages filled from seed, adopted. */
static unsigned char *adopted_pages(size_t len, unsigned seed)
{
    unsigned char *p = fresh_pages(len);
    fill(p, len, seed);
    adopt(p, len);
    return p;
}

Test(mem_adopt, usable_here)
{
    /* Debian's UCX hooks in bistro mode; not under another malloc. */
    cr_assert_eq(fold_mem_adopt_usable(), !SANITIZER_MALLOC, "%s",
                 SANITIZER_MALLOC ? "adopting under a sanitizer's malloc"
                            : "UCX's memory events are not seen here");
}

Test(mem_adopt, bytes_stay_and_the_pages_are_shared, .init = own_pages)
{
    const size_t len = PAGES * page();
    unsigned char *p = fresh_pages(len);
    fill(p, len, 1);
    char perms[8];
    perms_at(p, perms);
    cr_assert_str_eq(perms, "rw-p");
    fold_mem_place_t place = adopt(p, len);
    cr_expect(filled(p, len, 1), "the bytes changed");
    cr_expect_eq(place.off, 0);
    cr_expect_eq(place.bytes, len);
    perms_at(p, perms);
    cr_expect_str_eq(perms, "rw-s");
    /* Another mapping of the file (what a peer makes) sees the buffer and writes it. */
    unsigned char *alias = peer_view(&place, len);
    cr_expect(filled(alias, len, 1));
    alias[5] = 0xAB;
    cr_expect_eq(p[5], 0xAB);
    munmap(alias, len);
    /* A part of it is found too, at its offset. */
    fold_mem_place_t part;
    cr_expect_eq(fold_mem_adopt(p + page(), 2 * page(), &part), 1);
    cr_expect_eq(part.off, page());
    munmap(p, len);
}

Test(mem_adopt, dontneed_reads_zeros_as_private_memory_does, .init = own_pages)
{
    const size_t len = PAGES * page();
    unsigned char *p = adopted_pages(len, 2);
    cr_assert_eq(madvise(p + 4 * page(), 4 * page(), MADV_DONTNEED), 0);
    cr_expect(all_zero(p + 4 * page(), 4 * page()), "dropped pages kept their bytes");
    cr_expect(filled(p, 4 * page(), 2), "the pages before lost their bytes");
    cr_expect(filled_from(p + 8 * page(), 8 * page(), 8 * page(), 2),
              "the pages after lost their bytes");
    fold_mem_adopt_stats_t s;
    fold_mem_adopt_stats(&s);
    cr_expect_eq(s.exposed, 0, "a buffer partly given back is still offered to peers");
    cr_expect_eq(s.pieces, 2, "the two shared parts left are watched");
    /* Those parts stay watched: giving them back reads zeros as well. */
    cr_assert_eq(madvise(p, len, MADV_DONTNEED), 0);
    cr_expect(all_zero(p, len));
    fold_mem_adopt_stats(&s);
    cr_expect_eq(s.pieces, 0);
    char perms[8];
    perms_at(p, perms);
    cr_expect_str_eq(perms, "rw-p");
    munmap(p, len);
}

Test(mem_adopt, munmap_of_a_part_keeps_the_rest, .init = own_pages)
{
    const size_t len = PAGES * page();
    unsigned char *p = adopted_pages(len, 3);
    cr_assert_eq(munmap(p + 6 * page(), 4 * page()), 0);
    cr_expect(filled(p, 6 * page(), 3));
    cr_expect(filled_from(p + 10 * page(), 6 * page(), 10 * page(), 3));
    /* A new private mapping in the hole is not taken for the old buffer. */
    void *hole = mmap(p + 6 * page(), 4 * page(), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    cr_assert_eq(hole, p + 6 * page());
    fold_mem_place_t place;
    cr_expect_eq(fold_mem_adopt(p, len, &place), 0, "a buffer with new pages found adopted");
    munmap(p, len);
    fold_mem_adopt_stats_t s;
    fold_mem_adopt_stats(&s);
    cr_expect_eq(s.pieces, 0);
}

Test(mem_adopt, mremap_moves_the_bytes_into_private_memory, .init = own_pages)
{
    const size_t len = PAGES * page();
    unsigned char *p = adopted_pages(len, 4);
    unsigned char *q = mremap(p, len, 4 * len, MREMAP_MAYMOVE);
    cr_assert_neq(q, MAP_FAILED);
    cr_expect(filled(q, len, 4), "mremap lost the bytes");
    char perms[8];
    perms_at(q, perms);
    cr_expect_str_eq(perms, "rw-p");
    munmap(q, 4 * len);
}

Test(mem_adopt, a_forked_child_writes_its_own_copy, .init = own_pages)
{
    const size_t len = PAGES * page();
    unsigned char *p = adopted_pages(len, 5);
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        int ok = filled(p, len, 5);
        memset(p, 0x5A, len);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child saw other bytes");
    cr_expect(filled(p, len, 5), "the child's writes reached the parent");
    fold_mem_place_t place;
    cr_expect_eq(fold_mem_adopt(p, len, &place), 1, "the parent's buffer stays adopted");
    munmap(p, len);
}

Test(mem_adopt, heap_buffers_freed_and_trimmed)
{
    const size_t len = PAGES * page();
    unsigned char *p = NULL;
    cr_assert_eq(posix_memalign((void **)&p, page(), len), 0);
    if (SANITIZER_MALLOC) {
        fold_mem_place_t place;
        for (int pass = 0; pass < 2; pass++) {
            cr_expect_eq(fold_mem_adopt(p, len, &place), 0, "adopted from a sanitizer's heap");
        }
        free(p);
        return;
    }
    fill(p, len, 6);
    adopt(p, len);
    cr_expect(filled(p, len, 6));
    free(p);
    malloc_trim(0);   /* gives the free pages back: glibc's own madvise */
    unsigned char *q = calloc(1, len);
    cr_assert_not_null(q);
    cr_expect(all_zero(q, len), "calloc's memory holds bytes");
    free(q);
    /* Big blocks come from mmap and go back with munmap. */
    const size_t big = 64u << 20;
    cr_assert_eq(posix_memalign((void **)&p, page(), big), 0);
    memset(p, 1, big);
    adopt(p, big);
    free(p);
    fold_mem_adopt_stats_t s;
    fold_mem_adopt_stats(&s);
    cr_expect_eq(s.exposed, 0, "a freed block is still offered to peers");
}

/* Passes are counted per buffer: a new one where an unmapped buffer lay starts from
 * its first (a program freeing one array and allocating the next at the same address
 * must not inherit its passes), and counting goes on across notes and calls. */
Test(mem_adopt, a_new_buffer_at_an_old_address_counts_anew, .init = own_pages)
{
    const size_t len = 64 * page();
    fold_mem_place_t place;
    char *p = fresh_pages(len);
    fold_mem_adopt_note(p, len);
    fold_mem_adopt_note(p, len);
    cr_expect(fold_mem_adopt_would_after(p, len, 3), "the third pass would adopt");
    cr_assert_eq(munmap(p, len), 0);
    char *q = mmap(p, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    cr_assert_eq(q, p, "the address came back elsewhere");
    cr_expect_not(fold_mem_adopt_would_after(q, len, 3), "passes inherited from a freed buffer");
    cr_expect_eq(fold_mem_adopt_after(q, len, 3, &place), 0, "adopted at its first pass");
    cr_expect_eq(fold_mem_adopt_after(q, len, 3, &place), 0, "adopted at its second pass");
    cr_expect_eq(fold_mem_adopt_after(q, len, 3, &place), 1, "not adopted at its third pass");
    cr_expect_eq(fold_mem_adopt_after(q, len, 0, &place), 1, "adopted memory found");
    munmap(q, len);
}

/* A buffer passed with a larger count keeps its file, which grows: only the new
 * part is copied (adopted_bytes), and peers find the file at its new size. */
static void grown_buffer_adopted_again(void)
{
    const size_t len = PAGES * page();
    unsigned char *p = fresh_pages(2 * len);
    fill(p, 2 * len, 7);
    fold_mem_adopt_stats_t before, s;
    fold_mem_adopt_stats(&before);
    const fold_mem_place_t small = adopt(p, len);
    const fold_mem_place_t grown = adopt(p, 2 * len);
    cr_expect(filled(p, 2 * len, 7));
    cr_expect_eq(grown.ino, small.ino, "the grown buffer moved to another file");
    cr_expect_eq(grown.bytes, 2 * len);
    struct stat st;
    cr_assert_eq(fstat(grown.fd, &st), 0);
    cr_expect_eq((size_t)st.st_size, 2 * len);
    fold_mem_adopt_stats(&s);
    cr_expect_eq(s.adopted_bytes - before.adopted_bytes, 2 * len, "the first part copied again");
    cr_expect_eq(s.exposed, 1);
    cr_expect_eq(s.pieces, 1);
    /* Written through the new part's mapping, read back through the file. */
    p[len + 5] = 99;
    unsigned char byte = 0;
    cr_assert_eq(pread(grown.fd, &byte, 1, (off_t)(len + 5)), 1);
    cr_expect_eq(byte, 99);
    munmap(p, 2 * len);
}

Test(mem_adopt, a_grown_buffer_is_adopted_again, .init = own_pages)
{
    grown_buffer_adopted_again();
}

/* What kernels before 6.11 tell (no PROCMAP_QUERY): the text of /proc/self/maps. */
Test(mem_adopt, a_grown_buffer_is_adopted_again_by_the_maps_text, .init = own_pages)
{
    fold_mem_maps_read_text(1);
    grown_buffer_adopted_again();
}

/* An adoption spread over 4 calls moves a quarter of the buffer's pages at each pass
 * from the one that starts it, the bytes written between the passes kept, and the
 * buffer lies in fold memory from the pass that moves the last: one file, each page
 * copied once, and no pass but the last said to end in fold memory. */
static void adopted_in_steps(void)
{
    const size_t len = PAGES * page(), quarter = len / 4;
    unsigned char *p = fresh_pages(len);
    fill(p, len, 3);
    fold_mem_adopt_stats_t before, s;
    fold_mem_adopt_stats(&before);
    fold_mem_place_t place;
    cr_expect_eq(fold_mem_adopt_would_in_steps(p, len, 2, 4), 0, "the first pass only counts");
    cr_expect_eq(fold_mem_adopt_in_steps(p, len, 2, 4, &place), 0);
    cr_expect_eq(fold_mem_adopt_under_way(p, len), 0);
    for (size_t step = 1; step <= 4; step++) {
        cr_expect_eq(fold_mem_adopt_would_in_steps(p, len, 2, 4), step == 4,
                     "pass %zu said to end in fold memory", step + 1);
        const int whole = fold_mem_adopt_in_steps(p, len, 2, 4, &place);
        cr_expect_eq(whole, step == 4, "pass %zu", step + 1);
        fold_mem_adopt_stats(&s);
        cr_expect_eq(s.adopted_bytes - before.adopted_bytes, step * quarter,
                     "pass %zu moved %llu bytes in all", step + 1,
                     (unsigned long long)(s.adopted_bytes - before.adopted_bytes));
        cr_expect_eq(s.pieces, 1);
        cr_expect_eq(fold_mem_adopt_under_way(p, len), step < 4);
        cr_expect(filled(p, len, (unsigned)(step + 2)), "bytes lost at pass %zu", step + 1);
        fill(p, len, (unsigned)(step + 3));   /* the program writes between its calls */
    }
    cr_assert_geq(place.fd, 0);
    struct stat st;
    cr_assert_eq(fstat(place.fd, &st), 0);
    cr_expect_eq((size_t)st.st_size, len);
    cr_expect_eq(place.bytes, len);
    /* The last write went through the shared pages into the file. */
    unsigned char byte = 0;
    cr_assert_eq(pread(place.fd, &byte, 1, (off_t)(len - 3)), 1);
    cr_expect_eq(byte, (unsigned char)((len - 3) * 7 + 7));
    char perms[8];
    perms_at(p + len - 1, perms);
    cr_expect_eq(perms[3], 's', "the last page is not shared: %s", perms);
    munmap(p, len);
}

Test(mem_adopt, an_adoption_in_steps_moves_a_share_a_pass, .init = own_pages)
{
    adopted_in_steps();
}

/* A buffer given back halfway through its adoption: what is left of it keeps its
 * bytes, is no longer offered to peers, and its adoption does not go on. */
Test(mem_adopt, a_buffer_released_halfway_through_its_adoption, .init = own_pages)
{
    const size_t len = PAGES * page();
    unsigned char *p = fresh_pages(len);
    fill(p, len, 5);
    fold_mem_place_t place;
    for (int pass = 0; pass < 3; pass++) {
        cr_expect_eq(fold_mem_adopt_in_steps(p, len, 2, 4, &place), 0);
    }
    cr_assert_eq(fold_mem_adopt_under_way(p, len), 1);
    /* Half of it moved: a release from a quarter in takes moved pages with it. */
    cr_assert_eq(munmap(p + len / 4, len - len / 4), 0);
    fold_mem_adopt_stats_t s;
    fold_mem_adopt_stats(&s);
    cr_expect_eq(s.exposed, 0, "a buffer released in part is still offered to peers");
    cr_expect(filled(p, len / 4, 5));
    cr_expect_eq(fold_mem_adopt_under_way(p, len / 4), 0, "the adoption goes on");
    cr_expect_eq(fold_mem_adopt_in_steps(p, len / 4, 2, 4, &place), 0,
                 "the rest of a released buffer adopted without its passes");
    munmap(p, len / 4);
    fold_mem_adopt_stats(&s);
    cr_expect_eq(s.pieces, 0);
}

static void other_memory_left_alone(void)
{
    const size_t len = PAGES * page();
    fold_mem_place_t place;
    /* Not page-aligned, not whole pages. */
    unsigned char *p = fresh_pages(len);
    for (int pass = 0; pass < 2; pass++) {
        cr_expect_eq(fold_mem_adopt(p + 64, len - page(), &place), 0);
        cr_expect_eq(fold_mem_adopt(p, len - 64, &place), 0);
    }
    /* Read-only, and shared file memory. */
    cr_assert_eq(mprotect(p, len, PROT_READ), 0);
    for (int pass = 0; pass < 2; pass++) {
        cr_expect_eq(fold_mem_adopt(p, len, &place), 0, "read-only memory adopted");
    }
    munmap(p, len);
    FILE *f = tmpfile();
    cr_assert_not_null(f);
    cr_assert_eq(ftruncate(fileno(f), (off_t)len), 0);
    unsigned char *file = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fileno(f), 0);
    cr_assert_neq(file, MAP_FAILED);
    for (int pass = 0; pass < 2; pass++) {
        cr_expect_eq(fold_mem_adopt(file, len, &place), 0, "a file's pages adopted");
    }
    munmap(file, len);
    fclose(f);
    /* The stack. */
    unsigned char stack[3 * 4096];
    unsigned char *s = (unsigned char *)(((uintptr_t)stack + 4095) & ~(uintptr_t)4095);
    if (page() == 4096) {
        for (int pass = 0; pass < 2; pass++) {
            cr_expect_eq(fold_mem_adopt(s, 4096, &place), 0, "stack pages adopted");
        }
    }
    fold_mem_adopt_stats_t st;
    fold_mem_adopt_stats(&st);
    cr_expect_eq(st.pieces, 0);
}

Test(mem_adopt, other_memory_is_left_alone, .init = own_pages)
{
    other_memory_left_alone();
}

Test(mem_adopt, other_memory_is_left_alone_by_the_maps_text, .init = own_pages)
{
    fold_mem_maps_read_text(1);
    other_memory_left_alone();
}

/* fold_mem_maps_plain's answer both ways, which must agree: 1 or 0, -1 where they
 * differ. */
static int plain_both_ways(const void *lo, size_t len, const char *ours)
{
    const uintptr_t a = (uintptr_t)lo, b = a + len;
    fold_mem_maps_read_text(0);
    const int query = fold_mem_maps_plain(a, b, ours);
    fold_mem_maps_read_text(1);
    const int text = fold_mem_maps_plain(a, b, ours);
    fold_mem_maps_read_text(0);
    return query == text ? query : -1;
}

Test(mem_adopt, the_kernels_query_and_the_maps_text_agree)
{
    const size_t len = PAGES * page();
    unsigned char *anon = mmap(NULL, 3 * len, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(anon, MAP_FAILED);
    cr_expect_eq(plain_both_ways(anon, 3 * len, "/memfd:x"), 1, "anonymous memory");
    /* Three mappings side by side: private, read-only, private. */
    cr_assert_eq(mprotect(anon + len, len, PROT_READ), 0);
    cr_expect_eq(plain_both_ways(anon, len, "/memfd:x"), 1, "the first part");
    cr_expect_eq(plain_both_ways(anon, 3 * len, "/memfd:x"), 0, "a read-only part within");
    cr_expect_eq(plain_both_ways(anon + len, len, "/memfd:x"), 0, "read-only memory");
    /* An unmapped hole. */
    cr_assert_eq(munmap(anon + len, len), 0);
    cr_expect_eq(plain_both_ways(anon, 3 * len, "/memfd:x"), 0, "a hole within");
    cr_expect_eq(plain_both_ways(anon + len, len, "/memfd:x"), 0, "unmapped memory");
    /* A memfd of the name asked about, mapped over the last part, joins it to plain
     * memory; another name does not. */
    int fd = memfd_create("fold-maps-test", MFD_CLOEXEC);
    cr_assert_geq(fd, 0);
    cr_assert_eq(ftruncate(fd, (off_t)len), 0);
    unsigned char *over = mmap(anon + 2 * len, len, PROT_READ | PROT_WRITE,
                               MAP_SHARED | MAP_FIXED, fd, 0);
    cr_assert_eq(over, anon + 2 * len);
    cr_expect_eq(plain_both_ways(over, len, "/memfd:fold-maps-test"), 1, "our file");
    cr_expect_eq(plain_both_ways(over, len, "/memfd:fold-maps"), 0, "a longer name");
    cr_expect_eq(plain_both_ways(over, len, "/memfd:x"), 0, "another file");
    close(fd);
    munmap(anon, len);
    munmap(over, len);
    /* The heap, the stack, a program's text. */
    unsigned char *heap = malloc(4 * page());
    cr_assert_not_null(heap);
    unsigned char *whole = (unsigned char *)(((uintptr_t)heap + page() - 1) & ~(page() - 1));
    cr_expect_eq(plain_both_ways(whole, page(), "/memfd:x"), 1, "the heap");
    free(heap);
    unsigned char stack[3 * 4096];
    unsigned char *s = (unsigned char *)(((uintptr_t)stack + 4095) & ~(uintptr_t)4095);
    cr_expect_eq(plain_both_ways(s, 1, "/memfd:x"), 0, "the stack");
    uintptr_t code = (uintptr_t)&plain_both_ways & ~(uintptr_t)(page() - 1);
    cr_expect_eq(plain_both_ways((void *)code, page(), "/memfd:x"), 0, "the program's text");
}

/* ---- single copy on adopted buffers ----------------------------------------- */

#define CALLS 5
#define COUNT (160 * 1024 + 7)   /* 640 KiB of float32 and a few: several chunks */

/* The kernel's single copy slow, the segment's copies and folds not (whatever the
 * build measured; unoptimised kernels: the L2 rates too), and adopting all but free:
 * buffers move into fold memory at their second pass, whose mechanics these tests
 * check (its price: adopt_pricing below). */
#define SLOW_KERNEL_MODEL                                                               \
    "generic,copy_gbs=20,copy_mem_gbs=20,reduce_gbs=20,reduce_mem_gbs=20,shm_gbs=20,"  \
    "shm_write_gbs=20,shm_fold_gbs=20,shm_fold_far_gbs=20,shm_reduce_gbs=20,"          \
    "copy_l2_gbs=20,reduce_l2_gbs=20,cma_gbs=0.5,cma_us=50"
static const char AGREE_MODEL[] = SLOW_KERNEL_MODEL ",adopt_gbs=1000";

typedef struct adopt_case {
    int    allreduce;
    size_t skew;   /* bytes from a page's start to the buffers' (malloc's 16) */
} adopt_case_t;

static int adopt_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    const adopt_case_t *ac = arg;
    const int allreduce = ac->allreduce;
    fold_comm_h w = fold_comm_world(ctx);
    fold_config_set(ctx, "ALLREDUCE_ALG", "cma@128k");
    fold_config_set(ctx, "REDUCE_ALG", "cma@128k");
    fold_config_set(ctx, "MODEL", AGREE_MODEL);
    const size_t bytes = COUNT * sizeof(float), span = bytes + ac->skew + page();
    char *in_pages = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *out_pages = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    float *want = malloc(bytes);
    if (in_pages == MAP_FAILED || out_pages == MAP_FAILED || want == NULL) {
        return 1;
    }
    float *in = (float *)(in_pages + ac->skew), *out = (float *)(out_pages + ac->skew);
    int bad = 0;
    for (int c = 0; c < CALLS && !bad; c++) {
        /* New inputs every call: the peers must read them, not an old copy. */
        for (size_t i = 0; i < COUNT; i++) {
            in[i] = (float)((rank + 1) * (c + 1) + (int)(i % 13));
            want[i] = 0;
            for (int r = 0; r < size; r++) {
                want[i] += (float)((r + 1) * (c + 1) + (int)(i % 13));
            }
        }
        memset(out, 0xFF, bytes);
        const int root = c % size;
        int st = allreduce ? fold_allreduce(in, out, COUNT, FOLD_FLOAT32, FOLD_OP_SUM, w)
                           : fold_reduce(in, out, COUNT, FOLD_FLOAT32, FOLD_OP_SUM, root, w);
        const int has_out = allreduce || rank == root;
        bad = st != FOLD_OK || (has_out && memcmp(out, want, bytes) != 0);
        if (bad) {
            fprintf(stderr, "rank %d, call %d (%s, root %d): %s\n", rank, c,
                    allreduce ? "allreduce" : "reduce", root,
                    st != FOLD_OK ? fold_status_string(st) : "wrong result");
        }
    }
    fold_mem_place_t place;
    if (!bad && (fold_mem_adopt(in, bytes, &place) != 1 ||
                 place.pages_only != (ac->skew % page() != 0 || bytes % page() != 0))) {
        fold_mem_adopt_stats_t s;
        fold_mem_adopt_stats(&s);
        fprintf(stderr, "rank %d: its IN was not adopted after %d calls as it lies (%d "
                "pieces, %d exposed, %d wasted)\n", rank, CALLS, s.pieces, s.exposed, s.wasted);
        bad = 1;
    }
    uint64_t copies, views;
    int mapped;
    fold_node_xmap_stats(((fold_comm_t *)w)->node, &mapped, &copies, &views);
    if (!bad && copies + views == 0) {
        fprintf(stderr, "rank %d: nothing went through a mapping\n", rank);
        bad = 1;
    }
    munmap(in_pages, span);
    munmap(out_pages, span);
    free(want);
    return bad;
}

/* Buffers from a page's start (whole pages but the last), and from malloc's 16 bytes
 * in (partial pages at both ends, which peers copy through the kernel). */
Test(mem_adopt, single_copy_on_adopted_buffers, .init = own_pages)
{
    for (size_t skew = 0; skew <= 16; skew += 16) {
        for (int allreduce = 0; allreduce < 2; allreduce++) {
            adopt_case_t ac = {allreduce, skew};
            cr_expect_eq(lh_run(2, adopt_rank, &ac), 0, "%s, 2 ranks, skew %zu",
                         allreduce ? "allreduce" : "reduce", skew);
            cr_expect_eq(lh_run(3, adopt_rank, &ac), 0, "%s, 3 ranks, skew %zu",
                         allreduce ? "allreduce" : "reduce", skew);
        }
    }
}

/* ---- what adopting costs ---------------------------------------------------------- */

#define ROTATING 16   /* buffer pairs used in turn, as a training loop's buckets */

/* An allreduce of COUNT on in/out with inputs of call c; 0 when its sums are right. */
static int priced_call(fold_comm_h w, int rank, int size, float *in, float *out, int c)
{
    for (size_t i = 0; i < COUNT; i++) {
        in[i] = (float)((rank + 1) * (c + 1) + (int)(i % 7));
    }
    if (fold_allreduce(in, out, COUNT, FOLD_FLOAT32, FOLD_OP_SUM, w) != FOLD_OK) {
        return 1;
    }
    for (size_t i = 0; i < COUNT; i++) {
        float want = 0;
        for (int r = 0; r < size; r++) {
            want += (float)((r + 1) * (c + 1) + (int)(i % 7));
        }
        if (out[i] != want) {
            return 1;
        }
    }
    return 0;
}

/* Whether buf's whole pages lie in adopted memory (its last page, partly the next
 * buffer's, stays where it was). */
static int in_fold_memory(const void *buf)
{
    return fold_mem_adopt_would_after(buf, COUNT * sizeof(float), 0);
}

/* Adopting at 0.05 GB/s (a slow kernel's page faults): the calls must save its price
 * first. Sixteen pairs used twice each stay on the heap; one pair used on starts moving
 * into fold memory exactly at the pass selection priced, not before, and lies there
 * once the calls its adoption is spread over have each moved their share. */
static int priced_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)arg;
    fold_comm_h w = fold_comm_world(ctx);
    fold_config_set(ctx, "ALLREDUCE_ALG", "cma@128k");
    fold_config_set(ctx, "MODEL", SLOW_KERNEL_MODEL ",adopt_gbs=0.05");
    const size_t bytes = COUNT * sizeof(float);
    char *pages = mmap(NULL, 2 * ROTATING * bytes + 2 * ROTATING * page(), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pages == MAP_FAILED) {
        return 1;
    }
    float *buf[2 * ROTATING];
    for (int b = 0; b < 2 * ROTATING; b++) {
        buf[b] = (float *)(pages + (size_t)b * (bytes + page()));
    }
    float x = 1, sum;
    int bad = fold_allreduce(&x, &sum, 1, FOLD_FLOAT32, FOLD_OP_SUM, w) != FOLD_OK;   /* set-up */
    const int passes = fold_select_adopt_passes((fold_comm_t *)w, FOLD_COLL_ALLREDUCE, COUNT,
                                                FOLD_FLOAT32, FOLD_OP_SUM);
    const int steps = fold_select_adopt_steps((fold_comm_t *)w, FOLD_COLL_ALLREDUCE, COUNT,
                                              FOLD_FLOAT32);
    if (passes < 3 || passes > 200 || steps < 2 || steps > FOLD_SELECT_ADOPT_MAX_STEPS) {
        fprintf(stderr, "rank %d: adopting is priced to pay at pass %d, in %d steps\n", rank,
                passes, steps);
        bad = 1;
    }
    for (int c = 0; c < 2 * ROTATING && !bad; c++) {
        const int pair = c % ROTATING;
        bad = priced_call(w, rank, size, buf[2 * pair], buf[2 * pair + 1], c);
    }
    for (int b = 0; b < 2 * ROTATING && !bad; b++) {
        if (in_fold_memory(buf[b])) {
            fprintf(stderr, "rank %d: buffer %d adopted after two passes\n", rank, b);
            bad = 1;
        }
    }
    /* Pair 0 has had 2 passes: passes - 3 more leave it on the heap, one more moves it. */
    for (int c = 2; c < passes - 1 && !bad; c++) {
        bad = priced_call(w, rank, size, buf[0], buf[1], c);
    }
    if (!bad && (in_fold_memory(buf[0]) || in_fold_memory(buf[1]))) {
        fprintf(stderr, "rank %d: adopted before pass %d\n", rank, passes);
        bad = 1;
    }
    /* From that pass on, each moves a share of them (whole pages: the shares may take
     * fewer passes than steps), and they lie in fold memory from the last. */
    int last = 0;
    for (int c = passes; c < passes + steps && last == 0 && !bad; c++) {
        bad = priced_call(w, rank, size, buf[0], buf[1], c);
        const int whole = in_fold_memory(buf[0]) && in_fold_memory(buf[1]);
        const int moving = fold_mem_adopt_under_way(buf[0], COUNT * sizeof(float)) &&
                           fold_mem_adopt_under_way(buf[1], COUNT * sizeof(float));
        last = whole ? c : 0;
        if (!bad && whole == moving) {
            fprintf(stderr, "rank %d: pass %d of an adoption from %d in %d steps: %s\n", rank,
                    c, passes, steps, whole ? "adopted and under way" : "not started");
            bad = 1;
        }
    }
    if (!bad && last < passes + steps / 2) {
        fprintf(stderr, "rank %d: adopted at pass %d, from %d in %d steps\n", rank, last,
                passes, steps);
        bad = 1;
    }
    /* Used on, as a loop that paid for it does (adoption counts buffers released
     * before their third use as waste, and stops after a few). */
    for (int c = last + 1; c < last + 3 && !bad; c++) {
        bad = priced_call(w, rank, size, buf[0], buf[1], c);
    }
    munmap(pages, 2 * ROTATING * bytes + 2 * ROTATING * page());
    return bad;
}

Test(mem_adopt, adopting_waits_for_the_calls_to_pay_for_it, .init = own_pages)
{
    cr_expect_eq(lh_run(2, priced_rank, NULL), 0, "2 ranks");
    cr_expect_eq(lh_run(3, priced_rank, NULL), 0, "3 ranks");
}

/* ---- a loop on another algorithm --------------------------------------------- */

/* The model of test_mem_select (AGREE_MODEL), dpml and cma to choose from: dpml on the
 * heap, cma in fold memory. */
static const char AGREE_RULES[] = "allreduce:0-inf:dpml,cma#reduce:0-inf:dpml,cma";
#define BIG (300 * 1024)   /* 1.2 MB of float32 in whole pages: blocking calls agree on
                              placement, and every owner's block lies in mapped pages */
#define LOOP 4

typedef struct loop_case {
    int reuse;   /* which ranks pass the same buffers every call: -1 all, else that one */
} loop_case_t;

/* Folds through mappings so far (none before the first call sets the node up). */
static int views_of(fold_comm_h w)
{
    int mapped;
    uint64_t copies, views = 0;
    const fold_node_t *node = ((fold_comm_t *)w)->node;
    if (node != NULL) {
        fold_node_xmap_stats(node, &mapped, &copies, &views);
    }
    return (int)views;
}

/* LOOP blocking allreduces: on the same buffers (each rank or one), or on new ones each
 * call (kept till the end, so that none comes back at an old address). */
static int loop_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    const loop_case_t *lc = arg;
    fold_comm_h w = fold_comm_world(ctx);
    fold_config_set(ctx, "TUNE", AGREE_RULES);
    fold_config_set(ctx, "MODEL", AGREE_MODEL);
    const int reuse = lc->reuse < 0 || lc->reuse == rank;
    const size_t bytes = BIG * sizeof(float), span = bytes;
    char *pages[LOOP][2];
    float *want = malloc(bytes);
    int bad = want == NULL;
    for (int c = 0; c < LOOP; c++) {
        for (int b = 0; b < 2; b++) {
            pages[c][b] = reuse && c > 0 ? pages[0][b]
                                         : mmap(NULL, span, PROT_READ | PROT_WRITE,
                                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            bad |= pages[c][b] == MAP_FAILED;
        }
    }
    const int views0 = views_of(w);
    for (int c = 0; c < LOOP && !bad; c++) {
        float *in = (float *)pages[c][0], *out = (float *)pages[c][1];
        for (size_t i = 0; i < BIG; i++) {
            in[i] = (float)((rank + 1) * (c + 1) + (int)(i % 11));
            want[i] = 0;
            for (int r = 0; r < size; r++) {
                want[i] += (float)((r + 1) * (c + 1) + (int)(i % 11));
            }
        }
        int st = fold_allreduce(in, out, BIG, FOLD_FLOAT32, FOLD_OP_SUM, w);
        if (st != FOLD_OK || memcmp(out, want, bytes) != 0) {
            fprintf(stderr, "rank %d, call %d: %s\n", rank, c,
                    st != FOLD_OK ? fold_status_string(st) : "wrong result");
            bad = 1;
        }
    }
    /* Every rank reusing: the second call agreed on single copy, which adopted the
     * buffers; the later ones read each other's through mappings. One rank alone: all
     * stayed on dpml, whose reads and writes go through the segment. */
    const int views = views_of(w) - views0;
    fold_mem_place_t place;
    const int adopted = fold_mem_adopt(pages[0][0], bytes, &place);
    if (!bad && (lc->reuse < 0 ? views == 0 || !adopted : views != 0)) {
        fprintf(stderr, "rank %d (%s): %d folds through mappings, IN %sadopted\n", rank,
                lc->reuse < 0 ? "all reuse" : "one reuses", views, adopted ? "" : "not ");
        bad = 1;
    }
    for (int c = 0; c < LOOP; c++) {
        for (int b = 0; b < 2 && (c == 0 || !reuse); b++) {
            munmap(pages[c][b], span);
        }
    }
    free(want);
    return bad;
}

/* A loop of large blocking calls whose heap choice is not single copy but whose choice
 * in fold memory is: the ranks agree before each call (coll_api.c, select_agreed) and
 * move their buffers into fold memory together; where one rank brings new buffers
 * every call, every call runs the heap's choice on every rank, none fails apart. */
Test(mem_adopt, a_loop_on_another_algorithm_moves_into_fold_memory, .init = own_pages)
{
    loop_case_t all = {-1};
    cr_expect_eq(lh_run(2, loop_rank, &all), 0, "2 ranks, all reuse");
    cr_expect_eq(lh_run(3, loop_rank, &all), 0, "3 ranks, all reuse");
}

/* In a process of its own: a buffer at an address an earlier run passed counts as
 * passed before (adoption knows buffers by their pages), and new ones would not be new. */
Test(mem_adopt, one_rank_alone_in_a_loop_keeps_all_on_the_heaps_choice, .init = own_pages)
{
    loop_case_t one = {0};
    cr_expect_eq(lh_run(3, loop_rank, &one), 0, "3 ranks, one reuses");
}

/* The shim's advice (fold_serve_advice) prices a call as its loop will run: where the
 * node adopts buffers, in fold memory. Single copy alone on the node, its kernel path
 * slow (AGREE_MODEL): priced on the heap, a flat algorithm would beat it; in fold
 * memory, fold serves. */
static int advice_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    const int adopt = *(const int *)arg;
    fold_comm_h w = fold_comm_world(ctx);
    fold_config_set(ctx, "TUNE", "allreduce:0-inf:n1-1:ppn2-inf:cma");
    fold_config_set(ctx, "MODEL", AGREE_MODEL);
    float x = (float)rank, sum = 0;
    int serve = -1;
    const char *source = NULL;
    /* One call sets the node up (lazily); the advice asks it whether it adopts. */
    int bad = fold_allreduce(&x, &sum, 1, FOLD_FLOAT32, FOLD_OP_SUM, w) != FOLD_OK ||
              fold_serve_advice(w, "allreduce", (size_t)4 << 20, &serve, &source) != FOLD_OK;
    const int adopts = adopt && fold_mem_adopt_usable();
    if (!bad && serve != adopts) {
        fprintf(stderr, "rank %d of %d, adoption %s: fold %s 4 MiB (%s)\n", rank, size,
                adopts ? "on" : "off", serve ? "serves" : "does not serve", source);
        bad = 1;
    }
    return bad;
}

Test(mem_adopt, the_shims_advice_prices_a_loop_in_fold_memory, .init = own_pages)
{
    for (int adopt = 0; adopt <= 1; adopt++) {
        setenv("FOLD_ADOPT", adopt ? "auto" : "off", 1);
        cr_expect_eq(lh_run(2, advice_rank, &adopt), 0, "2 ranks, adoption %d", adopt);
        cr_expect_eq(lh_run(3, advice_rank, &adopt), 0, "3 ranks, adoption %d", adopt);
    }
    unsetenv("FOLD_ADOPT");
}

/* ---- two threads passing one buffer ------------------------------------------ */

typedef struct racer {
    unsigned char   *buf;
    size_t           len;
    pthread_barrier_t *start;
    int              adopted;
} racer_t;

static void *race(void *arg)
{
    racer_t *r = arg;
    fold_mem_place_t place;
    pthread_barrier_wait(r->start);
    for (int pass = 0; pass < 4; pass++) {
        r->adopted |= fold_mem_adopt(r->buf, r->len, &place);
    }
    return NULL;
}

Test(mem_adopt, two_threads_adopt_one_buffer_once, .init = own_pages)
{
    const size_t len = PAGES * page();
    for (int round = 0; round < 100; round++) {
        unsigned char *p = fresh_pages(len);
        fill(p, len, (unsigned)round);
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, 2);
        racer_t r[2] = {{p, len, &start, 0}, {p, len, &start, 0}};
        pthread_t t[2];
        for (int i = 0; i < 2; i++) {
            cr_assert_eq(pthread_create(&t[i], NULL, race, &r[i]), 0);
        }
        for (int i = 0; i < 2; i++) {
            pthread_join(t[i], NULL);
        }
        pthread_barrier_destroy(&start);
        cr_expect(r[0].adopted && r[1].adopted, "round %d: a thread never found it adopted",
                  round);
        fold_mem_adopt_stats_t s;
        fold_mem_adopt_stats(&s);
        cr_expect_eq(s.pieces, 1, "round %d: %d pieces for one buffer", round, s.pieces);
        cr_expect(filled(p, len, (unsigned)round), "round %d: the bytes changed", round);
        /* The file peers would map is the one under the buffer. */
        fold_mem_place_t place;
        cr_assert_eq(fold_mem_adopt(p, len, &place), 1);
        unsigned char *alias = peer_view(&place, len);
        alias[len - 1] ^= 0xFF;
        cr_expect_eq(p[len - 1], alias[len - 1], "round %d: peers would map another file",
                     round);
        munmap(alias, len);
        munmap(p, len);
    }
}

/* ---- fork while another thread gives memory back ----------------------------- */

static volatile int trimming;

static void *trim_loop(void *arg)
{
    (void)arg;
    /* Blocks from the heap, whose top free() gives back at once (brk, under malloc's
     * lock), not from mmap. */
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 10);
    while (trimming) {
        void *p = malloc(512u << 10);
        if (p != NULL) {
            memset(p, 1, 512u << 10);
        }
        free(p);
        malloc_trim(0);   /* madvise under malloc's lock: the release waits for fold's */
    }
    return NULL;
}

/* Forks never deadlock with a thread whose free() is reporting a release. */
Test(mem_adopt, fork_beside_a_freeing_thread, .timeout = 60)
{
    const size_t len = PAGES * page();
    unsigned char *p = fresh_pages(len);
    fill(p, len, 9);
    if (SANITIZER_MALLOC) {
        fold_mem_adopt_trust_any_allocator();
    }
    adopt(p, len);   /* pieces live: every release takes fold's lock */
    trimming = 1;
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, trim_loop, NULL), 0);
    int bad = 0;
    for (int i = 0; i < 300 && !bad; i++) {
        pid_t child = fork();
        if (child == 0) {
            _exit(filled(p, len, 9) ? 0 : 1);
        }
        int status = 0;
        bad = child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
              WEXITSTATUS(status) != 0;
    }
    trimming = 0;
    pthread_join(t, NULL);
    cr_expect(!bad, "a child saw other bytes, or a fork failed");
    munmap(p, len);
}
