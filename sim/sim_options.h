/* fold_sim's command line. */
#ifndef FOLD_SIM_OPTIONS_H
#define FOLD_SIM_OPTIONS_H

#include "coll/sched.h"

#include <stddef.h>
#include <stdio.h>

#define SIM_MAX_SIMGRID_ARGS 64

typedef struct sim_options {
    const char *shape;          /* -S */
    fold_coll_t coll;           /* -c */
    size_t      bytes;          /* -b */
    const char *alg;            /* -A, NULL: fold's choice */
    const char *platform;       /* --platform, NULL: the built-in cluster */
    int         csv;            /* --csv */
    int         print_platform; /* --print-platform */
    size_t      path_limit;     /* --path */
    int         nsimgrid;       /* SimGrid's own options (--cfg=, --log=), argv[0] first */
    char       *simgrid[SIM_MAX_SIMGRID_ARGS];
} sim_options_t;

/* 0, 1 for -h (usage printed), or 2 after printing what is wrong and the usage. */
int  sim_options_parse(int argc, char **argv, sim_options_t *o);
void sim_options_usage(FILE *out, const char *prog);

#endif
