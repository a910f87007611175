#include "config_table.h"
#include "size.h"

#include <errno.h>
#include <fold/fold_status.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- parsers ------------------------------------------------------------------ */

int fold_util_config_read_string(const char *text, void *field, const void *arg, char *why,
                                 size_t whylen)
{
    (void)arg;
    (void)why;
    (void)whylen;
    *(const char **)field = text;
    return 0;
}

/* ", or auto" when the parser takes a word besides numbers. */
static const char *or_word(const char *word, char *buf, size_t len)
{
    if (word == NULL) {
        return "";
    }
    snprintf(buf, len, ", or %s", word);
    return buf;
}

static int read_number(const char *text, const fold_util_config_num_t *a, long *out,
                       char *why, size_t whylen)
{
    if (a->word != NULL && strcasecmp(text, a->word) == 0) {
        *out = a->word_value;
        return 0;
    }
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end != text && *end == '\0' && errno == 0 && v >= a->min && v <= a->max) {
        *out = v;
        return 0;
    }
    char word[64];
    const char *alt = or_word(a->word, word, sizeof(word));
    if (a->max == LONG_MAX || a->max == INT_MAX) {
        snprintf(why, whylen, "expected an integer >= %ld%s", a->min, alt);
    } else {
        snprintf(why, whylen, "expected an integer from %ld to %ld%s", a->min, a->max, alt);
    }
    return -1;
}

int fold_util_config_read_int(const char *text, void *field, const void *arg, char *why,
                              size_t whylen)
{
    long v;
    if (read_number(text, arg, &v, why, whylen) != 0) {
        return -1;
    }
    *(int *)field = (int)v;   /* in range: the table's bounds are ints */
    return 0;
}

int fold_util_config_read_long(const char *text, void *field, const void *arg, char *why,
                               size_t whylen)
{
    return read_number(text, arg, (long *)field, why, whylen);
}

/* 4096 -> "4k": the largest binary suffix that divides it. */
static void format_size(size_t v, char *buf, size_t len)
{
    static const char suffix[] = {'\0', 'k', 'M', 'G'};
    int s = 0;
    while (s < 3 && v != 0 && v % 1024 == 0) {
        v /= 1024;
        s++;
    }
    snprintf(buf, len, "%zu%.1s", v, &suffix[s]);
}

int fold_util_config_read_size(const char *text, void *field, const void *arg, char *why,
                               size_t whylen)
{
    const fold_util_config_bytes_t *a = arg;
    size_t v;
    if (a->word != NULL && strcasecmp(text, a->word) == 0) {
        *(size_t *)field = a->word_value;
        return 0;
    }
    if (fold_util_parse_size(text, &v) == 0 && v >= a->min && v <= a->max) {
        *(size_t *)field = v;
        return 0;
    }
    char lo[32], hi[32], word[64];
    format_size(a->min, lo, sizeof(lo));
    format_size(a->max, hi, sizeof(hi));
    const char *alt = or_word(a->word, word, sizeof(word));
    if (a->max != SIZE_MAX) {
        snprintf(why, whylen, "expected %s, from %s to %s%s", FOLD_UTIL_SIZE_SYNTAX, lo, hi, alt);
    } else if (a->min != 0) {
        snprintf(why, whylen, "expected %s, at least %s%s", FOLD_UTIL_SIZE_SYNTAX, lo, alt);
    } else {
        snprintf(why, whylen, "expected %s%s", FOLD_UTIL_SIZE_SYNTAX, alt);
    }
    return -1;
}

int fold_util_config_read_seconds(const char *text, void *field, const void *arg, char *why,
                                  size_t whylen)
{
    (void)arg;
    char *end;
    double t = strtod(text, &end);
    /* !(t > 0) also catches NaN; "inf" would turn a timeout off without saying so. */
    if (end == text || *end != '\0' || !(t > 0) || t > FOLD_UTIL_MAX_SECONDS) {
        snprintf(why, whylen, "expected a number of seconds > 0, at most %g",
                 FOLD_UTIL_MAX_SECONDS);
        return -1;
    }
    *(double *)field = t;
    return 0;
}

int fold_util_config_read_enum(const char *text, void *field, const void *arg, char *why,
                               size_t whylen)
{
    const char *const *names = arg;
    for (int i = 0; names[i] != NULL; i++) {
        if (strcasecmp(text, names[i]) == 0) {
            *(int *)field = i;
            return 0;
        }
    }
    size_t used = (size_t)snprintf(why, whylen, "expected one of");
    for (int i = 0; names[i] != NULL && used < whylen; i++) {
        used += (size_t)snprintf(why + used, whylen - used, "%s %s", i ? "," : "", names[i]);
    }
    return -1;
}

/* ---- tables ------------------------------------------------------------------- */

int fold_util_config_find(const fold_util_config_table_t *t, const char *name)
{
    if (name == NULL) {
        return -1;
    }
    size_t plen = strlen(t->prefix);
    if (strncasecmp(name, t->prefix, plen) == 0) {
        name += plen;
    }
    for (size_t i = 0; i < t->count; i++) {
        if (strcasecmp(name, t->fields[i].name) == 0) {
            return (int)i;
        }
    }
    return -1;
}

const char *fold_util_config_getenv(const fold_util_config_table_t *t, int row)
{
    char env[128];
    snprintf(env, sizeof(env), "%s%s", t->prefix, t->fields[row].name);
    return getenv(env);
}

/* Room for any field a parser writes, aligned for any of them. */
typedef union config_scratch {
    long double ld;
    long long   ll;
    void       *p;
    char        bytes[32];
} config_scratch_t;

/* Runs the row's parser on text into scratch. FOLD_ERR_INVALID_ARG with what the
 * parser expected, or with the table's mistake, in why. */
static int parse_row(const fold_util_config_table_t *t, int row, const char *text,
                     config_scratch_t *scratch, char *why, size_t whylen)
{
    const fold_util_config_field_t *f = &t->fields[row];
    if (f->parser.size != f->field.size || f->parser.size > sizeof(*scratch)) {
        snprintf(why, whylen, "the table gives %s%s a %zu-byte field and a %zu-byte parser",
                 t->prefix, f->name, f->field.size, f->parser.size);
        return FOLD_ERR_INVALID_ARG;
    }
    memset(scratch, 0, sizeof(*scratch));
    return f->parser.read(text, scratch, f->parser.arg, why, whylen) == 0 ? FOLD_OK
                                                                           : FOLD_ERR_INVALID_ARG;
}

int fold_util_config_set(const fold_util_config_table_t *t, void *obj, char **values,
                         int row, const char *text, char *why, size_t whylen)
{
    if (row < 0 || (size_t)row >= t->count || text == NULL) {
        snprintf(why, whylen, "no such row or no value");
        return FOLD_ERR_INVALID_ARG;
    }
    /* The parser sees the copy the row keeps: a string field points into it. */
    char *copy = strdup(text);
    if (copy == NULL) {
        snprintf(why, whylen, "out of memory");
        return FOLD_ERR_NO_MEMORY;
    }
    config_scratch_t scratch;
    char expected[256] = "";
    if (parse_row(t, row, copy, &scratch, expected, sizeof(expected)) != FOLD_OK) {
        snprintf(why, whylen, "invalid value '%s' for %s%s: %s", text, t->prefix,
                 t->fields[row].name, expected);
        free(copy);
        return FOLD_ERR_INVALID_ARG;
    }
    const fold_util_config_field_t *f = &t->fields[row];
    memcpy((char *)obj + f->field.offset, &scratch, f->field.size);
    free(values[row]);
    values[row] = copy;
    return FOLD_OK;
}

int fold_util_config_init(const fold_util_config_table_t *t, void *obj, char **values,
                          char *why, size_t whylen)
{
    for (size_t i = 0; i < t->count; i++) {
        int status = fold_util_config_set(t, obj, values, (int)i, t->fields[i].default_value,
                                          why, whylen);
        if (status != FOLD_OK) {
            return status;
        }
    }
    return FOLD_OK;
}

void fold_util_config_release(const fold_util_config_table_t *t, char **values)
{
    for (size_t i = 0; i < t->count; i++) {
        free(values[i]);
        values[i] = NULL;
    }
}

/* "# " lines of at most width columns, broken at spaces. */
static void print_wrapped(FILE *out, const char *text, int width)
{
    while (*text != '\0') {
        int len = (int)strlen(text);
        if (len > width) {
            int cut = width;
            while (cut > 0 && text[cut] != ' ') {
                cut--;
            }
            len = cut > 0 ? cut : width;
        }
        fprintf(out, "# %.*s\n", len, text);
        text += len;
        while (*text == ' ') {
            text++;
        }
    }
}

void fold_util_config_print(const fold_util_config_table_t *t, FILE *out)
{
    fprintf(out, "#\n# %s (%s* environment variables)\n#\n", t->title, t->prefix);
    for (size_t i = 0; i < t->count; i++) {
        const fold_util_config_field_t *f = &t->fields[i];
        const char *env = fold_util_config_getenv(t, (int)i);
        print_wrapped(out, f->doc, 88);
        fprintf(out, "# default: %s\n", f->default_value[0] ? f->default_value : "(empty)");
        char why[256] = "";
        config_scratch_t scratch;
        if (env != NULL && parse_row(t, (int)i, env, &scratch, why, sizeof(why)) != FOLD_OK) {
            fprintf(out, "%s%s=%s  # from the environment, not valid: %s\n", t->prefix, f->name,
                    env, why);
        } else if (env != NULL) {
            fprintf(out, "%s%s=%s  # from the environment\n", t->prefix, f->name, env);
        } else {
            fprintf(out, "%s%s=%s\n", t->prefix, f->name, f->default_value);
        }
        fprintf(out, "#\n");
    }
}
