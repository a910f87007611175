/*
 * Schedule finalisation (coll/sched.c): derived dependencies, message numbering,
 * segmented helpers. The executor's plan of a schedule is test_exec_plan.c's, the
 * algorithm registry test_alg_table.c's.
 */
#include <criterion/criterion.h>

#include "comm.h"
#include "sched_check.h"

Test(sched, dependencies_follow_buffer_conflicts)
{
    fold_coll_args_t a = args_for(FOLD_COLL_ALLREDUCE, 0, 0);
    fold_sched_t s;
    fold_sched_init(&s, &a);
    fold_sched_recv(&s, 1, fold_ref_tmp(0), 10);                           /* 0 */
    fold_sched_reduce(&s, fold_ref_in(0), fold_ref_tmp(0), fold_ref_out(0), 10); /* 1: RAW on 0 */
    fold_sched_recv(&s, 1, fold_ref_tmp(0), 10);                           /* 2: WAR on 1 */
    fold_sched_send(&s, 2, fold_ref_in(50), 10);                           /* 3: independent */
    fold_sched_send(&s, 2, fold_ref_out(5), 10);                           /* 4: RAW on 1 */
    fold_sched_recv(&s, 3, fold_ref_out(0), 10);                           /* 5: WAW 1, WAR 4 */
    cr_assert_eq(fold_sched_finalize(&s), FOLD_OK);
    cr_expect(depends_on(&s, 1, 0));
    cr_expect(depends_on(&s, 2, 1));
    cr_expect_eq(s.steps[3].npred, 0);
    cr_expect(depends_on(&s, 4, 1));
    cr_expect(depends_on(&s, 5, 1));
    cr_expect(depends_on(&s, 5, 4));
    cr_expect(!depends_on(&s, 5, 3));
    cr_expect_eq(s.tmp_count, 10);
    /* Message numbers count per (peer, direction). */
    cr_expect_eq(s.steps[0].seq, 0);
    cr_expect_eq(s.steps[2].seq, 1);
    cr_expect_eq(s.steps[3].seq, 0);
    cr_expect_eq(s.steps[4].seq, 1);
    cr_expect_eq(s.steps[5].seq, 0);
    fold_sched_cleanup(&s);
}

/* A serial schedule's local steps wait each for the one built before, whatever their
 * buffers; sends, receives and flag steps only for their buffers, as before. */
Test(sched, a_serial_schedule_keeps_its_local_steps_in_order)
{
    for (int serial = 0; serial <= 1; serial++) {
        fold_coll_args_t a = args_for(FOLD_COLL_ALLREDUCE, 0, 0);
        fold_sched_t s;
        fold_sched_init(&s, &a);
        if (serial) {
            fold_sched_serial(&s);
        }
        fold_sched_copy(&s, fold_ref_in(0), fold_ref_out(0), 10);                      /* 0 */
        fold_sched_recv(&s, 1, fold_ref_tmp(100), 10);                                 /* 1 */
        fold_sched_reduce(&s, fold_ref_in(10), fold_ref_in(20), fold_ref_out(10), 10); /* 2 */
        fold_sched_send(&s, 1, fold_ref_in(90), 10);                                   /* 3 */
        fold_sched_copy(&s, fold_ref_in(30), fold_ref_tmp(0), 10);                     /* 4 */
        cr_assert_eq(fold_sched_finalize(&s), FOLD_OK);
        cr_expect_eq(depends_on(&s, 2, 0), serial, "serial %d: the reduction after the copy",
                     serial);
        cr_expect_eq(depends_on(&s, 4, 2), serial, "serial %d: the copy after the reduction",
                     serial);
        cr_expect_eq(s.steps[1].npred, 0, "a receive waits for nothing of the copy's");
        cr_expect_eq(s.steps[3].npred, 0, "a send waits for nothing of theirs");
        fold_sched_cleanup(&s);
    }
}

Test(sched, in_place_aliases_in_and_out)
{
    fold_coll_args_t a = args_for(FOLD_COLL_ALLREDUCE, 0, 1);
    fold_sched_t s;
    fold_sched_init(&s, &a);
    fold_sched_send(&s, 1, fold_ref_in(0), 10);
    fold_sched_recv(&s, 1, fold_ref_out(0), 10);   /* overwrites what the send reads */
    fold_sched_copy(&s, fold_ref_in(20), fold_ref_out(20), 10);   /* a no-op in place */
    cr_assert_eq(fold_sched_finalize(&s), FOLD_OK);
    cr_expect_eq(s.nsteps, 2);
    cr_expect(depends_on(&s, 1, 0));
    fold_sched_cleanup(&s);
}

Test(sched, out_is_refused_at_reduce_non_roots)
{
    fold_coll_args_t a = args_for(FOLD_COLL_REDUCE, 2, 0);
    fold_sched_t s;
    fold_sched_init(&s, &a);
    fold_sched_send(&s, 0, fold_ref_out(0), 10);
    cr_expect_eq(fold_sched_finalize(&s), FOLD_ERR_INVALID_ARG);
    fold_sched_cleanup(&s);
}

Test(sched, segmented_receive_reduce_rotates_slots)
{
    fold_coll_args_t a = args_for(FOLD_COLL_ALLREDUCE, 0, 0);
    fold_sched_t s;
    fold_sched_init(&s, &a);
    fold_sched_recv_reduce_segs(&s, 1, fold_ref_in(0), fold_ref_out(0), 35, 10, 2, 0, 1);
    cr_assert_eq(fold_sched_finalize(&s), FOLD_OK);
    cr_expect_eq(s.nsteps, 8);             /* 4 segments x (recv, reduce) */
    cr_expect_eq(s.tmp_count, 20);         /* two slots of 10 */
    cr_expect_eq(s.steps[6].count, 5);     /* the short tail */
    cr_expect_eq(s.steps[1].src.buf, FOLD_BUF_TMP);  /* peer on the left */
    cr_expect(depends_on(&s, 4, 1));       /* slot 0 reused only after its reduce */
    fold_sched_cleanup(&s);
}

/* A node leader's fold (sched.h): one wait over the other rows, one step over
 * them all. The fold waits for the wait; a later copy into a row it read waits for
 * it; this rank's own next copy into a row of its own, which the wait does not
 * guard, waits for neither. */
Test(sched, reduce_rows_after_a_wait_over_ranges)
{
    fold_coll_args_t a = args_for(FOLD_COLL_ALLREDUCE, 0, 0);
    fold_sched_t s;
    fold_sched_init(&s, &a);
    const fold_ref_t others[3] = {fold_ref_shm(10), fold_ref_shm(20), fold_ref_shm(30)};
    fold_sched_copy(&s, fold_ref_in(0), fold_ref_shm(0), 5);                     /* 0 */
    fold_sched_shm_wait_all(&s, FOLD_FLAG_WRITTEN, 1, others, 3, 5);             /* 1 */
    const fold_ref_t rows[4] = {fold_ref_shm(0), others[0], others[1], others[2]};
    fold_sched_reduce_rows(&s, rows, 4, fold_ref_out(0), 5);                     /* 2 */
    fold_sched_copy(&s, fold_ref_in(5), fold_ref_shm(5), 5);                     /* 3 */
    fold_sched_copy(&s, fold_ref_in(5), fold_ref_shm(20), 5);                    /* 4 */
    fold_sched_send(&s, 1, fold_ref_out(2), 2);                                  /* 5 */
    cr_assert_eq(fold_sched_finalize(&s), FOLD_OK);
    cr_assert_eq(s.nsteps, 6);
    cr_expect_eq(s.steps[1].kind, FOLD_STEP_SHM_WAIT);
    cr_expect_eq(s.steps[1].local, -1);
    cr_expect_eq(s.steps[2].kind, FOLD_STEP_REDUCE_ROWS);
    cr_expect_eq(s.steps[2].nops, 4);
    cr_expect(depends_on(&s, 2, 0));    /* reads row 0, which 0 wrote */
    cr_expect(depends_on(&s, 2, 1));    /* reads the rows 1 guards */
    cr_expect_eq(s.steps[3].npred, 0);  /* its own next piece: no wait */
    cr_expect(depends_on(&s, 4, 2));    /* overwrites a row 2 read */
    cr_expect(depends_on(&s, 4, 1));
    cr_expect(depends_on(&s, 5, 2));
    cr_expect_eq(fold_step_nreads(&s.steps[2]), 4);
    cr_expect_eq(fold_step_read(&s, &s.steps[2], 3).off, 30);
    cr_expect_eq(fold_step_nwrites(&s.steps[1]), 3);
    cr_expect_eq(fold_step_write(&s, &s.steps[1], 2).off, 30);
    cr_expect_eq(s.shm_count, 35);
    fold_sched_cleanup(&s);
}

Test(sched, reduce_rows_of_one_or_two_are_a_copy_or_a_reduction)
{
    fold_coll_args_t a = args_for(FOLD_COLL_ALLREDUCE, 0, 0);
    fold_sched_t s;
    fold_sched_init(&s, &a);
    const fold_ref_t rows[2] = {fold_ref_in(0), fold_ref_shm(0)};
    fold_sched_reduce_rows(&s, rows, 1, fold_ref_out(0), 8);
    fold_sched_reduce_rows(&s, rows, 2, fold_ref_out(0), 8);
    fold_sched_reduce_rows(&s, rows, 2, fold_ref_out(0), 0);   /* nothing */
    cr_assert_eq(fold_sched_finalize(&s), FOLD_OK);
    cr_assert_eq(s.nsteps, 2);
    cr_expect_eq(s.steps[0].kind, FOLD_STEP_COPY);
    cr_expect_eq(s.steps[1].kind, FOLD_STEP_REDUCE);
    cr_expect_eq(s.nops, 0);
    fold_sched_cleanup(&s);
}

/* dst may be the first operand exactly, nothing else: the executor writes each
 * block once, after reading it from every row, and folds more than 128 rows in
 * groups onto dst. */
Test(sched, reduce_rows_refuses_a_destination_among_later_operands)
{
    const fold_ref_t first[3] = {fold_ref_out(0), fold_ref_shm(0), fold_ref_shm(8)};
    const fold_ref_t later[3] = {fold_ref_shm(0), fold_ref_out(0), fold_ref_shm(8)};
    const fold_ref_t partly[3] = {fold_ref_out(4), fold_ref_shm(0), fold_ref_shm(8)};
    const fold_ref_t *cases[3] = {first, later, partly};
    const int expect[3] = {FOLD_OK, FOLD_ERR_INVALID_ARG, FOLD_ERR_INVALID_ARG};
    for (int inplace = 0; inplace < 2; inplace++) {
        for (int c = 0; c < 3; c++) {
            fold_coll_args_t a = args_for(FOLD_COLL_ALLREDUCE, 0, inplace);
            fold_sched_t s;
            fold_sched_init(&s, &a);
            fold_sched_reduce_rows(&s, cases[c], 3, fold_ref_out(0), 8);
            cr_expect_eq(fold_sched_finalize(&s), expect[c], "case %d, in place %d", c,
                         inplace);
            fold_sched_cleanup(&s);
        }
        /* In place, IN is OUT: IN at dst's offset among the later operands is dst. */
        fold_coll_args_t a = args_for(FOLD_COLL_ALLREDUCE, 0, inplace);
        fold_sched_t s;
        fold_sched_init(&s, &a);
        const fold_ref_t in_later[3] = {fold_ref_shm(0), fold_ref_in(0), fold_ref_shm(8)};
        fold_sched_reduce_rows(&s, in_later, 3, fold_ref_out(0), 8);
        cr_expect_eq(fold_sched_finalize(&s), inplace ? FOLD_ERR_INVALID_ARG : FOLD_OK);
        fold_sched_cleanup(&s);
    }
}

/* Schedules whose folds read other rows have other shapes; the same rows, the same. */
Test(sched, shape_counts_the_rows_a_fold_reads)
{
    fold_coll_args_t a = args_for(FOLD_COLL_ALLREDUCE, 0, 0);
    fold_sched_t s[3];
    const fold_ref_t rows[3][3] = {
        {fold_ref_in(0), fold_ref_shm(0), fold_ref_shm(8)},
        {fold_ref_in(0), fold_ref_shm(0), fold_ref_shm(8)},
        {fold_ref_in(0), fold_ref_shm(0), fold_ref_shm(16)},
    };
    for (int i = 0; i < 3; i++) {
        fold_sched_init(&s[i], &a);
        fold_sched_shm_wait_all(&s[i], FOLD_FLAG_WRITTEN, 1, rows[i] + 1, 2, 8);
        fold_sched_reduce_rows(&s[i], rows[i], 3, fold_ref_out(0), 8);
    }
    cr_expect(fold_sched_same_shape(&s[0], &s[1]));
    cr_expect_eq(fold_sched_shape_hash(&s[0]), fold_sched_shape_hash(&s[1]));
    cr_expect(!fold_sched_same_shape(&s[0], &s[2]));
    cr_expect_neq(fold_sched_shape_hash(&s[0]), fold_sched_shape_hash(&s[2]));
    cr_assert_eq(fold_sched_finalize(&s[0]), FOLD_OK);
    cr_assert_eq(fold_sched_finalize_like(&s[1], &s[0]), FOLD_OK);
    cr_expect_eq(fold_sched_finalize_like(&s[2], &s[0]), FOLD_ERR_INVALID_ARG);
    cr_expect(depends_on(&s[1], 1, 0));
    for (int i = 0; i < 3; i++) {
        fold_sched_cleanup(&s[i]);
    }
}
