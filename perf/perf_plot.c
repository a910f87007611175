#include "perf_plot.h"
#include "perf_config.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* FOLD_PERF_GNUPLOT names the program when it is not the gnuplot on PATH. */
static int find_gnuplot(char *path, size_t len)
{
    const char *chosen = perf_config()->gnuplot;
    if (chosen != NULL && *chosen != '\0') {
        snprintf(path, len, "%s", chosen);
        return access(path, X_OK) == 0 ? 0 : -1;
    }
    const char *dirs = getenv("PATH");
    if (dirs == NULL) {
        return -1;
    }
    while (*dirs != '\0') {
        size_t n = strcspn(dirs, ":");
        snprintf(path, len, "%.*s/gnuplot", (int)n, dirs);
        if (n > 0 && access(path, X_OK) == 0) {
            return 0;
        }
        dirs += n;
        dirs += *dirs == ':';
    }
    return -1;
}

int perf_plot_available(void)
{
    char path[PATH_MAX];
    return find_gnuplot(path, sizeof(path)) == 0;
}

void perf_plot_explain_missing(FILE *out)
{
    const char *chosen = perf_config()->gnuplot;
    if (chosen != NULL && *chosen != '\0') {
        fprintf(out, "fold_perf: --plot needs gnuplot, and FOLD_PERF_GNUPLOT=%s is not an "
                     "executable program\n", chosen);
    } else {
        fprintf(out, "fold_perf: --plot needs gnuplot, which is not on PATH (Debian: apt-get "
                     "install gnuplot-nox; or set FOLD_PERF_GNUPLOT to the program)\n");
    }
}

/* A series is a collective with one requested algorithm; MPI and the bound appear once
 * per collective, taken from the rows of its first requested algorithm. */
typedef enum { SERIES_FOLD, SERIES_MPI, SERIES_BOUND } series_kind_t;

typedef struct series {
    perf_coll_t   coll;
    const char   *requested;
    series_kind_t kind;
} series_t;

static int row_in_series(const perf_row_t *r, const series_t *s)
{
    if (r->coll != s->coll || strcmp(r->requested, s->requested) != 0) {
        return 0;
    }
    switch (s->kind) {
    case SERIES_FOLD:  return 1;
    case SERIES_MPI:   return r->has_mpi;
    case SERIES_BOUND: return !isnan(r->bound_us);
    }
    return 0;
}

static int series_seen(const series_t *list, size_t n, const series_t *s)
{
    for (size_t i = 0; i < n; i++) {
        if (list[i].coll == s->coll && list[i].kind == s->kind &&
            (s->kind != SERIES_FOLD || strcmp(list[i].requested, s->requested) == 0)) {
            return 1;
        }
    }
    return 0;
}

/* Distinct series in the order they first appear; MPI and bound once per collective. */
static size_t collect_series(const perf_results_t *res, series_t *list, size_t cap)
{
    size_t n = 0;
    for (series_kind_t kind = SERIES_FOLD; kind <= SERIES_BOUND; kind++) {
        for (size_t i = 0; i < res->nrows && n < cap; i++) {
            const perf_row_t *r = &res->rows[i];
            series_t s = {r->coll, r->requested, kind};
            if (row_in_series(r, &s) && !series_seen(list, n, &s)) {
                list[n++] = s;
            }
        }
    }
    return n;
}

/* One datablock per series: bytes, latency (us), bus bandwidth (GB/s). MPI's and the
 * bound's bus bandwidth use the row's own busbw/median ratio, i.e. the same factor. */
static void write_datablock(FILE *gp, size_t index, const perf_results_t *res,
                            const series_t *s)
{
    fprintf(gp, "$s%zu << EOD\n", index);
    for (size_t i = 0; i < res->nrows; i++) {
        const perf_row_t *r = &res->rows[i];
        if (!row_in_series(r, s)) {
            continue;
        }
        double us = s->kind == SERIES_FOLD  ? r->latency.median_us
                    : s->kind == SERIES_MPI ? r->mpi_median_us : r->bound_us;
        double busbw = us > 0 ? r->busbw_gbs * r->latency.median_us / us : 0;
        fprintf(gp, "%zu %.6g %.6g\n", r->bytes, us, busbw);
    }
    fprintf(gp, "EOD\n");
}

static void series_title(const series_t *s, char *out, size_t len)
{
    switch (s->kind) {
    case SERIES_FOLD:  snprintf(out, len, "%s %s", perf_coll_name(s->coll), s->requested); break;
    case SERIES_MPI:   snprintf(out, len, "%s MPI", perf_coll_name(s->coll)); break;
    case SERIES_BOUND: snprintf(out, len, "%s memory bound", perf_coll_name(s->coll)); break;
    }
}

static void write_plot_command(FILE *gp, const series_t *list, size_t n, int column)
{
    fprintf(gp, "plot ");
    for (size_t i = 0; i < n; i++) {
        char title[2 * PERF_NAME_LEN];
        series_title(&list[i], title, sizeof(title));
        const char *style = list[i].kind == SERIES_BOUND ? "lines dashtype 2 lw 2"
                            : list[i].kind == SERIES_MPI ? "linespoints pt 6 lw 2"
                                                         : "linespoints pt 7 lw 2";
        fprintf(gp, "%s$s%zu using 1:%d with %s title \"%s\"", i ? ", " : "", i, column, style,
                title);
    }
    fputc('\n', gp);
}

/* gnuplot single-quoted string: a quote is written twice. */
static void write_quoted(FILE *gp, const char *text)
{
    fputc('\'', gp);
    for (; *text != '\0'; text++) {
        if (*text == '\'') {
            fputc('\'', gp);
        }
        fputc(*text, gp);
    }
    fputc('\'', gp);
}

int perf_plot_write(const char *path, const perf_results_t *results)
{
    char gnuplot[PATH_MAX];
    enum { MAX_SERIES = 2 * (PERF_MAX_ALGORITHMS + 2) };
    series_t list[MAX_SERIES];

    if (find_gnuplot(gnuplot, sizeof(gnuplot)) != 0) {
        perf_plot_explain_missing(stderr);
        return -1;
    }
    size_t n = collect_series(results, list, MAX_SERIES);
    if (n == 0) {
        fprintf(stderr, "fold_perf: --plot: no results to draw\n");
        return -1;
    }
    FILE *gp = popen(gnuplot, "w");
    if (gp == NULL) {
        fprintf(stderr, "fold_perf: --plot: cannot start %s\n", gnuplot);
        return -1;
    }
    const perf_run_info_t *info = &results->info;
    for (size_t i = 0; i < n; i++) {
        write_datablock(gp, i, results, &list[i]);
    }
    fprintf(gp, "set terminal pngcairo size 1400,560 noenhanced\nset output ");
    write_quoted(gp, path);
    fprintf(gp, "\nset multiplot layout 1,2 title \"fold_perf: %d ranks on %d node(s), %s %s\"\n",
            info->ranks, info->nodes, fold_dtype_name(info->dtype), fold_op_name(info->op));
    fprintf(gp, "set logscale x 2\nset format x '%%.0b%%B'\nset grid\n"
                "set key outside below horizontal\n"
                "set xlabel 'bytes per rank'\n");
    fprintf(gp, "set logscale y 10\nset ylabel 'median latency (us, slowest rank)'\n");
    write_plot_command(gp, list, n, 2);
    fprintf(gp, "unset logscale y\nset ylabel 'bus bandwidth (GB/s, nccl-tests)'\n");
    write_plot_command(gp, list, n, 3);
    fprintf(gp, "unset multiplot\nset output\n");
    int status = pclose(gp);
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "fold_perf: --plot: gnuplot failed writing '%s'\n", path);
        return -1;
    }
    return 0;
}
