/*
 * Algorithm selection. In order: an algorithm forced by FOLD_ALLREDUCE_ALG /
 * FOLD_REDUCE_ALG; the first matching rule of FOLD_TUNE; the first matching rule of
 * the defaults below (written in the same language). Non-commutative ops go to an
 * algorithm that keeps the rank order when the chosen one does not.
 *
 * Rule syntax (UCC style): coll:size-range[:ranks-range]:alg, rules joined by '#'.
 *   allreduce:0-4k:recursive_doubling       message sizes [0, 4 KiB)
 *   reduce:64k-inf:p3-inf:ring              64 KiB and up, on 3 ranks or more
 */
#include "core.h"
#include "log.h"
#include "codec/reduce_kernel.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Measured on a 2-core node (see the README's tuning section for the numbers). */
const char fold_default_tune[] =
    "allreduce:0-8k:shm_flat"
    "#allreduce:32k-16M:p2-2:dpml_pipelined"
    "#allreduce:16M-inf:p2-2:dpml"
    "#allreduce:8k-inf:p2-2:rabenseifner"
    "#allreduce:8k-inf:rabenseifner"
    "#reduce:0-8k:shm_flat"
    "#reduce:8k-16k:p2-2:binomial"
    "#reduce:16k-1M:p2-2:dpml_pipelined"
    "#reduce:1M-inf:p2-2:dpml"
    "#reduce:8k-inf:rabenseifner";

static int parse_coll(const char *text, size_t len, fold_coll_t *coll)
{
    if (len == 9 && strncmp(text, "allreduce", 9) == 0) {
        *coll = FOLD_COLL_ALLREDUCE;
    } else if (len == 6 && strncmp(text, "reduce", 6) == 0) {
        *coll = FOLD_COLL_REDUCE;
    } else {
        return -1;
    }
    return 0;
}

/* "lo-hi" with size suffixes; hi may be "inf". */
static int parse_size_range(char *text, size_t *lo, size_t *hi)
{
    char *dash = strchr(text, '-');
    if (dash == NULL) {
        return -1;
    }
    *dash = '\0';
    return (fold_parse_size(text, lo) == 0 && fold_parse_size(dash + 1, hi) == 0 && *lo <= *hi)
               ? 0 : -1;
}

static int parse_rank_range(char *text, int *lo, int *hi)
{
    size_t l, h;
    if (text[0] != 'p' || parse_size_range(text + 1, &l, &h) != 0) {
        return -1;
    }
    *lo = l > (size_t)INT32_MAX ? INT32_MAX : (int)l;
    *hi = h > (size_t)INT32_MAX ? INT32_MAX : (int)h;
    return 0;
}

static int parse_rule(char *text, fold_tune_rule_t *rule)
{
    char *fields[4];
    int n = 0;
    for (char *save = NULL, *f = strtok_r(text, ":", &save); f != NULL;
         f = strtok_r(NULL, ":", &save)) {
        if (n == 4) {
            return FOLD_ERR_INVALID_ARG;
        }
        fields[n++] = f;
    }
    if (n < 3) {
        return FOLD_ERR_INVALID_ARG;
    }
    rule->min_ranks = 1;
    rule->max_ranks = INT32_MAX;
    if (parse_coll(fields[0], strlen(fields[0]), &rule->coll) != 0 ||
        parse_size_range(fields[1], &rule->min_bytes, &rule->max_bytes) != 0 ||
        (n == 4 && parse_rank_range(fields[2], &rule->min_ranks, &rule->max_ranks) != 0)) {
        return FOLD_ERR_INVALID_ARG;
    }
    rule->alg = fold_alg_find(fields[n - 1]);
    if (rule->alg == NULL) {
        return FOLD_ERR_NOT_FOUND;
    }
    if (fold_alg_builder(rule->alg, rule->coll) == NULL) {
        return FOLD_ERR_INVALID_ARG;
    }
    return FOLD_OK;
}

void fold_tune_release(fold_tune_t *tune)
{
    free(tune->rules);
    tune->rules  = NULL;
    tune->nrules = 0;
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
        fold_tune_rule_t *rules = realloc(t.rules, (size_t)(t.nrules + 1) * sizeof(*rules));
        if (rules == NULL) {
            status = FOLD_ERR_NO_MEMORY;
            break;
        }
        t.rules = rules;
        char rule_text[256];
        snprintf(rule_text, sizeof(rule_text), "%s", r);
        status = parse_rule(r, &t.rules[t.nrules]);
        if (status != FOLD_OK) {
            fold_error("bad tuning rule '%s': expected coll:size-range[:pN-M]:alg with coll "
                       "allreduce|reduce and an algorithm of that collective (fold_info -a)",
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

static int resolve_forced(const char *name, fold_coll_t coll, const fold_alg_t **alg)
{
    *alg = NULL;
    if (name == NULL || strcmp(name, "auto") == 0 || name[0] == '\0') {
        return FOLD_OK;
    }
    const fold_alg_t *a = fold_alg_find(name);
    if (a == NULL || fold_alg_builder(a, coll) == NULL) {
        fold_error("'%s' is not a%s %s algorithm (fold_info -a lists them)", name,
                   coll == FOLD_COLL_ALLREDUCE ? "n" : "", fold_coll_name(coll));
        return FOLD_ERR_NOT_FOUND;
    }
    *alg = a;
    return FOLD_OK;
}

int fold_select_configure(fold_context_t *ctx)
{
    const fold_alg_t *ar, *r;
    int status = resolve_forced(ctx->config.values[FOLD_CFG_ALLREDUCE_ALG],
                                FOLD_COLL_ALLREDUCE, &ar);
    if (status == FOLD_OK) {
        status = resolve_forced(ctx->config.values[FOLD_CFG_REDUCE_ALG], FOLD_COLL_REDUCE, &r);
    }
    if (status == FOLD_OK) {
        status = fold_tune_parse(ctx->config.values[FOLD_CFG_TUNE], &ctx->tune);
    }
    if (status != FOLD_OK) {
        return status;
    }
    ctx->forced[FOLD_COLL_ALLREDUCE] = ar;
    ctx->forced[FOLD_COLL_REDUCE]    = r;
    return FOLD_OK;
}

/* The first rule that matches, skipping algorithms with any of skip_flags. */
static const fold_alg_t *match_rules(const fold_tune_t *tune, fold_coll_t coll, size_t bytes,
                                     int ranks, unsigned skip_flags)
{
    for (int i = 0; i < tune->nrules; i++) {
        const fold_tune_rule_t *r = &tune->rules[i];
        if (r->coll == coll && !(r->alg->flags & skip_flags) && bytes >= r->min_bytes &&
            (bytes < r->max_bytes || r->max_bytes == SIZE_MAX) && ranks >= r->min_ranks &&
            ranks <= r->max_ranks) {
            return r->alg;
        }
    }
    return NULL;
}

static const fold_tune_t *default_rules(void)
{
    static fold_tune_t rules;
    static int parsed;
    if (!__atomic_load_n(&parsed, __ATOMIC_ACQUIRE)) {
        static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
        pthread_mutex_lock(&lock);
        if (!parsed) {
            fold_tune_parse(fold_default_tune, &rules);
            __atomic_store_n(&parsed, 1, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&lock);
    }
    return &rules;
}

int fold_select(fold_comm_t *comm, fold_coll_t coll, size_t count, fold_dtype_t dtype,
                fold_op_t op, const fold_alg_t **alg_p)
{
    fold_context_t *ctx = comm->ctx;
    size_t bytes = count * fold_dtype_size(dtype);
    const fold_alg_t *alg = ctx->forced[coll];
    if (alg == NULL) {
        alg = match_rules(&ctx->tune, coll, bytes, comm->size, 0);
    }
    if (alg == NULL) {
        alg = match_rules(default_rules(), coll, bytes, comm->size, 0);
    }
    if (alg == NULL) {
        alg = (coll == FOLD_COLL_ALLREDUCE) ? &fold_alg_recursive_doubling : &fold_alg_binomial;
    }
    if (!fold_op_is_commutative(op) && !(alg->flags & FOLD_ALG_ORDERED)) {
        const fold_alg_t *ordered =
            (coll == FOLD_COLL_ALLREDUCE) ? &fold_alg_recursive_doubling : &fold_alg_binomial;
        fold_debug("%s: %s does not keep the rank order a non-commutative op needs; using %s",
                   fold_coll_name(coll), alg->name, ordered->name);
        alg = ordered;
    }
    *alg_p = alg;
    return FOLD_OK;
}

size_t fold_default_segment(const fold_alg_t *alg, size_t bytes)
{
    return 128 * 1024;
}

/* Message bytes per DPML leader, below which another leader costs more (a flag
 * hop, a copy out) than it saves in reduction. Reduce needs far more: with one
 * leader the root reduces straight into its output, and every other leader's
 * result is one more copy at the root. Measured on 2 ranks of a 2-core node
 * (README, DPML section). */
#define DPML_ALLREDUCE_BYTES_PER_LEADER (8 * 1024)
#define DPML_REDUCE_BYTES_PER_LEADER    (2 * 1024 * 1024)

int fold_select_leaders(const fold_context_t *ctx, const fold_topo_t *topo, fold_coll_t coll,
                        size_t bytes)
{
    long l = ctx->config.dpml_leaders;
    if (l <= 0) {
        l = (long)(bytes / (coll == FOLD_COLL_REDUCE ? DPML_REDUCE_BYTES_PER_LEADER
                                                     : DPML_ALLREDUCE_BYTES_PER_LEADER));
    }
    l = l < topo->min_ppn ? l : topo->min_ppn;
    return l < 1 ? 1 : (int)l;
}

/* The leaders' exchange between nodes: what the rules would pick for a flat call of
 * part_bytes on nnodes ranks, never a node-aware algorithm. */
const fold_alg_t *fold_select_inter(const fold_context_t *ctx, fold_coll_t coll,
                                    size_t part_bytes, int nnodes)
{
    const fold_alg_t *alg = match_rules(&ctx->tune, coll, part_bytes, nnodes,
                                        FOLD_ALG_NODE_AWARE);
    if (alg == NULL) {
        alg = match_rules(default_rules(), coll, part_bytes, nnodes, FOLD_ALG_NODE_AWARE);
    }
    if (alg == NULL) {
        alg = (coll == FOLD_COLL_ALLREDUCE) ? &fold_alg_recursive_doubling : &fold_alg_binomial;
    }
    return alg;
}
