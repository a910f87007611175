#include "perf_progress.h"
#include "perf_stats.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Sweeps shorter than this never show the line. */
#define PROGRESS_DELAY_US 2e6

/* Whether the user sees stderr on a terminal. A launcher such as Open MPI's mpirun hands
 * its ranks a pipe for stderr and forwards it to its own, so for a rank started by the
 * launcher (its parent) the parent's stderr is what counts. */
static int stderr_reaches_terminal(void)
{
    if (isatty(STDERR_FILENO)) {
        return 1;
    }
    char link[64], target[256];
    snprintf(link, sizeof(link), "/proc/%d/fd/2", (int)getppid());
    ssize_t n = readlink(link, target, sizeof(target) - 1);
    if (n <= 0) {
        return 0;
    }
    target[n] = '\0';
    return strncmp(target, "/dev/pts/", 9) == 0 || strncmp(target, "/dev/tty", 8) == 0;
}

void perf_progress_init(perf_progress_t *p, int is_reporting_rank, size_t total_steps)
{
    p->enabled  = is_reporting_rank && stderr_reaches_terminal();
    p->visible  = 0;
    p->start_us = perf_now_us();
    p->total    = total_steps;
}

void perf_progress_update(perf_progress_t *p, size_t done, const char *what)
{
    if (!p->enabled) {
        return;
    }
    double elapsed = perf_now_us() - p->start_us;
    if (elapsed < PROGRESS_DELAY_US) {
        return;
    }
    double percent = p->total ? 100.0 * (double)done / (double)p->total : 100.0;
    fprintf(stderr, "\r\033[K[%zu/%zu %3.0f%% %.0fs] %s", done, p->total, percent,
            elapsed * 1e-6, what);
    fflush(stderr);
    p->visible = 1;
}

void perf_progress_clear(perf_progress_t *p)
{
    if (p->visible) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
        p->visible = 0;
    }
}
