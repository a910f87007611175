#!/usr/bin/env python3
"""Every collective the fold backend serves, x dtype x op x count, sync and async, in
place as torch does it, against a reference every rank computes from all ranks' known
inputs; then what it refuses (each error must name the operation) and what it
delegates. One launch per rank count: mpirun -n N, or launch_env.py N.

Inputs are small integers (bit patterns for the bitwise ops), so every partial result
is exact in every dtype and sums, products, minima and maxima must match bit for bit;
AVG divides after the exact sum and is compared within the dtype's rounding.
"""
import functools
import os
import sys
import zlib

import fold_test_util as util

rank, size = util.init_fold()

import torch                       # noqa: E402 - after the skip check
import torch.distributed as dist   # noqa: E402

R = dist.ReduceOp
INTS = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
COMPLEX = [torch.complex64, torch.complex128]
# 0; the tiny path; past the 2 KiB below which calls run blocking; many segments.
COUNTS = [0, 1, 7, 3000, 70001]
OP_NAMES = ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"]


def op_name(op):
    return next(n for n in OP_NAMES if getattr(R, n) == op)


def ops_for(dtype, coll):
    if dtype in INTS:
        return [R.SUM, R.PRODUCT, R.MIN, R.MAX, R.BAND, R.BOR, R.BXOR]
    if dtype in FLOATS:
        return [R.SUM, R.AVG, R.PRODUCT, R.MIN, R.MAX]
    # torch's all_reduce passes complex tensors as real pairs (view_as_real) and refuses
    # PRODUCT on them itself; its reduce passes them as they are.
    return [R.SUM, R.AVG] if coll == "all_reduce" else [R.SUM, R.AVG, R.PRODUCT]


def value_range(dtype, op):
    if op in (R.BAND, R.BOR, R.BXOR):
        if dtype == torch.uint8:
            return 0, 255
        bits = torch.iinfo(dtype).bits
        return -(1 << (bits - 2)), 1 << (bits - 2)
    if op == R.PRODUCT:
        return (0, 3) if dtype == torch.uint8 else (-2, 2)
    if op in (R.MIN, R.MAX):
        return (0, 255) if dtype == torch.uint8 else (-100, 100)
    return (0, 6) if dtype == torch.uint8 else (-3, 3)


def rank_input(r, dtype, op, count, salt):
    """Rank r's input, which every rank can compute."""
    seed = zlib.crc32(f"{r} {dtype} {op_name(op)} {count} {salt}".encode())
    g = torch.Generator().manual_seed(seed)
    lo, hi = value_range(dtype, op)
    if dtype in COMPLEX:
        re = torch.randint(lo, hi + 1, (count,), generator=g).double()
        im = torch.randint(lo, hi + 1, (count,), generator=g).double()
        return torch.complex(re, im).to(dtype)
    return torch.randint(lo, hi + 1, (count,), generator=g, dtype=torch.int64).to(dtype)


def reference(inputs, dtype, op):
    """The reduction of every rank's input in rank order, computed here."""
    wide = torch.complex128 if dtype in COMPLEX else \
        torch.float64 if dtype in FLOATS else dtype
    xs = [x.to(wide) for x in inputs]
    fn = {R.SUM: torch.add, R.AVG: torch.add, R.PRODUCT: torch.mul, R.MIN: torch.minimum,
          R.MAX: torch.maximum, R.BAND: torch.bitwise_and, R.BOR: torch.bitwise_or,
          R.BXOR: torch.bitwise_xor}[op]
    out = functools.reduce(fn, xs)
    if op == R.AVG:
        out = out / len(inputs)
    return out.to(dtype)


def same(got, want, dtype, op):
    if op == R.AVG:
        return torch.allclose(got.to(torch.complex128 if dtype in COMPLEX else torch.float64),
                              want.to(torch.complex128 if dtype in COMPLEX else torch.float64),
                              rtol=torch.finfo(got.real.dtype).eps * 2, atol=0)
    return torch.equal(got, want)


def describe(got, want):
    bad = (got != want).nonzero()
    if len(bad) == 0:
        return "values differ within rounding tolerance"
    i = int(bad[0][0])
    return f"{len(bad)} elements differ, first [{i}]: got {got[i].item()}, want {want[i].item()}"


c = util.Checker(rank)
case_no = 0
world = dist.distributed_c10d._get_default_group()
c.check(dist.get_backend() == "fold" and world._get_backend_name() == "fold", "the backend is fold")
if len(sys.argv) > 1:
    c.check(world.bootstrap == sys.argv[1], f"fold bootstrapped by {world.bootstrap}")


def finish_async(work, style):
    """Waits the way `style` says: wait(), polling is_completed(), or the future."""
    if style == "future":
        value = work.get_future().wait()
        c.check(isinstance(value, list) and len(value) == 1, "future's value is [tensor]")
    elif style == "poll":
        while not work.is_completed():
            pass
        work.wait()
    else:
        work.wait()
    c.check(work.is_completed(), f"is_completed() after {style}")


# A second fold group of the whole job, without a delegate, made before the first one
# reached any peer: its own context, bootstrapped as the first was (through PMIx under
# mpirun, over the store under env://), must not take the first one's peers or keys.
os.environ["FOLD_TORCH_DELEGATE"] = "none"
group = dist.new_group(backend="fold")
del os.environ["FOLD_TORCH_DELEGATE"]
c.check(group.bootstrap == world.bootstrap,
        f"a second fold group bootstrapped by {group.bootstrap}, the first by {world.bootstrap}")
for g in (None, group):
    t = torch.full((5000,), float(rank + 1))
    dist.all_reduce(t, group=g)
    c.check(torch.equal(t, torch.full((5000,), float(size * (size + 1) // 2))),
            f"all_reduce on the {'second' if g else 'first'} fold group")

# allreduce and reduce: one batch per (dtype, count, mode); an async batch starts every
# call before waiting for any, and waits for them last first.
def start_reduction(coll, dtype, op, count, mode, root):
    """Starts one call; returns (work, tensor, expected, description, op to compare as)."""
    inputs = [rank_input(r, dtype, op, count, coll) for r in range(size)]
    t = inputs[rank].clone()
    if coll == "all_reduce":
        w = dist.all_reduce(t, op=op, async_op=mode == "async")
    else:
        w = dist.reduce(t, root, op=op, async_op=mode == "async")
    what = f"{coll} {dtype} {op_name(op)} count {count} {mode} root {root}"
    if coll == "reduce" and rank != root:
        return w, t, inputs[rank], what, R.SUM   # non-roots keep their input exactly
    return w, t, reference(inputs, dtype, op), what, op


for dtype in INTS + FLOATS + COMPLEX:
    for count in COUNTS:
        for mode in ("sync", "async"):
            pending = []
            for coll in ("all_reduce", "reduce"):
                for op in ops_for(dtype, coll):
                    case_no += 1
                    pending.append(start_reduction(coll, dtype, op, count, mode,
                                                   case_no % size))
            for i, (w, t, want, what, op) in enumerate(reversed(pending)):
                if mode == "async":
                    finish_async(w, ("wait", "poll", "future")[i % 3])
                ok = same(t, want, dtype, op)
                c.check(ok, f"{what}: {'' if ok else describe(t, want)}")

# broadcast: any dtype (bool too), every root.
for dtype in [torch.bool] + INTS + FLOATS + COMPLEX:
    for count in COUNTS:
        for root in range(size):
            for mode in ("sync", "async"):
                src = rank_input(root, torch.int64 if dtype == torch.bool else dtype,
                                 R.MAX, count, "bcast")
                src = src > 0 if dtype == torch.bool else src
                t = src.clone() if rank == root else torch.zeros(count, dtype=dtype)
                w = dist.broadcast(t, root, async_op=mode == "async")
                if mode == "async":
                    finish_async(w, "wait")
                c.check(torch.equal(t, src), f"broadcast {dtype} count {count} root {root} {mode}")

# barrier, sync and async
dist.barrier()
w = dist.barrier(async_op=True)
w.wait()
c.check(w.is_completed(), "barrier async completes")

# What fold refuses, before any communication, naming the operation.
x = torch.zeros(4, 4)
c.raises(lambda: dist.all_reduce(x[:, 0]), RuntimeError, ["all_reduce", "contiguous"],
         "non-contiguous all_reduce")
c.raises(lambda: dist.reduce(x[:, 0], 0), RuntimeError, ["reduce", "contiguous"],
         "non-contiguous reduce")
c.raises(lambda: dist.broadcast(x[:, 0], 0), RuntimeError, ["broadcast", "contiguous"],
         "non-contiguous broadcast")
# Other devices: torch 1.13's dispatcher has c10d kernels for CPU and CUDA only, so a
# meta tensor is refused before the backend (a CUDA one would reach fold's check).
c.raises(lambda: dist.all_reduce(torch.empty(4, device="meta")), RuntimeError,
         ["allreduce"], "non-CPU all_reduce")
c.raises(lambda: dist.all_reduce(torch.ones(4, dtype=torch.bool)), RuntimeError,
         ["all_reduce", "dtype"], "bool all_reduce")
c.raises(lambda: dist.all_reduce(torch.ones(4), op=R.BAND), RuntimeError,
         ["all_reduce", "bitwise"], "BAND on float32")
c.raises(lambda: dist.reduce(torch.ones(4, dtype=torch.int32), 0, op=R.AVG), RuntimeError,
         ["reduce", "AVG"], "AVG on int32")
c.raises(lambda: dist.reduce(torch.ones(4, dtype=torch.complex64), 0, op=R.MAX),
         RuntimeError, ["reduce", "MAX"], "MAX on complex64")

# What it delegates (to gloo, by default): all_gather's result checked.
out = [torch.zeros(3) for _ in range(size)]
dist.all_gather(out, torch.full((3,), float(rank)))
c.check(all(torch.equal(o, torch.full((3,), float(r))) for r, o in enumerate(out)),
        "all_gather delegated to gloo")

# The second group (made first thing) refuses all_gather by name: it has no delegate.
c.raises(lambda: dist.all_gather(out, torch.zeros(3), group=group), NotImplementedError,
         ["all_gather", "fold"], "all_gather without a delegate")

dist.destroy_process_group(group)
dist.destroy_process_group()
c.finish("torch_collectives")
