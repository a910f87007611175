/*
 * How many entries a directory holds besides "." and "..": segments left in /dev/shm,
 * descriptors left open in /proc/self/fd (0 where it cannot be read).
 */
#ifndef FOLD_TEST_DIR_ENTRIES_H
#define FOLD_TEST_DIR_ENTRIES_H

#include <dirent.h>

static inline int dir_entries(const char *path)
{
    DIR *d = opendir(path);
    int n = 0;
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        n += e->d_name[0] != '.';
    }
    if (d != NULL) {
        closedir(d);
    }
    return n;
}

#endif
