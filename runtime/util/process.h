/*
 * What another process of this machine is doing, as /proc tells it.
 */
#ifndef FOLD_UTIL_PROCESS_H
#define FOLD_UTIL_PROCESS_H

#include <sys/types.h>

/* 1 when process pid is stopped (SIGSTOP, a debugger: state T or t in
 * /proc/<pid>/stat); 0 when it runs, sleeps, is gone, or /proc cannot say (another
 * pid namespace). */
int fold_util_process_stopped(pid_t pid);

#endif
