#include "util/process.h"

#include <stdio.h>
#include <string.h>

int fold_util_process_stopped(pid_t pid)
{
    char path[64], stat[512];
    snprintf(path, sizeof(path), "/proc/%lld/stat", (long long)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    size_t n = fread(stat, 1, sizeof(stat) - 1, f);
    fclose(f);
    stat[n] = '\0';
    /* "pid (comm) state ...": the command name may hold spaces and parentheses, so the
     * state follows the last ')'. */
    const char *paren = strrchr(stat, ')');
    return paren != NULL && paren[1] == ' ' && (paren[2] == 'T' || paren[2] == 't');
}
