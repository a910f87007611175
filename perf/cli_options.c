/*
 * The command-line engine of fold's tools (cli_options.h).
 */
#include "cli_options.h"

#include <string.h>

static const cli_option_t *option_at(const cli_table_t *t, size_t i)
{
    return (const cli_option_t *)((const char *)t->options + i * t->stride);
}

static const cli_option_t *find_long(const cli_table_t *t, const char *name, size_t len)
{
    for (size_t i = 0; i < t->count; i++) {
        const cli_option_t *opt = option_at(t, i);
        if (strlen(opt->name) == len && strncmp(opt->name, name, len) == 0) {
            return opt;
        }
    }
    return NULL;
}

static const cli_option_t *find_short(const cli_table_t *t, char c)
{
    for (size_t i = 0; i < t->count; i++) {
        if (option_at(t, i)->short_name == c) {
            return option_at(t, i);
        }
    }
    return NULL;
}

static void option_label(const cli_option_t *opt, char *buf, size_t len)
{
    if (opt->short_name != 0) {
        snprintf(buf, len, "-%c/--%s", opt->short_name, opt->name);
    } else {
        snprintf(buf, len, "--%s", opt->name);
    }
}

/* The option word at argv[i] and any value attached to it; NULL after writing err. */
static const cli_option_t *option_of(const cli_table_t *t, const char *word,
                                     const char **value, char *err, size_t errlen)
{
    const cli_option_t *opt;
    *value = NULL;
    if (strncmp(word, "--", 2) == 0 && word[2] != '\0') {
        const char *name = word + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        if ((opt = find_long(t, name, len)) == NULL) {
            snprintf(err, errlen, "unknown option '%.*s'", (int)(len + 2), word);
            return NULL;
        }
        if (eq != NULL) {
            if (opt->arg == NULL) {
                snprintf(err, errlen, "option --%s takes no value", opt->name);
                return NULL;
            }
            *value = eq + 1;
        }
        return opt;
    }
    if (word[0] == '-' && word[1] != '\0' && word[1] != '-') {
        if ((opt = find_short(t, word[1])) == NULL) {
            snprintf(err, errlen, "unknown option '-%c'", word[1]);
            return NULL;
        }
        if (word[2] != '\0') {
            if (opt->arg == NULL) {
                snprintf(err, errlen, "option -%c takes no value (in '%s')", word[1], word);
                return NULL;
            }
            *value = word + 2;
        }
        return opt;
    }
    snprintf(err, errlen, "unexpected argument '%s' (%s takes options only)", word, t->tool);
    return NULL;
}

int cli_parse(const cli_table_t *t, void *opts, int argc, char **argv, char *err, size_t errlen)
{
    for (int i = 1; i < argc; i++) {
        const char *value;
        char label[64];
        const cli_option_t *opt = option_of(t, argv[i], &value, err, errlen);
        if (opt == NULL) {
            return -1;
        }
        if (opt->arg != NULL && value == NULL) {
            if (i + 1 >= argc) {
                option_label(opt, label, sizeof(label));
                snprintf(err, errlen, "option %s needs a value (%s)", label, opt->arg);
                return -1;
            }
            value = argv[++i];
        }
        char why[256] = "";
        if (t->apply(opts, opt, value, why, sizeof(why)) != 0) {
            option_label(opt, label, sizeof(label));
            snprintf(err, errlen, "bad value '%s' for %s: %s", value ? value : "", label, why);
            return -1;
        }
    }
    return 0;
}

/* Prints text word-wrapped to `width` columns, continuation lines indented by `indent`. */
static void print_wrapped(FILE *out, const char *text, int column, int indent, int width)
{
    const char *p = text;
    while (*p != '\0') {
        size_t word = strcspn(p, " ");
        if (column > indent && column + 1 + (int)word > width) {
            fprintf(out, "\n%*s", indent, "");
            column = indent;
        } else if (column > indent) {
            fputc(' ', out);
            column++;
        }
        fwrite(p, 1, word, out);
        column += (int)word;
        p += word;
        while (*p == ' ') {
            p++;
        }
    }
    fputc('\n', out);
}

void cli_print_options(const cli_table_t *t, FILE *out, int indent, int width)
{
    for (size_t i = 0; i < t->count; i++) {
        const cli_option_t *opt = option_at(t, i);
        char head[64];
        int len;
        if (opt->short_name != 0) {
            len = snprintf(head, sizeof(head), "  -%c, --%s%s%s", opt->short_name, opt->name,
                           opt->arg ? " " : "", opt->arg ? opt->arg : "");
        } else {
            len = snprintf(head, sizeof(head), "      --%s%s%s", opt->name,
                           opt->arg ? " " : "", opt->arg ? opt->arg : "");
        }
        if (len >= indent - 1) {
            fprintf(out, "%s\n%*s", head, indent, "");
        } else {
            fprintf(out, "%-*s", indent, head);
        }
        print_wrapped(out, opt->help, indent, indent, width);
    }
}
