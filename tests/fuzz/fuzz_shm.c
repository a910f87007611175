/*
 * libFuzzer target for what fold reads from the node segment, which any local
 * process of the user can write (node/segment.c, node/setup.c, node/fast.c,
 * node/peer.c). Input, little-endian:
 *
 *   0   control: bits 0-2 local ranks - 1, bits 3-5 this rank's local index,
 *       bit 6 allreduce (else a reduce to local rank 0)
 *   1   u64 tiny-message calls this rank made      9   u64 its node-aware epoch
 *   17  u32 schedule bytes the creator recorded    21  u32 the mapping's size
 *   25  u16 elements (uint32) of the tiny call, below the node's limit
 *   27  64 bytes: the segment header
 *   91  patches of the words at the end of the data area -- the resync region
 *       (request word, records), the tiny-message slots (sequence numbers,
 *       fingerprints, data, `done`) and the single-copy lines -- each
 *       | u32 offset from their start | u16 length | length bytes |, clipped to them
 *       (the slots of 8 ranks take 2.2 MB, nearly all zeros)
 *
 * The mapping is a heap block of exactly its size, so ASan sees any access outside.
 * A header fold_shm_check_header accepts must give flags and data inside it;
 * fold_node_check_segment must leave room for the regions past the schedules'
 * bytes; then the readers of peers' words (fold_node_fast_peer_ahead,
 * fold_node_peer_check, fold_node_peer_started, fold_node_resync_poll and _join,
 * fold_node_fast_reduction) must stay inside the mapping and end with a status,
 * never a crash or a loop.
 */
#include "fingerprint.h"
#include "log.h"
#include "node/node.h"

#include <fold/fold_status.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PREFIX     27
#define HDR        64
#define MAX_MAP    (1u << 22)   /* 2 ranks' tiny-message slots: 1.1 MB */

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_shm: invariant broken: %s\n", what);
    abort();
}

static uint64_t get(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) {
        v = v << 8 | p[i];
    }
    return v;
}

/* One topology per local size: every rank on one node, one package. */
static fold_topo_t *topo_of(int local_size)
{
    static fold_topo_t *topos[8];
    if (topos[local_size - 1] == NULL) {
        int zeros[8] = {0};
        if (fold_topo_build(local_size, zeros, zeros, &topos[local_size - 1]) != FOLD_OK) {
            abort();
        }
    }
    return topos[local_size - 1];
}

/* What each reader makes of the peers' words. */
static void run_readers(fold_node_t *node, const uint8_t *ctl, size_t count)
{
    char why[256];
    for (int l = 0; l < node->seg.local_size; l++) {
        fold_fingerprint_t theirs, mine = {0};
        char line[512] = "";
        if (fold_node_fast_peer_ahead(node, l, &theirs)) {
            fold_fingerprint_diff(&theirs, l, &mine, node->comm_rank, line, sizeof(line));
        }
        if (fold_node_peer_started(node, l, &theirs)) {
            fold_fingerprint_diff(&theirs, l, &mine, node->comm_rank, line, sizeof(line));
        }
        why[0] = '\0';
        int rc = fold_node_peer_check(node, l, node->epoch, why, sizeof(why));
        if (rc != FOLD_OK && rc != FOLD_ERR_MISMATCH) {
            fail("peer_check gave another status than ok or mismatch");
        }
    }
    int rc = fold_node_resync_poll(node, node->epoch + node->fast_calls, why, sizeof(why));
    if (rc != FOLD_OK && rc != FOLD_INPROGRESS && rc != FOLD_ERR_MISMATCH &&
        rc != FOLD_ERR_PEER_FAILED) {
        fail("resync_poll gave another status than ok, in progress, mismatch or peer failed");
    }
    if (fold_node_resync_pending(node)) {
        rc = fold_node_resync_join(node, "fuzz", 0, 0);
        if (rc != FOLD_OK && rc != FOLD_ERR_MISMATCH && rc != FOLD_ERR_PEER_FAILED &&
            rc != FOLD_ERR_TIMEOUT) {
            fail("resync_join gave another status than ok, mismatch, peer failed or timeout");
        }
    }
    uint32_t in[FOLD_FAST_MAX_BYTES / 4], out[FOLD_FAST_MAX_BYTES / 4];
    memset(in, 1, sizeof(in));
    memset(out, 0, sizeof(out));
    fold_node_call_t call = {
        .allreduce = (*ctl >> 6) & 1, .coll_name = "fuzz", .in = in, .out = out,
        .count = count, .dtype = FOLD_UINT32, .op = FOLD_OP_SUM, .root = 0,
        .timeout_sec = 0, .spin_count = 0, .thread_threshold = SIZE_MAX};
    rc = fold_node_fast_reduction(node, &call);
    if (rc != FOLD_OK && rc != FOLD_ERR_TIMEOUT && rc != FOLD_ERR_MISMATCH) {
        fail("the tiny-message path gave another status than ok, timeout or mismatch");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < PREFIX + HDR) {
        return 0;
    }
    fold_log_level = -1;   /* timeouts and refusals are expected: not their messages */
    const int local_size = (data[0] & 7) + 1;
    size_t map_size = get(data + 21, 4) % MAX_MAP;
    map_size = map_size < HDR ? HDR : map_size;
    char *map = malloc(map_size);
    if (map == NULL) {
        abort();
    }
    memset(map, 0, map_size);
    memcpy(map, data + PREFIX, HDR);

    fold_shm_seg_t seg;
    memset(&seg, 0, sizeof(seg));
    seg.base = map;
    seg.map_size = map_size;
    seg.hdr = (fold_shm_header_t *)map;
    char why[256];
    if (fold_shm_check_header(&seg, local_size, why, sizeof(why)) != FOLD_OK) {
        if (seg.flags != NULL || seg.data != NULL) {
            fail("refused a header but set views");
        }
        free(map);
        return 0;
    }
    /* Every flag and every data byte lies in the mapping (ASan checks the reads). */
    uint64_t sum = 0;
    for (int l = 0; l < seg.local_size; l++) {
        for (int f = 0; f < FOLD_SHM_NFLAGS; f++) {
            sum += fold_shm_flag_read(&seg, l, f);
        }
    }
    if (seg.data_size > 0) {
        sum += (unsigned char)seg.data[0] + (unsigned char)seg.data[seg.data_size - 1];
    }
    if (sum != 0 && seg.local_size < 0) {
        fail("unreachable");   /* keeps the reads */
    }

    size_t shm_bytes = get(data + 17, 4);
    if (fold_node_check_segment(&seg, shm_bytes, why, sizeof(why)) != FOLD_OK) {
        free(map);
        return 0;
    }
    /* The peers' words: at the end of the data area, past the schedules' bytes. */
    size_t extra = fold_node_resync_region_bytes(local_size) +
                   fold_node_fast_region_bytes(local_size) +
                   fold_node_peer_region_bytes(local_size);
    char *words = seg.data + seg.data_size - extra;
    for (size_t at = PREFIX + HDR; at + 6 <= size;) {
        size_t off = get(data + at, 4), len = get(data + at + 4, 2);
        at += 6;
        len = len < size - at ? len : size - at;
        if (off < extra) {
            memcpy(words + off, data + at, len < extra - off ? len : extra - off);
        }
        at += len;
    }

    fold_node_t node;
    memset(&node, 0, sizeof(node));
    node.topo = topo_of(local_size);
    node.seg = seg;
    node.local_rank = (data[0] >> 3 & 7) % local_size;
    node.comm_rank = node.local_rank;
    node.comm_size = local_size;
    node.shm_bytes = shm_bytes;
    node.fast_calls = get(data + 1, 8);
    node.epoch = get(data + 9, 8);
    node.fast_pos = node.epoch;
    fold_node_resync_init(&node);
    fold_node_fast_init(&node);
    size_t count = get(data + 25, 2) % (node.fast_limit / 4);   /* below the limit */
    run_readers(&node, data, count);
    free(map);
    return 0;
}
