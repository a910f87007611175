/*
 * Logging: FOLD_LOG_LEVEL=error|warn|info|debug|trace (default warn), to stderr,
 * prefixed with the process's rank once the context knows it. The function that
 * decides an error is the one that logs it.
 */
#ifndef FOLD_LOG_H
#define FOLD_LOG_H

typedef enum fold_log_level {
    FOLD_LOG_ERROR, FOLD_LOG_WARN, FOLD_LOG_INFO, FOLD_LOG_DEBUG, FOLD_LOG_TRACE
} fold_log_level_t;

extern int fold_log_level;
/* "error" ... "trace", by level; NULL-terminated (FOLD_LOG_LEVEL's parser takes it). */
extern const char *const fold_log_level_names[];

void fold_log_set_rank(int rank);
void fold_log_emit(int level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define fold_log(level, ...) \
    do { if ((level) <= fold_log_level) fold_log_emit(level, __FILE__, __LINE__, __VA_ARGS__); } while (0)
#define fold_error(...) fold_log(FOLD_LOG_ERROR, __VA_ARGS__)
#define fold_warn(...)  fold_log(FOLD_LOG_WARN,  __VA_ARGS__)
#define fold_info(...)  fold_log(FOLD_LOG_INFO,  __VA_ARGS__)
#define fold_debug(...) fold_log(FOLD_LOG_DEBUG, __VA_ARGS__)
#define fold_trace(...) fold_log(FOLD_LOG_TRACE, __VA_ARGS__)

#endif
