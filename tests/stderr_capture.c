#include "stderr_capture.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int capture_fd = -1, saved_stderr = -1;

void stderr_capture_begin(void)
{
    char path[] = "/tmp/fold_test_stderr_XXXXXX";
    fflush(stderr);
    capture_fd = mkstemp(path);
    cr_assert_geq(capture_fd, 0);
    unlink(path);
    saved_stderr = dup(STDERR_FILENO);
    dup2(capture_fd, STDERR_FILENO);
}

char *stderr_capture_end(void)
{
    fflush(stderr);
    dup2(saved_stderr, STDERR_FILENO);
    close(saved_stderr);
    off_t n = lseek(capture_fd, 0, SEEK_END);
    char *text = calloc(1, (size_t)n + 1);
    cr_assert_not_null(text);
    cr_assert_eq(pread(capture_fd, text, (size_t)n, 0), n);
    close(capture_fd);
    return text;
}

int stderr_count(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)) != NULL; p += strlen(what)) {
        n++;
    }
    return n;
}
