/*
 * The executor's plan of a schedule (coll/exec_plan.h): codec links read off the
 * dependencies, the soft waits of answers to peers on another node, final results,
 * copies made along and peer reads taken over by the reduction that uses them.
 */
#include <criterion/criterion.h>

#include "comm.h"
#include "sched_check.h"

Test(exec_plan, codec_links)
{
    /* recv into TMP read by one reduce: decoded inside it; its result only sent on:
     * counted (and, in TMP, encodable straight for the send). */
    fold_coll_args_t a = args_for(FOLD_COLL_REDUCE, 1, 0);
    fold_sched_t s;
    fold_wire_plan_t p;
    fold_sched_init(&s, &a);
    fold_sched_recv(&s, 2, fold_ref_tmp(0), 10);
    fold_sched_reduce(&s, fold_ref_in(0), fold_ref_tmp(0), fold_ref_tmp(10), 10);
    fold_sched_send(&s, 0, fold_ref_tmp(10), 10);
    cr_assert_eq(fold_sched_finalize(&s), FOLD_OK);
    cr_assert_eq(fold_wire_plan_build(&p, &s, NULL), FOLD_OK);
    cr_expect_eq(p.steps[0].wire, 1);
    cr_expect_eq(p.steps[1].wire, 2);
    cr_expect_eq(p.steps[1].link, 0);
    cr_expect_eq(p.steps[1].counts, 2);
    cr_expect_eq(p.steps[1].fwd, 2);
    cr_expect_eq(p.steps[2].link, 1);
    fold_wire_plan_free(&p);
    fold_sched_cleanup(&s);

    /* A second reader of the slot: decoded on arrival instead. */
    fold_sched_init(&s, &a);
    fold_sched_recv(&s, 2, fold_ref_tmp(0), 10);
    fold_sched_reduce(&s, fold_ref_in(0), fold_ref_tmp(0), fold_ref_tmp(10), 10);
    fold_sched_copy(&s, fold_ref_tmp(0), fold_ref_tmp(20), 10);
    cr_assert_eq(fold_sched_finalize(&s), FOLD_OK);
    cr_assert_eq(fold_wire_plan_build(&p, &s, NULL), FOLD_OK);
    cr_expect_eq(p.steps[0].wire, 0);
    cr_expect_eq(p.steps[1].wire, 0);
    fold_wire_plan_free(&p);
    fold_sched_cleanup(&s);
}

Test(exec_plan, answers_to_remote_peers_wait_softly_for_own_sends)
{
    /* Reduce-scatter then allgather with a peer on another node: the allgather send
     * answers the peer's message, so it waits (softly) for this rank's own sends to
     * it; the own sends keep their overlap. With the peer on this node, nothing waits. */
    static const int nodes1[4] = {0, 1, 0, 0};   /* peer 1 on another node */
    fold_remote_nodes_t on_nodes;
    const fold_remote_t *remote1 = fold_remote_nodes(&on_nodes, nodes1, 0);
    fold_coll_args_t a = args_for(FOLD_COLL_ALLREDUCE, 0, 0);
    a.size = 2;
    fold_sched_t s;
    fold_wire_plan_t p;
    for (int across = 0; across <= 1; across++) {
        fold_sched_init(&s, &a);
        fold_sched_send(&s, 1, fold_ref_in(50), 25);                                /* 0 */
        fold_sched_send(&s, 1, fold_ref_in(75), 25);                                /* 1 */
        fold_sched_recv(&s, 1, fold_ref_tmp(0), 50);                                /* 2 */
        fold_sched_reduce(&s, fold_ref_in(0), fold_ref_tmp(0), fold_ref_out(0), 50); /* 3 */
        fold_sched_send(&s, 1, fold_ref_out(0), 50);                                /* 4 */
        fold_sched_recv(&s, 1, fold_ref_out(50), 50);                               /* 5 */
        cr_assert_eq(fold_sched_finalize(&s), FOLD_OK);
        cr_assert_eq(fold_wire_plan_build(&p, &s, across ? remote1 : NULL), FOLD_OK);
        cr_expect_eq(p.steps[4].soft, across ? 1u : FOLD_STEP_NONE,
                     "the answer waits for the latest own send");
        cr_expect_eq(p.steps[1].soft_first, across ? 4u : FOLD_STEP_NONE);
        cr_expect_eq(p.steps[4].soft_src, across ? 2u : FOLD_STEP_NONE,
                     "the wait hangs on the message it answers");
        cr_expect_eq(p.steps[1].soft, FOLD_STEP_NONE, "an own send waits for nothing");
        cr_expect(!depends_on(&s, 1, 0), "own sends stay concurrent");
        cr_expect(!depends_on(&s, 4, 1), "a soft wait is no edge of the schedule");
        cr_expect_eq(s.steps[4].npred, 1);
        cr_expect_eq(p.nsoft, (size_t)across);
        fold_wire_plan_free(&p);
        fold_sched_cleanup(&s);
    }

    /* Peer 1 remote, peer 2 local: data from 2 sent on to 1 is not an answer to 1;
     * what derives from 1's message is, also after passing through 2's. */
    a.size = 4;
    fold_sched_init(&s, &a);
    fold_sched_send(&s, 1, fold_ref_in(0), 50);                                  /* 0 */
    fold_sched_recv(&s, 2, fold_ref_tmp(0), 50);                                 /* 1 */
    fold_sched_reduce(&s, fold_ref_in(50), fold_ref_tmp(0), fold_ref_out(0), 50); /* 2 */
    fold_sched_send(&s, 1, fold_ref_out(0), 50);                                 /* 3 */
    fold_sched_recv(&s, 1, fold_ref_tmp(50), 50);                                /* 4 */
    fold_sched_reduce(&s, fold_ref_tmp(50), fold_ref_out(0), fold_ref_tmp(100), 50); /* 5 */
    fold_sched_send(&s, 2, fold_ref_tmp(100), 50);                               /* 6 */
    fold_sched_send(&s, 1, fold_ref_tmp(100), 50);                               /* 7 */
    cr_assert_eq(fold_sched_finalize(&s), FOLD_OK);
    cr_assert_eq(fold_wire_plan_build(&p, &s, remote1), FOLD_OK);
    cr_expect_eq(p.steps[3].soft, FOLD_STEP_NONE, "not an answer to 1");
    cr_expect_eq(p.steps[7].soft, 3u, "an answer to 1 waits for the latest own send to 1");
    cr_expect_eq(p.steps[7].soft_src, 4u);
    cr_expect_eq(p.steps[3].soft_first, 7u);
    cr_expect_eq(p.steps[6].soft, FOLD_STEP_NONE, "sends to a peer on this node never wait");
    fold_wire_plan_free(&p);
    fold_sched_cleanup(&s);

    a.size = 2;
    /* Rabenseifner between two ranks, segmented: every allgather send waits for
     * the last reduce-scatter send. */
    a.count = 100;
    a.seg_count = 10;
    fold_sched_init(&s, &a);
    cr_assert_eq(fold_alg_find("rabenseifner")->allreduce(&a, &s), FOLD_OK);
    cr_assert_eq(fold_sched_finalize(&s), FOLD_OK);
    cr_assert_eq(fold_wire_plan_build(&p, &s, remote1), FOLD_OK);
    int64_t last_own = -1;
    size_t answers = 0;
    for (size_t i = 0; i < s.nsteps; i++) {
        if (s.steps[i].kind != FOLD_STEP_SEND) {
            continue;
        }
        if (s.steps[i].src.buf == FOLD_BUF_IN) {
            last_own = (int64_t)i;
        } else {
            cr_assert_geq(last_own, 0);
            cr_expect_eq(p.steps[i].soft, (uint32_t)last_own, "send %zu", i);
            answers++;
        }
    }
    cr_expect_eq(answers, 5);
    cr_expect_eq(p.nsoft, 5);
    fold_wire_plan_free(&p);
    fold_sched_cleanup(&s);
}

Test(exec_plan, final_results_are_the_reductions_into_out_nothing_reads_later)
{
    fold_coll_args_t a = args_for(FOLD_COLL_ALLREDUCE, 0, 0);
    a.size = 2;
    fold_sched_t s;
    fold_wire_plan_t p;

    /* Reduce-scatter then allgather: the reduced half is sent on, so it is not final;
     * a chain of reductions into one range: none is, the last reads OUT's own lines
     * (dirty in the cache: streaming would write them back first). */
    fold_sched_init(&s, &a);
    fold_sched_recv(&s, 1, fold_ref_tmp(0), 50);                                 /* 0 */
    fold_sched_reduce(&s, fold_ref_in(0), fold_ref_tmp(0), fold_ref_out(0), 50);  /* 1 */
    fold_sched_send(&s, 1, fold_ref_out(0), 50);                                 /* 2 */
    fold_sched_recv(&s, 1, fold_ref_tmp(50), 50);                                /* 3 */
    fold_sched_reduce(&s, fold_ref_in(50), fold_ref_tmp(50), fold_ref_out(50), 50); /* 4 */
    fold_sched_reduce(&s, fold_ref_out(50), fold_ref_tmp(0), fold_ref_out(50), 50); /* 5 */
    fold_sched_reduce(&s, fold_ref_in(0), fold_ref_tmp(0), fold_ref_tmp(100), 10);  /* 6 */
    fold_sched_copy(&s, fold_ref_tmp(100), fold_ref_out(100), 10);               /* 7 */
    fold_sched_copy(&s, fold_ref_tmp(100), fold_ref_out(110), 10);               /* 8 */
    fold_sched_send(&s, 1, fold_ref_out(115), 2);                                /* 9 */
    cr_assert_eq(fold_sched_finalize(&s), FOLD_OK);
    cr_assert_eq(fold_wire_plan_build(&p, &s, NULL), FOLD_OK);
    cr_expect_eq(p.steps[1].final_out, 0, "sent on afterwards");
    cr_expect_eq(p.steps[4].final_out, 0, "read by the next reduction");
    cr_expect_eq(p.steps[5].final_out, 0, "a sum kept in OUT: its lines are in the cache");
    cr_expect_eq(p.steps[6].final_out, 0, "not into OUT");
    cr_expect_eq(p.steps[2].final_out, 0, "a send writes nothing");
    cr_expect_eq(p.steps[7].final_out, 1, "a copy of the result into OUT");
    cr_expect_eq(p.steps[8].final_out, 0, "a copy into OUT sent on afterwards");
    fold_wire_plan_free(&p);
    fold_sched_cleanup(&s);

    /* In place, IN is OUT: a later send from IN reads the result. A copy or a write to
     * a peer from the range reads it too; a read of a range beside it does not. */
    a.inplace = 1;
    fold_sched_init(&s, &a);
    fold_sched_recv(&s, 1, fold_ref_tmp(0), 50);                                 /* 0 */
    fold_sched_reduce(&s, fold_ref_in(0), fold_ref_tmp(0), fold_ref_out(0), 50);  /* 1 */
    fold_sched_send(&s, 1, fold_ref_in(40), 10);                                 /* 2 */
    fold_sched_reduce(&s, fold_ref_in(60), fold_ref_tmp(0), fold_ref_out(60), 20); /* 3 */
    fold_sched_copy(&s, fold_ref_out(70), fold_ref_tmp(200), 5);                 /* 4 */
    fold_sched_reduce(&s, fold_ref_in(80), fold_ref_tmp(0), fold_ref_out(80), 20); /* 5 */
    fold_sched_send(&s, 1, fold_ref_out(100), 10);                               /* 6 */
    cr_assert_eq(fold_sched_finalize(&s), FOLD_OK);
    cr_assert_eq(fold_wire_plan_build(&p, &s, NULL), FOLD_OK);
    cr_expect_eq(p.steps[1].final_out, 0, "sent on from IN, which is OUT");
    cr_expect_eq(p.steps[3].final_out, 0, "copied from afterwards");
    cr_expect_eq(p.steps[5].final_out, 1, "the send reads the range beside it");
    fold_wire_plan_free(&p);
    fold_sched_cleanup(&s);
}

/* A dpml leader's own block: the fold into the segment, the post that publishes it,
 * and the copy of it into OUT. */
static void leader_block(fold_sched_t *s, fold_ref_t own, size_t copy_count)
{
    fold_sched_copy(s, fold_ref_in(50), fold_ref_shm(0), 10);                       /* 0 */
    fold_sched_shm_post(s, FOLD_FLAG_WRITTEN, 1, fold_ref_shm(0), 10);              /* 1 */
    fold_sched_shm_wait(s, 1, 1, FOLD_FLAG_WRITTEN, 1, fold_ref_shm(10), 10);       /* 2 */
    fold_sched_reduce(s, own, fold_ref_shm(10), fold_ref_shm(20), 10);              /* 3 */
    fold_sched_shm_post(s, FOLD_FLAG_PUBLISHED, 1, fold_ref_shm(20), 10);           /* 4 */
    fold_sched_copy(s, fold_ref_shm(20), fold_ref_out(0), copy_count);              /* 5 */
}

/* Two folds into one segment range, each published, then the copy of it into OUT. */
static void two_folds(fold_sched_t *s, const fold_coll_args_t *a)
{
    fold_sched_init(s, a);
    fold_sched_reduce(s, fold_ref_in(0), fold_ref_shm(0), fold_ref_shm(20), 10);    /* 0 */
    fold_sched_shm_post(s, FOLD_FLAG_PUBLISHED, 1, fold_ref_shm(20), 10);
    fold_sched_reduce(s, fold_ref_shm(20), fold_ref_tmp(0), fold_ref_shm(20), 10);  /* 2 */
    fold_sched_shm_post(s, FOLD_FLAG_PUBLISHED, 2, fold_ref_shm(20), 10);
    fold_sched_copy(s, fold_ref_shm(20), fold_ref_out(0), 10);                      /* 4 */
}

static uint32_t along_of(fold_sched_t *s, uint32_t r, uint32_t c)
{
    fold_wire_plan_t p;
    cr_assert_eq(fold_sched_finalize(s), FOLD_OK);
    cr_assert_eq(fold_wire_plan_build(&p, s, NULL), FOLD_OK);
    uint32_t along = p.steps[r].copy_along;
    if (along == c) {
        cr_expect(p.steps[c].copied, "the copy knows it is made along");
    }
    cr_expect_eq(fold_plan_copy_along(s, r), along, "the model sees what the plan does");
    fold_wire_plan_free(&p);
    fold_sched_cleanup(s);
    return along;
}

Test(exec_plan, a_reduction_into_the_segment_makes_the_copy_of_its_result_along)
{
    fold_coll_args_t a = args_for(FOLD_COLL_ALLREDUCE, 0, 0);
    a.size = 2;
    fold_sched_t s;

    fold_sched_init(&s, &a);
    leader_block(&s, fold_ref_in(0), 10);
    cr_expect_eq(along_of(&s, 3, 5), 5, "the published result copied whole into OUT");

    fold_sched_init(&s, &a);
    leader_block(&s, fold_ref_in(0), 5);
    cr_expect_eq(along_of(&s, 3, 5), FOLD_STEP_NONE, "a part of it");

    /* A send from the copy's destination between them needs OUT as it was. */
    fold_sched_init(&s, &a);
    fold_sched_copy(&s, fold_ref_in(50), fold_ref_shm(0), 10);
    fold_sched_reduce(&s, fold_ref_in(0), fold_ref_shm(0), fold_ref_shm(20), 10);   /* 1 */
    fold_sched_send(&s, 1, fold_ref_out(5), 2);
    fold_sched_copy(&s, fold_ref_shm(20), fold_ref_out(0), 10);                     /* 3 */
    cr_expect_eq(along_of(&s, 1, 3), FOLD_STEP_NONE, "OUT read in between");

    /* Another fold into the range before the copy: the copy takes that one's result. */
    two_folds(&s, &a);
    cr_expect_eq(along_of(&s, 0, 4), FOLD_STEP_NONE, "not the first fold's result");
    two_folds(&s, &a);
    cr_expect_eq(along_of(&s, 2, 4), 4, "the last fold's");

    /* In place: the fold's own operand may be the copy's range (read before written),
     * not a range that only overlaps it. */
    a.inplace = 1;
    fold_sched_init(&s, &a);
    leader_block(&s, fold_ref_in(0), 10);
    cr_expect_eq(along_of(&s, 3, 5), 5, "IN is the copy's very range");
    fold_sched_init(&s, &a);
    leader_block(&s, fold_ref_in(5), 10);
    cr_expect_eq(along_of(&s, 3, 5), FOLD_STEP_NONE, "IN overlaps it");
}

/* The reduction a peer read at step r hands its bytes to (FOLD_STEP_NONE: none); the
 * reduction knows which operand they fill. */
static uint32_t viewer_of(fold_sched_t *s, uint32_t r)
{
    fold_wire_plan_t p;
    cr_assert_eq(fold_sched_finalize(s), FOLD_OK);
    cr_assert_eq(fold_wire_plan_build(&p, s, NULL), FOLD_OK);
    uint32_t j = p.steps[r].viewed_by;
    if (j != FOLD_STEP_NONE) {
        cr_expect_eq(p.steps[j].view_of, r);
        const fold_step_t *red = &s->steps[j];
        fold_ref_t filled = p.steps[j].view_operand == 1 ? red->src : red->src2;
        cr_expect(p.steps[j].view_operand != 0 && filled.buf == s->steps[r].dst.buf &&
                      filled.off == s->steps[r].dst.off,
                  "operand %d is the read's range", p.steps[j].view_operand);
    }
    int operand;
    cr_expect_eq(fold_plan_peer_view(s, r, &operand), j, "the model sees what the plan does");
    fold_wire_plan_free(&p);
    fold_sched_cleanup(s);
    return j;
}

/* A serial schedule whose step 0 reads 10 elements of local rank 1's IN into TMP. */
static void read_row(fold_sched_t *s, const fold_coll_args_t *a)
{
    fold_sched_init(s, a);
    fold_sched_serial(s);
    fold_sched_peer_read(s, 1, 1, FOLD_BUF_IN, 0, fold_ref_tmp(0), 10);
}

/* ... and whose step 1 folds them with IN into OUT. */
static void read_and_fold(fold_sched_t *s, const fold_coll_args_t *a)
{
    read_row(s, a);
    fold_sched_reduce(s, fold_ref_in(0), fold_ref_tmp(0), fold_ref_out(0), 10);
}

Test(exec_plan, a_reduction_takes_over_the_peer_read_it_alone_uses)
{
    fold_coll_args_t a = args_for(FOLD_COLL_ALLREDUCE, 0, 0);
    a.size = 3;
    fold_sched_t s;

    /* Single copy's chunk: the first row read straight into OUT and summed there; a
     * row read into TMP and folded into OUT, the next chunk's read overwriting it. */
    fold_sched_init(&s, &a);
    fold_sched_serial(&s);
    fold_sched_peer_read(&s, 1, 1, FOLD_BUF_IN, 0, fold_ref_out(0), 10);            /* 0 */
    fold_sched_reduce(&s, fold_ref_in(0), fold_ref_out(0), fold_ref_out(0), 10);    /* 1 */
    fold_sched_peer_read(&s, 2, 2, FOLD_BUF_IN, 0, fold_ref_tmp(0), 10);            /* 2 */
    fold_sched_reduce(&s, fold_ref_out(0), fold_ref_tmp(0), fold_ref_out(0), 10);   /* 3 */
    fold_sched_peer_read(&s, 2, 2, FOLD_BUF_IN, 10, fold_ref_tmp(0), 10);           /* 4 */
    fold_sched_reduce(&s, fold_ref_tmp(0), fold_ref_in(10), fold_ref_out(10), 10);  /* 5 */
    cr_assert_eq(fold_sched_finalize(&s), FOLD_OK);
    fold_wire_plan_t p;
    cr_assert_eq(fold_wire_plan_build(&p, &s, NULL), FOLD_OK);
    cr_expect_eq(p.steps[0].viewed_by, 1);
    cr_expect_eq(p.steps[1].view_operand, 2, "src2 is the row read");
    cr_expect_eq(p.steps[2].viewed_by, 3, "TMP is written again before it is read");
    cr_expect_eq(p.steps[4].viewed_by, 5, "the last read: nothing uses TMP afterwards");
    cr_expect_eq(p.steps[5].view_operand, 1);
    cr_expect_eq(p.steps[1].viewed_by, FOLD_STEP_NONE, "only peer reads are taken over");
    fold_wire_plan_free(&p);
    fold_sched_cleanup(&s);

    /* Not serial: the reads may run before the steps built ahead of them. */
    fold_sched_init(&s, &a);
    fold_sched_peer_read(&s, 1, 1, FOLD_BUF_IN, 0, fold_ref_out(0), 10);
    fold_sched_reduce(&s, fold_ref_in(0), fold_ref_out(0), fold_ref_out(0), 10);
    cr_expect_eq(viewer_of(&s, 0), FOLD_STEP_NONE, "not serial");

    /* The read's bytes are wanted again after the reduction: the row is sent on,
     * copied, or only partly overwritten next. */
    read_and_fold(&s, &a);
    fold_sched_send(&s, 1, fold_ref_tmp(0), 10);
    cr_expect_eq(viewer_of(&s, 0), FOLD_STEP_NONE, "sent on");
    read_and_fold(&s, &a);
    fold_sched_peer_write(&s, fold_ref_tmp(0), 1, 1, 0, 10);
    cr_expect_eq(viewer_of(&s, 0), FOLD_STEP_NONE, "written into a peer");
    read_and_fold(&s, &a);
    fold_sched_peer_read(&s, 2, 2, FOLD_BUF_IN, 0, fold_ref_tmp(0), 5);
    fold_sched_reduce(&s, fold_ref_in(0), fold_ref_tmp(0), fold_ref_out(20), 10);
    cr_expect_eq(viewer_of(&s, 0), FOLD_STEP_NONE, "half of it read after the next read");

    /* The next user is no reduction of exactly the range: a copy, a reduction of a
     * part, one whose both operands are the range, one writing beside it. */
    read_row(&s, &a);
    fold_sched_copy(&s, fold_ref_tmp(0), fold_ref_out(0), 10);
    cr_expect_eq(viewer_of(&s, 0), FOLD_STEP_NONE, "a copy");
    read_row(&s, &a);
    fold_sched_reduce(&s, fold_ref_in(0), fold_ref_tmp(0), fold_ref_out(0), 5);
    cr_expect_eq(viewer_of(&s, 0), FOLD_STEP_NONE, "a part");
    read_row(&s, &a);
    fold_sched_reduce(&s, fold_ref_tmp(0), fold_ref_tmp(0), fold_ref_out(0), 10);
    cr_expect_eq(viewer_of(&s, 0), FOLD_STEP_NONE, "both operands");
    read_row(&s, &a);
    fold_sched_reduce(&s, fold_ref_in(0), fold_ref_tmp(0), fold_ref_tmp(5), 10);
    cr_expect_eq(viewer_of(&s, 0), FOLD_STEP_NONE, "its result overlaps the range");
}

/* Results written along (exec_plan.h): the peer writes right after a reduction that
 * take its result whole go with it; its result in OUT is then final (the viewed
 * operand read where it lies), and a TMP result nothing reads afterwards is dead. */
Test(exec_plan, a_reduction_makes_the_peer_writes_of_its_result_along)
{
    fold_coll_args_t a = args_for(FOLD_COLL_ALLREDUCE, 0, 0);
    a.size = 3;
    fold_sched_t s;
    fold_wire_plan_t p;

    /* A 3-rank allreduce owner's chunk, its first row read into OUT, then two
     * chunks of a reduce's non-root, its block summed in TMP and written to the root. */
    fold_sched_init(&s, &a);
    fold_sched_serial(&s);
    fold_sched_peer_read(&s, 1, 1, FOLD_BUF_IN, 0, fold_ref_out(0), 10);            /* 0 */
    fold_sched_reduce(&s, fold_ref_in(0), fold_ref_out(0), fold_ref_out(0), 10);    /* 1 */
    fold_sched_peer_write(&s, fold_ref_out(0), 1, 1, 0, 10);                        /* 2 */
    fold_sched_peer_write(&s, fold_ref_out(0), 2, 2, 0, 10);                        /* 3 */
    fold_sched_peer_read(&s, 1, 1, FOLD_BUF_IN, 10, fold_ref_tmp(0), 10);           /* 4 */
    fold_sched_reduce(&s, fold_ref_tmp(0), fold_ref_in(10), fold_ref_tmp(0), 10);   /* 5 */
    fold_sched_peer_write(&s, fold_ref_tmp(0), 2, 2, 10, 10);                       /* 6 */
    fold_sched_peer_read(&s, 1, 1, FOLD_BUF_IN, 20, fold_ref_tmp(0), 10);           /* 7 */
    fold_sched_reduce(&s, fold_ref_tmp(0), fold_ref_in(20), fold_ref_tmp(0), 10);   /* 8 */
    fold_sched_peer_write(&s, fold_ref_tmp(0), 2, 2, 20, 10);                       /* 9 */
    fold_sched_copy(&s, fold_ref_tmp(0), fold_ref_out(30), 5);                      /* 10 */
    cr_assert_eq(fold_sched_finalize(&s), FOLD_OK);
    cr_assert_eq(fold_wire_plan_build(&p, &s, NULL), FOLD_OK);
    cr_expect_eq(fold_plan_writes_along(&s, 1), 2);
    cr_expect_eq(p.steps[1].writes_along, 2);
    cr_expect_eq(p.steps[2].written_by, 1);
    cr_expect_eq(p.steps[3].written_by, 1);
    cr_expect(p.steps[1].final_viewed && !p.steps[1].final_out,
              "OUT is the result once the writes are made along and the row viewed");
    cr_expect_eq(p.steps[5].writes_along, 1);
    cr_expect_eq(p.steps[6].written_by, 5);
    cr_expect(p.steps[5].dst_dead, "the next read writes all of TMP first");
    cr_expect_eq(p.steps[8].writes_along, 1);
    cr_expect(!p.steps[8].dst_dead, "a copy reads TMP afterwards");
    cr_expect_eq(p.steps[4].written_by, FOLD_STEP_NONE, "a read is no write along");
    cr_expect_eq(p.steps[10].written_by, FOLD_STEP_NONE);
    fold_wire_plan_free(&p);
    fold_sched_cleanup(&s);

    /* The sum kept in OUT (a third rank's row folded onto it) is read by its own
     * reduction: never final, written along or not. A write of part of the result,
     * or from another range, is not made along; nor outside serial schedules. */
    fold_sched_init(&s, &a);
    fold_sched_serial(&s);
    fold_sched_peer_read(&s, 2, 2, FOLD_BUF_IN, 0, fold_ref_tmp(0), 10);            /* 0 */
    fold_sched_reduce(&s, fold_ref_out(0), fold_ref_tmp(0), fold_ref_out(0), 10);   /* 1 */
    fold_sched_peer_write(&s, fold_ref_out(0), 1, 1, 0, 10);                        /* 2 */
    fold_sched_peer_write(&s, fold_ref_out(0), 2, 2, 0, 5);                         /* 3 */
    cr_assert_eq(fold_sched_finalize(&s), FOLD_OK);
    cr_assert_eq(fold_wire_plan_build(&p, &s, NULL), FOLD_OK);
    cr_expect_eq(p.steps[1].writes_along, 1, "the part written is not");
    cr_expect_eq(p.steps[3].written_by, FOLD_STEP_NONE);
    cr_expect(!p.steps[1].final_viewed && !p.steps[1].final_out, "the sum kept in OUT");
    fold_wire_plan_free(&p);
    fold_sched_cleanup(&s);

    fold_sched_init(&s, &a);
    fold_sched_peer_read(&s, 1, 1, FOLD_BUF_IN, 0, fold_ref_out(0), 10);
    fold_sched_reduce(&s, fold_ref_in(0), fold_ref_out(0), fold_ref_out(0), 10);
    fold_sched_peer_write(&s, fold_ref_out(0), 1, 1, 0, 10);
    cr_assert_eq(fold_sched_finalize(&s), FOLD_OK);
    cr_expect_eq(fold_plan_writes_along(&s, 1), 0, "not serial");
    fold_sched_cleanup(&s);
}
