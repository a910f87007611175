/*
 * Byte counts as people write them, the one syntax every FOLD_* variable, selection
 * rule, cost-model parameter and tool option takes:
 *
 *   DIGITS [k|K|m|M|g|G [i]] [b|B]    e.g. 8, 4096, 64k, 1M, 2KiB, 3kb
 *   inf (any case)                    no limit: SIZE_MAX
 *
 * Suffixes are binary (k = 2^10, M = 2^20, G = 2^30). No sign, spaces or fractions;
 * a value that overflows size_t is rejected.
 */
#ifndef FOLD_UTIL_SIZE_H
#define FOLD_UTIL_SIZE_H

#include <stddef.h>

/* Words for messages about a bad size. */
#define FOLD_UTIL_SIZE_SYNTAX "bytes with an optional k, M or G suffix (binary), e.g. 64k"

/* 0 and *out set, or -1 with *out untouched. */
int fold_util_parse_size(const char *text, size_t *out);

#endif
