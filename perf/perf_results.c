#include "perf_results.h"

#include "util/grow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int perf_results_add(perf_results_t *results, const perf_row_t *row)
{
    if (fold_util_grow((void **)&results->rows, &results->capacity, results->nrows + 1,
                       sizeof(*results->rows), 64) != FOLD_OK) {
        return -1;
    }
    results->rows[results->nrows++] = *row;
    return 0;
}

void perf_results_release(perf_results_t *results)
{
    free(results->rows);
    results->rows     = NULL;
    results->nrows    = 0;
    results->capacity = 0;
}

size_t perf_results_failed_checks(const perf_results_t *results)
{
    size_t failed = 0;
    for (size_t i = 0; i < results->nrows; i++) {
        failed += results->rows[i].checked && !results->rows[i].check_ok;
    }
    return failed;
}

const char *perf_row_check_text(const perf_row_t *row)
{
    return !row->checked ? "-" : row->check_ok ? "ok" : "FAIL";
}

void perf_row_algorithm_label(const perf_row_t *row, char *out, size_t len)
{
    char seg[32] = "";
    size_t s = row->segment_bytes;
    if (s != 0 && row->bytes > s) {
        int shift = s % (1u << 20) == 0 ? 20 : s % 1024 == 0 ? 10 : 0;
        snprintf(seg, sizeof(seg), "@%zu%s", s >> shift,
                 shift == 20 ? "M" : shift == 10 ? "k" : "");
    }
    snprintf(out, len, "%s%s%s", strcmp(row->requested, "auto") == 0 ? "auto:" : "",
             row->algorithm, seg);
}
