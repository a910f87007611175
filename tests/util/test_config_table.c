/*
 * The configuration row engine (util/config_table.h) on a table of every parser: rows
 * parse into their typed fields, bad values say what was expected and change
 * nothing, and a table whose parser is wider than its field is refused.
 */
#include <criterion/criterion.h>

#include "config_check.h"

#include <fold/fold_status.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

/* ---- the row engine ----------------------------------------------------------- */

typedef struct demo {
    int         level;
    long        count;
    size_t      bytes;
    double      seconds;
    int         color;
    const char *label;
} demo_t;

static const char *const colors[] = {"red", "green", "blue", NULL};

#define DEMO_FIELD(member) FOLD_UTIL_CONFIG_FIELD(demo_t, member)

static const fold_util_config_field_t demo_fields[] = {
    {"LEVEL", "1", "an int from 0 to 2", DEMO_FIELD(level), FOLD_UTIL_CONFIG_INT(0, 2)},
    {"COUNT", "auto", "a long >= 1, or auto (-1)", DEMO_FIELD(count),
     FOLD_UTIL_CONFIG_LONG_OR("auto", -1, 1, LONG_MAX)},
    {"BYTES", "4k", "bytes from 1k to 1M, or none (0)", DEMO_FIELD(bytes),
     FOLD_UTIL_CONFIG_SIZE_OR("none", 0, 1024, 1 << 20)},
    {"SECONDS", "2.5", "seconds", DEMO_FIELD(seconds), FOLD_UTIL_CONFIG_SECONDS},
    {"COLOR", "green", "a color", DEMO_FIELD(color), FOLD_UTIL_CONFIG_ENUM(colors)},
    {"LABEL", "", "any text", DEMO_FIELD(label), FOLD_UTIL_CONFIG_STRING},
};

static const fold_util_config_table_t demo_table = {
    "demo", "DEMO_", demo_fields, sizeof(demo_fields) / sizeof(demo_fields[0])
};

#define DEMO_ROWS (sizeof(demo_fields) / sizeof(demo_fields[0]))

static int demo_set(demo_t *d, char **values, const char *name, const char *text, char *why)
{
    int row = fold_util_config_find(&demo_table, name);
    cr_assert_geq(row, 0, "%s", name);
    return fold_util_config_set(&demo_table, d, values, row, text, why, 256);
}

Test(util_config, rows_parse_into_their_typed_fields)
{
    demo_t d;
    char *values[DEMO_ROWS] = {NULL};
    char why[256];
    memset(&d, 0x5a, sizeof(d));
    cr_assert_eq(fold_util_config_init(&demo_table, &d, values, why, sizeof(why)), FOLD_OK, "%s",
                 why);
    cr_expect_eq(d.level, 1);
    cr_expect_eq(d.count, -1);
    cr_expect_eq(d.bytes, 4096);
    cr_expect_eq(d.seconds, 2.5);
    cr_expect_eq(d.color, 1);
    cr_expect_str_eq(d.label, "");
    cr_expect_eq(d.label, values[5], "a string field points at the row's text");

    cr_expect_eq(demo_set(&d, values, "DEMO_COUNT", "12", why), FOLD_OK);
    cr_expect_eq(d.count, 12);
    cr_expect_eq(demo_set(&d, values, "count", "AUTO", why), FOLD_OK);
    cr_expect_eq(d.count, -1);
    cr_expect_eq(demo_set(&d, values, "BYTES", "1M", why), FOLD_OK);
    cr_expect_eq(d.bytes, (size_t)1 << 20);
    cr_expect_eq(demo_set(&d, values, "BYTES", "none", why), FOLD_OK);
    cr_expect_eq(d.bytes, 0);
    cr_expect_eq(demo_set(&d, values, "COLOR", "Blue", why), FOLD_OK);
    cr_expect_eq(d.color, 2);
    cr_expect_eq(demo_set(&d, values, "LABEL", "hello", why), FOLD_OK);
    cr_expect_str_eq(d.label, "hello");
    cr_expect_eq(d.label, values[5]);
    cr_expect_eq(fold_util_config_find(&demo_table, "DEMO_NOPE"), -1);
    cr_expect_eq(fold_util_config_find(&demo_table, NULL), -1);
    fold_util_config_release(&demo_table, values);
}

Test(util_config, bad_values_say_what_was_expected_and_change_nothing)
{
    static const struct {
        const char *name, *text, *expected;
    } bad[] = {
        {"LEVEL", "3", "an integer from 0 to 2"},
        {"LEVEL", "1x", "an integer from 0 to 2"},
        {"COUNT", "0", "an integer >= 1, or auto"},
        {"COUNT", "", "an integer >= 1, or auto"},
        {"BYTES", "512", "from 1k to 1M, or none"},
        {"BYTES", "2M", "from 1k to 1M, or none"},
        {"BYTES", "12q", "k, M or G suffix"},
        {"SECONDS", "0", "seconds > 0"},
        {"SECONDS", "nan", "seconds > 0"},
        {"SECONDS", "inf", "seconds > 0, at most"},
        {"SECONDS", "1e12", "seconds > 0, at most"},
        {"COLOR", "purple", "one of red, green, blue"},
    };
    demo_t d;
    char *values[DEMO_ROWS] = {NULL};
    char why[256];
    cr_assert_eq(fold_util_config_init(&demo_table, &d, values, why, sizeof(why)), FOLD_OK);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        demo_t before = d;
        int row = fold_util_config_find(&demo_table, bad[i].name);
        const char *text_before = values[row];
        cr_expect_eq(demo_set(&d, values, bad[i].name, bad[i].text, why), FOLD_ERR_INVALID_ARG,
                     "%s=%s accepted", bad[i].name, bad[i].text);
        char name[64], quoted[64];
        snprintf(name, sizeof(name), "DEMO_%s", bad[i].name);
        snprintf(quoted, sizeof(quoted), "'%s'", bad[i].text);
        EXPECT_LOG_HAS(why, name);
        EXPECT_LOG_HAS(why, quoted);
        EXPECT_LOG_HAS(why, bad[i].expected);
        cr_expect(fields_equal(&demo_table, &before, &d), "%s=%s changed the struct",
                     bad[i].name, bad[i].text);
        cr_expect_eq(values[row], text_before, "%s=%s changed the text", bad[i].name,
                     bad[i].text);
    }
    fold_util_config_release(&demo_table, values);
}

/* A table mistake: a long parser on an int field. */
typedef struct small {
    int narrow;
} small_t;

static const fold_util_config_field_t wrong_fields[] = {
    {"NARROW", "1", "an int given a long parser", FOLD_UTIL_CONFIG_FIELD(small_t, narrow),
     FOLD_UTIL_CONFIG_LONG(0, 9)},
};

Test(util_config, a_parser_wider_than_its_field_is_caught)
{
    const fold_util_config_table_t t = {"wrong", "W_", wrong_fields, 1};
    small_t s = {7};
    char *values[1] = {NULL};
    char why[256];
    cr_expect_eq(fold_util_config_init(&t, &s, values, why, sizeof(why)), FOLD_ERR_INVALID_ARG);
    EXPECT_LOG_HAS(why, "W_NARROW");
    EXPECT_LOG_HAS(why, "4-byte field");
    cr_expect_eq(s.narrow, 7);
    cr_expect_null(values[0]);
}
