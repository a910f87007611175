/*
 * What kind of mapping a range of this process lies in, for adoption (mem_adopt.c):
 * private anonymous writable memory (the heap, or an anonymous mapping, not the stack)
 * or a shared mapping of one of fold's own files.
 *
 * The kernel answers one address at a time through the PROCMAP_QUERY ioctl on
 * /proc/self/maps (Linux 6.11), as cheap as a system call. Older kernels only give the
 * whole file as text, which they write out for every mapping up to the range's: an MPI
 * process has hundreds of them (its libraries, UCX's and the MPI library's plugins),
 * and writing and parsing them was a large share of an adoption's cost
 * (docs/results/first-calls.md).
 */
#define _GNU_SOURCE
#include "mem.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* linux/fs.h of Linux 6.11; older headers lack it. */
struct fold_procmap_query {
    uint64_t size;
    uint64_t query_flags;
    uint64_t query_addr;
    uint64_t vma_start;
    uint64_t vma_end;
    uint64_t vma_flags;
    uint64_t vma_page_size;
    uint64_t vma_offset;
    uint64_t inode;
    uint32_t dev_major;
    uint32_t dev_minor;
    uint32_t vma_name_size;
    uint32_t build_id_size;
    uint64_t vma_name_addr;
    uint64_t build_id_addr;
};
_Static_assert(sizeof(struct fold_procmap_query) == 104, "struct procmap_query");
#define FOLD_PROCMAP_QUERY _IOWR('f', 17, struct fold_procmap_query)
#define VMA_READABLE   0x01u
#define VMA_WRITABLE   0x02u
#define VMA_EXECUTABLE 0x04u
#define VMA_SHARED     0x08u
#define VMA_READ_WRITE (VMA_READABLE | VMA_WRITABLE)

/* 1: the text only, as the kernel has no such ioctl (or tests asked for it). */
static _Atomic int read_text;
/* /proc/self/maps stays open for the queries: opening it costs several queries. It
 * names the process that opened it, so a forked child opens its own. */
static pthread_mutex_t maps_lock = PTHREAD_MUTEX_INITIALIZER;
static int             maps_fd = -1;
static pid_t           maps_pid;

void fold_mem_maps_read_text(int on)
{
    atomic_store(&read_text, on != 0);
}

/* Whether one mapping (its VMA_* bits, inode and name) is plain memory or one of
 * fold's own files named `ours` ("/memfd:NAME"). */
static int plain_mapping(unsigned flags, uint64_t inode, const char *name, const char *ours)
{
    const int shared = (flags & VMA_SHARED) != 0;
    if ((flags & (VMA_READ_WRITE | VMA_EXECUTABLE)) != VMA_READ_WRITE) {
        return 0;
    }
    if (!shared) {
        return inode == 0 && (name[0] == '\0' || strcmp(name, "[heap]") == 0);
    }
    const size_t n = strlen(ours);
    return strncmp(name, ours, n) == 0 && (name[n] == ' ' || name[n] == '\0');
}

/* This process's /proc/self/maps, open, or -1. Under maps_lock. */
static int maps_of_this_process(void)
{
    const pid_t pid = getpid();
    if (maps_fd >= 0 && maps_pid != pid) {
        close(maps_fd);
        maps_fd = -1;
    }
    if (maps_fd < 0) {
        maps_fd  = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
        maps_pid = pid;
    }
    return maps_fd;
}

/* The ioctl's answer for [lo, hi): 1 plain, 0 not, -1 the kernel has no such ioctl.
 * Under maps_lock. */
static int query_range(uintptr_t lo, uintptr_t hi, const char *ours)
{
    const int fd = maps_of_this_process();
    if (fd < 0) {
        return 0;
    }
    int plain = 1;
    for (uintptr_t at = lo; plain == 1 && at < hi;) {
        char name[256];
        struct fold_procmap_query q = {.size = sizeof(q), .query_addr = at,
                                       .vma_name_size = sizeof(name),
                                       .vma_name_addr = (uint64_t)(uintptr_t)name};
        if (ioctl(fd, FOLD_PROCMAP_QUERY, &q) != 0) {
            plain = errno == ENOTTY || errno == EINVAL ? -1 : 0;   /* ENOENT: unmapped */
            break;
        }
        if (q.vma_name_size == 0) {
            name[0] = '\0';
        }
        plain = q.vma_start <= at && plain_mapping((unsigned)q.vma_flags, q.inode, name, ours);
        at = (uintptr_t)q.vma_end;
    }
    return plain;
}

/* The same from the text of /proc/self/maps: 1 or 0. */
static int read_range(uintptr_t lo, uintptr_t hi, const char *ours)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (f == NULL) {
        return 0;
    }
    char line[512];
    uintptr_t at = lo;
    while (at < hi && fgets(line, sizeof(line), f) != NULL) {
        uintptr_t a, b;
        char perms[8];
        unsigned long long off, inode;
        int name_at = 0;
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s %llx %*s %llu %n", &a, &b, perms, &off,
                   &inode, &name_at) < 5 || b <= at) {
            continue;
        }
        char *name = line + name_at;
        name[strcspn(name, "\n")] = '\0';
        const unsigned flags = (perms[0] == 'r' ? VMA_READABLE : 0) |
                               (perms[1] == 'w' ? VMA_WRITABLE : 0) |
                               (perms[2] == 'x' ? VMA_EXECUTABLE : 0) |
                               (perms[3] == 's' ? VMA_SHARED : 0);
        if (a > at || !plain_mapping(flags, inode, name, ours)) {
            break;
        }
        at = b;
    }
    fclose(f);
    return at >= hi;
}

int fold_mem_maps_plain(uintptr_t lo, uintptr_t hi, const char *ours)
{
    if (!atomic_load(&read_text)) {
        pthread_mutex_lock(&maps_lock);
        int plain = query_range(lo, hi, ours);
        pthread_mutex_unlock(&maps_lock);
        if (plain >= 0) {
            return plain;
        }
        atomic_store(&read_text, 1);
    }
    return read_range(lo, hi, ours);
}
