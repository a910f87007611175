#!/usr/bin/env python3
"""Writes corpus/shm: fuzz_shm inputs holding a valid segment header and the peers'
words of a tiny-message call that can complete (layout of fuzz_shm.c's input; the
region, slot and line layout mirrors node/resync.c, node/fast.c and node/peer.c, so
re-run this when those change). Usage: tests/fuzz/shm_seeds.py"""
import os, struct

MAGIC, VERSION = 0x6d68732d646c6f66, 1
SLOTS, SLOT_BYTES = 8, 2048 + 64            # FOLD_FAST_SLOTS, SLOT_BYTES
RANK_BYTES = SLOTS * SLOT_BYTES + 64        # fast_rank_t
UINT32, SUM = 6, 0                          # fold_dtype_t, fold_op_t


def pack(allreduce, dtype, op, root, count, inplace=0):
    return (allreduce & 1) | (inplace & 1) << 1 | (dtype & 0x3f) << 2 | (op & 0xffff) << 8 \
        | (root & 0xfffff) << 24 | (count & 0xfffff) << 44


def seed(local_size, me, allreduce, calls, epoch, count, shm_bytes=4096, words=True,
         resync=None):
    resync_bytes = 64 + local_size * 64      # node/resync.c's region, before the others
    extra = resync_bytes + local_size * RANK_BYTES + local_size * 64
    flags_off = 64
    data_off = flags_off + local_size * 64
    data_size = shm_bytes + extra
    map_size = data_off + data_size
    ctl = (local_size - 1) | me << 3 | allreduce << 6
    out = struct.pack('<BQQIIH', ctl, calls, epoch, shm_bytes, map_size, count)
    hdr = struct.pack('<QIIQQQII', MAGIC, VERSION, local_size, flags_off, data_off,
                      data_size, local_size, 1)
    out += hdr + bytes(64 - len(hdr))
    if not words:
        return out
    region = bytearray(extra)
    if resync is not None:   # a request for position `resync`, every record in (slot 0)
        struct.pack_into('<Q', region, 0, resync << 1)
        for l in range(local_size):
            struct.pack_into('<QQQQQQQQ', region, 64 + l * 64, resync, 0, epoch, 0,
                             resync - epoch, 0, 0, 0)
    k = calls + 1
    b = k % SLOTS
    call = pack(allreduce, UINT32, SUM, 0, count) | ((epoch + k) & 0xff) << 56  # position
    for l in range(local_size):
        base = resync_bytes + l * RANK_BYTES + b * SLOT_BYTES
        struct.pack_into('<QQ', region, base, k, call)
        for i in range(count):
            struct.pack_into('<I', region, base + 16 + 4 * i, l * 1000 + i)
        struct.pack_into('<Q', region, resync_bytes + l * RANK_BYTES + SLOTS * SLOT_BYTES,
                         calls)  # done
        line = resync_bytes + local_size * RANK_BYTES + l * 64
        struct.pack_into('<QQQQQ', region, line, epoch, 0x1000 * (l + 1), 0x2000 * (l + 1),
                         count, pack(allreduce, UINT32, SUM, 0, 0))
    return out + bytes(region)


here = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'corpus', 'shm')
os.makedirs(here, exist_ok=True)
seeds = {
    'allreduce_2ranks': seed(2, 0, 1, 0, 5, 16),
    'reduce_3ranks_root': seed(3, 0, 0, 9, 2, 7),
    'reduce_3ranks_leaf': seed(3, 2, 0, 3, 2, 1),
    'allreduce_2ranks_max_count': seed(2, 1, 1, 16, 1, 512),
    'header_only': seed(4, 1, 1, 0, 1, 4, words=False),
    'resync_agreed_3ranks': seed(3, 1, 1, 6, 2, 8, resync=8),
}
for name, data in seeds.items():
    with open(os.path.join(here, name), 'wb') as f:
        f.write(data)
