/* fold_perf output formats: the table, CSV and JSON carry the columns the issue names,
 * and "not measured" is empty (CSV) or null (JSON), never nan. */
#include "perf_output.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static perf_results_t sample_results(int compare_mpi)
{
    perf_results_t res;
    memset(&res, 0, sizeof(res));
    res.info = (perf_run_info_t){
        .ranks = 2, .nodes = 1, .max_local_ranks = 2, .dtype = FOLD_FLOAT32,
        .op = FOLD_OP_SUM, .rotate = 1, .bootstrap = "pmix", .transport = "ucp",
        .segment_size = "auto", .threads = "auto", .fold_version = "0.1.0",
        .mpi_library = compare_mpi ? "Open MPI v4.1.4" : "", .node_bw_gbs = 30.5,
        .compare_mpi = compare_mpi, .checked = 1};
    perf_row_t ok = {
        .coll = PERF_COLL_ALLREDUCE, .requested = "auto", .algorithm = "recursive_doubling",
        .bytes = 8, .count = 2, .iterations = 1000,
        .latency = {1.5, 1.0, 9.0, 1.25, 4.0}, .algbw_gbs = 0.0064, .busbw_gbs = 0.0064,
        .bound_us = 0.001, .checked = 1, .check_ok = 1, .has_mpi = compare_mpi,
        .mpi_median_us = 2.5, .speedup = 2.0, .segment_bytes = 131072,
        .first_us = 40.5, .worst2_10_us = 7.25, .mpi_first_us = 61.5,
        .mpi_worst2_10_us = 9.75};
    perf_row_t failed = ok;
    failed.coll = PERF_COLL_REDUCE;
    snprintf(failed.requested, sizeof(failed.requested), "ring");
    snprintf(failed.algorithm, sizeof(failed.algorithm), "ring");
    failed.bytes    = 1 << 20;
    failed.count    = 1 << 18;
    failed.check_ok = 0;
    failed.bound_us = NAN;
    failed.has_mpi  = 0;
    failed.segment_bytes = 65536;
    cr_assert_eq(perf_results_add(&res, &ok), 0);
    cr_assert_eq(perf_results_add(&res, &failed), 0);
    return res;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void temp_path(char *path, size_t len, const char *suffix)
{
    snprintf(path, len, "/tmp/fold_perf_test_%d_%s", (int)getpid(), suffix);
}

Test(perf_output, csv_has_the_required_columns)
{
    perf_results_t res = sample_results(1);
    char path[128];
    temp_path(path, sizeof(path), "out.csv");
    cr_assert_eq(perf_csv_write(path, &res), 0);
    char *text = slurp(path);
    unlink(path);
    cr_expect(strstr(text, "nan") == NULL, "not measured is an empty field, not nan");
    char *header = strtok(text, "\n");
    const char *required[] = {"collective", "algorithm", "bytes", "count", "iterations",
                              "avg_us", "min_us", "max_us", "median_us", "p99_us", "algbw_gbs",
                              "busbw_gbs", "bound_us", "check", "mpi_median_us", "speedup",
                              "first_us", "worst2-10_us", "first_calls", "mpi_first_us",
                              "mpi_worst2-10_us", "segment_bytes"};
    for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
        char field[64];
        snprintf(field, sizeof(field), "%s,", required[i]);
        int found = strstr(header, field) != NULL ||
                    (strlen(header) >= strlen(required[i]) &&
                     strcmp(header + strlen(header) - strlen(required[i]), required[i]) == 0);
        cr_expect(found, "header '%s' lacks %s", header, required[i]);
    }
    char *row1 = strtok(NULL, "\n");
    char *row2 = strtok(NULL, "\n");
    cr_assert_not_null(row2);
    cr_expect(strncmp(row1, "allreduce,recursive_doubling,auto,8,2,1000,1.500,1.000,9.000,"
                            "1.250,4.000,", 60) == 0, "%s", row1);
    cr_expect(strstr(row1, ",ok,") != NULL, "%s", row1);
    cr_expect(strstr(row1, ",2.500,2.0000,61.500,9.750,") != NULL, "%s", row1);
    cr_expect(strstr(row1, ",sum,40.500,7.250,0,") != NULL, "first calls: %s", row1);
    cr_expect(strstr(row2, "reduce,ring,ring,1048576,262144,") == row2, "%s", row2);
    cr_expect(strstr(row2, ",,FAIL,") != NULL, "no bound is an empty field: %s", row2);
    cr_expect(strstr(row2, ",0,,,,,65536") != NULL && row2[strlen(row2) - 6] == ',',
              "no MPI time is empty, the segment last: %s", row2);
    cr_expect(strcmp(row1 + strlen(row1) - 7, ",131072") == 0, "%s", row1);
    perf_results_release(&res);
}

Test(perf_output, csv_without_mpi_has_no_mpi_columns)
{
    perf_results_t res = sample_results(0);
    char path[128];
    temp_path(path, sizeof(path), "nompi.csv");
    cr_assert_eq(perf_csv_write(path, &res), 0);
    char *text = slurp(path);
    unlink(path);
    cr_expect(strstr(text, "mpi_median_us") == NULL);
    cr_expect(strstr(text, "mpi_first_us") == NULL);
    cr_expect(strstr(text, ",first_us,worst2-10_us,first_calls,segment_bytes\n") != NULL,
              "%s", text);
    perf_results_release(&res);
}

Test(perf_output, json_has_the_required_keys)
{
    perf_results_t res = sample_results(1);
    char path[128];
    temp_path(path, sizeof(path), "out.json");
    cr_assert_eq(perf_json_write(path, &res), 0);
    char *text = slurp(path);
    unlink(path);
    const char *required[] = {
        "\"collective\": \"allreduce\"", "\"algorithm\": \"recursive_doubling\"",
        "\"requested\": \"auto\"", "\"segment_bytes\": 131072", "\"bytes\": 8", "\"count\": 2",
        "\"iterations\": 1000",
        "\"avg_us\": 1.500", "\"min_us\": 1.000", "\"max_us\": 9.000", "\"median_us\": 1.250",
        "\"p99_us\": 4.000", "\"algbw_gbs\": 0.006400", "\"busbw_gbs\": 0.006400",
        "\"bound_us\": 0.001", "\"check\": \"ok\"", "\"mpi_median_us\": 2.500",
        "\"speedup\": 2.0000", "\"check\": \"FAIL\"", "\"bound_us\": null",
        "\"mpi_median_us\": null", "\"ranks\": 2", "\"node_bandwidth_gbs\": 30.500",
        "\"first_calls\": 0", "\"first_us\": 40.500", "\"worst2-10_us\": 7.250",
        "\"mpi_first_us\": 61.500", "\"mpi_worst2-10_us\": 9.750", "\"mpi_first_us\": null",
        "\"buffers\": false", "\"settle\": false",
        "\"mpi_library\": \"Open MPI v4.1.4\"", "\"results\": ["};
    for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
        cr_expect(strstr(text, required[i]) != NULL, "JSON lacks %s:\n%s", required[i], text);
    }
    cr_expect(strstr(text, "nan") == NULL);
    /* Balanced brackets and braces: a cheap well-formedness check (the mpirun test
     * parses the real output with a JSON parser when one is installed). */
    int depth = 0;
    for (const char *c = text; *c; c++) {
        depth += (*c == '{' || *c == '[') - (*c == '}' || *c == ']');
        cr_assert(depth >= 0);
    }
    cr_expect_eq(depth, 0);
    perf_results_release(&res);
}

Test(perf_output, table_shows_algorithm_choice_and_check)
{
    perf_results_t res = sample_results(1);
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    perf_table_print_header(out, &res.info);
    for (size_t i = 0; i < res.nrows; i++) {
        perf_table_print_row(out, &res.info, &res.rows[i]);
    }
    fclose(out);
    const char *expected[] = {"2 ranks on 1 node", "float32 sum", "30.5 GB/s", "collective",
                              "algorithm", "median_us", "busbw_GB/s", "bound_us", "check",
                              "mpi_median_us", "speedup", "auto:recursive_doubling ", "FAIL",
                              "Open MPI v4.1.4", "ring@64k", "first_us", "worst2-10_us",
                              "mpi_first_us", "mpi_worst2-10_us", "     40.50         7.25 ",
                              "       61.50             9.75 "};
    for (size_t i = 0; i < sizeof(expected) / sizeof(expected[0]); i++) {
        cr_expect(strstr(text, expected[i]) != NULL, "table lacks '%s':\n%s", expected[i],
                  text);
    }
    cr_expect(strstr(text, "untimed") == NULL, "no untimed column without --settle:\n%s",
              text);
    cr_expect(strstr(text, "recursive_doubling@") == NULL,
              "8 B is one segment: no @ after its algorithm:\n%s", text);
    cr_expect_eq(perf_results_failed_checks(&res), 1);
    free(text);
    perf_results_release(&res);
}

/* --settle: the table counts the untimed calls of every row, and the header says what
 * first_us then comes after. */
Test(perf_output, table_counts_untimed_calls_under_settle)
{
    perf_results_t res = sample_results(0);
    res.info.settle = 1;
    res.rows[0].first_calls = 7;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    perf_table_print_header(out, &res.info);
    perf_table_print_row(out, &res.info, &res.rows[0]);
    fclose(out);
    cr_expect(strstr(text, "iters untimed") != NULL, "%s", text);
    cr_expect(strstr(text, "  1000       7 ") != NULL, "%s", text);
    cr_expect(strstr(text, "untimed before anything is timed (--settle)") != NULL, "%s", text);
    free(text);
    perf_results_release(&res);
}

Test(perf_output, unwritable_file_is_an_error)
{
    perf_results_t res = sample_results(0);
    cr_expect_eq(perf_csv_write("/nonexistent-dir/x.csv", &res), -1);
    cr_expect_eq(perf_json_write("/nonexistent-dir/x.json", &res), -1);
    perf_results_release(&res);
}
