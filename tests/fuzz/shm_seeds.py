#!/usr/bin/env python3
"""Writes corpus/shm: fuzz_shm inputs holding a valid segment header and the peers'
words of a tiny-message call that can complete (layout of fuzz_shm.c's input; the
region, slot and line layout mirrors node/resync.c, node/fast.c and node/peer.c, so
re-run this when those change). Usage: tests/fuzz/shm_seeds.py"""
import os, struct

MAGIC, VERSION = 0x6d68732d646c6f66, 1
SLOTS, LINES, LINE_DATA = 8, 16, 48         # FOLD_FAST_SLOTS, LINED_LINES, LINE_DATA
UINT32, SUM = 6, 0                          # fold_dtype_t, fold_op_t


def fast_limit(local_size):                 # fold_node_fast_limit
    limit = 65536
    while limit > 4096 and local_size * SLOTS * limit > 1 << 20:
        limit //= 2
    return limit


def slot_bytes(local_size):                 # the lines, then a tail of the limit
    return LINES * 64 + fast_limit(local_size)


def rank_bytes(local_size):                 # the slots, then the done line
    return SLOTS * slot_bytes(local_size) + 64


def pack(allreduce, dtype, op, root, count, inplace=0):   # fold_fingerprint_pack
    return (allreduce & 1) | (inplace & 1) << 1 | (dtype & 0x1fff) << 2 | (op & 0x1ff) << 15 \
        | (root & 0xfffff) << 24 | (count & 0xfffff) << 44


def call_word(allreduce, dtype, op, root, count, pos):    # node/fast.c's call_word
    return (pack(allreduce, dtype, op, 0, 0) & 0xffffff) | (root & 0xfff) << 24 \
        | (count & 0xfffff) << 36 | (pos & 0xff) << 56


def seed(local_size, me, allreduce, calls, epoch, count, shm_bytes=4096, words=True,
         resync=None):
    resync_bytes = 64 + local_size * 64      # node/resync.c's region, before the others
    RANK_BYTES, SLOT_BYTES = rank_bytes(local_size), slot_bytes(local_size)
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
    call = call_word(allreduce, UINT32, SUM, 0, count, epoch + k)
    lined = 4 * count <= LINES * LINE_DATA
    for l in range(local_size):
        base = resync_bytes + l * RANK_BYTES + b * SLOT_BYTES
        struct.pack_into('<QQ', region, base, k, call)
        for i in range(count):   # 48 B a line behind its seq, or the tail
            at = base + (i * 4 // LINE_DATA) * 64 + 16 + i * 4 % LINE_DATA if lined \
                else base + LINES * 64 + 4 * i
            struct.pack_into('<I', region, at, l * 1000 + i)
        for j in range(1, (4 * count + LINE_DATA - 1) // LINE_DATA if lined else 1):
            struct.pack_into('<Q', region, base + j * 64, k)
        struct.pack_into('<Q', region, resync_bytes + l * RANK_BYTES + SLOTS * SLOT_BYTES,
                         calls)  # done
        line = resync_bytes + local_size * RANK_BYTES + l * 64
        struct.pack_into('<QQQQQ', region, line, epoch, 0x1000 * (l + 1), 0x2000 * (l + 1),
                         count, pack(allreduce, UINT32, SUM, 0, 0))
    # The region as patches (fuzz_shm.c): each run of 64-byte lines holding a non-zero
    # byte, so that a seed stays a few KiB.
    lines = [i for i in range(0, extra, 64) if any(region[i:i + 64])]
    while lines:
        first = last = lines.pop(0)
        while lines and lines[0] == last + 64 and last + 128 - first <= 0xffff:
            last = lines.pop(0)
        chunk = bytes(region[first:min(last + 64, extra)])
        out += struct.pack('<IH', first, len(chunk)) + chunk
    return out


here = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'corpus', 'shm')
os.makedirs(here, exist_ok=True)
seeds = {
    'allreduce_2ranks': seed(2, 0, 1, 0, 5, 16),
    'reduce_3ranks_root': seed(3, 0, 0, 9, 2, 7),
    'reduce_3ranks_leaf': seed(3, 2, 0, 3, 2, 1),
    'allreduce_2ranks_lined_max': seed(2, 1, 1, 16, 1, 192),
    'allreduce_2ranks_tail': seed(2, 1, 1, 16, 1, 2000),
    'reduce_8ranks_tail': seed(8, 0, 0, 5, 1, 300),
    'header_only': seed(4, 1, 1, 0, 1, 4, words=False),
    'resync_agreed_3ranks': seed(3, 1, 1, 6, 2, 8, resync=8),
}
for name, data in seeds.items():
    with open(os.path.join(here, name), 'wb') as f:
        f.write(data)
