/*
 * fold_init when the ranks disagree on what selection reads (FOLD_TUNE differs, or
 * one rank cannot read its tuning file), or one rank's FOLD_* value is refused:
 * every rank must fail fold_init with an error, none may hang or go on to select
 * differently. Launched by mpirun with different environments per rank (MPMD
 * syntax); argv[1] is the status every rank must get: "ok" or "fail"; argv[2], if
 * given, words every rank's log of fold_init must hold (e.g. the failed rank's
 * number). Exits 0 when it got both.
 */
#include <fold/fold.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* fold_init with stderr caught in a file; what it logged (malloc'd), echoed. */
static char *init_logged(fold_context_h *ctx, int *status)
{
    FILE *log = tmpfile();
    int saved = dup(2);
    fflush(stderr);
    if (log == NULL || saved < 0 || dup2(fileno(log), 2) < 0) {
        perror("mp_init_agree: capturing stderr");
        exit(2);
    }
    *status = fold_init(NULL, ctx);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    long len = ftell(log);
    char *text = calloc(1, (size_t)(len > 0 ? len : 0) + 1);
    rewind(log);
    if (text == NULL || (len > 0 && fread(text, 1, (size_t)len, log) != (size_t)len)) {
        exit(2);
    }
    fclose(log);
    fputs(text, stderr);
    return text;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3 ||
        (strcmp(argv[1], "ok") != 0 && strcmp(argv[1], "fail") != 0)) {
        fprintf(stderr, "usage: mp_init_agree ok|fail [words the log must hold]\n");
        return 2;
    }
    fold_context_h ctx = NULL;
    int status;
    char *log = init_logged(&ctx, &status);
    int want_ok = strcmp(argv[1], "ok") == 0;
    if (argc == 3 && strstr(log, argv[2]) == NULL) {
        fprintf(stderr, "mp_init_agree: the log of fold_init lacks \"%s\"\n", argv[2]);
        if (status == FOLD_OK) {
            fold_finalize(ctx);
        }
        free(log);
        return 1;
    }
    free(log);
    if (status == FOLD_OK) {
        fold_finalize(ctx);
    }
    if ((status == FOLD_OK) != want_ok) {
        fprintf(stderr, "mp_init_agree: fold_init returned %s, expected %s\n",
                fold_status_string(status), argv[1]);
        return 1;
    }
    printf("mp_init_agree: fold_init %s as expected (%s)\n", argv[1],
           fold_status_string(status));
    return 0;
}
