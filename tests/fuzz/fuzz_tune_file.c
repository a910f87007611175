/*
 * libFuzzer target for the tuning file's text (FOLD_TUNE_FILE, coll/tune_file.c,
 * fold_tune_file_parse). Input: the file's bytes, in a buffer of exactly their size.
 *
 * Checks, besides ASan/UBSan: a refusal leaves the output alone; what is accepted
 * written back as a file (rule, serve and param lines) parses to the same rules,
 * serve ranges and parameters, and the parameters apply to the cost model.
 */
#include "coll/select.h"
#include "log.h"

#include <fold/fold_status.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_tune_file: invariant broken: %s\n", what);
    abort();
}

static int rule_eq(const fold_tune_rule_t *a, const fold_tune_rule_t *b)
{
    char la[1024], lb[1024];
    fold_tune_rule_format(a, la, sizeof(la));
    fold_tune_rule_format(b, lb, sizeof(lb));
    return strcmp(la, lb) == 0 && a->min_bytes == b->min_bytes && a->max_bytes == b->max_bytes;
}

/* The file as fold_tune would write what f holds. */
static char *write_back(const fold_tune_file_t *f, size_t *len)
{
    char *buf = NULL;
    FILE *out = open_memstream(&buf, len);
    if (out == NULL) {
        abort();
    }
    char line[1024];
    for (int i = 0; i < f->rules.nrules; i++) {
        fold_tune_rule_format(&f->rules.rules[i], line, sizeof(line));
        fprintf(out, "rule %s\n", line);
    }
    for (int i = 0; i < f->nserve; i++) {
        fold_tune_rule_format(&f->serve[i].where, line, sizeof(line));   /* ends in ':' */
        fprintf(out, "serve %s%s\n", line, f->serve[i].fold ? "fold" : "mpi");
    }
    char *params = strdup(f->params ? f->params : "");
    for (char *save = NULL, *item = strtok_r(params, ",", &save); item != NULL;
         item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        if (eq == NULL) {
            fail("a parameter without '='");
        }
        *eq = '\0';
        fprintf(out, "param %s %s\n", item, eq + 1);
    }
    free(params);
    fclose(out);
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fold_log_level = -1;
    char *text = malloc(size ? size : 1);
    if (text == NULL) {
        abort();
    }
    memcpy(text, data, size);

    fold_tune_file_t f;
    memset(&f, 0x5a, sizeof(f));
    if (fold_tune_file_parse(text, size, "fuzz", &f) != FOLD_OK) {
        for (size_t i = 0; i < sizeof(f); i++) {
            if (((unsigned char *)&f)[i] != 0x5a) {
                fail("refused but wrote");
            }
        }
        free(text);
        return 0;
    }
    if (f.path != NULL || f.source != NULL) {
        fail("parsing text set a path");
    }
    fold_model_params_t p;
    if (fold_model_configure(NULL, f.params, NULL, &p) != FOLD_OK) {
        fail("accepted parameters the model refuses");
    }
    size_t len;
    char *again = write_back(&f, &len);
    fold_tune_file_t g;
    if (fold_tune_file_parse(again, len, "written back", &g) != FOLD_OK) {
        fail("what was accepted, written back, does not parse");
    }
    if (g.rules.nrules != f.rules.nrules || g.nserve != f.nserve ||
        strcmp(g.params ? g.params : "", f.params ? f.params : "") != 0) {
        fail("written back, the file holds other items");
    }
    for (int i = 0; i < f.rules.nrules; i++) {
        if (!rule_eq(&f.rules.rules[i], &g.rules.rules[i])) {
            fail("a rule reads back as another");
        }
    }
    for (int i = 0; i < f.nserve; i++) {
        if (!rule_eq(&f.serve[i].where, &g.serve[i].where) || f.serve[i].fold != g.serve[i].fold) {
            fail("a serve range reads back as another");
        }
    }
    fold_tune_file_release(&g);
    free(again);
    fold_tune_file_release(&f);
    free(text);
    return 0;
}
