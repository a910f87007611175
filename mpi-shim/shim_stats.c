/*
 * Counters of where each call went, and the two FOLD_MPI_VERBOSE reports: a banner
 * at start and the totals at finalize. The totals line is also what the tests read
 * to prove that fold served calls:
 *
 *   fold-mpi: calls over 4 ranks: fold=120 (allreduce=100 reduce=20) pmpi=3 (op=2 small=1)
 */
#include "shim.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static atomic_ulong counts[SHIM_COLL_COUNT][SHIM_ROUTE_COUNT];
static atomic_ulong alloc_mem[2];   /* blocks and bytes MPI_Alloc_mem gave from fold memory */

static const char *const route_names[SHIM_ROUTE_COUNT] = {
    [SHIM_ROUTE_FOLD]        = "fold",
    [SHIM_ROUTE_OFF]         = "off",
    [SHIM_ROUTE_ARGS]        = "args",
    [SHIM_ROUTE_DATATYPE]    = "datatype",
    [SHIM_ROUTE_OP]          = "op",
    [SHIM_ROUTE_DTYPE_OP]    = "dtype_op",
    [SHIM_ROUTE_DERIVED]     = "derived",
    [SHIM_ROUTE_USER_OP]     = "user_op",
    [SHIM_ROUTE_USER_OP_DERIVED] = "user_op_derived",
    [SHIM_ROUTE_SMALL]       = "small",
    [SHIM_ROUTE_LARGE]       = "large",
    [SHIM_ROUTE_MPI_FASTER]  = "mpi_faster",
    [SHIM_ROUTE_INTERCOMM]   = "intercomm",
    [SHIM_ROUTE_FOREIGN]     = "foreign",
    [SHIM_ROUTE_COMM_FAILED] = "comm_failed",
    [SHIM_ROUTE_COMM_BUSY]   = "comm_busy",
};

void shim_stats_count(shim_coll_t coll, shim_route_t route)
{
    atomic_fetch_add_explicit(&counts[coll][route], 1, memory_order_relaxed);
}

void shim_stats_alloc_mem(size_t bytes)
{
    atomic_fetch_add_explicit(&alloc_mem[0], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&alloc_mem[1], bytes, memory_order_relaxed);
}

static void format_bytes(size_t v, char *buf, size_t len)
{
    if (v == SIZE_MAX) {
        snprintf(buf, len, "inf");
    } else if (v >= (1u << 20) && v % (1u << 20) == 0) {
        snprintf(buf, len, "%zu MiB", v >> 20);
    } else if (v >= 1024 && v % 1024 == 0) {
        snprintf(buf, len, "%zu KiB", v >> 10);
    } else {
        snprintf(buf, len, "%zu B", v);
    }
}

/* Appends "[lo, hi)" to buf. */
static void append_range(char *buf, size_t len, size_t lo, size_t hi)
{
    char a[32], b[32];
    size_t used = strlen(buf);
    format_bytes(lo, a, sizeof(a));
    format_bytes(hi, b, sizeof(b));
    snprintf(buf + used, len - used, "%s%s .. %s", used ? ", " : "", a, b);
}

/* What fold serves of coll on MPI_COMM_WORLD: the set range, or the advice per
 * power-of-two size up to 1 GiB folded into ranges, and where it comes from. */
static void served_ranges(shim_coll_t coll, char *buf, size_t len)
{
    size_t lo, hi;
    buf[0] = '\0';
    if (shim_config_range(&shim.config, coll, &lo, &hi)) {
        append_range(buf, len, lo, hi);
        size_t used = strlen(buf);
        snprintf(buf + used, len - used, " (FOLD_MPI_%s_MIN/MAX)",
                 coll == SHIM_ALLREDUCE ? "ALLREDUCE" : "REDUCE");
        return;
    }
    const shim_comm_t *world;
    if (shim_comm_get(MPI_COMM_WORLD, &world) != SHIM_ROUTE_FOLD) {
        snprintf(buf, len, "none (no fold communicator)");
        return;
    }
    const char *source = "", *name = coll == SHIM_ALLREDUCE ? "allreduce" : "reduce";
    size_t start = 0;
    int serving = 0;
    for (size_t bytes = 1;; bytes *= 2) {
        int serve = 0;
        int last = bytes == ((size_t)1 << 30);
        shim_fold_lock();
        fold_serve_advice(world->fold, name, bytes, &serve, &source);
        shim_fold_unlock();
        if (serve && !serving) {
            start = bytes == 1 ? 0 : bytes;
        }
        if (!serve && serving) {
            append_range(buf, len, start, bytes);
        }
        serving = serve;
        if (last) {
            break;
        }
    }
    if (serving) {
        append_range(buf, len, start, SIZE_MAX);
    }
    size_t used = strlen(buf);
    snprintf(buf + used, len - used, "%s (%s)", used ? "" : "none", source);
}

void shim_stats_banner(const char *what)
{
    if (shim.config.verbose < 1 || shim.world_rank != 0) {
        return;
    }
    char library[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    PMPI_Get_library_version(library, &len);
    library[strcspn(library, ",\n")] = '\0';   /* Open MPI appends build details */
    if (what != NULL) {
        fprintf(stderr, "fold-mpi: fold %s on %s, %d ranks: %s\n", fold_version_string(),
                library, shim.world_size, what);
        return;
    }
    char allreduce[512], reduce[512];
    served_ranges(SHIM_ALLREDUCE, allreduce, sizeof(allreduce));
    served_ranges(SHIM_REDUCE, reduce, sizeof(reduce));
    fprintf(stderr, "fold-mpi: fold %s on %s, %d ranks: serving MPI_Allreduce of %s and "
            "MPI_Reduce of %s per rank%s%s\n", fold_version_string(), library,
            shim.world_size, allreduce, reduce,
            shim.thread_multiple ? "; MPI_THREAD_MULTIPLE: fold calls serialised" : "",
            shim.config.alloc_mem ? "; MPI_Alloc_mem gives fold memory" : "");
}

static void print_totals(const char *who, const unsigned long n[SHIM_COLL_COUNT]
                                                              [SHIM_ROUTE_COUNT])
{
    unsigned long fold = n[SHIM_ALLREDUCE][SHIM_ROUTE_FOLD] + n[SHIM_REDUCE][SHIM_ROUTE_FOLD];
    unsigned long pmpi = 0;
    char reasons[512] = "";
    size_t used = 0;
    for (int r = SHIM_ROUTE_FOLD + 1; r < SHIM_ROUTE_COUNT; r++) {
        unsigned long k = n[SHIM_ALLREDUCE][r] + n[SHIM_REDUCE][r];
        pmpi += k;
        if (k > 0 && used < sizeof(reasons)) {
            used += (size_t)snprintf(reasons + used, sizeof(reasons) - used, "%s%s=%lu",
                                     used ? " " : "", route_names[r], k);
        }
    }
    fprintf(stderr, "fold-mpi: %s: fold=%lu (allreduce=%lu reduce=%lu) pmpi=%lu (%s)\n", who,
            fold, n[SHIM_ALLREDUCE][SHIM_ROUTE_FOLD], n[SHIM_REDUCE][SHIM_ROUTE_FOLD], pmpi,
            reasons);
}

void shim_stats_report(void)
{
    if (shim.config.verbose < 1) {
        return;
    }
    unsigned long mine[SHIM_COLL_COUNT][SHIM_ROUTE_COUNT], total[SHIM_COLL_COUNT]
                                                                [SHIM_ROUTE_COUNT];
    for (int c = 0; c < SHIM_COLL_COUNT; c++) {
        for (int r = 0; r < SHIM_ROUTE_COUNT; r++) {
            mine[c][r] = atomic_load_explicit(&counts[c][r], memory_order_relaxed);
        }
    }
    if (shim.config.verbose >= 2) {
        char who[48];
        snprintf(who, sizeof(who), "rank %d calls", shim.world_rank);
        print_totals(who, mine);
    }
    PMPI_Reduce(mine, total, SHIM_COLL_COUNT * SHIM_ROUTE_COUNT, MPI_UNSIGNED_LONG, MPI_SUM,
                0, MPI_COMM_WORLD);
    if (shim.world_rank == 0) {
        char who[48];
        snprintf(who, sizeof(who), "calls over %d ranks", shim.world_size);
        print_totals(who, total);
    }
    if (shim.config.alloc_mem) {   /* rank 0's value on every rank: all reduce or none */
        unsigned long blocks[2] = {atomic_load_explicit(&alloc_mem[0], memory_order_relaxed),
                                   atomic_load_explicit(&alloc_mem[1], memory_order_relaxed)};
        unsigned long sum[2] = {0, 0};
        PMPI_Reduce(blocks, sum, 2, MPI_UNSIGNED_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        if (shim.world_rank == 0) {
            fprintf(stderr, "fold-mpi: MPI_Alloc_mem over %d ranks: %lu blocks, %lu bytes "
                    "in fold memory\n", shim.world_size, sum[0], sum[1]);
        }
    }
}
