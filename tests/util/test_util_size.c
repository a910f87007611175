/*
 * The one size syntax (util/size.h) that FOLD_* variables, selection rules, cost-model
 * parameters and the tools' options share.
 */
#include <criterion/criterion.h>

#include "util/size.h"

#include <stdint.h>

Test(util_size, accepts_digits_with_binary_suffixes)
{
    static const struct {
        const char *text;
        size_t      bytes;
    } good[] = {
        {"0", 0},
        {"17", 17},
        {"17b", 17},
        {"64k", 65536},
        {"64K", 65536},
        {"2M", (size_t)2 << 20},
        {"2m", (size_t)2 << 20},
        {"5MB", (size_t)5 << 20},
        {"1G", (size_t)1 << 30},
        {"1g", (size_t)1 << 30},
        {"1Ki", 1024},
        {"2KiB", 2048},
        {"3kb", 3072},
        {"inf", SIZE_MAX},
        {"INF", SIZE_MAX},
        {"17179869183G", (size_t)17179869183 << 30},
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        size_t v = 1;
        cr_expect_eq(fold_util_parse_size(good[i].text, &v), 0, "'%s' rejected", good[i].text);
        cr_expect_eq(v, good[i].bytes, "'%s' -> %zu", good[i].text, v);
    }
}

Test(util_size, rejects_anything_else_and_leaves_the_output)
{
    static const char *const bad[] = {
        "", "k", "-1", " 1", " -1", "+8", "8 ", "12q", "12x", "1.5k", "4kk", "1iB",
        "2KiBs", "0x10", "infinity", "auto", "99999999999999999999", "17179869184G",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_t v = 42;
        cr_expect_eq(fold_util_parse_size(bad[i], &v), -1, "'%s' accepted", bad[i]);
        cr_expect_eq(v, 42, "'%s' changed the output", bad[i]);
    }
    size_t v = 42;
    cr_expect_eq(fold_util_parse_size(NULL, &v), -1);
}
