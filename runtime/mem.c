/*
 * fold memory: fold_mem_alloc gives pages of an anonymous shared-memory file
 * (memfd_create) mapped into this process. The other ranks of the node map the same
 * file through /proc/<pid>/fd/<fd> (node/xmap.c) and single copy moves a call's
 * bytes with memcpy instead of process_vm_readv, which runs at a fraction of its rate.
 * Nothing goes into /dev/shm: the file has no name and dies with the last mapping.
 *
 * A process-wide table (one mutex) holds the live allocations; a lookup happens
 * once per node call and costs one atomic load while none lives. Opening another
 * process's descriptor needs the same permission as cross-memory attach (ptrace
 * access to it), so where single copy is forbidden, so is this.
 */
#define _GNU_SOURCE
#include "mem.h"
#include "log.h"

#include <fold/fold.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct allocation {
    char    *base;
    size_t   bytes;   /* mapped: the request rounded up to pages */
    int      fd;
    uint64_t ino;
} allocation_t;

static allocation_t   *table;
static size_t          table_len, table_cap;
static _Atomic size_t  live;
static _Atomic uint64_t frees;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int table_add(const allocation_t *a)
{
    if (table_len == table_cap) {
        size_t cap = table_cap ? 2 * table_cap : 16;
        allocation_t *t = realloc(table, cap * sizeof(*t));
        if (t == NULL) {
            return 0;
        }
        table = t;
        table_cap = cap;
    }
    table[table_len++] = *a;
    atomic_store_explicit(&live, table_len, memory_order_release);
    return 1;
}

int fold_mem_alloc(size_t bytes, void **ptr)
{
    if (ptr == NULL || bytes == 0) {
        fold_error("fold_mem_alloc: %s", ptr == NULL ? "ptr is NULL" : "0 bytes asked");
        return FOLD_ERR_INVALID_ARG;
    }
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (bytes > SIZE_MAX - page) {
        fold_error("fold_mem_alloc: %zu bytes is more than an address space holds", bytes);
        return FOLD_ERR_NO_MEMORY;
    }
    allocation_t a = {.bytes = (bytes + page - 1) / page * page, .fd = -1};
    a.fd = memfd_create("fold-mem", MFD_CLOEXEC);
    struct stat st;
    if (a.fd < 0 || ftruncate(a.fd, (off_t)a.bytes) != 0 || fstat(a.fd, &st) != 0) {
        fold_error("fold_mem_alloc: %zu bytes of shared memory: %s", a.bytes, strerror(errno));
        if (a.fd >= 0) {
            close(a.fd);
        }
        return FOLD_ERR_NO_MEMORY;
    }
    a.ino  = (uint64_t)st.st_ino;
    a.base = mmap(NULL, a.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, a.fd, 0);
    if (a.base == MAP_FAILED) {
        fold_error("fold_mem_alloc: mapping %zu bytes: %s", a.bytes, strerror(errno));
        close(a.fd);
        return FOLD_ERR_NO_MEMORY;
    }
    pthread_mutex_lock(&lock);
    int added = table_add(&a);
    pthread_mutex_unlock(&lock);
    if (!added) {
        munmap(a.base, a.bytes);
        close(a.fd);
        fold_error("fold_mem_alloc: no memory for the table of allocations");
        return FOLD_ERR_NO_MEMORY;
    }
    *ptr = a.base;
    return FOLD_OK;
}

int fold_mem_free(void *ptr)
{
    if (ptr == NULL) {
        return FOLD_OK;   /* as free(NULL) */
    }
    allocation_t a = {0};
    int found = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < table_len && !found; i++) {
        if (table[i].base == ptr) {
            a = table[i];
            table[i] = table[--table_len];
            found = 1;
        }
    }
    if (found) {
        atomic_store_explicit(&live, table_len, memory_order_release);
        atomic_fetch_add_explicit(&frees, 1, memory_order_acq_rel);
    }
    pthread_mutex_unlock(&lock);
    if (!found) {
        fold_error("fold_mem_free: %p is not the start of memory from fold_mem_alloc", ptr);
        return FOLD_ERR_INVALID_ARG;
    }
    munmap(a.base, a.bytes);
    close(a.fd);
    return FOLD_OK;
}

int fold_mem_contains(const void *ptr)
{
    fold_mem_place_t place;
    return fold_mem_find(ptr, 1, &place);
}

int fold_mem_find(const void *p, size_t len, fold_mem_place_t *place)
{
    *place = (fold_mem_place_t){.fd = -1};
    if (atomic_load_explicit(&live, memory_order_acquire) == 0 || p == NULL) {
        return 0;
    }
    const uintptr_t lo = (uintptr_t)p;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < table_len; i++) {
        const uintptr_t base = (uintptr_t)table[i].base;
        if (lo >= base && lo - base <= table[i].bytes && len <= table[i].bytes - (lo - base)) {
            *place = (fold_mem_place_t){table[i].fd, 0, table[i].ino, lo - base, table[i].bytes};
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return place->fd >= 0;
}

uint64_t fold_mem_frees(void)
{
    return atomic_load_explicit(&frees, memory_order_acquire);
}

void fold_mem_count_free(void)
{
    atomic_fetch_add_explicit(&frees, 1, memory_order_acq_rel);
}
