/*
 * FOLD_TEST_REDUCED=1: the sanitizer stage of scripts/test.sh, after the release stage
 * ran every test in full. The sanitizers make a test about ten times slower, and
 * memory errors show on any shape, so a test may keep to fewer shapes there.
 */
#ifndef FOLD_TEST_REDUCED_H
#define FOLD_TEST_REDUCED_H

#include <stdlib.h>
#include <string.h>

static inline int fold_test_reduced(void)
{
    const char *r = getenv("FOLD_TEST_REDUCED");
    return r != NULL && strcmp(r, "1") == 0;
}

#endif
