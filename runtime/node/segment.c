/*
 * Node segment: naming, create, attach (counting ranks in and unlinking once all
 * are in), detach, and the blocking flag wait. See segment.h.
 */
#include "node/segment.h"
#include "log.h"
#include "util/clock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fold/fold_status.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHM_MAGIC   0x6d68732d646c6f66ull   /* "fold-shm" */
#define SHM_VERSION 1u

struct fold_shm_header {
    uint64_t         magic;
    uint32_t         version;
    uint32_t         local_size;
    uint64_t         flags_offset;
    uint64_t         data_offset;
    uint64_t         data_size;
    _Atomic uint32_t attached;
    _Atomic uint32_t ready;        /* set last by the creator */
};

static size_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

static size_t round_up(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

/* Copies at most max characters of text, replacing what a name should not hold. */
static size_t append_clean(char *dst, size_t max, const char *text)
{
    size_t n = 0;
    for (; text != NULL && text[n] != '\0' && n < max; n++) {
        char c = text[n];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-';
        dst[n] = ok ? c : '_';
    }
    dst[n] = '\0';
    return n;
}

void fold_shm_make_name(char *buf, size_t len, const char *job, const char *node,
                        uint32_t comm_id, uint64_t nonce)
{
    char tail[48];
    int tail_len = snprintf(tail, sizeof(tail), "-c%u-%016llx", comm_id,
                            (unsigned long long)nonce);
    if (len < sizeof("/fold--") + (size_t)tail_len) {
        if (len > 0) {
            buf[0] = '\0';
        }
        return;
    }
    /* Room for "/fold-" job "-" node tail and the terminator, split between the two. */
    size_t room = len - (sizeof("/fold-") - 1) - 1 - (size_t)tail_len - 1;
    size_t job_max = room / 2, node_max = room - room / 2;
    size_t pos = (size_t)snprintf(buf, len, "/fold-");
    pos += append_clean(buf + pos, job_max, job);
    buf[pos++] = '-';
    pos += append_clean(buf + pos, node_max, node);
    snprintf(buf + pos, len - pos, "%s", tail);
}

static size_t layout(int local_size, size_t data_size, size_t *flags_off, size_t *data_off)
{
    *flags_off = round_up(sizeof(fold_shm_header_t), 64);
    *data_off  = round_up(*flags_off + (size_t)local_size * sizeof(fold_shm_flags_t),
                          page_size());
    return *data_off + round_up(data_size, page_size());
}

static int map_fd(fold_shm_seg_t *seg, int fd, size_t size)
{
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        int err = errno;
        fold_error("shm: mmap of %zu bytes of %s failed: %s", size, seg->name, strerror(err));
        errno = err;
        return FOLD_ERR_NO_MEMORY;
    }
    seg->base     = base;
    seg->map_size = size;
    seg->hdr      = base;
    return FOLD_OK;
}

static void seg_fill_views(fold_shm_seg_t *seg)
{
    seg->flags      = (fold_shm_flags_t *)((char *)seg->base + seg->hdr->flags_offset);
    seg->data       = (char *)seg->base + seg->hdr->data_offset;
    seg->data_size  = seg->hdr->data_size;
    seg->local_size = (int)seg->hdr->local_size;
}

/* The header another process wrote: every offset and size must keep the flags and the
 * data inside the mapping, in that order, on cache-line boundaries (they hold atomics). */
int fold_shm_check_header(fold_shm_seg_t *seg, int local_size, char *why, size_t whylen)
{
    const fold_shm_header_t *h = seg->hdr;
    if (seg->map_size < sizeof(*h) || local_size < 1) {
        snprintf(why, whylen, "%zu bytes cannot hold a header for %d local ranks",
                 seg->map_size, local_size);
        return FOLD_ERR_MALFORMED;
    }
    if (atomic_load_explicit(&h->ready, memory_order_acquire) != 1 || h->magic != SHM_MAGIC ||
        h->version != SHM_VERSION || h->local_size != (uint32_t)local_size) {
        snprintf(why, whylen, "not a fold segment for %d local ranks (header says %u)",
                 local_size, h->magic == SHM_MAGIC ? h->local_size : 0);
        return FOLD_ERR_MALFORMED;
    }
    const uint64_t size = seg->map_size, flags_bytes = (uint64_t)local_size * sizeof(fold_shm_flags_t);
    if (h->flags_offset < sizeof(*h) || h->flags_offset % 64 != 0 || h->flags_offset > size ||
        flags_bytes > size - h->flags_offset || h->data_offset % 64 != 0 ||
        h->data_offset < h->flags_offset + flags_bytes || h->data_offset > size ||
        h->data_size > size - h->data_offset || h->data_size % 64 != 0) {
        snprintf(why, whylen, "header's layout (flags at %llu, %llu data bytes at %llu) does "
                 "not fit its %zu bytes", (unsigned long long)h->flags_offset,
                 (unsigned long long)h->data_size, (unsigned long long)h->data_offset,
                 seg->map_size);
        return FOLD_ERR_MALFORMED;
    }
    seg_fill_views(seg);
    return FOLD_OK;
}

size_t fold_shm_footprint(int local_size, size_t data_size)
{
    size_t flags_off, data_off;
    return layout(local_size, data_size, &flags_off, &data_off);
}

/* Backs all `size` bytes now; 0 or the errno. */
static int reserve(int fd, size_t size)
{
    int err;
    do {
        err = posix_fallocate(fd, 0, (off_t)size);
    } while (err == EINTR);
    return err;
}

int fold_shm_create(fold_shm_seg_t *seg, const char *name, int local_size, size_t data_size)
{
    memset(seg, 0, sizeof(*seg));
    snprintf(seg->name, sizeof(seg->name), "%s", name);
    size_t flags_off, data_off, size = layout(local_size, data_size, &flags_off, &data_off);

    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
        int err = errno;
        fold_debug("shm: creating %s failed: %s", name, strerror(err));
        errno = err;
        return err == EEXIST ? FOLD_ERR_BUSY : FOLD_ERR_NO_MEMORY;
    }
    /* Every page backed now: tmpfs otherwise allocates on first touch, and a touch it
     * cannot back is a SIGBUS in whichever rank writes there first. */
    int err = fchmod(fd, 0600) != 0 ? errno : reserve(fd, size);
    int status = FOLD_ERR_NO_MEMORY;
    if (err != 0) {
        fold_debug("shm: reserving %zu bytes for %s in " FOLD_SHM_DIR " failed: %s", size,
                   name, strerror(err));
    } else if ((status = map_fd(seg, fd, size)) != FOLD_OK) {
        err = errno;
    }
    close(fd);
    if (status != FOLD_OK) {
        shm_unlink(name);
        memset(seg, 0, sizeof(*seg));
        errno = err;
        return status;
    }
    /* The reserved pages read as zero: flags start at 0. */
    fold_shm_header_t *h = seg->hdr;
    h->magic        = SHM_MAGIC;
    h->version      = SHM_VERSION;
    h->local_size   = (uint32_t)local_size;
    h->flags_offset = flags_off;
    h->data_offset  = data_off;
    h->data_size    = size - data_off;
    atomic_store_explicit(&h->attached, 1, memory_order_relaxed);
    atomic_store_explicit(&h->ready, 1, memory_order_release);
    seg_fill_views(seg);
    return FOLD_OK;
}

int fold_shm_attach(fold_shm_seg_t *seg, const char *name, int local_size)
{
    memset(seg, 0, sizeof(*seg));
    snprintf(seg->name, sizeof(seg->name), "%s", name);
    int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0) {
        fold_error("shm: opening %s failed: %s", name, strerror(errno));
        return errno == ENOENT ? FOLD_ERR_NOT_FOUND : FOLD_ERR_NO_MEMORY;
    }
    struct stat st;
    int status = FOLD_OK;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(fold_shm_header_t)) {
        fold_error("shm: %s is too small to be a fold segment", name);
        status = FOLD_ERR_MALFORMED;
    } else {
        status = map_fd(seg, fd, (size_t)st.st_size);
    }
    close(fd);
    if (status != FOLD_OK) {
        return status;
    }
    fold_shm_header_t *h = seg->hdr;
    char why[256];
    if (fold_shm_check_header(seg, local_size, why, sizeof(why)) != FOLD_OK) {
        fold_error("shm: %s: %s", name, why);
        fold_shm_detach(seg);
        return FOLD_ERR_MALFORMED;
    }
    if (atomic_fetch_add_explicit(&h->attached, 1, memory_order_acq_rel) + 1 ==
        (uint32_t)local_size) {
        fold_shm_unlink(name);   /* everyone is in: nothing needs the name any more */
    }
    return FOLD_OK;
}

void fold_shm_unlink(const char *name)
{
    if (shm_unlink(name) != 0 && errno != ENOENT) {
        fold_warn("shm: unlinking %s failed: %s", name, strerror(errno));
    }
}

int fold_shm_unlink_stale(const char *job, const char *node, uint32_t comm_id)
{
    char prefix[FOLD_SHM_NAME_MAX];
    fold_shm_make_name(prefix, sizeof(prefix), job, node, comm_id, 0);
    size_t len = strlen(prefix);
    if (len <= 16 + 1) {
        return 0;
    }
    len -= 16;   /* the nonce: 16 hex digits */
    prefix[len] = '\0';
    DIR *dir = opendir(FOLD_SHM_DIR);
    if (dir == NULL) {
        return 0;
    }
    int count = 0;
    for (struct dirent *e; (e = readdir(dir)) != NULL;) {
        /* prefix starts with '/', directory entries do not */
        if (strncmp(e->d_name, prefix + 1, len - 1) == 0 && strlen(e->d_name) == len - 1 + 16) {
            char path[sizeof(e->d_name) + 1];   /* the leading '/' and any entry name */
            snprintf(path, sizeof(path), "/%s", e->d_name);
            fold_debug("shm: removing %s, left by a rank that died setting it up", path);
            fold_shm_unlink(path);
            count++;
        }
    }
    closedir(dir);
    return count;
}

void fold_shm_detach(fold_shm_seg_t *seg)
{
    if (seg->base != NULL) {
        munmap(seg->base, seg->map_size);
    }
    memset(seg, 0, sizeof(*seg));
}

int fold_shm_attached(const fold_shm_seg_t *seg)
{
    return (int)atomic_load_explicit(&seg->hdr->attached, memory_order_acquire);
}

int fold_shm_flag_wait(const fold_shm_seg_t *seg, int local, int flag, uint64_t value,
                       long spin_count, double timeout_sec)
{
    double deadline = 0;
    for (long polls = 0;; polls++) {
        if (fold_shm_flag_reached(seg, local, flag, value)) {
            return FOLD_OK;
        }
        if (polls < spin_count) {
            continue;
        }
        double now = fold_util_time_now();
        if (deadline == 0) {
            deadline = now + timeout_sec;
        } else if (now > deadline) {
            fold_error("shm: no progress for %.1f s waiting for local rank %d's flag %d of "
                       "%s to reach %llu (it is at %llu)", timeout_sec, local, flag, seg->name,
                       (unsigned long long)value,
                       (unsigned long long)fold_shm_flag_read(seg, local, flag));
            return FOLD_ERR_TIMEOUT;
        }
        sched_yield();
    }
}
