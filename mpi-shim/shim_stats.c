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

static const char *const route_names[SHIM_ROUTE_COUNT] = {
    [SHIM_ROUTE_FOLD]        = "fold",
    [SHIM_ROUTE_OFF]         = "off",
    [SHIM_ROUTE_ARGS]        = "args",
    [SHIM_ROUTE_DATATYPE]    = "datatype",
    [SHIM_ROUTE_OP]          = "op",
    [SHIM_ROUTE_DTYPE_OP]    = "dtype_op",
    [SHIM_ROUTE_SMALL]       = "small",
    [SHIM_ROUTE_LARGE]       = "large",
    [SHIM_ROUTE_INTERCOMM]   = "intercomm",
    [SHIM_ROUTE_FOREIGN]     = "foreign",
    [SHIM_ROUTE_COMM_FAILED] = "comm_failed",
    [SHIM_ROUTE_COMM_BUSY]   = "comm_busy",
};

void shim_stats_count(shim_coll_t coll, shim_route_t route)
{
    atomic_fetch_add_explicit(&counts[coll][route], 1, memory_order_relaxed);
}

/* "2048 B .. inf", "512 .. 4096 B" */
static const char *size_range(shim_coll_t coll, char *buf, size_t len)
{
    size_t lo = shim.config.min_bytes[coll], hi = shim.config.max_bytes[coll];
    if (hi == SIZE_MAX) {
        snprintf(buf, len, "%zu B .. inf", lo);
    } else {
        snprintf(buf, len, "%zu .. %zu B", lo, hi);
    }
    return buf;
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
    char allreduce[64], reduce[64];
    fprintf(stderr, "fold-mpi: fold %s on %s, %d ranks: serving MPI_Allreduce of %s and "
            "MPI_Reduce of %s per rank%s\n", fold_version_string(), library, shim.world_size,
            size_range(SHIM_ALLREDUCE, allreduce, sizeof(allreduce)),
            size_range(SHIM_REDUCE, reduce, sizeof(reduce)),
            shim.thread_multiple ? "; MPI_THREAD_MULTIPLE: fold calls serialised" : "");
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
}
