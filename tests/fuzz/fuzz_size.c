/*
 * libFuzzer target for the byte-count syntax (util/size.c) and the configuration
 * table's value parsers (util/config_table.c). Input: one control byte choosing the
 * parser, then the text (up to the first NUL, as an environment variable holds it).
 *
 * Checks, besides ASan/UBSan:
 *   - fold_util_parse_size agrees with a reference written from size.h's grammar,
 *     and what it accepts reads back the same printed in decimal and with a suffix;
 *   - a config parser either refuses, leaving the field alone and saying what it
 *     expected, or stores a value inside the row's bounds that reads back the same.
 */
#include "util/config_table.h"
#include "util/size.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void fail(const char *what, const char *text)
{
    fprintf(stderr, "fuzz_size: invariant broken: %s: '%s'\n", what, text);
    abort();
}

/* DIGITS [kKmMgG [i]] [bB] or inf; -1 on anything else or on overflow. */
static int reference_size(const char *t, size_t *out)
{
    if (strcasecmp(t, "inf") == 0) {
        *out = SIZE_MAX;
        return 0;
    }
    size_t v = 0;
    if (!isdigit((unsigned char)*t)) {
        return -1;
    }
    for (; isdigit((unsigned char)*t); t++) {
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (size_t)(*t - '0'), &v)) {
            return -1;
        }
    }
    const char *units = "kmg";
    const char *u = *t ? strchr(units, tolower((unsigned char)*t)) : NULL;
    if (u != NULL) {
        unsigned shift = 10 * (unsigned)(u - units + 1);
        if (v > (SIZE_MAX >> shift)) {
            return -1;
        }
        v <<= shift;
        t++;
        if (*t == 'i') {
            t++;
        }
    }
    if (*t == 'b' || *t == 'B') {
        t++;
    }
    if (*t != '\0') {
        return -1;
    }
    *out = v;
    return 0;
}

static void check_size(const char *text)
{
    size_t v = 12345, ref;
    int rc = fold_util_parse_size(text, &v);
    if ((rc == 0) != (reference_size(text, &ref) == 0)) {
        fail(rc == 0 ? "accepted what the grammar refuses" : "refused a valid size", text);
    }
    if (rc != 0) {
        if (v != 12345) {
            fail("refused but wrote", text);
        }
        return;
    }
    if (v != ref) {
        fail("parsed to another value than the grammar's", text);
    }
    char buf[64];
    size_t back;
    snprintf(buf, sizeof(buf), "%zu", v);
    if (v != SIZE_MAX && (fold_util_parse_size(buf, &back) != 0 || back != v)) {
        fail("does not read back in decimal", text);
    }
    static const char *const suffix[] = {"k", "MiB", "GB"};
    for (int s = 0; s < 3; s++) {
        unsigned shift = 10 * (unsigned)(s + 1);
        if (v != SIZE_MAX && v % ((size_t)1 << shift) == 0) {
            snprintf(buf, sizeof(buf), "%zu%s", v >> shift, suffix[s]);
            if (fold_util_parse_size(buf, &back) != 0 || back != v) {
                fail("does not read back with a suffix", text);
            }
        }
    }
}

static const char *const names[] = {"off", "on", "auto", NULL};
static const fold_util_config_parser_t parsers[] = {
    FOLD_UTIL_CONFIG_INT(0, 100),
    FOLD_UTIL_CONFIG_INT(INT_MIN, INT_MAX),
    FOLD_UTIL_CONFIG_LONG(1, LONG_MAX),
    FOLD_UTIL_CONFIG_LONG_OR("auto", -1, 0, 64),
    FOLD_UTIL_CONFIG_SIZE(4096, (size_t)1 << 30),
    FOLD_UTIL_CONFIG_SIZE_OR("auto", SIZE_MAX, 0, SIZE_MAX),
    FOLD_UTIL_CONFIG_SECONDS,
    FOLD_UTIL_CONFIG_ENUM(names),
};
#define NPARSERS (sizeof(parsers) / sizeof(parsers[0]))

static void check_config(const fold_util_config_parser_t *p, const char *text)
{
    union { long l; int i; size_t z; double d; unsigned char b[16]; } field, again;
    memset(&field, 0xa5, sizeof(field));
    char why[256] = "";
    if (p->read(text, &field, p->arg, why, sizeof(why)) != 0) {
        for (size_t i = 0; i < sizeof(field); i++) {
            if (field.b[i] != 0xa5) {
                fail("config parser refused but wrote", text);
            }
        }
        if (strncmp(why, "expected ", 9) != 0) {
            fail("config parser refused without saying what it expected", text);
        }
        return;
    }
    for (size_t i = p->size; i < sizeof(field); i++) {
        if (field.b[i] != 0xa5) {
            fail("config parser wrote past its field", text);
        }
    }
    char buf[64];
    if (p->read == fold_util_config_read_int || p->read == fold_util_config_read_long) {
        const fold_util_config_num_t *a = p->arg;
        long v = p->size == sizeof(int) ? field.i : field.l;
        if (!(v >= a->min && v <= a->max) && !(a->word != NULL && v == a->word_value)) {
            fail("integer out of the row's bounds", text);
        }
        snprintf(buf, sizeof(buf), "%ld", v);
        if (a->word != NULL && v == a->word_value) {
            snprintf(buf, sizeof(buf), "%s", a->word);
        }
    } else if (p->read == fold_util_config_read_size) {
        const fold_util_config_bytes_t *a = p->arg;
        if (!(field.z >= a->min && field.z <= a->max) &&
            !(a->word != NULL && field.z == a->word_value)) {
            fail("size out of the row's bounds", text);
        }
        snprintf(buf, sizeof(buf), "%zu", field.z);
        if (field.z == SIZE_MAX) {
            snprintf(buf, sizeof(buf), "inf");
        }
        if (a->word != NULL && field.z == a->word_value) {
            snprintf(buf, sizeof(buf), "%s", a->word);
        }
    } else if (p->read == fold_util_config_read_seconds) {
        if (!(field.d > 0)) {
            fail("seconds not > 0", text);
        }
        if (!isfinite(field.d)) {
            return;   /* "inf" is a timeout that never fires; %.17g would print it too */
        }
        snprintf(buf, sizeof(buf), "%.17g", field.d);
    } else {
        if (field.i < 0 || field.i > 2) {
            fail("enum index out of its names", text);
        }
        snprintf(buf, sizeof(buf), "%s", names[field.i]);
    }
    memset(&again, 0xa5, sizeof(again));
    if (p->read(buf, &again, p->arg, why, sizeof(why)) != 0 ||
        memcmp(&again, &field, sizeof(field)) != 0) {
        fail("config value does not read back", text);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    char *text = malloc(size);
    if (text == NULL) {
        abort();
    }
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    if (data[0] % (NPARSERS + 1) == NPARSERS) {
        check_size(text);
    } else {
        check_config(&parsers[data[0] % (NPARSERS + 1)], text);
    }
    free(text);
    return 0;
}
