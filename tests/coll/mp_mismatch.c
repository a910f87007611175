/*
 * Mismatched calls over a real transport (ucp, or ofi with FOLD_TRANSPORT=ofi), no
 * FOLD_CHECK: the flat algorithms carry the call's fingerprint on the first message
 * between two ranks (runtime/coll/exec_fp.c). On 2 ranks both ranks meet, so for
 * each flat algorithm and each mistake -- a count at a small and a large size, a
 * datatype, an op -- both must fail with FOLD_ERR_MISMATCH (FOLD_ERR_TRUNCATED where
 * the rank with the smaller count receives the larger message before any
 * fingerprint), rank 1 being the culprit; then a correct call must give the right
 * result. Exits 0 when every case did.
 */
#include <fold/fold.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { LARGE = 1 << 18 };

static int rank, size, failures;

static int run_case(fold_comm_h w, const char *alg, const char *mistake, size_t count, float *in,
                    float *out)
{
    int me = rank == 1;
    size_t n = me && strcmp(mistake, "count") == 0 ? count / 2 : count;
    fold_dtype_t dt = me && strcmp(mistake, "datatype") == 0 ? FOLD_INT32 : FOLD_FLOAT32;
    fold_op_t op = me && strcmp(mistake, "op") == 0 ? FOLD_OP_MAX : FOLD_OP_SUM;
    int st = fold_allreduce(in, out, n, dt, op, w);
    int want_trunc = strcmp(mistake, "count") == 0;
    if (st != FOLD_ERR_MISMATCH && !(want_trunc && st == FOLD_ERR_TRUNCATED)) {
        fprintf(stderr, "rank %d: %s, %s at %zu elements returned %s\n", rank, alg, mistake,
                count, fold_status_string(st));
        failures++;
    }
    return st;
}

static void correct_call(fold_comm_h w, const char *alg, float *in, float *out)
{
    for (int i = 0; i < 1000; i++) {
        in[i] = (float)(rank + 1);
    }
    int st = fold_allreduce(in, out, 1000, FOLD_FLOAT32, FOLD_OP_SUM, w);
    if (st != FOLD_OK || out[999] != (float)(size * (size + 1) / 2)) {
        fprintf(stderr, "rank %d: %s: the correct call after the mistakes returned %s\n", rank,
                alg, fold_status_string(st));
        failures++;
    }
}

int main(void)
{
    fold_context_h ctx;
    if (fold_init(NULL, &ctx) != FOLD_OK) {
        fprintf(stderr, "mp_mismatch: fold_init failed\n");
        return 1;
    }
    fold_comm_h w = fold_comm_world(ctx);
    fold_comm_rank(w, &rank);
    fold_comm_size(w, &size);
    if (size != 2) {
        fprintf(stderr, "mp_mismatch: run it on 2 ranks\n");
        fold_finalize(ctx);
        return 2;
    }
    float *in = malloc(LARGE * sizeof(float)), *out = malloc(LARGE * sizeof(float));
    for (int i = 0; in != NULL && i < LARGE; i++) {
        in[i] = (float)(rank + 1);
    }
    static const char *const algs[] = {"recursive_doubling", "rabenseifner", "ring"};
    static const char *const mistakes[] = {"count", "datatype", "op"};
    static const size_t counts[] = {64, 512, LARGE};
    for (size_t a = 0; in != NULL && out != NULL && a < sizeof(algs) / sizeof(algs[0]); a++) {
        fold_config_set(ctx, "ALLREDUCE_ALG", algs[a]);
        for (size_t m = 0; m < sizeof(mistakes) / sizeof(mistakes[0]); m++) {
            for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
                run_case(w, algs[a], mistakes[m], counts[c], in, out);
            }
        }
        correct_call(w, algs[a], in, out);
    }
    free(in);
    free(out);
    fold_finalize(ctx);
    if (failures == 0 && rank == 0) {
        printf("mp_mismatch: every mistake failed on both ranks\n");
    }
    return failures != 0;
}
