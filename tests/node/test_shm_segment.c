/*
 * The node segment (naming, mode, attach counting, unlink once all are in, flags,
 * bounded waits), the communicator topology (nodes, local indices, leaders spread
 * across sockets) and DPML's layout (chunks that agree between nodes and fit the
 * segment).
 */
#include <criterion/criterion.h>

#include "comm.h"
#include "coll/alg_dpml.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int shm_exists(const char *name)
{
    char path[300];
    struct stat st;
    snprintf(path, sizeof(path), "/dev/shm%s", name);
    return stat(path, &st) == 0;
}

static void unique_name(char *buf, size_t len, const char *tag)
{
    fold_shm_make_name(buf, len, tag, "test-node", 7, (uint64_t)getpid());
}

Test(shm_segment, name_carries_job_node_comm_and_is_clean)
{
    char name[FOLD_SHM_NAME_MAX];
    fold_shm_make_name(name, sizeof(name), "prterun-host-12@1", "host/ns 4026531840", 42,
                       0xabcdefull);
    cr_expect_str_eq(name, "/fold-prterun-host-12_1-host_ns_4026531840-c42-0000000000abcdef");

    /* Very long job and node names are shortened; the comm id and nonce survive. */
    char job[400], node[400];
    memset(job, 'j', sizeof(job) - 1);
    job[sizeof(job) - 1] = '\0';
    memset(node, 'n', sizeof(node) - 1);
    node[sizeof(node) - 1] = '\0';
    fold_shm_make_name(name, sizeof(name), job, node, 65535, 1);
    cr_expect_lt(strlen(name), sizeof(name));
    cr_expect_not_null(strstr(name, "-c65535-0000000000000001"));
    cr_expect_eq(strchr(name + 1, '/'), NULL);
    cr_expect_not_null(strstr(name, "jjjj-nnnn"));
}

Test(shm_segment, create_attach_unlinks_when_all_are_in)
{
    char name[FOLD_SHM_NAME_MAX];
    unique_name(name, sizeof(name), "attach");
    fold_shm_seg_t a, b, c;
    cr_assert_eq(fold_shm_create(&a, name, 3, 100000), FOLD_OK);

    char path[300];
    struct stat st;
    snprintf(path, sizeof(path), "/dev/shm%s", name);
    cr_assert_eq(stat(path, &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0600, "mode %o", st.st_mode & 0777);
    cr_expect_geq(a.data_size, 100000);
    cr_expect_eq((uintptr_t)a.data % 4096, 0, "data area page aligned");

    fold_shm_seg_t dup;
    cr_expect_eq(fold_shm_create(&dup, name, 3, 100000), FOLD_ERR_BUSY);

    cr_assert_eq(fold_shm_attach(&b, name, 3), FOLD_OK);
    cr_expect(shm_exists(name), "two of three attached: the name stays");
    cr_expect_eq(fold_shm_attached(&b), 2);
    cr_assert_eq(fold_shm_attach(&c, name, 3), FOLD_OK);
    cr_expect(!shm_exists(name), "every rank attached: the name is gone");
    cr_expect_eq(fold_shm_attached(&a), 3);

    /* One memory behind three mappings; flags cross between them. */
    memcpy(a.data + 4000, "hello", 6);
    cr_expect_str_eq(c.data + 4000, "hello");
    cr_expect_eq(fold_shm_flag_read(&b, 2, 3), 0);
    fold_shm_flag_post(&c, 2, 3, 77);
    cr_expect_eq(fold_shm_flag_read(&a, 2, 3), 77);
    cr_expect(fold_shm_flag_reached(&b, 2, 3, 77));
    cr_expect(!fold_shm_flag_reached(&b, 2, 3, 78));
    cr_expect_eq(fold_shm_flag_wait(&a, 2, 3, 50, 10, 1.0), FOLD_OK);

    fold_shm_detach(&a);
    fold_shm_detach(&b);
    fold_shm_detach(&c);
    cr_expect_null(a.base);
}

Test(shm_segment, attach_checks_the_header)
{
    char name[FOLD_SHM_NAME_MAX];
    unique_name(name, sizeof(name), "header");
    fold_shm_seg_t a, b;
    cr_expect_eq(fold_shm_attach(&b, name, 2), FOLD_ERR_NOT_FOUND);
    cr_assert_eq(fold_shm_create(&a, name, 2, 8192), FOLD_OK);
    cr_expect_eq(fold_shm_attach(&b, name, 5), FOLD_ERR_MALFORMED, "wrong local size");
    fold_shm_unlink(name);
    fold_shm_unlink(name);   /* harmless twice */
    cr_expect(!shm_exists(name));
    fold_shm_detach(&a);
}

/* A header as another local process could write it (segment.c's layout). */
typedef struct test_header {
    uint64_t magic;
    uint32_t version, local_size;
    uint64_t flags_offset, data_offset, data_size;
    uint32_t attached, ready;
} test_header_t;

static int check(void *map, size_t size, int local_size)
{
    fold_shm_seg_t seg;
    memset(&seg, 0, sizeof(seg));
    seg.base = map;
    seg.map_size = size;
    seg.hdr = map;
    char why[256] = "";
    int rc = fold_shm_check_header(&seg, local_size, why, sizeof(why));
    cr_expect((rc == FOLD_OK) == (why[0] == '\0'), "why: '%s'", why);
    return rc;
}

Test(shm_segment, header_offsets_must_lie_inside_the_mapping)
{
    enum { SIZE = 8192 };
    static _Alignas(64) char map[SIZE];
    test_header_t good = {0x6d68732d646c6f66ull, 1, 2, 64, 4096, 4096, 1, 1};
    test_header_t *h = (test_header_t *)map;
    *h = good;
    cr_expect_eq(check(map, SIZE, 2), FOLD_OK);
    cr_expect_eq(check(map, SIZE - 64, 2), FOLD_ERR_MALFORMED, "data past the end");
    cr_expect_eq(check(map, SIZE, 3), FOLD_ERR_MALFORMED, "another local size");
    /* Each field another process could corrupt, one at a time. */
    struct { const char *what; size_t off; uint64_t value; } bad[] = {
        {"flags past the end", offsetof(test_header_t, flags_offset), SIZE},
        {"flags over the header", offsetof(test_header_t, flags_offset), 0},
        {"flags not on a cache line", offsetof(test_header_t, flags_offset), 72},
        {"flags wrap around", offsetof(test_header_t, flags_offset), UINT64_MAX - 63},
        {"data over the flags", offsetof(test_header_t, data_offset), 128},
        {"data not on a cache line", offsetof(test_header_t, data_offset), 4100},
        {"data offset wraps", offsetof(test_header_t, data_offset), UINT64_MAX - 4095},
        {"data size wraps the offset", offsetof(test_header_t, data_size), UINT64_MAX - 4095},
        {"data size not whole lines", offsetof(test_header_t, data_size), 4000},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        *h = good;
        memcpy(map + bad[i].off, &bad[i].value, sizeof(uint64_t));
        cr_expect_eq(check(map, SIZE, 2), FOLD_ERR_MALFORMED, "%s", bad[i].what);
    }
    *h = good;
    h->ready = 0;
    cr_expect_eq(check(map, SIZE, 2), FOLD_ERR_MALFORMED, "not ready");
}

Test(shm_segment, node_check_leaves_room_for_the_resync_fast_and_peer_regions)
{
    fold_shm_seg_t seg = {.local_size = 2};
    size_t extra = fold_node_resync_region_bytes(2) + fold_node_fast_region_bytes(2) +
                   fold_node_peer_region_bytes(2);
    char why[256];
    seg.data_size = extra + 4096;
    cr_expect_eq(fold_node_check_segment(&seg, 4096, why, sizeof(why)), FOLD_OK);
    cr_expect_eq(fold_node_check_segment(&seg, 4097, why, sizeof(why)), FOLD_ERR_MALFORMED);
    seg.data_size = extra - 64;   /* the regions would start before the data */
    cr_expect_eq(fold_node_check_segment(&seg, 0, why, sizeof(why)), FOLD_ERR_MALFORMED);
    cr_expect(strstr(why, "data bytes") != NULL, "%s", why);
}

Test(shm_segment, flag_wait_is_bounded)
{
    char name[FOLD_SHM_NAME_MAX];
    unique_name(name, sizeof(name), "timeout");
    fold_shm_seg_t a;
    cr_assert_eq(fold_shm_create(&a, name, 2, 4096), FOLD_OK);
    fold_shm_unlink(name);
    double t0 = fold_util_time_now();
    cr_expect_eq(fold_shm_flag_wait(&a, 1, 0, 1, 100, 0.2), FOLD_ERR_TIMEOUT);
    double waited = fold_util_time_now() - t0;
    cr_expect(waited >= 0.2 && waited < 5.0, "waited %.2f s", waited);
    fold_shm_detach(&a);
}

/* ---- topology ------------------------------------------------------------------ */

/* The creator of a communicator's segment died between creating it and unlinking it
 * (the fault harness killed it mid-setup): a survivor whose exchange fails removes
 * the segment of that communicator, whatever its nonce, and nothing else. */
static int failing_allgather(void *arg, const void *mine, void *all, size_t bytes)
{
    (void)arg;
    (void)mine;
    (void)all;
    (void)bytes;
    return FOLD_ERR_TIMEOUT;
}

Test(shm_segment, failed_setup_removes_a_dead_creators_segment)
{
    char job[64], dead[FOLD_SHM_NAME_MAX], other[FOLD_SHM_NAME_MAX];
    snprintf(job, sizeof(job), "stale-%d", (int)getpid());
    fold_shm_make_name(dead, sizeof(dead), job, "test-node", 7, 0x0123456789abcdefULL);
    fold_shm_make_name(other, sizeof(other), job, "test-node", 71, 0x0123456789abcdefULL);
    fold_shm_seg_t a, b;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    cr_assert_eq(fold_shm_create(&a, dead, 2, 4096), FOLD_OK);
    cr_assert_eq(fold_shm_create(&b, other, 2, 4096), FOLD_OK);
    fold_shm_detach(&a);
    fold_shm_detach(&b);

    int key[2] = {0, 0};
    fold_node_params_t p = {.rank = 1, .size = 2, .comm_id = 7, .node_key = key,
                            .job_id = job, .node_name = "test-node", .shm_size = 1 << 20,
                            .shm_reserve = SIZE_MAX, .pipeline_depth = 4,
                            .allgather = failing_allgather};
    fold_node_t *node = NULL;
    char why[256] = "";
    cr_expect_neq(fold_node_create(&p, &node, why, sizeof(why)), FOLD_OK);
    cr_expect(!shm_exists(dead), "%s is still there", dead);
    cr_expect(shm_exists(other), "another communicator's %s went too", other);
    fold_shm_unlink(dead);
    fold_shm_unlink(other);
}

Test(shm_topo, nodes_locals_and_leaders_across_sockets)
{
    /* ranks 0..7; node keys interleave; node A (key 5) has ranks 0,2,4,6 on sockets
     * 0,0,1,1; node B (key 9) has ranks 1,3,5 and node C (key 2) rank 7. */
    int key[8] = {5, 9, 5, 9, 5, 9, 5, 2};
    int pkg[8] = {0, 3, 0, 3, 1, 3, 1, -1};
    fold_topo_t *t;
    cr_assert_eq(fold_topo_build(8, key, pkg, &t), FOLD_OK);
    cr_expect_eq(t->nnodes, 3);
    cr_expect_eq(t->min_ppn, 1);
    cr_expect_eq(t->max_ppn, 4);
    int node_of[8] = {0, 1, 0, 1, 0, 1, 0, 2}, local_of[8] = {0, 0, 1, 1, 2, 2, 3, 0};
    for (int r = 0; r < 8; r++) {
        cr_expect_eq(t->node_of[r], node_of[r], "rank %d", r);
        cr_expect_eq(t->local_of[r], local_of[r], "rank %d", r);
        cr_expect_eq(fold_topo_rank(t, node_of[r], local_of[r]), r);
    }
    cr_expect_eq(fold_topo_ppn(t, 1), 3);
    /* Node A alternates sockets: local 0 (s0), 2 (s1), 1 (s0), 3 (s1). */
    int expect_a[4] = {0, 2, 1, 3};
    for (int j = 0; j < 4; j++) {
        cr_expect_eq(fold_topo_leader_local(t, 0, j), expect_a[j], "leader %d", j);
    }
    cr_expect_eq(fold_topo_leader_index(t, 4, 2), 1);    /* rank 4 = local 2 */
    cr_expect_eq(fold_topo_leader_index(t, 2, 2), -1);   /* local 1: third in line */
    cr_expect_eq(fold_topo_leader_index(t, 2, 3), 2);
    cr_expect_eq(fold_topo_leader_index(t, 7, 1), 0);
    fold_topo_free(t);
}

Test(shm_topo, locate_answers_on_this_machine)
{
    int package, numa;
    fold_topo_locate(&package, &numa);
    cr_expect_geq(package, 0, "hwloc should find the package this test runs on");
}

/* ---- layout -------------------------------------------------------------------- */

static fold_coll_args_t layout_args(const fold_topo_t *t, size_t count, int leaders,
                                    size_t shm_count)
{
    fold_coll_args_t a = {.coll = FOLD_COLL_ALLREDUCE, .rank = 0, .size = t->size,
                          .count = count, .seg_count = 1000, .depth = 4, .commutative = 1,
                          .topo = t, .leaders = leaders, .shm_count = shm_count};
    return a;
}

Test(shm_layout, chunks_fit_the_segment_and_cover_the_message)
{
    int key[7] = {0, 0, 0, 1, 1, 2, 2}, pkg[7] = {0, 0, 0, 0, 0, 0, 0};
    fold_topo_t *t;
    cr_assert_eq(fold_topo_build(7, key, pkg, &t), FOLD_OK);
    static const size_t counts[] = {1, 63, 64, 1000, 65537, 10000019};
    for (int pipelined = 0; pipelined <= 1; pipelined++) {
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
            for (int leaders = 1; leaders <= 4; leaders++) {
                fold_coll_args_t a = layout_args(t, counts[c], leaders, 1 << 20);
                fold_dpml_layout_t lay;
                cr_assert_eq(fold_dpml_layout(&a, pipelined, &lay), FOLD_OK);
                cr_expect_eq(lay.leaders, leaders < 2 ? leaders : 2, "capped by min ppn");
                cr_expect(lay.uses_shm);
                cr_expect_eq(lay.chunk_cap, (size_t)lay.leaders * lay.part_cap);
                cr_expect_geq(lay.nchunks * lay.chunk_cap, counts[c]);
                cr_expect_lt((lay.nchunks - 1) * lay.chunk_cap, counts[c]);
                cr_expect_leq((size_t)lay.stages * 3 * lay.chunk_cap, (size_t)1 << 20,
                              "the largest node's rows fit");
                cr_expect_eq(lay.results, 0, "two leaders at most: no result row");
                cr_expect_eq(lay.chunk_cap % 64, 0, "rows of whole lines");
                cr_expect(lay.subparts >= 1 && lay.subparts <= 4);
                cr_expect(pipelined || lay.subparts == 1);
                cr_expect_geq(lay.stages, pipelined ? 4 : 2);
            }
        }
    }
    /* Too small a segment is refused, not overrun. */
    fold_coll_args_t a = layout_args(t, 1000, 2, 5);
    fold_dpml_layout_t lay;
    cr_expect_eq(fold_dpml_layout(&a, 0, &lay), FOLD_ERR_INVALID_ARG);
    fold_topo_free(t);
}

/* Three leaders or more publish side by side in a result row at the end of each
 * stage (alg_dpml.h), which the segment must hold too; a row of 64 parts is whole
 * lines whatever the part (the parts of a wide node are not cut to 64 elements). */
Test(shm_layout, wide_nodes_keep_a_result_row)
{
    int key[64] = {0}, pkg[64] = {0};
    fold_topo_t *t;
    cr_assert_eq(fold_topo_build(64, key, pkg, &t), FOLD_OK);
    static const int leaders[] = {2, 3, 8, 64};
    for (size_t i = 0; i < sizeof(leaders) / sizeof(leaders[0]); i++) {
        fold_coll_args_t a = layout_args(t, (size_t)1 << 24, leaders[i], (size_t)1 << 20);
        fold_dpml_layout_t lay;
        cr_assert_eq(fold_dpml_layout(&a, 0, &lay), FOLD_OK);
        cr_expect_eq(lay.results, leaders[i] >= 3, "%d leaders", leaders[i]);
        cr_expect_leq((size_t)lay.stages * (64 + (size_t)lay.results) * lay.chunk_cap,
                      (size_t)1 << 20, "%d leaders: rows and results fit", leaders[i]);
        cr_expect_eq(lay.chunk_cap % 64, 0, "%d leaders", leaders[i]);
    }
    /* 1 Mi elements over 2 stages of 65 rows of 64 parts: 126 each, not 64. */
    fold_coll_args_t a = layout_args(t, (size_t)1 << 24, 64, (size_t)1 << 20);
    fold_dpml_layout_t lay;
    cr_assert_eq(fold_dpml_layout(&a, 0, &lay), FOLD_OK);
    cr_expect_eq(lay.part_cap, 126);
    fold_topo_free(t);
}

Test(shm_layout, single_rank_nodes_need_no_segment)
{
    int key[3] = {0, 1, 2}, pkg[3] = {0, 0, 0};
    fold_topo_t *t;
    cr_assert_eq(fold_topo_build(3, key, pkg, &t), FOLD_OK);
    fold_coll_args_t a = layout_args(t, 100000, 4, 0);
    fold_dpml_layout_t lay;
    cr_assert_eq(fold_dpml_layout(&a, 0, &lay), FOLD_OK);
    cr_expect(!lay.uses_shm);
    cr_expect_eq(lay.leaders, 1);
    cr_expect_eq(lay.nchunks, 1);
    cr_assert_eq(fold_dpml_layout(&a, 1, &lay), FOLD_OK);
    cr_expect_gt(lay.nchunks, 1, "pipelined: several exchanges in flight");

    /* The schedule of such a rank never touches the segment. */
    fold_sched_t s;
    a.rank  = 1;
    a.inter = &fold_alg_ring;
    fold_sched_init(&s, &a);
    cr_assert_eq(fold_dpml_build(&a, &s, 0), FOLD_OK);
    cr_expect(!s.uses_shm);
    cr_expect_gt(s.nsteps, 0);
    fold_sched_cleanup(&s);
    fold_topo_free(t);
}
