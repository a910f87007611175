/*
 * fold_util_process_stopped (util/process.h), which ends a failing rank's wait for a
 * copier that SIGSTOP or a debugger halted (node/peer.c): a child is running, then
 * stopped, then running again; a gone pid is not stopped; a command name with
 * parentheses and a fake state inside does not fool the parse.
 */
#include <criterion/criterion.h>

#include "util/process.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Polls until the child's state is `want` (signals take effect asynchronously). */
static int becomes(pid_t pid, int want)
{
    for (int i = 0; i < 2000; i++) {
        if (fold_util_process_stopped(pid) == want) {
            return 1;
        }
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    return 0;
}

static pid_t child_named(const char *name)
{
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_NAME, name);
        for (;;) {
            pause();
        }
    }
    return pid;
}

static void check_stop_and_resume(const char *name)
{
    pid_t pid = child_named(name);
    cr_expect(becomes(pid, 0), "%s: a sleeping child counts as running", name);
    kill(pid, SIGSTOP);
    cr_expect(becomes(pid, 1), "%s: stopped by SIGSTOP", name);
    kill(pid, SIGCONT);
    cr_expect(becomes(pid, 0), "%s: running again after SIGCONT", name);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    cr_expect_eq(fold_util_process_stopped(pid), 0, "%s: a reaped pid", name);
}

Test(util_process, a_stopped_child_and_a_resumed_one)
{
    check_stop_and_resume("plain");
    /* The state is the field after the last ')': a name holding ") T" must not read
     * as stopped while the child sleeps. */
    check_stop_and_resume("a) T (b)");
}

Test(util_process, nobody_is_not_stopped)
{
    cr_expect_eq(fold_util_process_stopped(0), 0);
    cr_expect_eq(fold_util_process_stopped(-1), 0);
    cr_expect_eq(fold_util_process_stopped(getpid()), 0, "this process runs");
}
