/*
 * The selection rule language (select.h): parsing, matching and printing rules.
 */
#include "select.h"
#include "util/size.h"
#include "log.h"

#include <fold/fold_status.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FIELDS (3 + 3 + 1)   /* coll, sizes, three terms, algorithms */

/* "lo-hi" with size suffixes; hi may be "inf". Modifies text. */
static int parse_size_range(char *text, size_t *lo, size_t *hi)
{
    char *dash = strchr(text, '-');
    if (dash == NULL) {
        return -1;
    }
    *dash = '\0';
    return (fold_util_parse_size(text, lo) == 0 && fold_util_parse_size(dash + 1, hi) == 0 && *lo <= *hi)
               ? 0 : -1;
}

static int parse_count_range(char *text, fold_range_t *range)
{
    size_t lo, hi;
    if (parse_size_range(text, &lo, &hi) != 0) {
        return -1;
    }
    range->lo = lo > (size_t)LONG_MAX ? LONG_MAX : (long)lo;
    range->hi = hi > (size_t)LONG_MAX ? LONG_MAX : (long)hi;
    return 0;
}

/* One topology term: pA-B, nA-B or ppnA-B. */
static int parse_term(char *text, fold_tune_rule_t *rule)
{
    if (strncmp(text, "ppn", 3) == 0) {
        return parse_count_range(text + 3, &rule->ppn);
    }
    if (text[0] == 'p') {
        return parse_count_range(text + 1, &rule->ranks);
    }
    if (text[0] == 'n') {
        return parse_count_range(text + 1, &rule->nodes);
    }
    return -1;
}

int fold_select_parse_alg(const char *text, const fold_alg_t **alg, size_t *seg_bytes)
{
    char name[64];
    const char *at = strchr(text, '@');
    size_t len = at != NULL ? (size_t)(at - text) : strlen(text);
    *alg       = NULL;
    *seg_bytes = 0;
    if (len >= sizeof(name)) {
        return FOLD_ERR_NOT_FOUND;
    }
    memcpy(name, text, len);
    name[len] = '\0';
    if ((*alg = fold_alg_find(name)) == NULL) {
        return FOLD_ERR_NOT_FOUND;
    }
    /* A segment holds at least one element of any type. */
    if (at != NULL && (fold_util_parse_size(at + 1, seg_bytes) != 0 || *seg_bytes < 16)) {
        return FOLD_ERR_INVALID_ARG;
    }
    return FOLD_OK;
}

/* "alg" or "alg,alg@SIZE,...": every one must exist and serve coll. */
static int parse_algs(char *text, fold_tune_rule_t *rule)
{
    rule->nalgs = 0;
    for (char *save = NULL, *name = strtok_r(text, ",", &save); name != NULL;
         name = strtok_r(NULL, ",", &save)) {
        const fold_alg_t *alg;
        size_t seg;
        int status = fold_select_parse_alg(name, &alg, &seg);
        if (status != FOLD_OK) {
            return status;
        }
        if (fold_alg_builder(alg, rule->coll) == NULL || rule->nalgs == FOLD_RULE_MAX_ALGS) {
            return FOLD_ERR_INVALID_ARG;
        }
        rule->segs[rule->nalgs]   = seg;
        rule->algs[rule->nalgs++] = alg;
    }
    return rule->nalgs > 0 ? FOLD_OK : FOLD_ERR_INVALID_ARG;
}

/* Splits text at ':' into at most max fields; returns how many, or -1. */
static int split_fields(char *text, char **fields, int max)
{
    int n = 0;
    for (char *save = NULL, *f = strtok_r(text, ":", &save); f != NULL;
         f = strtok_r(NULL, ":", &save)) {
        if (n == max) {
            return -1;
        }
        fields[n++] = f;
    }
    return n;
}

/* coll, size range and terms: the fields of a rule before its algorithms. */
static int parse_where(char **fields, int n, fold_tune_rule_t *rule)
{
    memset(rule, 0, sizeof(*rule));
    fold_range_t any = {1, LONG_MAX};
    rule->ranks = rule->nodes = rule->ppn = any;
    if (n < 2 || fold_reduction_from_name(fields[0], &rule->coll) != 0 ||
        parse_size_range(fields[1], &rule->min_bytes, &rule->max_bytes) != 0) {
        return FOLD_ERR_INVALID_ARG;
    }
    for (int i = 2; i < n; i++) {
        if (parse_term(fields[i], rule) != 0) {
            return FOLD_ERR_INVALID_ARG;
        }
    }
    return FOLD_OK;
}

static int parse_rule(char *text, fold_tune_rule_t *rule)
{
    char *fields[MAX_FIELDS];
    int n = split_fields(text, fields, MAX_FIELDS);
    if (n < 3) {
        return FOLD_ERR_INVALID_ARG;
    }
    int status = parse_where(fields, n - 1, rule);
    return status == FOLD_OK ? parse_algs(fields[n - 1], rule) : status;
}

int fold_tune_parse_where(char *text, fold_tune_rule_t *rule, char **last)
{
    char *fields[MAX_FIELDS];
    int n = split_fields(text, fields, MAX_FIELDS);
    if (n < 3) {
        return FOLD_ERR_INVALID_ARG;
    }
    *last = fields[n - 1];
    return parse_where(fields, n - 1, rule);
}

void fold_tune_release(fold_tune_t *tune)
{
    free(tune->rules);
    tune->rules  = NULL;
    tune->nrules = 0;
}

static int tune_grow(fold_tune_t *t, int extra)
{
    fold_tune_rule_t *rules = realloc(t->rules, (size_t)(t->nrules + extra) * sizeof(*rules));
    if (rules == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    t->rules = rules;
    return FOLD_OK;
}

int fold_tune_parse(const char *text, fold_tune_t *tune)
{
    fold_tune_t t = {NULL, 0};
    char *copy = strdup(text ? text : "");
    if (copy == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    int status = FOLD_OK;
    for (char *save = NULL, *r = strtok_r(copy, "#", &save); r != NULL;
         r = strtok_r(NULL, "#", &save)) {
        if ((status = tune_grow(&t, 1)) != FOLD_OK) {
            break;
        }
        char rule_text[256];
        snprintf(rule_text, sizeof(rule_text), "%s", r);
        status = parse_rule(r, &t.rules[t.nrules]);
        if (status != FOLD_OK) {
            fold_error("bad tuning rule '%s': expected coll:size-range[:pA-B][:nA-B][:ppnA-B]:"
                       "alg[@SEGMENT][,alg...] with coll allreduce|reduce and algorithms of "
                       "that collective (fold_info -a), a segment at least 16 bytes",
                       rule_text);
            break;
        }
        t.nrules++;
    }
    free(copy);
    if (status != FOLD_OK) {
        fold_tune_release(&t);
        return status;
    }
    fold_tune_release(tune);
    *tune = t;
    return FOLD_OK;
}

int fold_tune_append(fold_tune_t *dst, const fold_tune_t *src)
{
    if (src->nrules == 0) {
        return FOLD_OK;
    }
    int status = tune_grow(dst, src->nrules);
    if (status == FOLD_OK) {
        memcpy(dst->rules + dst->nrules, src->rules, (size_t)src->nrules * sizeof(*src->rules));
        dst->nrules += src->nrules;
    }
    return status;
}

static int in_range(const fold_range_t *r, long v)
{
    return v >= r->lo && v <= r->hi;
}

int fold_tune_rule_matches(const fold_tune_rule_t *r, fold_coll_t coll, size_t bytes,
                        const fold_shape_t *shape)
{
    return r->coll == coll && bytes >= r->min_bytes &&
           (bytes < r->max_bytes || r->max_bytes == SIZE_MAX) &&
           in_range(&r->ranks, shape->size) && in_range(&r->nodes, shape->nnodes) &&
           in_range(&r->ppn, shape->max_ppn);
}

const fold_tune_rule_t *fold_tune_match(const fold_tune_t *tune, fold_coll_t coll,
                                        size_t bytes, const fold_shape_t *shape,
                                        unsigned skip_flags)
{
    for (int i = 0; i < tune->nrules; i++) {
        const fold_tune_rule_t *r = &tune->rules[i];
        if (!fold_tune_rule_matches(r, coll, bytes, shape)) {
            continue;
        }
        for (int a = 0; a < r->nalgs; a++) {
            if (!(r->algs[a]->flags & skip_flags)) {
                return r;
            }
        }
    }
    return NULL;
}

static void format_size(size_t v, char *buf, size_t len)
{
    if (v == SIZE_MAX) {
        snprintf(buf, len, "inf");
    } else if (v >= (1u << 30) && v % (1u << 30) == 0) {
        snprintf(buf, len, "%zuG", v >> 30);
    } else if (v >= (1u << 20) && v % (1u << 20) == 0) {
        snprintf(buf, len, "%zuM", v >> 20);
    } else if (v >= 1024 && v % 1024 == 0) {
        snprintf(buf, len, "%zuk", v >> 10);
    } else {
        snprintf(buf, len, "%zu", v);
    }
}

void fold_select_format_alg(const fold_alg_t *alg, size_t seg_bytes, char *buf, size_t len)
{
    char seg[32] = "";
    if (seg_bytes != 0) {
        seg[0] = '@';
        format_size(seg_bytes, seg + 1, sizeof(seg) - 1);
    }
    snprintf(buf, len, "%s%s", alg->name, seg);
}

static void format_term(const char *name, const fold_range_t *r, char *buf, size_t len)
{
    buf[0] = '\0';
    if (r->lo == 1 && r->hi == LONG_MAX) {
        return;
    }
    if (r->hi == LONG_MAX) {
        snprintf(buf, len, ":%s%ld-inf", name, r->lo);
    } else {
        snprintf(buf, len, ":%s%ld-%ld", name, r->lo, r->hi);
    }
}

void fold_tune_rule_format(const fold_tune_rule_t *r, char *buf, size_t len)
{
    char lo[32], hi[32], p[48], n[48], ppn[48], algs[256] = "";
    format_size(r->min_bytes, lo, sizeof(lo));
    format_size(r->max_bytes, hi, sizeof(hi));
    format_term("p", &r->ranks, p, sizeof(p));
    format_term("n", &r->nodes, n, sizeof(n));
    format_term("ppn", &r->ppn, ppn, sizeof(ppn));
    for (int a = 0; a < r->nalgs; a++) {
        size_t used = strlen(algs);
        char alg[96];
        fold_select_format_alg(r->algs[a], r->segs[a], alg, sizeof(alg));
        snprintf(algs + used, sizeof(algs) - used, "%s%s", a ? "," : "", alg);
    }
    snprintf(buf, len, "%s:%s-%s%s%s%s:%s", fold_coll_name(r->coll), lo, hi, p, n, ppn, algs);
}

void fold_shape_of(int size, const int *node_of, int max_node, fold_shape_t *shape)
{
    shape->size    = size;
    shape->nnodes  = 0;
    shape->min_ppn = size;
    shape->max_ppn = 0;
    int *per_node = calloc((size_t)(max_node > 0 ? max_node : 1), sizeof(int));
    if (per_node == NULL) {
        /* Selection only: assume the worst-case spread, one rank per node. */
        shape->nnodes  = size;
        shape->min_ppn = shape->max_ppn = 1;
        return;
    }
    for (int r = 0; r < size; r++) {
        per_node[node_of[r]]++;
    }
    for (int n = 0; n < max_node; n++) {
        if (per_node[n] == 0) {
            continue;
        }
        shape->nnodes++;
        shape->min_ppn = per_node[n] < shape->min_ppn ? per_node[n] : shape->min_ppn;
        shape->max_ppn = per_node[n] > shape->max_ppn ? per_node[n] : shape->max_ppn;
    }
    free(per_node);
}
