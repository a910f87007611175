/* fold_sim's command line (sim_options.h). */
#include "sim_options.h"

#include "util/size.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sim_options_usage(FILE *out, const char *prog)
{
    fprintf(out,
            "Usage: %s -S SHAPE -b BYTES [-c allreduce|reduce] [-A ALG] [--platform FILE]\n"
            "          [--csv] [--path N] [--print-platform] [--cfg=SIMGRID_OPTION:VALUE]...\n"
            "Replays every rank's schedule of one call (float32 sum) in SimGrid, one actor\n"
            "per rank, and prints the simulated time, fold's model's prediction of the same\n"
            "schedules and the critical path.\n"
            "  -S SHAPE          NODESxPPN (8x64) or the ranks of each node (2,1,1), as\n"
            "                    fold_info -S\n"
            "  -b BYTES          the call's size (k, M, G suffixes), at least 4\n"
            "  -c COLL           allreduce (default) or reduce (root 0)\n"
            "  -A ALG            an algorithm of fold_info -a, NAME@SIZE to fix its segment,\n"
            "                    or auto (default): fold's own choice for the shape and size;\n"
            "                    leaders and segment are the model's best for it\n"
            "  --platform FILE   a SimGrid platform (XML); node k runs on the k-th host by\n"
            "                    name; a host property fold_model=name=value,... sets cost-\n"
            "                    model parameters for the machine it describes (default: a\n"
            "                    cluster built from the cost model's parameters)\n"
            "  --csv             one CSV row with fold_perf's columns (and the simulator's)\n"
            "  --path N          critical-path elements to list (default 40; 0: none)\n"
            "  --print-platform  print the built-in platform for the shape and exit\n"
            "  --cfg=, --log=    passed to SimGrid\n"
            "  -h                this help\n"
            "FOLD_MODEL, FOLD_TUNE_FILE, FOLD_DPML_LEADERS and FOLD_SEGMENT_SIZE apply as they\n"
            "do to fold_info -S; FOLD_MODEL=generic replays with the generic parameters.\n",
            prog);
}

static int bad(const char *prog, const char *what, const char *arg)
{
    fprintf(stderr, "%s: %s%s%s%s\n", prog, what, arg ? " '" : "", arg ? arg : "",
            arg ? "'" : "");
    sim_options_usage(stderr, prog);
    return 2;
}

int sim_options_parse(int argc, char **argv, sim_options_t *o)
{
    enum { OPT_PLATFORM = 256, OPT_CSV, OPT_PATH, OPT_PRINT_PLATFORM };
    static const struct option long_options[] = {
        {"platform", required_argument, NULL, OPT_PLATFORM},
        {"csv", no_argument, NULL, OPT_CSV},
        {"path", required_argument, NULL, OPT_PATH},
        {"print-platform", no_argument, NULL, OPT_PRINT_PLATFORM},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof(*o));
    o->coll       = FOLD_COLL_ALLREDUCE;
    o->path_limit = 40;
    o->simgrid[o->nsimgrid++] = argv[0];
    /* SimGrid's options first, out of getopt's way. */
    int n = 1;
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--cfg=", 6) == 0 || strncmp(argv[i], "--log=", 6) == 0) {
            if (o->nsimgrid == SIM_MAX_SIMGRID_ARGS) {
                return bad(argv[0], "too many SimGrid options", NULL);
            }
            o->simgrid[o->nsimgrid++] = argv[i];
        } else {
            argv[n++] = argv[i];
        }
    }
    argc = n;
    int opt;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":S:c:b:A:h", long_options, NULL)) != -1) {
        char *end;
        switch (opt) {
        case 'S': o->shape = optarg; break;
        case 'c':
            if (fold_reduction_from_name(optarg, &o->coll) != 0) {
                return bad(argv[0], "-c takes allreduce or reduce, not", optarg);
            }
            break;
        case 'b':
            if (fold_util_parse_size(optarg, &o->bytes) != 0 || o->bytes < 4) {
                return bad(argv[0], "-b takes at least 4 " FOLD_UTIL_SIZE_SYNTAX ", not",
                           optarg);
            }
            break;
        case 'A': o->alg = strcmp(optarg, "auto") == 0 ? NULL : optarg; break;
        case OPT_PLATFORM: o->platform = optarg; break;
        case OPT_CSV: o->csv = 1; break;
        case OPT_PATH: {
            long v = strtol(optarg, &end, 10);
            if (end == optarg || *end != '\0' || v < 0) {
                return bad(argv[0], "--path takes a count of elements, not", optarg);
            }
            o->path_limit = (size_t)v;
            break;
        }
        case OPT_PRINT_PLATFORM: o->print_platform = 1; break;
        case 'h': sim_options_usage(stdout, argv[0]); return 1;
        case ':': return bad(argv[0], "an option lacks its value:", argv[optind - 1]);
        default: return bad(argv[0], "unknown option", argv[optind - 1]);
        }
    }
    if (optind < argc) {
        return bad(argv[0], "unexpected argument", argv[optind]);
    }
    if (o->shape == NULL) {
        return bad(argv[0], "-S SHAPE is needed", NULL);
    }
    if (o->bytes == 0 && !o->print_platform) {
        return bad(argv[0], "-b BYTES is needed", NULL);
    }
    return 0;
}
