/*
 * fold_tune options: one table (name, short name, argument, help, handler) drives the
 * parser, the usage shown on errors and --help, as in fold_perf.
 */
#include "tune_options.h"
#include "cli_options.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef int (*tune_option_handler_t)(tune_options_t *opts, const char *arg, char *why,
                                     size_t whylen);

typedef struct tune_option {
    cli_option_t           cli;   /* first: the engine sees only this */
    tune_option_handler_t handler;
} tune_option_t;

/* ---- handlers --------------------------------------------------------------- */

static int opt_collective(tune_options_t *o, const char *arg, char *why, size_t whylen)
{
    return perf_parse_collectives(arg, o->colls, &o->ncolls, why, whylen);
}

static int opt_begin(tune_options_t *o, const char *arg, char *why, size_t whylen)
{
    o->set_begin = 1;
    return perf_parse_size_arg(arg, &o->begin_bytes, why, whylen);
}

static int opt_end(tune_options_t *o, const char *arg, char *why, size_t whylen)
{
    o->set_end = 1;
    return perf_parse_size_arg(arg, &o->end_bytes, why, whylen);
}

static int opt_factor(tune_options_t *o, const char *arg, char *why, size_t whylen)
{
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    o->set_factor = 1;
    if (end == arg || *end != '\0' || errno != 0 || v < 2 || v > 1024) {
        snprintf(why, whylen, "expected an integer from 2 to 1024");
        return -1;
    }
    o->factor = (size_t)v;
    return 0;
}

static int opt_output(tune_options_t *o, const char *arg, char *why, size_t whylen)
{
    if (arg[0] == '\0') {
        snprintf(why, whylen, "expected a file name");
        return -1;
    }
    o->output = arg;
    return 0;
}

static int opt_csv(tune_options_t *o, const char *arg, char *why, size_t whylen)
{
    if (arg[0] == '\0') {
        snprintf(why, whylen, "expected a file name");
        return -1;
    }
    o->csv_path = arg;
    return 0;
}

static int opt_quick(tune_options_t *o, const char *arg, char *why, size_t whylen)
{
    (void)arg;
    (void)why;
    (void)whylen;
    o->quick = 1;
    return 0;
}

static int opt_time_per_size(tune_options_t *o, const char *arg, char *why, size_t whylen)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    o->set_time = 1;
    if (end == arg || *end != '\0' || errno != 0 || !(v >= 0.0 && v <= 3600.0)) {
        snprintf(why, whylen, "expected seconds from 0 (no limit) to 3600, e.g. 0.1");
        return -1;
    }
    o->time_per_size = v;
    return 0;
}

static int opt_no_mpi(tune_options_t *o, const char *arg, char *why, size_t whylen)
{
    (void)arg;
    (void)why;
    (void)whylen;
    o->no_mpi = 1;
    return 0;
}

static int opt_stale(tune_options_t *o, const char *arg, char *why, size_t whylen)
{
    (void)arg;
    (void)why;
    (void)whylen;
    o->stale = 1;
    return 0;
}

static int opt_version(tune_options_t *o, const char *arg, char *why, size_t whylen)
{
    (void)arg;
    (void)why;
    (void)whylen;
    o->version = 1;
    return 0;
}

static int opt_help(tune_options_t *o, const char *arg, char *why, size_t whylen)
{
    (void)arg;
    (void)why;
    (void)whylen;
    o->help = 1;
    return 0;
}

/* ---- the table -------------------------------------------------------------- */

static const tune_option_t tune_option_table[] = {
    {{"collective", 'c', "LIST", "collectives to tune, comma-separated: allreduce, reduce "
     "(default allreduce,reduce)"}, opt_collective},
    {{"begin", 'b', "SIZE", "smallest message in bytes per rank (default 8; --quick 8)"},
     opt_begin},
    {{"end", 'e', "SIZE", "largest message in bytes per rank (default 64M; --quick 1M)"},
     opt_end},
    {{"factor", 'f', "N", "size multiplier from one measured size to the next (default 2; "
     "--quick 8)"}, opt_factor},
    {{"output", 'o', "FILE", "the tuning file to write (default " TUNE_DEFAULT_OUTPUT " in "
     "the current directory); written by rank 0, only when the whole run succeeds"},
     opt_output},
    {{"csv", 0, "FILE", "also write every measured time (the sweep's and the calibration "
     "pairs') with the cost model's prediction for it, as CSV (rank 0)"}, opt_csv},
    {{"quick", 0, NULL, "a short run for CI and smoke tests: 8 B .. 1 MiB by factor 8, "
     "0.01 s per size, at most 100 iterations; -b/-e/-f/--time-per-size still apply"},
     opt_quick},
    {{"time-per-size", 0, "SEC", "time budget of one case at one size (fold and MPI "
     "together): its timed iterations are cut to about SEC seconds, never below 10 "
     "(default 0.1; --quick 0.01; 0: no limit)"}, opt_time_per_size},
    {{"no-mpi", 0, NULL, "do not time the MPI library beside fold: the file then has no "
     "serve lines (the MPI shim falls back on the cost model)"}, opt_no_mpi},
    {{"stale", 0, NULL, "time calls on inputs written once, as OSU and fold_perf without "
     "--fresh do (default: each rank rewrites its input before every call, as an "
     "application that has just computed it; a peer's input is then in its owner's cache, "
     "not still in the reader's from the call before, which favours single copy)"},
     opt_stale},
    {{"version", 'V', NULL, "print fold's version and exit"}, opt_version},
    {{"help", 'h', NULL, "print this help and exit"}, opt_help},
};

#define TUNE_OPTION_COUNT (sizeof(tune_option_table) / sizeof(tune_option_table[0]))

static const char tune_help_intro[] =
    "fold_tune measures the machine it runs on and writes a tuning file that fold loads\n"
    "(FOLD_TUNE_FILE): cost-model parameters, selection rules for the job's shape, and\n"
    "where fold beat the MPI library. Start it like fold_perf, with every rank of the\n"
    "shape you want to tune: mpirun -n N fold_tune [options] (srun --mpi=pmix fold_tune).\n"
    "\n";

static const char tune_help_notes[] =
    "\n"
    "What it does\n"
    "  1. Calibrates the cost model (fold_info -m lists the parameters):\n"
    "       copy_gbs, copy_mem_gbs      memcpy on one core, 256 KiB (in cache) and out of\n"
    "                                   it: buffers of 4 MiB, doubled until a doubling no\n"
    "                                   longer slows the copy by 10% (64 MiB at least, the\n"
    "                                   last-level cache or 1 GiB at most)\n"
    "       reduce_gbs, reduce_mem_gbs  fold's float32 c = a + b kernel, likewise (bytes of c)\n"
    "       cma_mem_gbs                 single copy out of cache: process_vm_readv of the\n"
    "                                   same out-of-cache buffer, 1 MiB per call\n"
    "       node_mem_gbs                every rank of a node streaming c += a at once over\n"
    "                                   twice the node's cache (the fold_perf probe), as\n"
    "                                   bytes of result per ns (the probe's traffic / 3)\n"
    "       intra_lat_us, intra_gbs     two ranks of one node, forced recursive_doubling\n"
    "                                   allreduce at 8 B and at 1, 2 and 4 MiB, before and\n"
    "                                   after the sweep (the lower median counts): the values\n"
    "                                   that make the model reproduce those times, with the\n"
    "                                   reduction and executor costs it already knows\n"
    "       inter_lat_us, inter_gbs     the same between two nodes, when the job spans\n"
    "                                   several (else kept)\n"
    "       step_us, flag_us            fitted: the values minimising the squared log error\n"
    "                                   between the model and every measured time up to\n"
    "                                   4 KiB (all algorithms but auto): a log grid, then\n"
    "                                   Levenberg-Marquardt; the latencies above are\n"
    "                                   re-solved for each candidate, so they stay consistent\n"
    "       cache_bytes                 hwloc's last-level cache of the node, at most the\n"
    "                                   footprint of the first of those copies that no\n"
    "                                   longer ran at 1.25x the memory rate, per instance\n"
    "                                   (a VM may report any size),\n"
    "                                   unless another size (256 KiB, 512 KiB, ...) lowers\n"
    "                                   the error over all measured times by 5% or more\n"
    "                                   (the bandwidths re-solved for each): the model has\n"
    "                                   one cache level, a machine may deliver in-cache\n"
    "                                   speed only in L2\n"
    "       eager_bytes                 fitted among 1k..64k on 4 KiB < size <= 1 MiB, kept\n"
    "                                   unless that lowers the error by 5% or more\n"
    "       shm_gbs                     fitted among 1.5..48 GB/s on the same sizes, kept\n"
    "                                   unless that lowers the error by 5% or more\n"
    "       nics                        kept (not measured)\n"
    "  2. Sweeps allreduce and reduce (float32 sum, out of place, root 0) over the sizes,\n"
    "     with every algorithm that implements the collective and fits the job's shape\n"
    "     (node-aware ones only where a node holds several ranks, shm_flat only on one\n"
    "     node), the node-aware ones once per leader count 1, 2, 4, ... up to the fewest\n"
    "     ranks on a node, fold's own choice (auto), and the MPI library's MPI_Allreduce /\n"
    "     MPI_Reduce timed beside every case, interleaved iteration by iteration. All cases\n"
    "     of one size run one after the other, so that drift affects them alike. A case's\n"
    "     time is fold_perf's: the median over iterations of the slowest rank's time,\n"
    "     every rank rewriting its input before each call (fold_perf --fresh) unless\n"
    "     --stale.\n"
    "  3. Writes the tuning file (rank 0) and prints a table: per collective and size the\n"
    "     fastest case (leaders), fold's own choice, MPI, and the model's prediction for\n"
    "     the fastest case with the fitted parameters.\n"
    "\n"
    "The tuning file\n"
    "  param <name> <value>   the calibrated cost model; on every shape, the model then\n"
    "                         picks algorithms and leaders for this machine\n"
    "  rule <rule>            the fastest algorithm per size range, keyed to the measured\n"
    "                         shape (nA-A:ppnB-B): other shapes are left to the model.\n"
    "                         Adjacent sizes keep the previous size's algorithm while it\n"
    "                         is within 3% of the fastest, or within the spread of that\n"
    "                         size's own timings (auto against the algorithm it ran, timed\n"
    "                         on its own; at most 25%), so noise does not split ranges.\n"
    "                         A rule cannot name a leader count: the model picks it, and\n"
    "                         the comment after the rule gives the measured one\n"
    "  serve <coll>:<sizes>:<terms>:fold|mpi\n"
    "                         fold where its rule's algorithm measured at most the MPI\n"
    "                         library's median (MPI is the incumbent), else mpi; the MPI\n"
    "                         shim (libfold-mpi.so) follows these on this shape\n"
    "  Use it with   export FOLD_TUNE_FILE=/path/" TUNE_DEFAULT_OUTPUT "\n"
    "  or install it as <prefix>/etc/fold/tune (read by default, FOLD_TUNE_FILE=auto).\n"
    "  fold_info -m shows the parameters in effect, fold_info -S NODESxPPN the decisions.\n"
    "  fold_tune itself ignores any tuning file (it runs with FOLD_TUNE_FILE=none), so\n"
    "  'auto' is fold's built-in choice.\n"
    "\n"
    "Time: about 3 minutes on 2 ranks with the defaults; --quick well under 30 s.\n"
    "Exit status: 0 success, 2 bad usage, 3 a runtime error.\n"
    "Example: mpirun -n 4 fold_tune -o /opt/fold/etc/fold/tune\n";

/* ---- parser ----------------------------------------------------------------- */

void tune_options_defaults(tune_options_t *opts)
{
    memset(opts, 0, sizeof(*opts));
    opts->colls[0]      = PERF_COLL_ALLREDUCE;
    opts->colls[1]      = PERF_COLL_REDUCE;
    opts->ncolls        = 2;
    opts->begin_bytes   = 8;
    opts->end_bytes     = (size_t)64 << 20;
    opts->factor        = 2;
    opts->time_per_size = 0.1;
    opts->iters         = 1000;
    opts->warmup        = 10;
    opts->probe_bytes   = (size_t)64 << 20;
    opts->output        = TUNE_DEFAULT_OUTPUT;
}

static void apply_quick(tune_options_t *o)
{
    if (!o->quick) {
        return;
    }
    o->begin_bytes   = o->set_begin ? o->begin_bytes : 8;
    o->end_bytes     = o->set_end ? o->end_bytes : (size_t)1 << 20;
    o->factor        = o->set_factor ? o->factor : 8;
    o->time_per_size = o->set_time ? o->time_per_size : 0.01;
    o->iters         = 100;
    o->warmup        = 3;
    o->probe_bytes   = (size_t)16 << 20;
}

static int options_validate(const tune_options_t *o, char *err, size_t errlen)
{
    if (o->begin_bytes < sizeof(float)) {
        snprintf(err, errlen, "--begin must be at least 4 bytes (one float32)");
        return -1;
    }
    if (o->begin_bytes > o->end_bytes) {
        snprintf(err, errlen, "--begin (%zu bytes) is larger than --end (%zu bytes)",
                 o->begin_bytes, o->end_bytes);
        return -1;
    }
    if (o->end_bytes > ((size_t)1 << 30)) {
        snprintf(err, errlen, "--end (%zu bytes) is above 1G", o->end_bytes);
        return -1;
    }
    return 0;
}

/* The engine's call into this table's typed handlers. */
static int apply(void *opts, const cli_option_t *opt, const char *value, char *why,
                 size_t whylen)
{
    return ((const tune_option_t *)opt)->handler(opts, value, why, whylen);
}

static const cli_table_t tune_cli = {tune_option_table, TUNE_OPTION_COUNT,
                                     sizeof(tune_option_table[0]), "fold_tune", apply};

int tune_options_parse(tune_options_t *opts, int argc, char **argv, char *err, size_t errlen)
{
    if (cli_parse(&tune_cli, opts, argc, argv, err, errlen) != 0) {
        return -1;
    }
    if (opts->help || opts->version) {
        return 0;
    }
    apply_quick(opts);
    return options_validate(opts, err, errlen);
}

/* ---- usage and help --------------------------------------------------------- */

void tune_options_print_usage(FILE *out)
{
    fprintf(out, "Usage: mpirun -n N fold_tune [options]\n\nOptions:\n");
    cli_print_options(&tune_cli, out, 28, 92);
}

void tune_options_print_help(FILE *out)
{
    fputs(tune_help_intro, out);
    tune_options_print_usage(out);
    fputs(tune_help_notes, out);
}
