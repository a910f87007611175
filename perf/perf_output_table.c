#include "perf_output.h"

#include <math.h>

void perf_table_print_header(FILE *out, const perf_run_info_t *info)
{
    fprintf(out, "# fold_perf (fold %s): %d rank%s on %d node%s (at most %d per node), %s %s, "
            "%s", info->fold_version, info->ranks, info->ranks == 1 ? "" : "s", info->nodes,
            info->nodes == 1 ? "" : "s", info->max_local_ranks, fold_dtype_name(info->dtype),
            fold_op_name(info->op), info->inplace ? "in place" : "out of place");
    fprintf(out, ", reduce root %d\n", info->root);
    fprintf(out, "# bootstrap %s, transport %s, segment size %s, threads %s, %d buffer%s "
            "in rotation, %s%s\n", info->bootstrap, info->transport, info->segment_size,
            info->threads, info->rotate, info->rotate == 1 ? "" : "s",
            info->fold_memory ? "buffers in fold memory" : "buffers on the heap",
            info->buffers ? ", every call's input written with new data before it"
            : info->fresh ? ", inputs rewritten before every call" : "");
    if (info->barrier) {
        fprintf(out, "# every timed call after a barrier of its own library, untimed "
                "(--barrier): latencies from a common start\n");
    }
    if (info->settle) {
        fprintf(out, "# fold's online trials untimed before anything is timed (--settle): "
                "untimed counts those calls, first_us comes after them\n");
    } else {
        fprintf(out, "# first_us, worst2-10_us: a size's first call and the slowest of calls 2-10, "
                "before its warm-ups; fold's online trials timed\n");
    }
    if (info->batch) {
        fprintf(out, "# calls timed in runs of back-to-back calls (--batch): each call "
                "shows its run's mean\n");
    }
    if (info->compare_mpi) {
        fprintf(out, "# beside: %s (MPI_Allreduce / MPI_Reduce, %s)\n", info->mpi_library,
                info->compare_apart ? "each size's iterations after fold's" : "interleaved");
    }
    if (info->sparsity > 0) {
        fprintf(out, "# data: sparse, %.3g of each input zero, %s distribution\n",
                info->sparsity, perf_distribution_name(info->distribution));
    } else {
        fprintf(out, "# data: dense\n");
    }
    if (info->probe_each) {
        fprintf(out, "# memory bound: streaming c[i] += a[i] over each size's own footprint "
                "(its inputs and outputs, from 4 KiB), probed before its calls\n");
    } else if (isnan(info->node_bw_gbs)) {
        fprintf(out, "# memory bound: not probed (--probe-size 0)\n");
    } else {
        fprintf(out, "# memory bound: streaming c[i] += a[i] at %.1f GB/s per node "
                "(slowest node, all its ranks at once)\n", info->node_bw_gbs);
    }
    fprintf(out, "# times in us: slowest rank per iteration; GB/s = 1e9 B/s; "
            "busbw per nccl-tests; speedup = MPI median / fold median\n");
    fprintf(out, "#\n# %-10s %-26s %10s %10s %6s", "collective", "algorithm", "bytes",
            "count", "iters");
    if (info->settle) {
        fprintf(out, " %7s", "untimed");
    }
    fprintf(out, " %10s %10s %10s %10s %10s %12s %10s %10s %10s %10s %5s", "avg_us", "min_us",
            "max_us", "median_us", "first_us", "worst2-10_us", "p99_us", "algbw_GB/s",
            "busbw_GB/s", "bound_us", "check");
    if (info->compare_mpi) {
        fprintf(out, " %13s %12s %16s %7s", "mpi_median_us", "mpi_first_us",
                "mpi_worst2-10_us", "speedup");
    }
    fputc('\n', out);
    fflush(out);
}

void perf_table_print_row(FILE *out, const perf_run_info_t *info, const perf_row_t *row)
{
    char label[2 * PERF_NAME_LEN + 8];
    char bound[32];
    perf_row_algorithm_label(row, label, sizeof(label));
    if (isnan(row->bound_us)) {
        snprintf(bound, sizeof(bound), "-");
    } else {
        snprintf(bound, sizeof(bound), "%.2f", row->bound_us);
    }
    fprintf(out, "  %-10s %-26s %10zu %10zu %6ld", perf_coll_name(row->coll), label,
            row->bytes, row->count, row->iterations);
    if (info->settle) {
        fprintf(out, " %7ld", row->first_calls);
    }
    fprintf(out, " %10.2f %10.2f %10.2f %10.2f %10.2f %12.2f %10.2f %10.3f %10.3f %10s %5s",
            row->latency.avg_us, row->latency.min_us, row->latency.max_us,
            row->latency.median_us, row->first_us, row->worst2_10_us, row->latency.p99_us,
            row->algbw_gbs, row->busbw_gbs, bound, perf_row_check_text(row));
    if (info->compare_mpi) {
        if (row->has_mpi) {
            fprintf(out, " %13.2f %12.2f %16.2f %7.2f", row->mpi_median_us, row->mpi_first_us,
                    row->mpi_worst2_10_us, row->speedup);
        } else {
            fprintf(out, " %13s %12s %16s %7s", "-", "-", "-", "-");
        }
    }
    fputc('\n', out);
    fflush(out);
}
