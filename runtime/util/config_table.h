/*
 * Configuration tables in UCX's style (ucs_config_field_t): one row per environment
 * variable, giving its name, default, description, parser, and the field of a typed
 * struct the parsed value goes to (offsetof). The runtime (FOLD_*), the MPI shim
 * (FOLD_MPI_*) and the tools (FOLD_PERF_*) each own one table of these rows; this file
 * sets and prints any of them, so none of them parses on its own.
 *
 * Beside its typed struct, a table's owner keeps the text of every row: values[i], one
 * owned string per row (t->count of them). String fields point into it.
 */
#ifndef FOLD_UTIL_CONFIG_TABLE_H
#define FOLD_UTIL_CONFIG_TABLE_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Converts text into *field; 0, or -1 with what it expected in why ("expected ...").
 * text stays valid as long as it is the row's value, so a parser may keep the pointer. */
typedef int (*fold_util_config_read_fn)(const char *text, void *field, const void *arg,
                                        char *why, size_t whylen);

typedef struct fold_util_config_parser {
    fold_util_config_read_fn read;
    const void              *arg;    /* bounds, names; NULL when the parser takes none */
    size_t                   size;   /* bytes it writes, which must be the field's size */
} fold_util_config_parser_t;

/* Where a row's value goes: FOLD_UTIL_CONFIG_FIELD(struct type, member). */
typedef struct fold_util_config_slot {
    size_t offset;
    size_t size;
} fold_util_config_slot_t;

#define FOLD_UTIL_CONFIG_FIELD(type, member) \
    {offsetof(type, member), sizeof(((type *)0)->member)}

typedef struct fold_util_config_field {
    const char               *name;            /* without the table's prefix */
    const char               *default_value;
    const char               *doc;
    fold_util_config_slot_t   field;
    fold_util_config_parser_t parser;
} fold_util_config_field_t;

typedef struct fold_util_config_table {
    const char                     *title;    /* what the variables configure, for fold_info */
    const char                     *prefix;   /* of the environment names: "FOLD_" */
    const fold_util_config_field_t *fields;
    size_t                          count;
} fold_util_config_table_t;

/* ---- parsers ----------------------------------------------------------------------
 * A row names one with a macro below. Bounds are inclusive; an _OR parser also takes
 * one word (any case, e.g. "auto") and stores `value` for it. */

typedef struct fold_util_config_num {
    long        min, max;
    const char *word;
    long        word_value;
} fold_util_config_num_t;

typedef struct fold_util_config_bytes {
    size_t      min, max;
    const char *word;
    size_t      word_value;
} fold_util_config_bytes_t;

int fold_util_config_read_string(const char *text, void *field, const void *arg, char *why,
                                 size_t whylen);
int fold_util_config_read_int(const char *text, void *field, const void *arg, char *why,
                              size_t whylen);
int fold_util_config_read_long(const char *text, void *field, const void *arg, char *why,
                               size_t whylen);
int fold_util_config_read_size(const char *text, void *field, const void *arg, char *why,
                               size_t whylen);
int fold_util_config_read_seconds(const char *text, void *field, const void *arg, char *why,
                                  size_t whylen);
int fold_util_config_read_enum(const char *text, void *field, const void *arg, char *why,
                               size_t whylen);

/* Any text; the field is a const char * into values[]. */
#define FOLD_UTIL_CONFIG_STRING \
    {fold_util_config_read_string, NULL, sizeof(const char *)}
/* Decimal integers into an int / a long. */
#define FOLD_UTIL_CONFIG_INT(lo, hi) \
    {fold_util_config_read_int, &(const fold_util_config_num_t){(lo), (hi), NULL, 0}, \
     sizeof(int)}
#define FOLD_UTIL_CONFIG_LONG(lo, hi) \
    {fold_util_config_read_long, &(const fold_util_config_num_t){(lo), (hi), NULL, 0}, \
     sizeof(long)}
#define FOLD_UTIL_CONFIG_LONG_OR(word, value, lo, hi) \
    {fold_util_config_read_long, &(const fold_util_config_num_t){(lo), (hi), (word), (value)}, \
     sizeof(long)}
/* Byte counts in util/size.h's syntax into a size_t. */
#define FOLD_UTIL_CONFIG_SIZE(lo, hi) \
    {fold_util_config_read_size, &(const fold_util_config_bytes_t){(lo), (hi), NULL, 0}, \
     sizeof(size_t)}
#define FOLD_UTIL_CONFIG_SIZE_OR(word, value, lo, hi) \
    {fold_util_config_read_size, \
     &(const fold_util_config_bytes_t){(lo), (hi), (word), (value)}, sizeof(size_t)}
/* A number of seconds > 0 into a double. */
/* The longest duration a seconds value may give (a year): finite, so deadlines stay
 * representable. */
#define FOLD_UTIL_MAX_SECONDS (365.0 * 24 * 3600)
#define FOLD_UTIL_CONFIG_SECONDS \
    {fold_util_config_read_seconds, NULL, sizeof(double)}
/* One of a NULL-terminated list of names (any case); the field, an int, gets its index. */
#define FOLD_UTIL_CONFIG_ENUM(names) \
    {fold_util_config_read_enum, (names), sizeof(int)}

/* ---- tables ------------------------------------------------------------------------ */

/* The row called name, with or without the table's prefix, in any case; -1 if none. */
int fold_util_config_find(const fold_util_config_table_t *t, const char *name);

/* The row's environment variable (prefix and name), or NULL when it is not set. */
const char *fold_util_config_getenv(const fold_util_config_table_t *t, int row);

/* Sets every row of obj and values[] (NULLs before) to its default. FOLD_OK, or an
 * error with the reason in why (a default its own parser rejects is a bug in the
 * table; so is a parser writing more or less than its field). */
int fold_util_config_init(const fold_util_config_table_t *t, void *obj, char **values,
                          char *why, size_t whylen);

/* Parses text into the row's field and keeps a copy in values[row]. On a bad value
 * (FOLD_ERR_INVALID_ARG, why naming the variable, the value and what was expected)
 * both stay as they were. */
int fold_util_config_set(const fold_util_config_table_t *t, void *obj, char **values,
                         int row, const char *text, char *why, size_t whylen);

/* Frees values[] (not the array). */
void fold_util_config_release(const fold_util_config_table_t *t, char **values);

/* Every row as fold_info -c shows it: the description, the default, and the current
 * value (the environment's, checked by the row's parser, else the default). */
void fold_util_config_print(const fold_util_config_table_t *t, FILE *out);

#endif
