/*
 * fold_info: what this fold build has — version, transports, the configuration
 * variables of every table (runtime, MPI shim, tools) with defaults, current values
 * and descriptions, algorithms with one-line descriptions, and the default selection
 * rules. Like ucx_info / ucc_info. Under a launcher, -C shows what a context ended
 * up with (transport, node path).
 */
#include "comm.h"
#include "mem.h"
#ifdef FOLD_INFO_SHIM_TABLE
#include "shim_config.h"
#endif
#ifdef FOLD_INFO_PERF_TABLE
#include "perf_config.h"
#endif

#include "fold_info_launcher.h"
#include "fold_shape.h"

#include <getopt.h>
#include <rdma/fabric.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_version(void)
{
    printf("# fold version %s\n", fold_version_string());
}

/* One line per provider name: its endpoint types, and whether it offers what the
 * ofi transport asks for (reliable datagrams with tagged messages). */
static void print_ofi_providers(void)
{
    struct fi_info *all = NULL;
    int ret = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0, NULL,
                         &all);
    uint32_t version = fi_version();

    printf("#\n# libfabric %u.%u providers (FOLD_OFI_PROVIDER selects one for ofi; 'usable' =\n"
           "# reliable datagrams with tagged messages, which ofi needs)\n#\n",
           FI_MAJOR(version), FI_MINOR(version));
    if (ret != 0) {
        printf("#   none found: %s\n", fi_strerror(-ret));
        return;
    }
    for (struct fi_info *i = all; i != NULL; i = i->next) {
        const char *name = i->fabric_attr->prov_name;
        int seen = 0;
        for (struct fi_info *j = all; j != i && !seen; j = j->next) {
            seen = strcmp(j->fabric_attr->prov_name, name) == 0;
        }
        if (seen) {
            continue;
        }
        int msg = 0, rdm = 0, dgram = 0, usable = 0;
        for (struct fi_info *j = i; j != NULL; j = j->next) {
            if (strcmp(j->fabric_attr->prov_name, name) != 0) {
                continue;
            }
            msg   |= j->ep_attr->type == FI_EP_MSG;
            dgram |= j->ep_attr->type == FI_EP_DGRAM;
            rdm   |= j->ep_attr->type == FI_EP_RDM;
            usable |= j->ep_attr->type == FI_EP_RDM && (j->caps & FI_TAGGED);
        }
        char types[32];
        snprintf(types, sizeof(types), "%s%s%s", rdm ? "rdm " : "", msg ? "msg " : "",
                 dgram ? "dgram " : "");
        size_t types_len = strlen(types);
        if (types_len > 0) {
            types[types_len - 1] = '\0';   /* the last type's trailing space */
        }
        if (usable) {
            printf("#   %-16s %-16s usable\n", name, types);
        } else {
            printf("#   %-16s %s\n", name, types);
        }
    }
    fi_freeinfo(all);
}

static void print_transports(void)
{
    printf("#\n# Transports\n#\n");
    for (int i = 0; fold_tl_all[i] != NULL; i++) {
        printf("#   %-10s %s\n", fold_tl_all[i]->name, fold_tl_all[i]->description);
    }
    print_ofi_providers();
}

/* Every configuration table: name, default, current value (the environment's) and
 * description of each variable. */
static const fold_util_config_table_t *const config_tables[] = {
    &fold_config_table,
#ifdef FOLD_INFO_SHIM_TABLE
    &shim_config_table,
#endif
#ifdef FOLD_INFO_PERF_TABLE
    &perf_config_table,
#endif
};
#define CONFIG_TABLES (sizeof(config_tables) / sizeof(config_tables[0]))

static void print_config(void)
{
    for (size_t i = 0; i < CONFIG_TABLES; i++) {
        fold_util_config_print(config_tables[i], stdout);
    }
}

/* Text for a Markdown table cell: '|' would end the cell, '<' start an HTML tag and
 * '*' emphasis. */
static void print_markdown_cell(const char *text)
{
    for (const char *c = text; *c != '\0'; c++) {
        if (*c == '|' || *c == '*' || *c == '\\') {
            printf("\\%c", *c);
        } else if (*c == '<') {
            fputs("&lt;", stdout);
        } else if (*c == '>') {
            fputs("&gt;", stdout);
        } else {
            putchar(*c);
        }
    }
}

/* -c --markdown: every table's variables with their defaults and descriptions, as
 * Markdown tables (docs/user/configuration.md is generated from it). The environment
 * is not read, so the output depends on the build alone. */
static void print_config_markdown(void)
{
    for (size_t i = 0; i < CONFIG_TABLES; i++) {
        const fold_util_config_table_t *t = config_tables[i];
        printf("%s### %s (`%s*`)\n\n", i > 0 ? "\n" : "", t->title, t->prefix);
        printf("| variable | default | meaning |\n|---|---|---|\n");
        for (size_t f = 0; f < t->count; f++) {
            const fold_util_config_field_t *row = &t->fields[f];
            printf("| `%s%s` | ", t->prefix, row->name);
            if (row->default_value[0] != '\0') {
                printf("`%s`", row->default_value);
            }
            printf(" | ");
            print_markdown_cell(row->doc);
            printf(" |\n");
        }
    }
}

static void print_algorithms(void)
{
    printf("#\n# Algorithms (FOLD_ALLREDUCE_ALG, FOLD_REDUCE_ALG, FOLD_TUNE)\n#\n");
    printf("#   %-20s %-18s %-8s %s\n", "name", "collectives", "ordered", "description");
    for (int i = 0; fold_alg_all[i] != NULL; i++) {
        const fold_alg_t *a = fold_alg_all[i];
        char colls[32] = "";
        if (a->allreduce) {
            strcat(colls, "allreduce");
        }
        if (a->reduce) {
            strcat(colls, a->allreduce ? ",reduce" : "reduce");
        }
        printf("#   %-20s %-18s %-8s %s\n", a->name, colls,
               (a->flags & FOLD_ALG_ORDERED) ? "yes" : "no", a->description);
    }
    printf("#\n# 'ordered' algorithms keep the rank order, so they serve non-commutative ops;\n"
           "# for those ops the others give way to recursive_doubling / binomial.\n");
}

static void print_selection(void)
{
    printf("#\n# Default selection (first matching rule wins; FOLD_TUNE rules come first, then\n"
           "# the tuning file's; a rule naming several algorithms lets the cost model pick,\n"
           "# with the leaders per node; p = ranks, n = nodes, ppn = ranks on the fullest node)\n"
           "#\n");
    const fold_tune_t *d = fold_default_rules();
    for (int i = 0; i < d->nrules; i++) {
        char rule[512];
        fold_tune_rule_format(&d->rules[i], rule, sizeof(rule));
        printf("#   %s\n", rule);
    }
}

/* What fold_init would measure on this machine (the copy rate, single copy's rate
 * and cost), fed to the model as it would be. */
static int measure_here(fold_context_t *ctx)
{
    fold_node_calib_t calib;
    fold_node_calibrate(&calib);
    fold_context_set_measured(ctx, &calib);
    ctx->calib = calib;
    return fold_select_configure(ctx) == FOLD_OK;
}

/* Whether large calls stream their results here (FOLD_STREAM), and why. */
static void print_stream(fold_context_t *ctx)
{
    const char *setting = "?";
    fold_config_get(ctx, "FOLD_STREAM", &setting);
    size_t from = fold_context_stream_min(ctx);
    printf("#\n# Results streamed (FOLD_STREAM=%s): reduction from memory %.4g GB/s, with "
           "streaming stores %.4g GB/s; in a loop in cache (%.0f KiB touched, L2 %.0f KiB) "
           "%.4g and %.4g GB/s: ",
           setting, ctx->calib.reduce_mem_gbs, ctx->calib.reduce_stream_gbs,
           ctx->calib.rounds_bytes / 1024, ctx->calib.l2_bytes / 1024,
           ctx->calib.reduce_loop_gbs, ctx->calib.reduce_loop_stream_gbs);
    if (from == SIZE_MAX) {
        printf("off\n");
    } else {
        printf("on, from %zu bytes\n", from);
    }
}

/* Whether the buffers single copy has the kernel copy are backed with huge pages
 * (FOLD_HUGE_PAGES, node/huge.c), and the kernel's rates from memory either way. */
static void print_huge_pages(fold_context_t *ctx)
{
    const char *setting = "?";
    fold_config_get(ctx, "FOLD_HUGE_PAGES", &setting);
    const size_t page = fold_node_huge_page_bytes();
    printf("# Huge pages under the kernel's copies (FOLD_HUGE_PAGES=%s): ", setting);
    if (!ctx->calib.single_copy) {
        printf("no single copy here\n");
    } else if (page == 0 || ctx->calib.cma_huge_mem_gbs <= 0) {
        printf("the kernel makes none here (huge page %zu bytes); its copy from memory "
               "%.4g GB/s\n", page, ctx->calib.cma_mem_gbs);
    } else {
        printf("%s; its copy from memory %.4g GB/s from %zu-byte pages, %.4g over 4 KiB "
               "ones (estimated)\n", ctx->config.huge_pages ? "on" : "off",
               ctx->calib.cma_huge_mem_gbs, page, ctx->calib.cma_mem_gbs);
    }
}

/* Whether buffers single copy moves may move into fold memory (FOLD_ADOPT,
 * mem_adopt.c), and why not. */
static void print_adopt(fold_context_t *ctx)
{
    const char *setting = "?";
    fold_config_get(ctx, "FOLD_ADOPT", &setting);
    printf("# Adopted buffers (FOLD_ADOPT=%s): ", setting);
    const char *why = ctx->config.adopt ? fold_mem_adopt_why_off() : "FOLD_ADOPT=off";
    if (!ctx->calib.single_copy) {
        printf("no single copy here\n");
    } else if (why != NULL) {
        printf("off: %s\n", why);
    } else {
        printf("on\n");
    }
}

/* The cost model's parameters in effect: defaults, measured, the tuning file's,
 * FOLD_MODEL. */
static int print_model(void)
{
    int node_of[1] = {0};
    fold_context_t *ctx;
    if (fold_context_create_virtual(1, node_of, &ctx) != FOLD_OK) {
        return 1;
    }
    int measured = measure_here(ctx);
    printf("#\n# Cost model parameters (defaults, then measured here: %s, then the tuning "
           "file %s, then FOLD_MODEL)\n#\n",
           measured ? ctx->measured : "nothing",
           ctx->file.path ? ctx->file.path : "(none)");
    fold_model_print(&ctx->model, "", stdout);
    print_stream(ctx);
    print_huge_pages(ctx);
    print_adopt(ctx);
    fold_context_free_virtual(ctx);
    return 0;
}

/* The model's prediction of every algorithm (best leaders and segment for node-aware
 * ones; the segment column is 0 for the default),
 * from 8 B to 64 MiB by factors of 2: what perf/model_check.sh compares with
 * fold_perf's measurements. */
static void print_predictions(fold_comm_t *w)
{
    printf("# collective,algorithm,bytes,leaders,predicted_us,segment\n");
    for (int coll = FOLD_COLL_ALLREDUCE; coll <= FOLD_COLL_REDUCE; coll++) {
        for (int i = 0; fold_alg_all[i] != NULL; i++) {
            const fold_alg_t *alg = fold_alg_all[i];
            if (fold_alg_builder(alg, coll) == NULL ||
                (alg == &fold_alg_shm_flat && w->shape.nnodes > 1)) {
                continue;
            }
            for (size_t bytes = 8; bytes <= ((size_t)64 << 20); bytes *= 2) {
                fold_choice_t c;
                double us = fold_select_evaluate(w, coll, alg, bytes, &c);
                printf("%s,%s,%zu,%d,%.3f,%zu\n", fold_coll_name(coll), alg->name, bytes,
                       c.leaders, us, c.seg_bytes);
            }
        }
    }
}

/* What fold would run on a communicator of this shape, size by size. */
/* "dpml@32k": the choice's algorithm and the segments it cuts `bytes` into. */
static void format_choice(const fold_context_t *ctx, const fold_choice_t *c, size_t bytes,
                          char *buf, size_t len)
{
    size_t seg = fold_select_seg_count(ctx, c->seg_bytes, bytes, 1);
    fold_select_format_alg(c->alg, bytes > seg ? seg : 0, buf, len);
}

static int print_decisions(const char *shape_text, int all_algorithms)
{
    int *node_of, size;
    if (fold_parse_shape(shape_text, &node_of, &size) != 0) {
        fprintf(stderr, "fold_info: bad shape '%s': expected NODESxPPN (8x64) or the ranks of "
                "each node (2,1,1)\n", shape_text);
        return 2;
    }
    fold_context_t *ctx;
    int status = fold_context_create_virtual(size, node_of, &ctx);
    free(node_of);
    if (status != FOLD_OK) {
        fprintf(stderr, "fold_info: %s\n", fold_status_string(status));
        return 1;
    }
    measure_here(ctx);   /* as fold_init would on this machine */
    fold_comm_t *w = ctx->world;
    if (fold_select_topos(w) != FOLD_OK) {
        fold_context_free_virtual(ctx);
        return 1;
    }
    fold_select_space_enter(w);   /* the model's memory serves the whole table */
    if (all_algorithms) {
        print_predictions(w);
        fold_select_space_leave(w);
        fold_context_free_virtual(ctx);
        return 0;
    }
    printf("#\n# Selection on %d ranks over %d nodes (%d-%d per node), float32 sum; the cost\n"
           "# model's prediction, and the best flat algorithm's (what an MPI library runs)\n#\n",
           w->size, w->shape.nnodes, w->shape.min_ppn, w->shape.max_ppn);
    printf("# in_fold_memory: the choice for buffers every rank has in fold memory\n"
           "# (fold_mem_alloc), where it differs\n#\n");
    printf("# %-10s %10s  %-20s %7s %-18s %12s %12s %-4s %s\n", "collective", "bytes",
           "algorithm", "leaders", "between nodes", "predicted_us", "flat_us", "shim",
           "in_fold_memory");
    for (int coll = FOLD_COLL_ALLREDUCE; coll <= FOLD_COLL_REDUCE; coll++) {
        for (size_t bytes = 8; bytes <= ((size_t)64 << 20); bytes *= 4) {
            fold_choice_t c, ignored;
            if (fold_select(w, coll, bytes / 4, FOLD_FLOAT32, FOLD_OP_SUM, &c) != FOLD_OK) {
                continue;
            }
            double us = fold_select_evaluate(w, coll, c.alg, bytes, &ignored);
            double flat_us = fold_select_flat_us(w, coll, bytes);
            int serve = 0;
            fold_serve_advice(w, fold_coll_name(coll), bytes, &serve, NULL);
            char leaders[32];   /* "2", or "2 r150%": the root folds 1.5x another's block */
            snprintf(leaders, sizeof(leaders), c.root_weight > 0 ? "%d r%d%%" : "%d",
                     c.leaders, c.root_weight);
            char alg[96];
            format_choice(ctx, &c, bytes, alg, sizeof(alg));
            fold_choice_t in_fold;
            char mapped[96] = "-";
            if (fold_select_in_fold_memory(w, coll, bytes / 4, FOLD_FLOAT32, FOLD_OP_SUM,
                                           &in_fold) == FOLD_OK && in_fold.memory) {
                char name[64];
                format_choice(ctx, &in_fold, bytes, name, sizeof(name));
                snprintf(mapped, sizeof(mapped), "%s (%.2f us)", name,
                         fold_select_predict(w, w->select.topo, coll, &in_fold, bytes));
            }
            printf("  %-10s %10zu  %-20s %7s %-18s %12.2f %12.2f %-4s %s\n",
                   fold_coll_name(coll), bytes, alg, leaders, c.inter ? c.inter->name : "-", us,
                   flat_us, serve ? "fold" : "mpi", mapped);
        }
    }
    fold_select_space_leave(w);
    fold_context_free_virtual(ctx);
    return 0;
}

/* The world communicator's node path on this rank, in words. */
static void describe_node_path(fold_context_t *ctx, char *buf, size_t len)
{
    fold_comm_t *w = ctx->world;
    fold_node_t *node;
    fold_shm_budget_t b = {0};
    char space[160] = "";
    int status = fold_comm_node(w, &node);   /* collective: every rank asks */
    if (fold_shm_budget_measure(&b, ctx->config.shm_reserve) == FOLD_OK) {
        snprintf(space, sizeof(space), "; " FOLD_SHM_DIR " now has %zu bytes free of %zu, "
                 "%zu of them left to others", b.free, b.total, b.reserve);
    }
    if (status == FOLD_ERR_UNSUPPORTED) {
        snprintf(buf, len, "no node shared memory (%s): node-unaware algorithms only%s",
                 w->node_why, space);
    } else if (status != FOLD_OK) {
        snprintf(buf, len, "node state failed: %s", fold_status_string(status));
    } else if (node->seg.base == NULL) {
        snprintf(buf, len, "alone on its node: no segment needed");
    } else {
        snprintf(buf, len, "node segment of %zu data bytes for %d local ranks (%zu mapped), "
                 "single copy %s%s", node->shm_bytes, node->seg.local_size,
                 node->seg.map_size, node->single_copy ? "on" : "off", space);
    }
}

/* What a context ended up with, rank by rank: its transport, what that runs over
 * (and why on less than asked), and the world communicator's node path. Runs as an
 * application does: under a launcher, on every rank (mpirun -n 2 fold_info -C). */
static int print_context(void)
{
    fold_context_h ctx;
    int status = fold_init(NULL, &ctx);
    if (status != FOLD_OK) {
        fprintf(stderr, "fold_info: fold_init failed: %s (-C runs under a launcher: "
                "mpirun -n N fold_info -C)\n", fold_status_string(status));
        return 1;
    }
    fold_comm_t *w = ctx->world;
    fold_tl_caps_t caps = {0};
    ctx->tl_ops->query(ctx->tl, &caps);
    char path[1024];
    describe_node_path(ctx, path, sizeof(path));
    for (int r = 0; r < w->size; r++) {   /* in rank order */
        fold_barrier(w);
        if (r != w->rank) {
            continue;
        }
        printf("rank %d of %d, node %d (%d ranks there): transport %s over %s\n", w->rank,
               w->size, fold_context_node_of(ctx, w->rank), ctx->local_size, caps.name,
               caps.provider ? caps.provider : "(not reported)");
        if (caps.fallback != NULL) {
            printf("rank %d: %s\n", w->rank, caps.fallback);
        }
        printf("rank %d: world: %s\n", w->rank, path);
        fflush(stdout);
    }
    fold_barrier(w);
    return fold_finalize(ctx) == FOLD_OK ? 0 : 1;
}

static void usage(FILE *out)
{
    fputs("Usage: fold_info [options]\n"
          "Prints what this fold build provides. Without options, prints everything.\n"
          "\n"
          "Options:\n"
          "  -v, --version          version\n"
          "  -t, --transports       transports, and the libfabric providers found\n"
          "  -c, --config           configuration variables (fold's, the MPI shim's, the\n"
          "                         tools'): defaults, values from the environment,\n"
          "                         descriptions\n"
          "      --markdown         with -c: defaults and descriptions as Markdown tables\n"
          "                         (the environment is not read)\n"
          "  -a, --algorithms       algorithms and the default selection rules\n"
          "  -m, --model            the cost model's parameters in effect\n"
          "  -S, --shape SHAPE      what selection picks on a communicator of that shape,\n"
          "                         without running it: NODESxPPN (8x64) or the ranks of\n"
          "                         each node (2,1,1)\n"
          "  -p, --predictions      with -S: the model's prediction of every algorithm, as\n"
          "                         CSV\n"
          "  -L, --launcher         the launcher and bootstrap fold_init would use here\n"
          "                         (PMIx server, Slurm, Open MPI), the node as the launcher\n"
          "                         and hwloc see it, and the MPI library the shim was built\n"
          "                         for\n"
          "  -C, --context          under a launcher (mpirun -n N fold_info -C): start a\n"
          "                         context and print, per rank, the transport it runs over\n"
          "                         (UCX's transports; why without shared memory, if so)\n"
          "                         and the world communicator's node path\n"
          "  -h, --help             this help\n",
          out);
}

int main(int argc, char **argv)
{
    int want_version = 0, want_tl = 0, want_cfg = 0, want_alg = 0, want_model = 0, opt;
    int all_predictions = 0, want_context = 0, want_launcher = 0, markdown = 0;
    const char *shape = NULL;
    static const struct option long_options[] = {
        {"version", no_argument, NULL, 'v'},     {"transports", no_argument, NULL, 't'},
        {"config", no_argument, NULL, 'c'},      {"markdown", no_argument, NULL, 'M'},
        {"algorithms", no_argument, NULL, 'a'},  {"model", no_argument, NULL, 'm'},
        {"shape", required_argument, NULL, 'S'}, {"predictions", no_argument, NULL, 'p'},
        {"launcher", no_argument, NULL, 'L'},    {"context", no_argument, NULL, 'C'},
        {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0},
    };
    while ((opt = getopt_long(argc, argv, "vtcamS:pLCh", long_options, NULL)) != -1) {
        switch (opt) {
        case 'M': markdown = 1; break;
        case 'v': want_version = 1; break;
        case 't': want_tl = 1; break;
        case 'c': want_cfg = 1; break;
        case 'a': want_alg = 1; break;
        case 'm': want_model = 1; break;
        case 'S': shape = optarg; break;
        case 'p': all_predictions = 1; break;
        case 'L': want_launcher = 1; break;
        case 'C': want_context = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "fold_info: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (markdown) {
        if (!want_cfg) {
            fprintf(stderr, "fold_info: --markdown goes with -c\n");
            usage(stderr);
            return 2;
        }
        print_config_markdown();
        return 0;
    }
    if (shape != NULL) {
        return print_decisions(shape, all_predictions);
    }
    if (want_context) {
        return print_context();
    }
    int all = !(want_version || want_tl || want_cfg || want_alg || want_model || want_launcher);
    if (all || want_version) {
        print_version();
    }
    if (all || want_launcher) {
        fold_info_print_launcher();
    }
    if (all || want_tl) {
        print_transports();
    }
    if (all || want_cfg) {
        print_config();
    }
    if (all || want_alg) {
        print_algorithms();
        print_selection();
    }
    if (all || want_model) {
        return print_model();
    }
    return 0;
}
