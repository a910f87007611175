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
