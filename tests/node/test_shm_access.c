/*
 * A node segment is created O_EXCL with mode 0600 (node/segment.c): a process of
 * another user must not open a live one, neither to read it nor to write it. As root,
 * a child drops to nobody (uid/gid 65534) and tries; skipped when not root.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include "node/segment.h"

#include <fold/fold_status.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOBODY 65534

/* The child's exit code: a bit per way in that was not refused with EACCES. */
enum { OPENED_RO = 1, OPENED_RW = 2, OTHER_ERRNO = 4, DROP_FAILED = 8 };

static int try_as_nobody(const char *name)
{
    /* Supplementary groups first, then the group, then the user: after setuid the
     * process could no longer change its groups. */
    if (setgroups(0, NULL) != 0 || setgid(NOBODY) != 0 || setuid(NOBODY) != 0 ||
        geteuid() != NOBODY) {
        return DROP_FAILED;
    }
    int code = 0;
    int flags[2] = {O_RDONLY, O_RDWR};
    for (int i = 0; i < 2; i++) {
        int fd = shm_open(name, flags[i], 0);
        if (fd >= 0) {
            close(fd);
            code |= i == 0 ? OPENED_RO : OPENED_RW;
        } else if (errno != EACCES) {
            code |= OTHER_ERRNO;
        }
    }
    return code;
}

Test(shm_access, another_user_cannot_open_a_live_segment)
{
    if (geteuid() != 0) {
        cr_skip("needs root to run a child as another user (uid %d)", NOBODY);
    }
    char name[FOLD_SHM_NAME_MAX];
    fold_shm_make_name(name, sizeof(name), "access", "test-node", 9, (uint64_t)getpid());
    fold_shm_seg_t seg;
    cr_assert_eq(fold_shm_create(&seg, name, 2, 4096), FOLD_OK);

    pid_t pid = fork();
    if (pid == 0) {
        _exit(try_as_nobody(name));
    }
    int wstatus = 0;
    int waited = pid > 0 && waitpid(pid, &wstatus, 0) == pid;
    fold_shm_unlink(name);
    fold_shm_detach(&seg);
    cr_assert(waited, "fork or waitpid failed");
    cr_assert(WIFEXITED(wstatus), "the child did not exit normally (status %#x)", wstatus);
    int code = WEXITSTATUS(wstatus);
    cr_assert_eq(code & DROP_FAILED, 0, "the child could not become uid/gid %d", NOBODY);
    cr_expect_eq(code & OPENED_RO, 0, "another user opened %s for reading", name);
    cr_expect_eq(code & OPENED_RW, 0, "another user opened %s for writing", name);
    cr_expect_eq(code & OTHER_ERRNO, 0, "shm_open failed with another errno than EACCES");
}
