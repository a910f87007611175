/*
 * Adopted buffers: a buffer a rank passes to single copy often enough (an iterative
 * solver's IN and OUT, a gradient bucket, a benchmark's loop) moves into fold memory
 * at the same address: at the pass selection says adopting has paid for itself by
 * then (fold_select_adopt_passes), the second at the earliest. Its pages are copied
 * into an anonymous shared-memory file, which is then mapped over them (mmap
 * MAP_FIXED): the bytes and the addresses stay,
 * and the other ranks of the node map the file (node/xmap.c) and copy at memcpy's
 * speed instead of the kernel's (process_vm_readv pins every page it copies).
 *
 * Shared pages behave like the private ones they replace except where memory is
 * given back or a process forks: after madvise(MADV_DONTNEED) a private page reads
 * zeros (allocators count on it) while a shared one keeps its bytes, mremap would
 * carry the sharing along, and a forked child would share the pages instead of
 * getting a copy. So every release of address space (munmap, mremap, MAP_FIXED over,
 * brk, madvise giving pages back, glibc's own calls from malloc and free included)
 * is reported here first, through UCX's memory events (libucm), and the adopted
 * pages it touches become private again, bytes kept, before it proceeds; a forked
 * child makes all of them private (pthread_atfork). Nothing else may be in use there:
 * the caller is giving those pages up or moving them. Adoption starts only where
 * UCX's hooks patch the functions themselves ("bistro": its "reloc" mode misses
 * glibc's internal calls) and a test munmap is seen, and only under glibc's own
 * malloc: another allocator (jemalloc, tcmalloc, a sanitizer's) may give memory back
 * through raw system calls nothing hears, and UCX would replace it with its own to
 * hear them.
 *
 * Only the buffer's own whole pages, in private anonymous writable memory (heap or
 * mmap, not the stack), are adopted: the bytes of no other object are ever copied. A
 * buffer that starts or ends inside a page (malloc's) moves its whole pages if they
 * are many; peers copy its partial pages at either end through the kernel. Mapping
 * over the buffer goes through libc, so every listener to memory events (a
 * registration cache of pinned pages) hears that its pages changed.
 *
 *   pieces: adopted ranges; "exposed" while a piece is a whole buffer as adopted,
 *   with its file open for peers; a release inside a piece privatises that part and
 *   leaves the rest as unexposed pieces (still shared, still watched).
 */
#define _GNU_SOURCE
#include "mem.h"
#include "log.h"

#include <ucm/api/ucm.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ADOPT_PIECES  256   /* adopted ranges watched at most */
#define ADOPT_SPARE   16    /* pieces kept free for splits by releases */
#define ADOPT_SEEN    128   /* buffers remembered while counting their passes */
/* Adopted buffers released before their third use: a program that passes each new
 * buffer exactly twice would pay two copies each for nothing, so adoption stops after
 * this many, unless as many were used more. */
#define ADOPT_WASTE_LIMIT 4
#define ADOPT_FILE_NAME   "fold-adopted"   /* its mappings are named "/memfd:fold-adopted" */
/* The least whole pages a buffer that starts or ends inside a page moves with: the
 * partial pages then cost two kernel calls in a call, small beside the call. */
#define ADOPT_MIN_PAGES_ONLY (256u << 10)

typedef struct piece {
    uintptr_t lo, hi;      /* hi 0: a free slot */
    uintptr_t goal;        /* where the buffer being adopted ends: beyond hi while its
                              adoption goes on over several calls (adopt_step) */
    uint64_t  file_off;    /* where lo lies in the file */
    uint64_t  ino;
    int       fd;          /* open while exposed, else -1 */
    uint32_t  uses;        /* calls that found it exposed, the adopting one counted */
} piece_t;

typedef struct seen {
    uintptr_t lo, hi;
    unsigned  passes;   /* calls that passed it so far */
} seen_t;

static piece_t         pieces[ADOPT_PIECES];
static seen_t          seen[ADOPT_SEEN];
static unsigned        seen_next;
static _Atomic int     npieces;       /* pieces in use: the event handler's quick look */
static _Atomic int     nseen;         /* buffers remembered: the same */
static int             top;           /* slots ever used: the lookups look no further */
static _Atomic int     state;         /* 0 untested, 1 usable, -1 not */
static unsigned        waste, useful;   /* adopted buffers released: before their
                                           third use, and after */
static uint64_t        adopted_bytes, privatised_bytes;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* One adoption at a time (two threads passing one buffer to two calls would map two
 * files over it); held across the mapping, whose event takes `lock`. */
static pthread_mutex_t adopting = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t  once = PTHREAD_ONCE_INIT;
/* The range this thread is mapping over right now: its release is the adoption. */
static __thread uintptr_t replacing_lo, replacing_hi;
static volatile int   probe_seen;   /* the self-test's munmap reached the handler */
static void *volatile probe_at;
static int            any_allocator;   /* tests: trust an interposed malloc */
static const char    *off_reason = "not tested yet";

/* Adoption stays off in this process, for `why`. */
static void stay_off(const char *why)
{
    off_reason = why;
    fold_debug("adopted buffers: off (%s)", why);
    atomic_store(&state, -1);
}

const char *fold_mem_adopt_why_off(void)
{
    fold_mem_adopt_usable();
    return atomic_load(&state) == 1 ? NULL : off_reason;
}

void fold_mem_adopt_trust_any_allocator(void)
{
    any_allocator = 1;
}

/* Whether malloc is glibc's own, not one interposed before it. */
static int glibc_malloc(void)
{
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    void *theirs = libc != NULL ? dlsym(libc, "malloc") : NULL;
    if (libc != NULL) {
        dlclose(libc);
    }
    return theirs != NULL && theirs == dlsym(RTLD_DEFAULT, "malloc");
}

/* Raw system calls: under the lock nothing may go through the hooked libc functions
 * (the handler would wait for the lock its own thread holds). */
static void *raw_mmap(void *at, size_t len, int prot, int flags, int fd, off_t off)
{
    return (void *)syscall(SYS_mmap, at, len, prot, flags, fd, off);
}

static void *raw_mremap(void *from, size_t len, void *to)
{
    return (void *)syscall(SYS_mremap, from, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, to);
}

/* [lo, hi) becomes private anonymous memory with the same bytes: copied into new
 * pages, which are then moved over it. 0, or -1 (the range stays shared). */
static int privatise(uintptr_t lo, uintptr_t hi)
{
    const size_t len = hi - lo;
    void *fresh = raw_mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (fresh == MAP_FAILED) {
        return -1;
    }
    memcpy(fresh, (void *)lo, len);
    if (raw_mremap(fresh, len, (void *)lo) == MAP_FAILED) {
        syscall(SYS_munmap, fresh, len);
        return -1;
    }
    privatised_bytes += len;
    return 0;
}

static piece_t *free_slot(void)
{
    for (int i = 0; i < ADOPT_PIECES; i++) {
        if (pieces[i].hi == 0) {
            top = i + 1 > top ? i + 1 : top;
            return &pieces[i];
        }
    }
    return NULL;
}

/* The piece stops being a buffer peers may map. Under the lock. */
static void unexpose(piece_t *p)
{
    if (p->fd >= 0) {
        close(p->fd);
        p->fd = -1;
        fold_mem_count_free();   /* peers drop their mappings of this process */
        if (p->uses < 3) {
            waste++;
        } else {
            useful++;
        }
    }
}

static void take_out(piece_t *p)
{
    *p = (piece_t){.fd = -1};
    atomic_fetch_sub_explicit(&npieces, 1, memory_order_relaxed);
}

/* [lo, hi) is being released or mapped over: the pieces it overlaps give that part
 * up (private again with its bytes unless this thread is mapping a new adoption
 * there) and keep the rest. Under the lock. */
static void release(uintptr_t lo, uintptr_t hi, int replaced)
{
    for (int i = 0; i < top; i++) {
        piece_t *p = &pieces[i];
        if (p->hi == 0 || p->hi <= lo || hi <= p->lo) {
            continue;
        }
        const uintptr_t x = p->lo > lo ? p->lo : lo, y = p->hi < hi ? p->hi : hi;
        if (!replaced) {
            privatise(x, y);
        }
        unexpose(p);
        const piece_t whole = *p;
        take_out(p);
        if (whole.lo < x) {   /* the part before stays shared */
            piece_t *left = free_slot();
            *left = (piece_t){.lo = whole.lo, .hi = x, .file_off = whole.file_off,
                              .ino = whole.ino, .fd = -1, .uses = 3};
            atomic_fetch_add_explicit(&npieces, 1, memory_order_relaxed);
        }
        if (y < whole.hi) {   /* and the part after, where a slot is left */
            piece_t *right = free_slot();
            if (right == NULL) {
                privatise(y, whole.hi);   /* never reached: ADOPT_SPARE */
                continue;
            }
            *right = (piece_t){.lo = y, .hi = whole.hi,
                               .file_off = whole.file_off + (y - whole.lo), .ino = whole.ino,
                               .fd = -1, .uses = 3};
            atomic_fetch_add_explicit(&npieces, 1, memory_order_relaxed);
        }
    }
}

static void forget_released(uintptr_t lo, uintptr_t hi);

static void on_unmapped(ucm_event_type_t type, ucm_event_t *event, void *arg)
{
    (void)type;
    (void)arg;
    const uintptr_t lo = (uintptr_t)event->vm_unmapped.address;
    const uintptr_t hi = lo + event->vm_unmapped.size;
    if (lo == (uintptr_t)probe_at) {
        probe_seen = 1;
    }
    if ((atomic_load_explicit(&npieces, memory_order_acquire) == 0 &&
         atomic_load_explicit(&nseen, memory_order_relaxed) == 0) ||
        hi <= lo) {
        return;
    }
    const int replaced = lo >= replacing_lo && hi <= replacing_hi && replacing_hi != 0;
    pthread_mutex_lock(&lock);
    release(lo, hi, replaced);
    if (!replaced) {
        forget_released(lo, hi);
    }
    pthread_mutex_unlock(&lock);
}

/* A forked child gets its own copy of every adopted page, as of private memory. The
 * fork waits for an adoption under way, but not for `lock`: a thread inside free()
 * holds malloc's lock while its release waits for `lock`, and fork takes malloc's
 * locks after these handlers, so holding `lock` here could deadlock both. The child
 * takes the table as it finds it (a release under way in another thread at that
 * instant may leave a part of a piece out: it stays shared in the child). */
static void before_fork(void)
{
    pthread_mutex_lock(&adopting);
}

static void after_fork_parent(void)
{
    pthread_mutex_unlock(&adopting);
}

static void after_fork_child(void)
{
    pthread_mutex_init(&lock, NULL);   /* only this thread is left */
    for (int i = 0; i < ADOPT_PIECES; i++) {
        if (pieces[i].hi != 0) {
            privatise(pieces[i].lo, pieces[i].hi);
            if (pieces[i].fd >= 0) {
                close(pieces[i].fd);
            }
            pieces[i] = (piece_t){.fd = -1};
        }
    }
    atomic_store(&npieces, 0);
    pthread_mutex_unlock(&adopting);
}

/* Whether [lo, hi) lies in private anonymous writable memory (not the stack), or in
 * fold's files: a buffer that grew over one adopted before (a benchmark's next size). */
static int plain_memory(uintptr_t lo, uintptr_t hi)
{
    return fold_mem_maps_plain(lo, hi, "/memfd:" ADOPT_FILE_NAME);
}

static void start(void)
{
    for (int i = 0; i < ADOPT_PIECES; i++) {
        pieces[i].fd = -1;
    }
    if (ucm_global_opts.mmap_hook_mode != UCM_MMAP_HOOK_BISTRO) {
        stay_off("UCX_MEM_MMAP_HOOK_MODE is not bistro: glibc's own releases of memory "
                 "would go unseen");
        return;
    }
    if (!any_allocator && !glibc_malloc()) {
        stay_off("malloc is not glibc's: another allocator may give memory back unseen");
        return;
    }
    if (ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, -1, on_unmapped, NULL) != UCS_OK) {
        stay_off("UCX's memory events could not be set up");
        return;
    }
    void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) {
        /* The first look at the mappings opens them, which costs many looks: here, not
         * inside a call. */
        plain_memory((uintptr_t)p, (uintptr_t)p + 4096);
        probe_at = p;
        munmap(p, 4096);
        probe_at = NULL;
    }
    if (!probe_seen || pthread_atfork(before_fork, after_fork_parent, after_fork_child) != 0) {
        ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, on_unmapped, NULL);
        stay_off(probe_seen ? "pthread_atfork failed"
                            : "UCX's memory events did not report a test munmap");
        return;
    }
    atomic_store(&state, 1);
}

int fold_mem_adopt_usable(void)
{
    pthread_once(&once, start);
    return atomic_load(&state) == 1;
}

/* The exposed piece holding [lo, hi), or NULL. Under the lock. */
static piece_t *exposed_holding(uintptr_t lo, uintptr_t hi)
{
    for (int i = 0; i < top; i++) {
        piece_t *p = &pieces[i];
        if (p->fd >= 0 && p->lo <= lo && hi <= p->hi) {
            return p;
        }
    }
    return NULL;
}

static void place_of(const piece_t *p, uintptr_t lo, fold_mem_place_t *place)
{
    *place = (fold_mem_place_t){.fd = p->fd, .ino = p->ino,
                                .off = p->file_off + (lo - p->lo),
                                .bytes = p->file_off + (p->hi - p->lo)};
}

/* The whole pages of [buf, buf + bytes), or 0 where they are fewer than
 * ADOPT_MIN_PAGES_ONLY bytes and the buffer does not start and end on a page: its
 * partial pages at either end are copied through the kernel, a call each. */
static int whole_pages(const void *buf, size_t bytes, uintptr_t *lo, uintptr_t *hi)
{
    const uintptr_t a = (uintptr_t)buf, b = a + bytes;
    if (buf == NULL || b <= a) {
        return 0;
    }
    fold_mem_whole_pages(a, bytes, (uintptr_t)sysconf(_SC_PAGESIZE), lo, hi);
    const int exact = *lo == a && *hi == b;
    return *hi > *lo && (exact || *hi - *lo >= ADOPT_MIN_PAGES_ONLY);
}

/* Where [lo, hi) is remembered as passed before, or -1. Under the lock. */
static int seen_at(uintptr_t lo, uintptr_t hi)
{
    for (int i = 0; i < ADOPT_SEEN; i++) {
        if (seen[i].lo == lo && seen[i].hi == hi) {
            return i;
        }
    }
    return -1;
}

/* Forgets remembered buffer i. Under the lock. */
static void forget(int i)
{
    seen[i] = (seen_t){0};
    atomic_fetch_sub_explicit(&nseen, 1, memory_order_relaxed);
}

/* Forgets the passes of every remembered buffer that [lo, hi) overlaps: memory given
 * back, a new buffer there later is another. Under the lock. */
static void forget_released(uintptr_t lo, uintptr_t hi)
{
    for (int i = 0; i < ADOPT_SEEN; i++) {
        if (seen[i].hi != 0 && seen[i].lo < hi && lo < seen[i].hi) {
            forget(i);
        }
    }
}

/* Remembers a first pass of [lo, hi), in place of the oldest. Under the lock. */
static void remember(uintptr_t lo, uintptr_t hi)
{
    if (seen[seen_next].hi == 0) {
        atomic_fetch_add_explicit(&nseen, 1, memory_order_relaxed);
    }
    seen[seen_next] = (seen_t){lo, hi, 1};
    seen_next = (seen_next + 1) % ADOPT_SEEN;
}

/* Counts a pass of [lo, hi): how many passed it so far, this one counted. Under the
 * lock. */
static unsigned count_pass(uintptr_t lo, uintptr_t hi)
{
    const int i = seen_at(lo, hi);
    if (i < 0) {
        remember(lo, hi);
        return 1;
    }
    return ++seen[i].passes;
}

/* Whether this pass of [lo, hi) is the `passes`-th or later (it is forgotten then, to
 * be adopted). Under the lock. */
static int passed_enough(uintptr_t lo, uintptr_t hi, int passes)
{
    if (count_pass(lo, hi) < (unsigned)passes) {
        return 0;
    }
    forget(seen_at(lo, hi));
    return 1;
}

/* Writes [from, hi) into fd at offset at, pwrite by pwrite: 1, or 0. */
static int write_file(int fd, uintptr_t from, uintptr_t hi, off_t at)
{
    for (size_t done = 0, len = hi - from; done < len;) {
        ssize_t n = pwrite(fd, (const char *)from + done, len - done, at + (off_t)done);
        if (n <= 0) {
            return 0;
        }
        done += (size_t)n;
    }
    return 1;
}

/* The file, holding the bytes of [lo, hi): its descriptor, or -1. */
static int copy_into_file(uintptr_t lo, uintptr_t hi, uint64_t *ino)
{
    const size_t len = hi - lo;
    int fd = memfd_create(ADOPT_FILE_NAME, MFD_CLOEXEC);
    struct stat st;
    if (fd < 0 || ftruncate(fd, (off_t)len) != 0 || fstat(fd, &st) != 0) {
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    if (!write_file(fd, lo, hi, 0)) {
        close(fd);
        return -1;
    }
    *ino = (uint64_t)st.st_ino;
    return fd;
}

/* Maps the file over [lo, hi) and records the piece, heading for goal: 1, or 0
 * (nothing changed). */
static int map_over(uintptr_t lo, uintptr_t hi, uintptr_t goal, int fd, uint64_t ino)
{
    replacing_lo = lo;
    replacing_hi = hi;
    void *at = mmap((void *)lo, hi - lo, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
    replacing_lo = replacing_hi = 0;
    if (at != (void *)lo) {
        fold_warn("adopted buffers: mapping %zu KiB at %p failed: %s", (size_t)(hi - lo) >> 10,
                  (void *)lo, strerror(errno));
        return 0;
    }
    pthread_mutex_lock(&lock);
    piece_t *p = free_slot();   /* reserved: adopt() saw ADOPT_SPARE free */
    *p = (piece_t){.lo = lo, .hi = hi, .goal = goal, .ino = ino, .fd = fd, .uses = 1};
    atomic_fetch_add_explicit(&npieces, 1, memory_order_release);
    adopted_bytes += hi - lo;
    pthread_mutex_unlock(&lock);
    return 1;
}

static int slots_left(void)
{
    return ADOPT_PIECES - atomic_load_explicit(&npieces, memory_order_relaxed);
}

/* Whether adoption goes on: not stopped by buffers released before their third use,
 * and slots left beside the spares. Under the lock. */
static int adopting_goes_on(void)
{
    return (waste < ADOPT_WASTE_LIMIT || useful >= waste) && slots_left() > ADOPT_SPARE;
}

/* The exposed piece holding [lo, hi) gives *place (1), or 0. Counts a use. */
static int look_up(uintptr_t lo, uintptr_t hi, fold_mem_place_t *place)
{
    pthread_mutex_lock(&lock);
    piece_t *p = exposed_holding(lo, hi);
    if (p != NULL) {
        p->uses++;
        place_of(p, lo, place);
    }
    pthread_mutex_unlock(&lock);
    return p != NULL;
}

/* Moves [lo, end) into a file mapped over it, the start of the buffer [lo, goal): 1,
 * or 0 (left as it was). Holding `adopting`. */
static int adopt_new(uintptr_t lo, uintptr_t end, uintptr_t goal)
{
    if (!plain_memory(lo, end)) {
        return 0;
    }
    uint64_t ino = 0;
    int fd = copy_into_file(lo, end, &ino);
    if (fd < 0) {
        fold_debug("adopted buffers: no file for %zu KiB: %s", (size_t)(end - lo) >> 10,
                   strerror(errno));
        return 0;
    }
    if (!map_over(lo, end, goal, fd, ino)) {
        close(fd);
        return 0;
    }
    fold_debug("adopted buffers: %zu KiB at %p now lie in fold memory%s",
               (size_t)(end - lo) >> 10, (void *)lo, end < goal ? ", the buffer's first" : "");
    return 1;
}

/* The exposed piece that starts at lo and at its file's start and ends before hi: what
 * of the buffer [lo, hi) lies in fold memory so far, or NULL. Under the lock. */
static piece_t *prefix_of(uintptr_t lo, uintptr_t hi)
{
    for (int i = 0; i < top; i++) {
        piece_t *p = &pieces[i];
        if (p->fd >= 0 && p->lo == lo && p->file_off == 0 && p->hi < hi) {
            return p;
        }
    }
    return NULL;
}

/*
 * Where [lo, end) extends an exposed piece that starts at lo and at its file's start
 * (a buffer passed with a larger count than before, as a benchmark's sweep of sizes
 * does, or one adopted over several calls), its file grows by the rest, written and
 * mapped after the piece: what the piece holds is neither copied again nor mapped
 * over, which cost as much as copying it. Peers find the file at its new size and map
 * it anew. 1, or 0 (nothing changed). Holding `adopting`.
 */
static int grow(uintptr_t lo, uintptr_t end, uintptr_t goal)
{
    pthread_mutex_lock(&lock);
    piece_t *p = prefix_of(lo, end);
    const uintptr_t from = p != NULL ? p->hi : 0;
    const int fd = p != NULL ? p->fd : -1;
    pthread_mutex_unlock(&lock);
    if (p == NULL || !plain_memory(from, end)) {
        return 0;
    }
    if (ftruncate(fd, (off_t)(end - lo)) != 0 ||
        !write_file(fd, from, end, (off_t)(from - lo))) {
        (void)ftruncate(fd, (off_t)(from - lo));
        return 0;
    }
    replacing_lo = from;
    replacing_hi = end;
    void *at = mmap((void *)from, end - from, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                    fd, (off_t)(from - lo));
    replacing_lo = replacing_hi = 0;
    if (at != (void *)from) {
        (void)ftruncate(fd, (off_t)(from - lo));
        return 0;
    }
    pthread_mutex_lock(&lock);
    /* A free() in another thread may have released the piece meanwhile: the new pages
     * then stay this process's alone, as the released part of it does. */
    const int same = p->fd == fd && p->lo == lo && p->hi == from;
    if (same) {
        p->hi   = end;
        p->goal = goal;
        adopted_bytes += end - from;
    }
    pthread_mutex_unlock(&lock);
    if (same) {
        fold_debug("adopted buffers: %zu KiB at %p grown by %zu KiB in fold memory%s",
                   (size_t)(from - lo) >> 10, (void *)lo, (size_t)(end - from) >> 10,
                   end < goal ? ", the buffer's start" : "");
    }
    return same;
}

/* The bytes of [lo, hi) one call moves into fold memory where its adoption is spread
 * over `steps` calls (at most 1: all of it): whole pages, so that it may take fewer
 * calls than `steps`. */
static size_t adopt_step(uintptr_t lo, uintptr_t hi, int steps)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), len = hi - lo;
    if (steps <= 1) {
        return len;
    }
    const size_t step = (len / (size_t)steps + page - 1) & ~(page - 1);
    return step < page ? page : step;
}

/* Where the adoption of [lo, hi) stands: the end of what of it lies in fold memory
 * (lo: nothing), and whether it is under way, started by an earlier pass and heading
 * for hi or beyond. Under the lock. */
static uintptr_t adopted_up_to(uintptr_t lo, uintptr_t hi, int *under_way)
{
    const piece_t *p = prefix_of(lo, hi);
    *under_way = p != NULL && p->goal >= hi;
    return p != NULL ? p->hi : lo;
}

/* The `passes`-th pass of [lo, hi), and every pass after it while the adoption it
 * started goes on, moves the next part of it (adopt_step), while adoption goes on: 1
 * with *place once the whole of it lies in fold memory. */
static int adopt_at_pass(uintptr_t lo, uintptr_t hi, int passes, int steps,
                         fold_mem_place_t *place)
{
    int under_way = 0;
    pthread_mutex_lock(&lock);
    (void)adopted_up_to(lo, hi, &under_way);
    int go = adopting_goes_on() && (under_way || passed_enough(lo, hi, passes));
    pthread_mutex_unlock(&lock);
    if (!go) {
        return 0;
    }
    pthread_mutex_lock(&adopting);
    /* Another thread may have adopted it meanwhile. */
    int found = look_up(lo, hi, place);
    if (!found) {
        pthread_mutex_lock(&lock);
        const uintptr_t from = adopted_up_to(lo, hi, &under_way);
        pthread_mutex_unlock(&lock);
        const size_t step = adopt_step(lo, hi, steps);
        const uintptr_t end = hi - from > step ? from + step : hi;
        found = ((from > lo && grow(lo, end, hi)) || adopt_new(lo, end, hi)) && end == hi &&
                look_up(lo, hi, place);
    }
    pthread_mutex_unlock(&adopting);
    return found;
}

/* Counts a pass of [lo, hi) unless it lies in adopted memory already. */
static void note_pass(uintptr_t lo, uintptr_t hi)
{
    pthread_mutex_lock(&lock);
    if (exposed_holding(lo, hi) == NULL) {
        count_pass(lo, hi);
    }
    pthread_mutex_unlock(&lock);
}

void fold_mem_adopt_note(const void *buf, size_t bytes)
{
    uintptr_t lo, hi;
    if (whole_pages(buf, bytes, &lo, &hi) && fold_mem_adopt_usable()) {
        note_pass(lo, hi);
    }
}

int fold_mem_adopt_would_in_steps(const void *buf, size_t bytes, int passes, int steps)
{
    uintptr_t lo, hi;
    if (!whole_pages(buf, bytes, &lo, &hi) || !fold_mem_adopt_usable()) {
        return 0;
    }
    pthread_mutex_lock(&lock);
    int under_way = 0;
    const int i          = seen_at(lo, hi);
    const uintptr_t from = adopted_up_to(lo, hi, &under_way);
    const int starts     = i >= 0 && seen[i].passes + 1 >= (unsigned)passes;
    int would = exposed_holding(lo, hi) != NULL ||
                (passes > 0 && adopting_goes_on() && (under_way || starts) &&
                 hi - from <= adopt_step(lo, hi, steps));
    pthread_mutex_unlock(&lock);
    return would;
}

int fold_mem_adopt_would_after(const void *buf, size_t bytes, int passes)
{
    return fold_mem_adopt_would_in_steps(buf, bytes, passes, 1);
}

int fold_mem_adopt_would(const void *buf, size_t bytes)
{
    return fold_mem_adopt_would_after(buf, bytes, 2);
}

int fold_mem_adopt_in_steps(const void *buf, size_t bytes, int passes, int steps,
                            fold_mem_place_t *place)
{
    *place = (fold_mem_place_t){.fd = -1};
    uintptr_t lo, hi;
    if (!whole_pages(buf, bytes, &lo, &hi) || !fold_mem_adopt_usable()) {
        return 0;
    }
    if (!look_up(lo, hi, place)) {
        if (passes <= 0) {   /* never adopted: the pass still counts */
            note_pass(lo, hi);
            return 0;
        }
        if (!adopt_at_pass(lo, hi, passes < 2 ? 2 : passes, steps, place)) {
            return 0;
        }
    }
    place->pages_only = lo != (uintptr_t)buf || hi != (uintptr_t)buf + bytes;
    return 1;
}

int fold_mem_adopt_under_way(const void *buf, size_t bytes)
{
    uintptr_t lo, hi;
    if (!whole_pages(buf, bytes, &lo, &hi) ||
        atomic_load_explicit(&npieces, memory_order_acquire) == 0) {
        return 0;
    }
    int under_way = 0;
    pthread_mutex_lock(&lock);
    (void)adopted_up_to(lo, hi, &under_way);
    pthread_mutex_unlock(&lock);
    return under_way;
}

int fold_mem_adopt_after(const void *buf, size_t bytes, int passes, fold_mem_place_t *place)
{
    return fold_mem_adopt_in_steps(buf, bytes, passes, 1, place);
}

int fold_mem_adopt(const void *buf, size_t bytes, fold_mem_place_t *place)
{
    return fold_mem_adopt_after(buf, bytes, 2, place);
}

void fold_mem_adopt_stats(fold_mem_adopt_stats_t *s)
{
    pthread_mutex_lock(&lock);
    *s = (fold_mem_adopt_stats_t){.pieces = atomic_load(&npieces),
                                  .adopted_bytes = adopted_bytes,
                                  .privatised_bytes = privatised_bytes,
                                  .wasted = (int)waste};
    for (int i = 0; i < ADOPT_PIECES; i++) {
        s->exposed += pieces[i].fd >= 0;
    }
    pthread_mutex_unlock(&lock);
}
