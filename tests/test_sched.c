/*
 * Schedule finalisation (derived dependencies, message numbering) and the algorithm
 * registry (the selection rules are in test_select.c, the configuration in
 * test_config.c).
 */
#include <criterion/criterion.h>

#include "comm.h"

static fold_coll_args_t args_for(fold_coll_t coll, int rank, int inplace)
{
    fold_coll_args_t a = {.coll = coll, .rank = rank, .size = 4, .root = 0, .count = 100,
                          .seg_count = 10, .depth = 2, .inplace = inplace, .commutative = 1};
    return a;
}

static int depends_on(const fold_sched_t *s, uint32_t later, uint32_t earlier)
{
    const fold_step_t *st = &s->steps[earlier];
    for (uint32_t k = 0; k < st->nsucc; k++) {
        if (s->succ[st->succ_off + k] == later) {
            return 1;
        }
    }
    return 0;
}

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

/* The codec links that sched_wire.c derives. */
Test(sched, wire_links)
{
    /* recv into TMP read by one reduce: decoded inside it; its result only sent on:
     * counted (and, in TMP, encodable straight for the send). */
    fold_coll_args_t a = args_for(FOLD_COLL_REDUCE, 1, 0);
    fold_sched_t s;
    fold_sched_init(&s, &a);
    fold_sched_recv(&s, 2, fold_ref_tmp(0), 10);
    fold_sched_reduce(&s, fold_ref_in(0), fold_ref_tmp(0), fold_ref_tmp(10), 10);
    fold_sched_send(&s, 0, fold_ref_tmp(10), 10);
    cr_assert_eq(fold_sched_finalize(&s), FOLD_OK);
    cr_expect_eq(s.steps[0].wire, 1);
    cr_expect_eq(s.steps[1].wire, 2);
    cr_expect_eq(s.steps[1].link, 0);
    cr_expect_eq(s.steps[1].counts, 2);
    cr_expect_eq(s.steps[1].fwd, 2);
    cr_expect_eq(s.steps[2].link, 1);
    fold_sched_cleanup(&s);

    /* A second reader of the slot: decoded on arrival instead. */
    fold_sched_init(&s, &a);
    fold_sched_recv(&s, 2, fold_ref_tmp(0), 10);
    fold_sched_reduce(&s, fold_ref_in(0), fold_ref_tmp(0), fold_ref_tmp(10), 10);
    fold_sched_copy(&s, fold_ref_tmp(0), fold_ref_tmp(20), 10);
    cr_assert_eq(fold_sched_finalize(&s), FOLD_OK);
    cr_expect_eq(s.steps[0].wire, 0);
    cr_expect_eq(s.steps[1].wire, 0);
    fold_sched_cleanup(&s);
}

Test(sched, answers_to_remote_peers_wait_softly_for_own_sends)
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
    for (int across = 0; across <= 1; across++) {
        a.remote = across ? remote1 : NULL;
        fold_sched_init(&s, &a);
        fold_sched_send(&s, 1, fold_ref_in(50), 25);                                /* 0 */
        fold_sched_send(&s, 1, fold_ref_in(75), 25);                                /* 1 */
        fold_sched_recv(&s, 1, fold_ref_tmp(0), 50);                                /* 2 */
        fold_sched_reduce(&s, fold_ref_in(0), fold_ref_tmp(0), fold_ref_out(0), 50); /* 3 */
        fold_sched_send(&s, 1, fold_ref_out(0), 50);                                /* 4 */
        fold_sched_recv(&s, 1, fold_ref_out(50), 50);                               /* 5 */
        cr_assert_eq(fold_sched_finalize(&s), FOLD_OK);
        cr_expect_eq(depends_on(&s, 4, 1), across, "the answer waits for the latest own send");
        cr_expect_eq(s.steps[4].soft, across ? 1u : FOLD_STEP_NONE);
        cr_expect_eq(s.steps[4].soft_src, across ? 2u : FOLD_STEP_NONE,
                     "the wait hangs on the message it answers");
        cr_expect_eq(s.steps[1].soft, FOLD_STEP_NONE, "an own send waits for nothing");
        cr_expect(!depends_on(&s, 1, 0), "own sends stay concurrent");
        cr_expect_eq(s.steps[4].npred, 1 + (uint32_t)across);
        cr_expect_eq(s.nsoft, (size_t)across);
        fold_sched_cleanup(&s);
    }

    /* Peer 1 remote, peer 2 local: data from 2 sent on to 1 is not an answer to 1;
     * what derives from 1's message is, also after passing through 2's. */
    a.size = 4;
    a.remote = remote1;
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
    cr_expect_eq(s.steps[3].soft, FOLD_STEP_NONE, "not an answer to 1");
    cr_expect_eq(s.steps[7].soft, 3u, "an answer to 1 waits for the latest own send to 1");
    cr_expect_eq(s.steps[7].soft_src, 4u);
    cr_expect(depends_on(&s, 7, 3));
    cr_expect_eq(s.steps[6].soft, FOLD_STEP_NONE, "sends to a peer on this node never wait");
    fold_sched_cleanup(&s);

    a.size = 2;
    a.remote = remote1;
    /* Rabenseifner between two ranks, segmented: every allgather send waits for
     * the last reduce-scatter send. */
    a.count = 100;
    a.seg_count = 10;
    fold_sched_init(&s, &a);
    cr_assert_eq(fold_alg_find("rabenseifner")->allreduce(&a, &s), FOLD_OK);
    cr_assert_eq(fold_sched_finalize(&s), FOLD_OK);
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
            cr_expect(depends_on(&s, (uint32_t)i, (uint32_t)last_own), "send %zu", i);
            answers++;
        }
    }
    cr_expect_eq(answers, 5);
    fold_sched_cleanup(&s);
}

Test(registry, every_named_algorithm_is_registered)
{
    static const char *const names[] = {"binomial", "rabenseifner", "ring", "chain", "bintree",
                                        "greedy", "recursive_doubling"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const fold_alg_t *a = fold_alg_find(names[i]);
        cr_assert_not_null(a, "%s", names[i]);
        cr_expect(a->allreduce || a->reduce, "%s builds nothing", names[i]);
        cr_expect_not_null(a->description);
    }
    cr_expect_null(fold_alg_find("no_such_algorithm"));
    cr_expect_not_null(fold_alg_find("ring")->allreduce);
    cr_expect_not_null(fold_alg_find("recursive_doubling")->allreduce);
    cr_expect_not_null(fold_alg_find("rabenseifner")->reduce);
}
