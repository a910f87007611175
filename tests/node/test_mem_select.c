/*
 * Selection knows where a call's buffers lie (select.h, fold_select_placed): with
 * the buffers in fold memory on every rank, single copy goes through mappings at
 * the segment's copy rates, and the model may choose it where the kernel's copies
 * made it lose. Here the model's parameters are set so that it must: the kernel's
 * single copy is slow (cma_gbs 0.5, cma_us 50), the segment's copies are not, and
 * the rules leave dpml and cma to choose from.
 *
 *   - heap buffers get dpml, fold memory cma (fold_selected_for_buffers says so),
 *     and both give the reference's result, cma's copies through mappings;
 *   - a rank whose buffers lie elsewhere than the others' fails with
 *     FOLD_ERR_MISMATCH on every rank (a reduce's non-root may return success), the
 *     ranks that meet it directly naming the field (FOLD_MISMATCH_MEMORY), and the
 *     next matching call runs;
 *   - where placement changes nothing (one algorithm, the tiny-message path), ranks
 *     may mix.
 */
#include <criterion/criterion.h>

#include "coll_reference.h"
#include "loopback_harness.h"
#include "mem_buffer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT 200003   /* 800 KiB of float32: large enough for single copy to win */

static const char CHOICE_RULES[] = "allreduce:0-inf:dpml,cma#reduce:0-inf:dpml,cma";
static const char MODEL[] =
    "generic,copy_gbs=20,copy_mem_gbs=20,reduce_gbs=20,reduce_mem_gbs=20,shm_gbs=20,"
    "shm_write_gbs=20,shm_reduce_gbs=20,shm_fold_gbs=20,shm_fold_far_gbs=20,"
    "cma_gbs=0.5,cma_us=50";

typedef struct call_bufs {
    int    fold;
    float *in, *out;
} call_bufs_t;

static int bufs_get(call_bufs_t *b, int fold, size_t count)
{
    b->fold = fold;
    b->in   = mem_buffer(fold, count * sizeof(float));
    b->out  = mem_buffer(fold, count * sizeof(float));
    return b->in != NULL && b->out != NULL;
}

static void bufs_put(call_bufs_t *b)
{
    mem_release(b->fold, b->in);
    mem_release(b->fold, b->out);
}

/* An allreduce (root < 0) or a reduce to root on b, float32 sum; 0 when it returned
 * want_status and, where it succeeded, the result matches the reference. */
static int run_call(fold_comm_h w, int rank, int size, const call_bufs_t *b, size_t count,
                    int root, int want_status, const char *what)
{
    ref_fill_input(FOLD_FLOAT32, FOLD_OP_SUM, rank, count, b->in);
    int st = root < 0 ? fold_allreduce(b->in, b->out, count, FOLD_FLOAT32, FOLD_OP_SUM, w)
                      : fold_reduce(b->in, b->out, count, FOLD_FLOAT32, FOLD_OP_SUM, root, w);
    if (st != want_status) {
        fprintf(stderr, "rank %d: %s returned %s, want %s\n", rank, what,
                fold_status_string(st), fold_status_string(want_status));
        return 1;
    }
    if (st != FOLD_OK || (root >= 0 && rank != root)) {
        return 0;
    }
    float *want = malloc(count * sizeof(float));
    int bad = want == NULL;
    for (size_t i = 0; i < count && !bad; i++) {
        ref_expected(FOLD_FLOAT32, FOLD_OP_SUM, size, i, want);
        if (!ref_same_element(FOLD_FLOAT32, b->out, want, i)) {
            fprintf(stderr, "rank %d: %s: element %zu is %g, want %g\n", rank, what, i,
                    (double)b->out[i], (double)want[i]);
            bad = 1;
        }
    }
    free(want);
    return bad;
}

static void configure(fold_context_t *ctx)
{
    fold_config_set(ctx, "TUNE", CHOICE_RULES);
    fold_config_set(ctx, "MODEL", MODEL);
}

/* The set-up of a case: the model pinned, a heap and a fold-memory pair of buffers,
 * and one call on the heap, which sets the node up (FOLD_WORLD_SETUP=lazy): only
 * then can its ranks map each other's fold memory, which selection asks. 0 when all
 * went well, 1 when the call did not, -1 (and no buffers) when memory ran out. */
static int start_case(fold_context_t *ctx, int rank, int size, call_bufs_t *heap,
                      call_bufs_t *fold)
{
    configure(ctx);
    if (!bufs_get(heap, 0, COUNT) || !bufs_get(fold, 1, COUNT)) {
        bufs_put(heap);
        bufs_put(fold);
        return -1;
    }
    return run_call(fold_comm_world(ctx), rank, size, heap, COUNT, -1, FOLD_OK,
                    "the set-up call on the heap");
}

/* What selection picks for these buffers, or "?" */
static const char *picked(fold_comm_h w, const char *coll, const call_bufs_t *b, int has_out)
{
    const char *name = fold_selected_for_buffers(w, coll, b->in, has_out ? b->out : NULL, COUNT,
                                                 FOLD_FLOAT32, NULL);
    return name != NULL ? name : "?";
}

static int placement_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)arg;
    fold_comm_h w = fold_comm_world(ctx);
    call_bufs_t heap = {0}, fold = {0};
    int bad = start_case(ctx, rank, size, &heap, &fold);
    if (bad < 0) {
        return 1;
    }
    const int root = size - 1, has_out = rank == root;
    const char *names[4] = {picked(w, "allreduce", &heap, 1), picked(w, "allreduce", &fold, 1),
                            picked(w, "reduce", &heap, has_out),
                            picked(w, "reduce", &fold, has_out)};
    static const char *const want[4] = {"dpml", "cma", "dpml", "cma"};
    for (int k = 0; k < 4; k++) {
        if (strcmp(names[k], want[k]) != 0) {
            fprintf(stderr, "rank %d: choice %d is %s, want %s\n", rank, k, names[k], want[k]);
            bad = 1;
        }
    }
    int mapped0, mapped1;
    uint64_t copies0, copies1, views0, views1;
    fold_node_xmap_stats(((fold_comm_t *)w)->node, &mapped0, &copies0, &views0);
    bad |= run_call(w, rank, size, &fold, COUNT, -1, FOLD_OK, "allreduce in fold memory");
    bad |= run_call(w, rank, size, &fold, COUNT, root, FOLD_OK, "reduce in fold memory");
    bad |= run_call(w, rank, size, &heap, COUNT, root, FOLD_OK, "reduce on the heap");
    fold_node_xmap_stats(((fold_comm_t *)w)->node, &mapped1, &copies1, &views1);
    if (copies1 + views1 <= copies0 + views0) {
        fprintf(stderr, "rank %d: nothing through a mapping (%llu before, %llu after)\n",
                rank, (unsigned long long)(copies0 + views0),
                (unsigned long long)(copies1 + views1));
        bad = 1;
    }
    bufs_put(&heap);
    bufs_put(&fold);
    return bad;
}

Test(mem_select, the_placement_decides)
{
    cr_expect_eq(lh_run(2, placement_rank, NULL), 0, "2 ranks");
    cr_expect_eq(lh_run(3, placement_rank, NULL), 0, "3 ranks");
}

typedef struct apart_case {
    int      reduce;
    unsigned fields[3];   /* each rank's fold_mismatch_fields() after the mistake */
} apart_case_t;

/* The last rank's buffers lie on the heap, the others' in fold memory. */
static int apart_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    apart_case_t *c = arg;
    fold_comm_h w = fold_comm_world(ctx);
    call_bufs_t heap = {0}, fold = {0};
    int bad = start_case(ctx, rank, size, &heap, &fold);
    if (bad < 0) {
        return 1;
    }
    const int root = c->reduce ? 0 : -1;
    fold_mismatch_fields();   /* forget anything before */
    const call_bufs_t *mine = rank == size - 1 ? &heap : &fold;
    /* A reduce's non-root, which gets no result, may return success (README). */
    int st = c->reduce ? fold_reduce(mine->in, mine->out, COUNT, FOLD_FLOAT32, FOLD_OP_SUM,
                                     root, w)
                       : fold_allreduce(mine->in, mine->out, COUNT, FOLD_FLOAT32, FOLD_OP_SUM, w);
    if (st != FOLD_ERR_MISMATCH && !(st == FOLD_OK && c->reduce && rank != root)) {
        fprintf(stderr, "rank %d: a call with the buffers apart returned %s\n", rank,
                fold_status_string(st));
        bad = 1;
    }
    c->fields[rank] = fold_mismatch_fields();
    /* Back in step: matching calls run, in fold memory and on the heap. */
    bad |= run_call(w, rank, size, &fold, COUNT, root, FOLD_OK, "the next call, fold memory");
    bad |= run_call(w, rank, size, &heap, COUNT, root, FOLD_OK, "the next call, the heap");
    bufs_put(&heap);
    bufs_put(&fold);
    return bad;
}

Test(mem_select, buffers_apart_fail_as_a_mismatch)
{
    setenv("FOLD_TIMEOUT", "30", 1);
    for (int size = 2; size <= 3; size++) {
        for (int reduce = 0; reduce <= 1; reduce++) {
            apart_case_t c = {.reduce = reduce};
            int result, named = 0;
            char *log = lh_run_logged(size, apart_rank, &c, &result);
            const char *what = reduce ? "reduce" : "allreduce";
            cr_expect_eq(result, 0, "%d ranks, %s:\n%s", size, what, log);
            /* A rank told by another that the calls differ may know no more (0). */
            for (int r = 0; r < size; r++) {
                cr_expect(c.fields[r] == 0 || c.fields[r] == FOLD_MISMATCH_MEMORY,
                          "%d ranks, %s: rank %d's fields 0x%x", size, what, r, c.fields[r]);
                named += c.fields[r] == FOLD_MISMATCH_MEMORY;
            }
            cr_expect(named >= (size == 2 ? 2 : 1), "%d ranks, %s: %d ranks named the field\n%s",
                      size, what, named, log);
            cr_expect(strstr(log, "passed buffers in fold memory ") != NULL,
                      "%d ranks, %s: the log names the field:\n%s", size, what, log);
            free(log);
        }
    }
}

/* Where the choice is the same for any placement, ranks may mix: one algorithm
 * (a rule naming dpml alone), and the tiny-message path. */
static int mixed_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)arg;
    fold_comm_h w = fold_comm_world(ctx);
    fold_config_set(ctx, "MODEL", MODEL);
    fold_config_set(ctx, "TUNE", "allreduce:0-inf:dpml#reduce:0-inf:shm_flat,cma");
    call_bufs_t b;
    if (!bufs_get(&b, rank == 0, COUNT)) {
        return 1;
    }
    int bad = run_call(w, rank, size, &b, COUNT, -1, FOLD_OK, "allreduce, dpml alone");
    bad |= run_call(w, rank, size, &b, 16, 0, FOLD_OK, "tiny reduce");
    bufs_put(&b);
    return bad;
}

Test(mem_select, mixed_where_placement_changes_nothing)
{
    cr_expect_eq(lh_run(2, mixed_rank, NULL), 0);
    cr_expect_eq(lh_run(3, mixed_rank, NULL), 0);
}

/* fold_selected_for_buffers: on heap buffers it says what fold_selected_algorithm
 * and _segment_size say; bad arguments give NULL. */
static int report_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)arg;
    (void)size;
    fold_comm_h w = fold_comm_world(ctx);
    float *in = calloc(COUNT, sizeof(float)), *out = calloc(COUNT, sizeof(float));
    int bad = in == NULL || out == NULL;
    static const size_t counts[] = {1, 5000, COUNT};
    for (size_t k = 0; k < 3 && !bad; k++) {
        size_t seg = 0;
        const char *name = fold_selected_for_buffers(w, "reduce", FOLD_IN_PLACE, out, counts[k],
                                                     FOLD_FLOAT32, &seg);
        const char *plain = fold_selected_algorithm(w, "reduce", counts[k], FOLD_FLOAT32);
        if (name == NULL || plain == NULL || strcmp(name, plain) != 0 ||
            seg != fold_selected_segment_size(w, "reduce", counts[k], FOLD_FLOAT32)) {
            fprintf(stderr, "rank %d: %zu elements: %s with segment %zu, want %s\n", rank,
                    counts[k], name ? name : "NULL", seg, plain ? plain : "NULL");
            bad = 1;
        }
    }
    bad |= fold_selected_for_buffers(NULL, "allreduce", in, out, 4, FOLD_FLOAT32, NULL) != NULL;
    bad |= fold_selected_for_buffers(w, "bcast", in, out, 4, FOLD_FLOAT32, NULL) != NULL;
    bad |= fold_selected_for_buffers(w, "allreduce", in, out, 4, (fold_dtype_t)999, NULL) != NULL;
    free(in);
    free(out);
    return bad;
}

Test(mem_select, reports_the_choice_for_given_buffers)
{
    cr_expect_eq(lh_run(2, report_rank, NULL), 0);
}
