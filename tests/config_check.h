/*
 * Checks shared by the configuration tests (tests/api/test_config.c on the FOLD_*
 * table, tests/util/test_config_table.c on the row engine).
 */
#ifndef FOLD_TEST_CONFIG_CHECK_H
#define FOLD_TEST_CONFIG_CHECK_H

#include "stderr_capture.h"   /* EXPECT_LOG_HAS */
#include "util/config_table.h"

#include <string.h>

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
