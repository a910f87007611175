#!/usr/bin/env python3
"""DistributedDataParallel on the fold backend against the same training on gloo, in one
process group each: a small model (three linear layers) on synthetic data. Every rank
checks its final parameters against gloo's:
  - float data, DDP's own averaging hook, 8 steps: within float tolerance; bit for bit
    on 2 ranks, where each gradient sum is one (commutative) addition whatever the
    algorithm;
  - integer-valued data and weights (a float64 model, a loss linear in the output,
    learning rate 1) summed by a comm hook through the Work's future: bit for bit on
    any number of ranks, as every value stays an integer below 2^53 so every sum is
    exact in any order (2 steps: a third would pass 2^53).
Small buckets put several of DDP's allreduces in flight at once.
"""
import fold_test_util as util

rank, size = util.init_fold()

import torch                       # noqa: E402 - after the skip check
import torch.distributed as dist   # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP   # noqa: E402

STEPS = {"float": 8, "integer": 2}
c = util.Checker(rank)
gloo = dist.new_group(backend="gloo")
fold_pg = dist.group.WORLD


def make_model(kind):
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 8))
    if kind == "integer":
        model = model.double()
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(torch.randint(-1, 2, p.shape).double())
    return model


def batch(g, kind):
    if kind == "integer":
        return (torch.randint(-1, 2, (16, 32), generator=g).double(),
                torch.randint(-1, 2, (16, 8), generator=g).double())
    return torch.randn(16, 32, generator=g), torch.randn(16, 8, generator=g)


def sum_hook(group, bucket):
    """Gradients summed, not averaged (DDP's default divides by the ranks first)."""
    work = dist.all_reduce(bucket.buffer(), group=group, async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0])


def train(pg, kind):
    model = make_model(kind)
    ddp = DDP(model, process_group=pg, bucket_cap_mb=0.004)   # ~4 buckets
    if kind == "integer":
        ddp.register_comm_hook(pg, sum_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=1.0 if kind == "integer" else 0.01)
    g = torch.Generator().manual_seed(100 + rank)   # each rank its own data
    for _ in range(STEPS[kind]):
        x, y = batch(g, kind)
        out = ddp(x)
        loss = (out * y).sum() if kind == "integer" else ((out - y) ** 2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


for kind in ("float", "integer"):
    seq_before = fold_pg._get_sequence_number_for_group()
    on_fold = train(fold_pg, kind)
    calls = fold_pg._get_sequence_number_for_group() - seq_before
    on_gloo = train(gloo, kind)
    c.check(calls >= STEPS[kind], f"{kind}: fold served {calls} calls for {STEPS[kind]} steps")
    start = [p.detach() for p in make_model(kind).parameters()]
    c.check(all(torch.isfinite(p).all() for p in on_fold) and
            any(not torch.equal(p, q) for p, q in zip(on_fold, start)),
            f"{kind}: training moved the parameters and kept them finite")
    if kind == "integer":
        biggest = max(p.abs().max().item() for p in on_gloo)
        c.check(biggest < 2.0 ** 50 and all(torch.equal(p, p.round()) for p in on_gloo),
                f"integer: parameters stayed integers below 2^50 (largest {biggest:g})")
    for i, (a, b) in enumerate(zip(on_fold, on_gloo)):
        diff = (a - b).abs().max().item()
        if kind == "integer" or size == 2:
            c.check(torch.equal(a, b), f"{kind}: parameter {i} bit for bit: max diff {diff}")
        else:
            c.check(torch.allclose(a, b, rtol=1e-5, atol=1e-6),
                    f"{kind}: parameter {i} within tolerance: max diff {diff}")
    # and every rank holds the same model
    flat = torch.cat([p.flatten() for p in on_fold]).double()
    first = flat.clone()
    dist.broadcast(first, 0)
    c.check(torch.equal(flat, first), f"{kind}: rank {rank}'s model is rank 0's")

dist.destroy_process_group()
c.finish("torch_ddp")
