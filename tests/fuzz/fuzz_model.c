/*
 * libFuzzer target for the cost model's parameters (coll/model.c fold_model_set, and
 * the FOLD_MODEL list "name=value,..." through fold_model_configure). Input: one
 * control byte, then the text (up to the first NUL); control bit 0 set: the text is
 * a FOLD_MODEL list, else "NAME VALUE" for fold_model_set.
 *
 * Checks, besides ASan/UBSan: a refusal leaves the parameters alone; what is
 * accepted prints (fold_model_print) lines that read back to the same parameters,
 * as fold_model_print promises, and that read back as a FOLD_MODEL list too.
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
    fprintf(stderr, "fuzz_model: invariant broken: %s: '%s'\n", what, text);
    abort();
}

static char *print_params(const fold_model_params_t *p, const char *prefix)
{
    char *buf = NULL;
    size_t len;
    FILE *out = open_memstream(&buf, &len);
    if (out == NULL) {
        abort();
    }
    fold_model_print(p, prefix, out);
    fclose(out);
    return buf;
}

/* The printed lines read back, one fold_model_set each and as one FOLD_MODEL list. */
static void check_print(const fold_model_params_t *p, const char *text)
{
    char *lines = print_params(p, NULL);
    fold_model_params_t back;
    fold_model_defaults(&back);
    char *list = calloc(1, strlen(lines) + 1);
    for (char *save = NULL, *line = strtok_r(lines, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        char *value = strchr(line, ' ');
        if (value == NULL) {
            fail("a printed line without a value", text);
        }
        *value++ = '\0';
        if (fold_model_set(&back, line, value) != FOLD_OK) {
            fail("a printed parameter does not read back", text);
        }
        sprintf(list + strlen(list), "%s%s=%s", list[0] ? "," : "", line, value);
    }
    char *a = print_params(p, NULL), *b = print_params(&back, NULL);
    if (strcmp(a, b) != 0) {
        fail("printed parameters read back as others", text);
    }
    fold_model_params_t from_list;
    char *c = NULL;
    if (fold_model_configure(NULL, NULL, list, &from_list) != FOLD_OK ||
        strcmp(a, c = print_params(&from_list, NULL)) != 0) {
        fail("printed parameters do not read back as a FOLD_MODEL list", text);
    }
    free(c);
    free(a);
    free(b);
    free(list);
    free(lines);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    fold_log_level = -1;
    char *text = malloc(size);
    if (text == NULL) {
        abort();
    }
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';

    fold_model_params_t p, before;
    fold_model_defaults(&p);
    memcpy(&before, &p, sizeof(p));
    int rc;
    if (data[0] & 1) {
        rc = fold_model_configure(NULL, NULL, text, &p);
    } else {
        char *value = strchr(text, ' ');
        if (value != NULL) {
            *value++ = '\0';
        }
        rc = fold_model_set(&p, text, value);
    }
    if (rc != FOLD_OK && memcmp(&p, &before, sizeof(p)) != 0) {
        fail("refused but changed the parameters", text);
    }
    if (rc == FOLD_OK) {
        check_print(&p, text);
    }
    free(text);
    return 0;
}
