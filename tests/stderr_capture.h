/*
 * stderr into a temporary file for a span of a test, to check what fold logged there.
 * One capture at a time per process.
 */
#ifndef FOLD_TEST_STDERR_CAPTURE_H
#define FOLD_TEST_STDERR_CAPTURE_H

#include <criterion/criterion.h>
#include <string.h>

void  stderr_capture_begin(void);
/* What was written since stderr_capture_begin (malloc'd, NUL-terminated); stderr is
 * the terminal's again. */
char *stderr_capture_end(void);

/* What Criterion's cr_redirect_stderr has collected so far, for tests that redirect
 * stderr for all their ranks' logs (the first MiB; malloc'd, NUL-terminated). */
char *stderr_redirected(void);

/* How many times `what` stands in `text` (not overlapping). */
int stderr_count(const char *text, const char *what);

/* Expects `fragment` in the captured `log`, and shows the log where it is missing. */
#define EXPECT_LOG_HAS(log, fragment) \
    cr_expect(strstr((log), (fragment)) != NULL, "log lacks \"%s\": %s", (fragment), (log))

#endif
