#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int fold_log_level = FOLD_LOG_WARN;
static int log_rank = -1;

const char *const fold_log_level_names[] = {"error", "warn", "info", "debug", "trace", NULL};

void fold_log_set_rank(int rank)
{
    log_rank = rank;
}

void fold_log_emit(int level, const char *file, int line, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);

    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    if (log_rank >= 0) {
        fprintf(stderr, "[fold rank %d pid %d] %-5s %s:%d %s\n", log_rank, (int)getpid(),
                fold_log_level_names[level], base, line, msg);
    } else {
        fprintf(stderr, "[fold pid %d] %-5s %s:%d %s\n", (int)getpid(),
                fold_log_level_names[level], base, line, msg);
    }
}
