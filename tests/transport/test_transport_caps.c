/*
 * Transport capabilities (transport.h): every backend this machine can open reports
 * its caps, the executor accepts them and refuses caps missing what it relies on,
 * the context opens ofi with the provider its configuration names, and the loopback
 * backend, which the algorithm tests run on, behaves as its caps say: in-order
 * matching, a completed send's buffer free for reuse (eager and rendezvous),
 * truncation reported, whole tags matched.
 */
#include <criterion/criterion.h>

#include "bootstrap.h"
#include "context.h"
#include "coll/exec.h"
#include "log.h"
#include "transport/transport.h"

#include <fold/fold_status.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ALL_CAPS (FOLD_TL_CAP_ORDERED | FOLD_TL_CAP_SEND_REUSE | FOLD_TL_CAP_TRUNCATION)

static const fold_tl_ops_t *const lb = &fold_tl_loopback_ops;

/* Loopback ranks 0..n-1 on one fabric; sends below rndv bytes are eager. */
typedef struct lb_world {
    void      *fabric;
    int        n;
    fold_tl_t *tl[3];
} lb_world_t;

static void lb_world_open(lb_world_t *w, int n, size_t rndv)
{
    w->n      = n;
    w->fabric = fold_loopback_fabric_create(n);
    cr_assert(w->fabric != NULL);
    fold_loopback_fabric_set_rndv(w->fabric, rndv);
    for (int r = 0; r < n; r++) {
        fold_tl_params_t params = {.rank = r, .size = n, .loopback_fabric = w->fabric};
        cr_assert_eq(lb->open(&params, &w->tl[r]), FOLD_OK);
    }
}

static void lb_world_close(lb_world_t *w)
{
    for (int r = 0; r < w->n; r++) {
        lb->close(w->tl[r]);
    }
    fold_loopback_fabric_destroy(w->fabric);
}

static void expect_caps(const fold_tl_caps_t *caps, const char *name, unsigned flags,
                        int tag_bits)
{
    cr_expect_eq(fold_exec_check_caps(caps), FOLD_OK, "the executor refuses %s", name);
    cr_expect_str_eq(caps->name, name);
    cr_expect_eq(caps->flags & flags, flags, "%s: flags 0x%x lack 0x%x", name, caps->flags,
                 flags & ~caps->flags);
    cr_expect_eq(caps->tag_bits, tag_bits, "%s: %d tag bits", name, caps->tag_bits);
}

/* ---- every backend here ------------------------------------------------------ */

Test(tl_caps, every_backend_has_a_query)
{
    for (int i = 0; fold_tl_all[i] != NULL; i++) {
        cr_expect(fold_tl_all[i]->query != NULL, "%s has no query", fold_tl_all[i]->name);
    }
}

Test(tl_caps, loopback_reports_its_caps)
{
    lb_world_t w;
    lb_world_open(&w, 2, SIZE_MAX);
    fold_tl_caps_t caps;
    cr_assert_eq(lb->query(w.tl[0], &caps), FOLD_OK);
    expect_caps(&caps, "loopback", ALL_CAPS, 64);
    cr_expect_null(caps.provider);
    lb_world_close(&w);
}

Test(tl_caps, ucp_reports_its_caps)
{
    fold_tl_params_t params = {.rank = 0, .size = 1};
    fold_tl_t *tl;
    if (fold_tl_ucp_ops.open(&params, &tl) != FOLD_OK) {
        cr_skip_test("ucp does not open here");
    }
    fold_tl_caps_t caps;
    cr_assert_eq(fold_tl_ucp_ops.query(tl, &caps), FOLD_OK);
    expect_caps(&caps, "ucp", ALL_CAPS, FOLD_TL_TAG_BITS);
    /* UCX's transports in use, as fold_info -C shows them; none left out here. */
    cr_assert_not_null(caps.provider);
    cr_expect_not_null(strstr(caps.provider, "self"), "provider '%s'", caps.provider);
    cr_expect_not_null(strstr(caps.provider, "tcp"), "provider '%s'", caps.provider);
    cr_expect_null(caps.fallback, "fallback '%s'", caps.fallback);
    fold_tl_ucp_ops.close(tl);
}

/* The first provider that fits, then shm by name (this machine has it). */
Test(tl_caps, ofi_reports_its_caps_and_provider)
{
    const char *const providers[] = {NULL, "shm"};
    for (int i = 0; i < 2; i++) {
        fold_tl_params_t params = {.rank = 0, .size = 1, .ofi_provider = providers[i]};
        fold_tl_t *tl;
        if (fold_tl_ofi_ops.open(&params, &tl) != FOLD_OK) {
            cr_skip_test("ofi does not open here with provider %s",
                         providers[i] ? providers[i] : "(default)");
        }
        fold_tl_caps_t caps;
        cr_assert_eq(fold_tl_ofi_ops.query(tl, &caps), FOLD_OK);
        expect_caps(&caps, "ofi", ALL_CAPS, FOLD_TL_TAG_BITS);
        cr_assert_not_null(caps.provider);
        if (providers[i] != NULL) {
            cr_expect_str_eq(caps.provider, providers[i]);
        } else {
            cr_expect(caps.provider[0] != '\0');
        }
        fold_tl_ofi_ops.close(tl);
    }
}

/* FOLD_OFI_PROVIDER reaches the transport through the context's configuration. */
Test(tl_caps, context_opens_ofi_with_the_configured_provider)
{
    setenv("FOLD_OFI_PROVIDER", "shm", 1);
    void *group = fold_bootstrap_mem_group_create(1);
    fold_bootstrap_t bs;
    fold_context_t *ctx;
    cr_assert_eq(fold_bootstrap_mem_init(&bs, group, 0), FOLD_OK);
    if (fold_context_create(&bs, "ofi", NULL, &ctx) != FOLD_OK) {
        fold_bootstrap_mem_group_destroy(group);
        cr_skip_test("ofi over shm does not open here");
    }
    const char *value;
    cr_assert_eq(fold_config_get(ctx, "OFI_PROVIDER", &value), FOLD_OK);
    cr_expect_str_eq(value, "shm");
    fold_tl_caps_t caps;
    cr_assert_eq(ctx->tl_ops->query(ctx->tl, &caps), FOLD_OK);
    cr_expect_str_eq(caps.provider, "shm");
    cr_expect_eq(fold_finalize(ctx), FOLD_OK);
    fold_bootstrap_mem_group_destroy(group);
}

/* The executor needs ordered matching, reusable send buffers, truncation and the 44
 * tag bits of its tag layout. */
Test(tl_caps, executor_refuses_caps_it_cannot_work_with)
{
    const unsigned needed[] = {FOLD_TL_CAP_ORDERED, FOLD_TL_CAP_SEND_REUSE,
                               FOLD_TL_CAP_TRUNCATION};
    fold_tl_caps_t caps = {.name = "test", .flags = ALL_CAPS, .tag_bits = FOLD_TL_TAG_BITS};
    cr_expect_eq(fold_exec_check_caps(&caps), FOLD_OK);

    fold_log_level = -1;   /* the refusals' log lines are expected */
    for (size_t i = 0; i < sizeof(needed) / sizeof(needed[0]); i++) {
        caps.flags = ALL_CAPS & ~needed[i];
        cr_expect_eq(fold_exec_check_caps(&caps), FOLD_ERR_UNSUPPORTED, "without %s",
                     fold_tl_cap_name(needed[i]));
    }
    caps.flags    = ALL_CAPS;
    caps.tag_bits = FOLD_TL_TAG_BITS - 1;
    cr_expect_eq(fold_exec_check_caps(&caps), FOLD_ERR_UNSUPPORTED);
}

/* ---- the loopback backend keeps what it reports ---------------------------------- */

/* Modes: eager (sends complete at once) and rendezvous (only once received). */
static const size_t rndv_modes[] = {SIZE_MAX, 1};

/* FOLD_TL_CAP_ORDERED: four messages with one tag meet four receives in order,
 * whether the receives or the sends come first. */
Test(tl_caps, loopback_matches_in_posting_order)
{
    enum { N = 4 };
    for (int m = 0; m < 2; m++) {
        for (int recv_first = 0; recv_first < 2; recv_first++) {
            lb_world_t w;
            lb_world_open(&w, 2, rndv_modes[m]);
            int sent[N], got[N];
            fold_tl_req_t sreq[N], rreq[N];
            for (int k = 0; k < 2 * N; k++) {
                int i = k % N;
                if ((k < N) == recv_first) {
                    got[i] = -1;
                    cr_assert_eq(lb->tag_recv(w.tl[1], 0, 7, &got[i], sizeof(int), &rreq[i]),
                                 FOLD_OK);
                } else {
                    sent[i] = 100 + i;
                    cr_assert_eq(lb->tag_send(w.tl[0], 1, 7, &sent[i], sizeof(int), &sreq[i]),
                                 FOLD_OK);
                }
            }
            for (int i = 0; i < N; i++) {
                cr_expect_eq(rreq[i].status, FOLD_OK);
                cr_expect_eq(sreq[i].status, FOLD_OK);
                cr_expect_eq(got[i], 100 + i, "mode %d, receives %s: receive %d got %d", m,
                             recv_first ? "first" : "last", i, got[i]);
            }
            lb_world_close(&w);
        }
    }
}

/* FOLD_TL_CAP_SEND_REUSE: once a send completes, overwriting its buffer does not
 * change what the receiver gets. In rendezvous mode the send completes only once
 * the receive is posted. */
Test(tl_caps, loopback_send_completion_frees_the_buffer)
{
    for (int m = 0; m < 2; m++) {
        lb_world_t w;
        lb_world_open(&w, 2, rndv_modes[m]);
        char buf[64], got[64];
        memset(buf, 'a', sizeof(buf));
        fold_tl_req_t sreq, rreq;
        cr_assert_eq(lb->tag_send(w.tl[0], 1, 3, buf, sizeof(buf), &sreq), FOLD_OK);
        if (rndv_modes[m] == SIZE_MAX) {
            cr_expect_eq(sreq.status, FOLD_OK, "an eager send completes at once");
            memset(buf, 'b', sizeof(buf));
        } else {
            cr_expect_eq(sreq.status, FOLD_INPROGRESS, "a rendezvous send waits");
        }
        cr_assert_eq(lb->tag_recv(w.tl[1], 0, 3, got, sizeof(got), &rreq), FOLD_OK);
        cr_expect_eq(sreq.status, FOLD_OK);
        cr_expect_eq(rreq.status, FOLD_OK);
        cr_expect_eq(rreq.length, sizeof(got));
        memset(buf, 'c', sizeof(buf));
        for (size_t i = 0; i < sizeof(got); i++) {
            cr_assert_eq(got[i], 'a', "mode %d: byte %zu is '%c'", m, i, got[i]);
        }
        lb_world_close(&w);
    }
}

/* FOLD_TL_CAP_TRUNCATION: an over-long message fails its receive with
 * FOLD_ERR_TRUNCATED, posted first or arriving first, and the pair stays usable;
 * a shorter one reports its length. */
Test(tl_caps, loopback_reports_truncation)
{
    for (int m = 0; m < 2; m++) {
        for (int recv_first = 0; recv_first < 2; recv_first++) {
            lb_world_t w;
            lb_world_open(&w, 2, rndv_modes[m]);
            char big[100] = {0}, small[50];
            fold_tl_req_t sreq, rreq;
            if (recv_first) {
                cr_assert_eq(lb->tag_recv(w.tl[1], 0, 5, small, sizeof(small), &rreq), FOLD_OK);
            }
            cr_assert_eq(lb->tag_send(w.tl[0], 1, 5, big, sizeof(big), &sreq), FOLD_OK);
            if (!recv_first) {
                cr_assert_eq(lb->tag_recv(w.tl[1], 0, 5, small, sizeof(small), &rreq), FOLD_OK);
            }
            cr_expect_eq(rreq.status, FOLD_ERR_TRUNCATED, "mode %d: %s", m,
                         fold_status_string(rreq.status));
            cr_expect_neq(sreq.status, FOLD_INPROGRESS);

            cr_assert_eq(lb->tag_send(w.tl[0], 1, 5, big, 10, &sreq), FOLD_OK);
            cr_assert_eq(lb->tag_recv(w.tl[1], 0, 5, small, sizeof(small), &rreq), FOLD_OK);
            cr_expect_eq(rreq.status, FOLD_OK);
            cr_expect_eq(rreq.length, 10);
            lb_world_close(&w);
        }
    }
}

/* Receives match exactly (peer, tag), every one of the tag bits the caps give. */
Test(tl_caps, loopback_matches_whole_tags_and_peers)
{
    lb_world_t w;
    lb_world_open(&w, 3, SIZE_MAX);
    fold_tl_caps_t caps;
    cr_assert_eq(lb->query(w.tl[0], &caps), FOLD_OK);
    uint64_t low = 9, high = low | (UINT64_C(1) << (caps.tag_bits - 1));
    int from0_low = 1, from0_high = 2, from2_low = 3, got[3] = {0};
    fold_tl_req_t sreq[3], rreq[3];
    cr_assert_eq(lb->tag_send(w.tl[0], 1, high, &from0_high, sizeof(int), &sreq[0]), FOLD_OK);
    cr_assert_eq(lb->tag_send(w.tl[2], 1, low, &from2_low, sizeof(int), &sreq[1]), FOLD_OK);
    cr_assert_eq(lb->tag_send(w.tl[0], 1, low, &from0_low, sizeof(int), &sreq[2]), FOLD_OK);
    cr_assert_eq(lb->tag_recv(w.tl[1], 0, low, &got[0], sizeof(int), &rreq[0]), FOLD_OK);
    cr_assert_eq(lb->tag_recv(w.tl[1], 2, low, &got[1], sizeof(int), &rreq[1]), FOLD_OK);
    cr_assert_eq(lb->tag_recv(w.tl[1], 0, high, &got[2], sizeof(int), &rreq[2]), FOLD_OK);
    cr_expect_eq(got[0], from0_low);
    cr_expect_eq(got[1], from2_low);
    cr_expect_eq(got[2], from0_high);
    lb_world_close(&w);
}
