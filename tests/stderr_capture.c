#include "stderr_capture.h"

#include <criterion/criterion.h>
#include <criterion/redirect.h>
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

char *stderr_redirected(void)
{
    fflush(stderr);
    FILE *f = cr_get_redirected_stderr();
    size_t cap = 1 << 20, n = 0;
    char *text = malloc(cap);
    cr_assert_not_null(text);
    int ch;
    while (n + 1 < cap && (ch = fgetc(f)) != EOF) {
        text[n++] = (char)ch;
    }
    text[n] = '\0';
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
