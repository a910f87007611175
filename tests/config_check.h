/*
 * Checks shared by the configuration tests (tests/api/test_config.c on the FOLD_*
 * table, tests/util/test_config_table.c on the row engine).
 */
#ifndef FOLD_TEST_CONFIG_CHECK_H
#define FOLD_TEST_CONFIG_CHECK_H

#include "util/config_table.h"

#include <criterion/criterion.h>
#include <string.h>

#define EXPECT_LOG_HAS(log, fragment) \
    cr_expect(strstr((log), (fragment)) != NULL, "log lacks \"%s\": %s", (fragment), (log))

/* Whether every row's field holds the same bytes in a and b (padding aside). */
static inline int fields_equal(const fold_util_config_table_t *t, const void *a, const void *b)
{
    for (size_t i = 0; i < t->count; i++) {
        const fold_util_config_slot_t *s = &t->fields[i].field;
        if (memcmp((const char *)a + s->offset, (const char *)b + s->offset, s->size) != 0) {
            return 0;
        }
    }
    return 1;
}

#endif
