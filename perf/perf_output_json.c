#include "perf_output.h"

#include <errno.h>
#include <math.h>
#include <string.h>

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            fprintf(f, "\\%c", c);
        } else if (c < 0x20) {
            fprintf(f, "\\u%04x", c);
        } else {
            fputc(c, f);
        }
    }
    fputc('"', f);
}

/* JSON has no NaN: "not measured" is null. */
static void json_number(FILE *f, const char *key, const char *format, double value)
{
    fprintf(f, ", \"%s\": ", key);
    if (isnan(value) || isinf(value)) {
        fputs("null", f);
    } else {
        fprintf(f, format, value);
    }
}

static void json_run_info(FILE *f, const perf_run_info_t *info)
{
    fprintf(f, "  \"tool\": \"fold_perf\",\n  \"fold_version\": ");
    json_string(f, info->fold_version);
    fprintf(f, ",\n  \"ranks\": %d,\n  \"nodes\": %d,\n  \"max_local_ranks\": %d,\n",
            info->ranks, info->nodes, info->max_local_ranks);
    fprintf(f, "  \"dtype\": \"%s\",\n  \"op\": \"%s\",\n  \"root\": %d,\n  \"inplace\": %s,\n",
            fold_dtype_name(info->dtype), fold_op_name(info->op), info->root,
            info->inplace ? "true" : "false");
    fprintf(f, "  \"bootstrap\": ");
    json_string(f, info->bootstrap);
    fprintf(f, ",\n  \"transport\": ");
    json_string(f, info->transport);
    fprintf(f, ",\n  \"segment_size\": ");
    json_string(f, info->segment_size);
    fprintf(f, ",\n  \"threads\": ");
    json_string(f, info->threads);
    fprintf(f, ",\n  \"rotate\": %d,\n  \"buffers\": %s,\n  \"fresh\": %s,\n"
            "  \"settle\": %s,\n", info->rotate, info->buffers ? "true" : "false",
            info->fresh ? "true" : "false", info->settle ? "true" : "false");
    fprintf(f, "  \"barrier\": %s,\n", info->barrier ? "true" : "false");
    fprintf(f, "  \"batch\": %s,\n  \"memory\": \"%s\",\n"
            "  \"sparsity\": %.6g,\n  \"distribution\": \"%s\",\n",
            info->batch ? "true" : "false",
            info->fold_memory ? "fold" : "host", info->sparsity,
            perf_distribution_name(info->distribution));
    fprintf(f, "  \"probe\": \"%s\",\n  \"node_bandwidth_gbs\": ",
            info->probe_each ? "each size" : "start-up");
    if (isnan(info->node_bw_gbs)) {
        fputs("null", f);
    } else {
        fprintf(f, "%.3f", info->node_bw_gbs);
    }
    fprintf(f, ",\n  \"checked\": %s,\n  \"compare\": \"%s\",\n  \"mpi_library\": ",
            info->checked ? "true" : "false",
            info->compare_mpi ? (info->compare_apart ? "mpi-apart" : "mpi") : "none");
    json_string(f, info->mpi_library);
    fputs(",\n", f);
}

static void json_row(FILE *f, const perf_run_info_t *info, const perf_row_t *r)
{
    fprintf(f, "    {\"collective\": \"%s\", \"algorithm\": ", perf_coll_name(r->coll));
    json_string(f, r->algorithm);
    fprintf(f, ", \"requested\": ");
    json_string(f, r->requested);
    fprintf(f, ", \"segment_bytes\": %zu", r->segment_bytes);
    fprintf(f, ", \"bytes\": %zu, \"count\": %zu, \"iterations\": %ld, \"first_calls\": %ld",
            r->bytes, r->count, r->iterations, r->first_calls);
    json_number(f, "avg_us", "%.3f", r->latency.avg_us);
    json_number(f, "min_us", "%.3f", r->latency.min_us);
    json_number(f, "max_us", "%.3f", r->latency.max_us);
    json_number(f, "median_us", "%.3f", r->latency.median_us);
    json_number(f, "p99_us", "%.3f", r->latency.p99_us);
    json_number(f, "first_us", "%.3f", r->first_us);
    json_number(f, "worst2-10_us", "%.3f", r->worst2_10_us);
    json_number(f, "algbw_gbs", "%.6f", r->algbw_gbs);
    json_number(f, "busbw_gbs", "%.6f", r->busbw_gbs);
    json_number(f, "bound_us", "%.3f", r->bound_us);
    if (info->probe_each) {
        json_number(f, "probe_gbs", "%.3f", r->probe_gbs);
    }
    fprintf(f, ", \"check\": \"%s\"", perf_row_check_text(r));
    if (info->compare_mpi) {
        json_number(f, "mpi_median_us", "%.3f", r->has_mpi ? r->mpi_median_us : NAN);
        json_number(f, "speedup", "%.4f", r->has_mpi ? r->speedup : NAN);
        json_number(f, "mpi_first_us", "%.3f", r->has_mpi ? r->mpi_first_us : NAN);
        json_number(f, "mpi_worst2-10_us", "%.3f", r->has_mpi ? r->mpi_worst2_10_us : NAN);
    }
    fputc('}', f);
}

int perf_json_write(const char *path, const perf_results_t *results)
{
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        fprintf(stderr, "fold_perf: cannot write JSON file '%s': %s\n", path, strerror(errno));
        return -1;
    }
    fputs("{\n", f);
    json_run_info(f, &results->info);
    fputs("  \"results\": [\n", f);
    for (size_t i = 0; i < results->nrows; i++) {
        json_row(f, &results->info, &results->rows[i]);
        fputs(i + 1 < results->nrows ? ",\n" : "\n", f);
    }
    fputs("  ]\n}\n", f);
    if (fclose(f) != 0) {
        fprintf(stderr, "fold_perf: writing JSON file '%s' failed: %s\n", path,
                strerror(errno));
        return -1;
    }
    return 0;
}
