/*
 * The tuning file (select.h): selection rules, cost-model parameters and where fold
 * beat the MPI library, as measured by fold_tune on the machine it runs on.
 */
#include "select.h"
#include "config.h"
#include "log.h"

#include <fold/fold_status.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void fold_tune_file_release(fold_tune_file_t *f)
{
    free(f->path);
    free(f->source);
    fold_tune_release(&f->rules);
    free(f->serve);
    free(f->params);
    memset(f, 0, sizeof(*f));
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) {
        s++;
    }
    char *end = s + strlen(s);
    while (end > s && isspace((unsigned char)end[-1])) {
        *--end = '\0';
    }
    return s;
}

static int add_param(fold_tune_file_t *f, const char *name, const char *value)
{
    size_t old = f->params ? strlen(f->params) : 0;
    size_t len = old + strlen(name) + strlen(value) + 3;
    char *p = realloc(f->params, len);
    if (p == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    snprintf(p + old, len - old, "%s%s=%s", old ? "," : "", name, value);
    f->params = p;
    return FOLD_OK;
}

static int add_serve(fold_tune_file_t *f, char *text)
{
    fold_serve_rule_t rule;
    char *who;
    int status = fold_tune_parse_where(text, &rule.where, &who);
    if (status != FOLD_OK || (strcmp(who, "fold") != 0 && strcmp(who, "mpi") != 0)) {
        return FOLD_ERR_INVALID_ARG;
    }
    rule.fold = strcmp(who, "fold") == 0;
    fold_serve_rule_t *s = realloc(f->serve, (size_t)(f->nserve + 1) * sizeof(*s));
    if (s == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    f->serve = s;
    f->serve[f->nserve++] = rule;
    return FOLD_OK;
}

static int add_rule(fold_tune_file_t *f, const char *text)
{
    fold_tune_t one = {NULL, 0};
    int status = fold_tune_parse(text, &one);
    if (status == FOLD_OK) {
        status = fold_tune_append(&f->rules, &one);
    }
    fold_tune_release(&one);
    return status;
}

/* One line: "rule R", "param NAME VALUE", "serve W:fold|mpi", blank or comment. */
static int parse_line(fold_tune_file_t *f, char *line)
{
    char *hash = strchr(line, '#');
    if (hash != NULL) {
        *hash = '\0';
    }
    line = trim(line);
    if (*line == '\0') {
        return FOLD_OK;
    }
    char *rest = line + strcspn(line, " \t");
    if (*rest != '\0') {
        *rest++ = '\0';
    }
    rest = trim(rest);
    if (strcmp(line, "rule") == 0) {
        return add_rule(f, rest);
    }
    if (strcmp(line, "serve") == 0) {
        return add_serve(f, rest);
    }
    if (strcmp(line, "param") == 0) {
        char *value = rest + strcspn(rest, " \t");
        if (*value == '\0') {
            return FOLD_ERR_INVALID_ARG;
        }
        *value++ = '\0';
        fold_model_params_t check;
        fold_model_defaults(&check);
        value = trim(value);
        int status = fold_model_set(&check, rest, value);
        return status == FOLD_OK ? add_param(f, rest, value) : status;
    }
    return FOLD_ERR_INVALID_ARG;
}

int fold_tune_file_parse(const char *text, size_t len, const char *origin,
                         fold_tune_file_t *file)
{
    fold_tune_file_t f;
    memset(&f, 0, sizeof(f));
    int status = FOLD_OK;
    for (size_t at = 0, lineno = 1; status == FOLD_OK && at < len; lineno++) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t n = (nl != NULL ? (size_t)(nl - text) : len) - at;
        /* A copy each: parse_line cuts the line up, and text need not end in '\0'. */
        char *line = malloc(n + 1), *copy = malloc(n + 1);
        if (line == NULL || copy == NULL) {
            status = FOLD_ERR_NO_MEMORY;
        } else {
            memcpy(line, text + at, n);
            line[n] = '\0';
            memcpy(copy, line, n + 1);
            status = parse_line(&f, line);
            if (status != FOLD_OK) {
                fold_error("%s:%zu: bad line '%s': expected 'rule <rule>', 'param <name> "
                           "<value>' or 'serve <coll>:<sizes>[:terms]:fold|mpi'", origin,
                           lineno, trim(copy));
            }
        }
        free(line);
        free(copy);
        at += n + 1;
    }
    if (status != FOLD_OK) {
        fold_tune_file_release(&f);
        return status;
    }
    *file = f;
    return FOLD_OK;
}

/* The whole file into memory: *text (malloc'd) and *len. */
static int read_file(const char *path, char **text, size_t *len)
{
    FILE *in = fopen(path, "r");
    if (in == NULL) {
        fold_error("cannot read the tuning file %s (FOLD_TUNE_FILE): %s", path, strerror(errno));
        return FOLD_ERR_NOT_FOUND;
    }
    char *buf = NULL;
    size_t used = 0, cap = 0;
    int status = FOLD_OK;
    for (;;) {
        if (used == cap) {
            char *grown = realloc(buf, cap = cap ? 2 * cap : 4096);
            if (grown == NULL) {
                status = FOLD_ERR_NO_MEMORY;
                break;
            }
            buf = grown;
        }
        size_t got = fread(buf + used, 1, cap - used, in);
        used += got;
        if (got == 0) {
            break;
        }
    }
    if (status == FOLD_OK && ferror(in)) {
        fold_error("cannot read the tuning file %s (FOLD_TUNE_FILE): %s", path, strerror(errno));
        status = FOLD_ERR_NOT_FOUND;
    }
    fclose(in);
    if (status != FOLD_OK) {
        free(buf);
        return status;
    }
    *text = buf;
    *len = used;
    return FOLD_OK;
}

int fold_tune_file_load(const char *setting, fold_tune_file_t *file)
{
    fold_tune_file_t f;
    memset(&f, 0, sizeof(f));
    const char *path = setting;
    if (setting == NULL || setting[0] == '\0' || strcmp(setting, "none") == 0) {
        *file = f;
        return FOLD_OK;
    }
    if (strcmp(setting, "auto") == 0) {
        if (access(FOLD_TUNE_DEFAULT_FILE, R_OK) != 0) {
            *file = f;
            return FOLD_OK;
        }
        path = FOLD_TUNE_DEFAULT_FILE;
    }
    char *text = NULL;
    size_t text_len = 0;
    int status = read_file(path, &text, &text_len);
    if (status == FOLD_OK) {
        status = fold_tune_file_parse(text, text_len, path, &f);
        free(text);
    }
    size_t len = strlen(path) + sizeof("tuning file ");
    if (status == FOLD_OK &&
        ((f.path = strdup(path)) == NULL || (f.source = malloc(len)) == NULL)) {
        status = FOLD_ERR_NO_MEMORY;
    }
    if (status == FOLD_OK) {
        snprintf(f.source, len, "tuning file %s", path);
    }
    if (status != FOLD_OK) {
        fold_tune_file_release(&f);
        return status;
    }
    fold_debug("tuning file %s: %d rules, %d serve ranges, parameters %s", path, f.rules.nrules,
               f.nserve, f.params ? f.params : "none");
    *file = f;
    return FOLD_OK;
}

const fold_serve_rule_t *fold_tune_file_serve(const fold_tune_file_t *file, fold_coll_t coll,
                                              size_t bytes, const fold_shape_t *shape)
{
    for (int i = 0; i < file->nserve; i++) {
        if (fold_tune_rule_matches(&file->serve[i].where, coll, bytes, shape)) {
            return &file->serve[i];
        }
    }
    return NULL;
}

/* "name=value,name=value" onto p; names and values as fold_model_set takes them. */
static int apply_params(const char *list, const char *origin, fold_model_params_t *p)
{
    if (list == NULL || *list == '\0') {
        return FOLD_OK;
    }
    char *copy = strdup(list);
    if (copy == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    int status = FOLD_OK;
    for (char *save = NULL, *item = strtok_r(copy, ",", &save); item != NULL && status == FOLD_OK;
         item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        status = FOLD_ERR_INVALID_ARG;
        if (eq != NULL) {
            *eq = '\0';
            status = fold_model_set(p, trim(item), trim(eq + 1));
        }
        if (status != FOLD_OK) {
            fold_error("%s: bad cost-model parameter '%s' (expected name=value; fold_info -m "
                       "lists the names)", origin, item);
        }
    }
    free(copy);
    return status;
}

/* Where FOLD_MODEL begins with the word "generic" (alone or before a comma), what
 * follows it; else NULL. */
static const char *after_generic(const char *env)
{
    static const char word[] = "generic";
    if (env == NULL) {
        return NULL;
    }
    env += strspn(env, " \t");
    if (strncmp(env, word, sizeof(word) - 1) != 0) {
        return NULL;
    }
    const char *rest = env + sizeof(word) - 1;
    rest += strspn(rest, " \t");
    return *rest == '\0' ? rest : *rest == ',' ? rest + 1 : NULL;
}

int fold_model_configure(const char *measured, const char *file_params, const char *env,
                         fold_model_params_t *p)
{
    fold_model_params_t m;
    fold_model_defaults(&m);
    /* "generic,...": the defaults alone beneath FOLD_MODEL's own values, so that the
     * same setting gives the same model on every machine (tests of decisions pin it
     * so; neither the measurement nor a tuning file reaches it). */
    const char *rest = after_generic(env);
    if (rest != NULL) {
        env      = rest;
        measured = file_params = NULL;
    }
    int status = apply_params(measured, "fold_init's measurement", &m);
    if (status == FOLD_OK) {
        status = apply_params(file_params, "tuning file", &m);
    }
    if (status == FOLD_OK) {
        status = apply_params(env, "FOLD_MODEL", &m);
    }
    if (status == FOLD_OK) {
        *p = m;
    }
    return status;
}
