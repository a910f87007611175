/*
 * fold_perf: parse the options, bootstrap MPI (when used) and fold, probe the nodes,
 * run the sweep, write the outputs. Exit status: 0 success, 1 a check failed,
 * 2 bad usage, 3 a runtime error.
 */
#include "perf_bench.h"
#include "perf_job.h"
#include "perf_mpi.h"
#include "perf_options.h"
#include "perf_output.h"
#include "perf_plot.h"
#include "perf_probe.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EXIT_CHECK_FAILED = 1, EXIT_USAGE = 2, EXIT_RUNTIME = 3 };

static perf_bootstrap_t resolve_bootstrap(const perf_options_t *opts)
{
    if (opts->bootstrap != PERF_BOOTSTRAP_DEFAULT) {
        return opts->bootstrap;
    }
    return perf_mpi_built() ? PERF_BOOTSTRAP_OOB : PERF_BOOTSTRAP_PMIX;
}

/* Settings that every rank applies alike; 0 or -1 after printing why (rank 0). */
static int apply_settings(const perf_options_t *opts, fold_context_h ctx, int rank, int ranks)
{
    char threads[32];
    if (opts->root >= ranks) {
        if (rank == 0) {
            fprintf(stderr, "fold_perf: bad value '%d' for -r/--root: the job has %d rank%s\n",
                    opts->root, ranks, ranks == 1 ? "" : "s");
        }
        return -1;
    }
    if (opts->inject_rank >= ranks) {
        if (rank == 0) {
            fprintf(stderr, "fold_perf: bad value '%d' for --inject-error: the job has %d "
                    "rank%s\n", opts->inject_rank, ranks, ranks == 1 ? "" : "s");
        }
        return -1;
    }
    if (opts->segment_size[0] != '\0' &&
        fold_config_set(ctx, "SEGMENT_SIZE", opts->segment_size) != FOLD_OK) {
        if (rank == 0) {
            fprintf(stderr, "fold_perf: fold rejected segment size '%s'\n", opts->segment_size);
        }
        return -1;
    }
    snprintf(threads, sizeof(threads), "%ld", opts->threads);
    if (opts->threads >= 0 && fold_config_set(ctx, "NUM_THREADS", threads) != FOLD_OK) {
        if (rank == 0) {
            fprintf(stderr, "fold_perf: fold rejected %s threads\n", threads);
        }
        return -1;
    }
    return 0;
}

/* Rank 0 finds out whether it can write every output file, before the sweep, and
 * tells the others, so that the run does not end in a write error after minutes. */
static int outputs_writable(const perf_options_t *opts, fold_comm_h comm, int rank)
{
    int32_t ok = 1;
    if (rank == 0) {
        const char *paths[] = {opts->csv_path, opts->json_path, opts->plot_path};
        for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
            FILE *f = paths[i] ? fopen(paths[i], "a") : NULL;
            if (paths[i] != NULL && f == NULL) {
                fprintf(stderr, "fold_perf: cannot write '%s': %s\n", paths[i],
                        strerror(errno));
                ok = 0;
            }
            if (f != NULL) {
                fclose(f);
            }
        }
        if (opts->plot_path != NULL && !perf_plot_available()) {
            perf_plot_explain_missing(stderr);
            ok = 0;
        }
    }
    if (fold_bcast(&ok, 1, FOLD_INT32, 0, comm) != FOLD_OK) {
        perf_fail_job(EXIT_RUNTIME);
    }
    return ok ? 0 : -1;
}

/* The current value of a fold variable, copied (fold's string lasts until the next set). */
static const char *config_value(fold_context_h ctx, const char *name, char *buf, size_t len)
{
    const char *value = NULL;
    if (fold_config_get(ctx, name, &value) != FOLD_OK || value == NULL) {
        value = "?";
    }
    snprintf(buf, len, "%s", value);
    return buf;
}

static void print_row(const perf_run_info_t *info, const perf_row_t *row, void *arg)
{
    (void)arg;
    perf_table_print_row(stdout, info, row);
}

static int write_outputs(const perf_options_t *opts, const perf_results_t *results)
{
    int failed = 0;
    if (opts->csv_path != NULL) {
        failed |= perf_csv_write(opts->csv_path, results) != 0;
    }
    if (opts->json_path != NULL) {
        failed |= perf_json_write(opts->json_path, results) != 0;
    }
    if (opts->plot_path != NULL) {
        failed |= perf_plot_write(opts->plot_path, results) != 0;
    }
    return failed ? -1 : 0;
}

int main(int argc, char **argv)
{
    perf_options_t opts;
    char err[512];
    int reporting = perf_launcher_rank() == 0;

    perf_options_defaults(&opts);
    if (perf_options_parse(&opts, argc, argv, err, sizeof(err)) != 0) {
        if (reporting) {
            fprintf(stderr, "fold_perf: %s\n\n", err);
            perf_options_print_usage(stderr);
            fprintf(stderr, "\nfold_perf --help also explains the statistics, the bandwidths "
                            "and the bound.\n");
        }
        return EXIT_USAGE;
    }
    if (opts.help) {
        if (reporting) {
            perf_options_print_help(stdout);
        }
        return 0;
    }
    if (opts.version) {
        if (reporting) {
            printf("fold_perf (fold %s), %s MPI\n", fold_version_string(),
                   perf_mpi_built() ? "with" : "without");
        }
        return 0;
    }
    perf_bootstrap_t bootstrap = resolve_bootstrap(&opts);
    if (bootstrap == PERF_BOOTSTRAP_OOB && !perf_mpi_built()) {
        if (reporting) {
            fprintf(stderr, "fold_perf: bad value 'oob' for --bootstrap: this fold_perf was "
                            "built without MPI\n");
        }
        return EXIT_USAGE;
    }

    /* --compare mpi needs MPI even when fold bootstraps through PMIx. */
    if (opts.compare_mpi && bootstrap == PERF_BOOTSTRAP_PMIX) {
        int rank, size;
        if (perf_mpi_init(NULL, NULL, &rank, &size) != 0) {
            return EXIT_RUNTIME;
        }
    }
    fold_context_h ctx;
    int status = perf_init_fold(bootstrap == PERF_BOOTSTRAP_OOB, opts.transport, &ctx);
    if (status != FOLD_OK) {
        fprintf(stderr, "fold_perf: fold_init (%s bootstrap) failed: %s%s\n",
                bootstrap == PERF_BOOTSTRAP_OOB ? "oob" : "pmix", fold_status_string(status),
                bootstrap == PERF_BOOTSTRAP_PMIX ? " (start fold_perf with a PMIx launcher, "
                                                   "e.g. mpirun -n 2 fold_perf)" : "");
        perf_fail_job(EXIT_RUNTIME);
    }

    perf_env_t env;
    memset(&env, 0, sizeof(env));
    env.opts = &opts;
    env.ctx  = ctx;
    env.comm = fold_comm_world(ctx);
    fold_comm_rank(env.comm, &env.rank);
    fold_comm_size(env.comm, &env.ranks);
    if (apply_settings(&opts, ctx, env.rank, env.ranks) != 0 ||
        outputs_writable(&opts, env.comm, env.rank) != 0 ||
        perf_bench_resolve_algorithms(&env) != 0) {
        fold_finalize(ctx);
        perf_mpi_finalize();
        return EXIT_USAGE;
    }
    perf_data_spec_init(&env.spec, &opts, env.ranks);
    status = perf_node_layout_init(&env.layout, env.comm);
    if (status == FOLD_OK && !opts.probe_each) {
        status = perf_probe_bandwidth(&env.layout, env.comm, opts.probe_bytes);
    }
    if (status != FOLD_OK) {
        fprintf(stderr, "fold_perf: rank %d: finding the nodes' layout and bandwidth failed: "
                "%s\n", env.rank, fold_status_string(status));
        perf_fail_job(EXIT_RUNTIME);
    }

    char transport[PERF_NAME_LEN], segment[PERF_NAME_LEN], threads[PERF_NAME_LEN];
    perf_results_t results;
    memset(&results, 0, sizeof(results));
    perf_run_info_t *info = &results.info;
    info->ranks           = env.ranks;
    info->nodes           = env.layout.nnodes;
    info->max_local_ranks = perf_node_layout_max_local(&env.layout);
    info->dtype           = opts.dtype;
    info->op              = opts.op;
    info->root            = opts.root;
    info->inplace         = opts.inplace;
    info->rotate          = opts.rotate;
    info->buffers         = opts.buffers > 0;
    info->fresh           = opts.fresh;
    info->barrier         = opts.barrier;
    info->settle          = opts.settle;
    info->batch           = opts.batch;
    info->fold_memory     = opts.fold_memory;
    info->sparsity        = opts.sparsity;
    info->distribution    = opts.distribution;
    info->bootstrap       = bootstrap == PERF_BOOTSTRAP_OOB ? "oob (MPI_Allgather)" : "pmix";
    /* --transport reaches fold through the init parameters, not the variable. */
    info->transport       = opts.transport[0] != '\0'
                                ? opts.transport
                                : config_value(ctx, "TRANSPORT", transport, sizeof(transport));
    info->segment_size    = config_value(ctx, "SEGMENT_SIZE", segment, sizeof(segment));
    info->threads         = config_value(ctx, "NUM_THREADS", threads, sizeof(threads));
    if (strcmp(info->threads, "0") == 0) {
        info->threads = "auto";
    }
    info->fold_version    = fold_version_string();
    info->mpi_library     = opts.compare_mpi ? perf_mpi_library_version() : "";
    info->node_bw_gbs     = perf_probe_slowest_node(&env.layout);
    info->probe_each      = opts.probe_each;
    info->compare_mpi     = opts.compare_mpi;
    info->compare_apart   = opts.compare_apart;
    info->checked         = opts.check;

    if (env.rank == 0) {
        perf_table_print_header(stdout, info);
    }
    status = perf_bench_run(&env, &results, print_row, NULL);
    if (status != FOLD_OK) {
        perf_fail_job(EXIT_RUNTIME);
    }

    int exit_code = 0;
    if (env.rank == 0 && write_outputs(&opts, &results) != 0) {
        exit_code = EXIT_RUNTIME;
    }
    size_t failed = perf_results_failed_checks(&results);
    if (failed > 0) {
        if (env.rank == 0) {
            fprintf(stderr, "fold_perf: %zu of %zu row(s) FAILED the check (mismatches are "
                    "listed above, by rank)\n", failed, results.nrows);
        }
        exit_code = EXIT_CHECK_FAILED;
    }
    perf_results_release(&results);
    perf_node_layout_release(&env.layout);
    status = fold_finalize(ctx);
    perf_mpi_finalize();
    if (status != FOLD_OK && exit_code == 0) {
        fprintf(stderr, "fold_perf: fold_finalize failed: %s\n", fold_status_string(status));
        exit_code = EXIT_RUNTIME;
    }
    return exit_code;
}
