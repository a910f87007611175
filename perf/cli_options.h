/*
 * The command-line engine of fold's tools (fold_perf, fold_tune): one table of
 * options (long name, short name, argument, help, handler) drives the parser, the
 * error messages and the usage text. A tool's option type starts with a
 * cli_option_t and adds its typed handler; `apply` calls that handler.
 */
#ifndef FOLD_CLI_OPTIONS_H
#define FOLD_CLI_OPTIONS_H

#include <stddef.h>
#include <stdio.h>

typedef struct cli_option {
    const char *name;
    char        short_name;   /* 0: long form only */
    const char *arg;          /* NULL: a flag without a value */
    const char *help;
} cli_option_t;

/* Runs opt's handler on value (NULL for a flag); 0, or -1 with the reason in why. */
typedef int (*cli_apply_fn)(void *opts, const cli_option_t *opt, const char *value, char *why,
                            size_t whylen);

typedef struct cli_table {
    const void  *options;   /* the tool's option structs, each starting with a cli_option_t */
    size_t       count;
    size_t       stride;    /* the size of one of them */
    const char  *tool;      /* "fold_perf", for messages */
    cli_apply_fn apply;
} cli_table_t;

/* Parses argv[1..argc) into opts: --name, --name=value, --name value, -x, -xvalue,
 * -x value. Returns 0, or -1 with a one-line reason in err. */
int cli_parse(const cli_table_t *t, void *opts, int argc, char **argv, char *err, size_t errlen);

/* One line per option, help word-wrapped at `width` columns from column `indent`. */
void cli_print_options(const cli_table_t *t, FILE *out, int indent, int width);

#endif
