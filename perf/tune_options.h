/*
 * fold_tune command line: the options, their defaults (and --quick's), and the
 * parser, driven by one table of options that also generates --help.
 */
#ifndef FOLD_TUNE_OPTIONS_H
#define FOLD_TUNE_OPTIONS_H

#include "perf_options.h"

#include <stddef.h>
#include <stdio.h>

#define TUNE_DEFAULT_OUTPUT "fold-tune.conf"

typedef struct tune_options {
    perf_coll_t colls[PERF_COLL_COUNT];
    int         ncolls;
    size_t      begin_bytes;
    size_t      end_bytes;
    size_t      factor;
    double      time_per_size;   /* seconds of timed iterations per case and size */
    long        iters;           /* most timed iterations per case and size */
    long        warmup;          /* most warm-ups */
    size_t      probe_bytes;     /* bytes of the streaming probe (node_mem_gbs) */
    const char *output;
    const char *csv_path;        /* every measured time with the model's, or NULL */
    int         quick;
    int         no_mpi;
    int         stale;          /* inputs written once (as OSU's), not before every call */
    int         help;
    int         version;
    /* given on the command line, so --quick leaves them alone */
    int         set_begin, set_end, set_factor, set_time;
} tune_options_t;

void tune_options_defaults(tune_options_t *opts);

/* Parses argv[1..argc), then applies --quick to what was not given. Returns 0, or -1
 * with a one-line reason in err. */
int tune_options_parse(tune_options_t *opts, int argc, char **argv, char *err, size_t errlen);

void tune_options_print_usage(FILE *out);
void tune_options_print_help(FILE *out);

#endif
