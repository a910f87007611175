#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

int fold_log_level = FOLD_LOG_WARN;
static int log_rank = -1;

static const char *const level_names[] = {"error", "warn", "info", "debug", "trace"};

void fold_log_set_rank(int rank)
{
    log_rank = rank;
}

int fold_log_level_from_name(const char *name, int *level)
{
    for (int i = 0; i <= FOLD_LOG_TRACE; i++) {
        if (strcasecmp(name, level_names[i]) == 0) {
            *level = i;
            return 0;
        }
    }
    return -1;
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
                level_names[level], base, line, msg);
    } else {
        fprintf(stderr, "[fold pid %d] %-5s %s:%d %s\n", (int)getpid(), level_names[level],
                base, line, msg);
    }
}
