/*
 * fold_init when the ranks disagree on what selection reads (FOLD_TUNE differs, or
 * one rank cannot read its tuning file): every rank must fail fold_init with an
 * error, none may hang or go on to select differently. Launched by mpirun with
 * different environments per rank (MPMD syntax); argv[1] is the status every rank
 * must get: "ok" or "fail". Exits 0 when it got it.
 */
#include <fold/fold.h>

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "ok") != 0 && strcmp(argv[1], "fail") != 0)) {
        fprintf(stderr, "usage: mp_init_agree ok|fail\n");
        return 2;
    }
    fold_context_h ctx = NULL;
    int status = fold_init(NULL, &ctx);
    int want_ok = strcmp(argv[1], "ok") == 0;
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
