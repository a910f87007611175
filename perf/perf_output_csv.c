#include "perf_output.h"

#include <errno.h>
#include <math.h>
#include <string.h>

/* An empty field stands for "not measured". */
static void csv_number(FILE *f, const char *format, double value)
{
    fputc(',', f);
    if (!isnan(value)) {
        fprintf(f, format, value);
    }
}

int perf_csv_write(const char *path, const perf_results_t *results)
{
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        fprintf(stderr, "fold_perf: cannot write CSV file '%s': %s\n", path, strerror(errno));
        return -1;
    }
    const perf_run_info_t *info = &results->info;
    fprintf(f, "collective,algorithm,requested,bytes,count,iterations,avg_us,min_us,max_us,"
               "median_us,p99_us,algbw_gbs,busbw_gbs,bound_us,check,ranks,dtype,op,"
               "first_us,worst2-10_us,first_calls");
    if (info->compare_mpi) {
        fprintf(f, ",mpi_median_us,speedup,mpi_first_us,mpi_worst2-10_us");
    }
    fprintf(f, ",segment_bytes\n");
    for (size_t i = 0; i < results->nrows; i++) {
        const perf_row_t *r = &results->rows[i];
        fprintf(f, "%s,%s,%s,%zu,%zu,%ld", perf_coll_name(r->coll), r->algorithm, r->requested,
                r->bytes, r->count, r->iterations);
        csv_number(f, "%.3f", r->latency.avg_us);
        csv_number(f, "%.3f", r->latency.min_us);
        csv_number(f, "%.3f", r->latency.max_us);
        csv_number(f, "%.3f", r->latency.median_us);
        csv_number(f, "%.3f", r->latency.p99_us);
        csv_number(f, "%.6f", r->algbw_gbs);
        csv_number(f, "%.6f", r->busbw_gbs);
        csv_number(f, "%.3f", r->bound_us);
        fprintf(f, ",%s,%d,%s,%s", perf_row_check_text(r), info->ranks,
                fold_dtype_name(info->dtype), fold_op_name(info->op));
        csv_number(f, "%.3f", r->first_us);
        csv_number(f, "%.3f", r->worst2_10_us);
        fprintf(f, ",%ld", r->first_calls);
        if (info->compare_mpi) {
            csv_number(f, "%.3f", r->has_mpi ? r->mpi_median_us : NAN);
            csv_number(f, "%.4f", r->has_mpi ? r->speedup : NAN);
            csv_number(f, "%.3f", r->has_mpi ? r->mpi_first_us : NAN);
            csv_number(f, "%.3f", r->has_mpi ? r->mpi_worst2_10_us : NAN);
        }
        fprintf(f, ",%zu\n", r->segment_bytes);
    }
    if (fclose(f) != 0) {
        fprintf(stderr, "fold_perf: writing CSV file '%s' failed: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}
