/*
 * libFuzzer target for the selection rule language (FOLD_TUNE, coll/select_rules.c).
 * Input: the rule text (up to the first NUL, as an environment variable holds it).
 *
 * Checks, besides ASan/UBSan: fold_tune_parse either refuses, leaving the rules it
 * was given as they were, or every rule it gives reads back through
 * fold_tune_rule_format and fold_tune_parse as the same rule, and prints the same.
 */
#include "coll/select.h"
#include "log.h"

#include <fold/fold_status.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fail(const char *what, const char *text)
{
    fprintf(stderr, "fuzz_tune: invariant broken: %s: '%s'\n", what, text);
    abort();
}

static int rule_eq(const fold_tune_rule_t *a, const fold_tune_rule_t *b)
{
    if (a->coll != b->coll || a->min_bytes != b->min_bytes || a->max_bytes != b->max_bytes ||
        a->ranks.lo != b->ranks.lo || a->ranks.hi != b->ranks.hi || a->nodes.lo != b->nodes.lo ||
        a->nodes.hi != b->nodes.hi || a->ppn.lo != b->ppn.lo || a->ppn.hi != b->ppn.hi ||
        a->nalgs != b->nalgs) {
        return 0;
    }
    for (int i = 0; i < a->nalgs; i++) {
        if (a->algs[i] != b->algs[i] || a->segs[i] != b->segs[i]) {
            return 0;
        }
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fold_log_level = -1;   /* refusals are the point: not their messages */
    char *text = malloc(size + 1);
    if (text == NULL) {
        abort();
    }
    memcpy(text, data, size);
    text[size] = '\0';

    /* Rules parsed before, which a refusal must leave alone and a success frees. */
    fold_tune_rule_t *marker = calloc(1, sizeof(*marker));
    fold_tune_t tune = {marker, 1};
    if (fold_tune_parse(text, &tune) != FOLD_OK) {
        if (tune.rules != marker || tune.nrules != 1) {
            fail("refused but changed the rules", text);
        }
        fold_tune_release(&tune);
        free(text);
        return 0;
    }
    for (int i = 0; i < tune.nrules; i++) {
        char line[1024], again[1024];
        fold_tune_rule_format(&tune.rules[i], line, sizeof(line));
        fold_tune_t back = {NULL, 0};
        if (fold_tune_parse(line, &back) != FOLD_OK || back.nrules != 1) {
            fail("a formatted rule does not parse", line);
        }
        if (!rule_eq(&back.rules[0], &tune.rules[i])) {
            fail("a formatted rule parses as another rule", line);
        }
        fold_tune_rule_format(&back.rules[0], again, sizeof(again));
        if (strcmp(line, again) != 0) {
            fail("formatting is not stable", line);
        }
        fold_tune_release(&back);
    }
    fold_tune_release(&tune);
    free(text);
    return 0;
}
