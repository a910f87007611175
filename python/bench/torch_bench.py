#!/usr/bin/env python3
"""torch.distributed.all_reduce latency, 8 B to 64 MiB of float32, and DDP step time,
on the fold backend and on gloo (and mpi where this torch has it), side by side in one
run: for each size every backend takes its turn, repeatedly (in turn forwards and
backwards, each turn after a tenth of its calls untimed, as one backend's threads can
disturb the next for a while), so drift on a shared machine hits them alike; DDP steps
take turns step by step. Rank 0 prints markdown tables: the median over the
repetitions of each repetition's mean time per call, and the median step.

    mpirun --allow-run-as-root -n 2 -x PYTHONPATH=build/python \\
        python3 python/bench/torch_bench.py [--reps 7] [--max-bytes 64M]
    # or ranks started by hand / torchrun with MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE

Each process runs torch with one thread (as torchrun sets OMP_NUM_THREADS=1). The DDP
table's "no comm" column is the same model stepped without DDP in the same turns: the
compute every backend pays, and a gauge of how much the machine's load moved.
"""
import argparse
import os
import statistics
import time

import fold  # noqa: F401 - registers the backend
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def parse_bytes(text: str) -> int:
    units = {"k": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def human(n: int) -> str:
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n // size} {unit}"
    return f"{n} B"


def time_calls(fn, calls: int) -> float:
    """Mean seconds per call of `calls` calls, the ranks starting together, after a
    tenth as many untimed."""
    for _ in range(max(1, calls // 10)):
        fn()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def allreduce_table(groups, sizes, reps):
    rows = []
    for nbytes in sizes:
        t = torch.ones(max(nbytes // 4, 1), dtype=torch.float32)
        calls = max(3, min(2000, (64 << 20) // max(nbytes, 1) // 8))
        times = {name: [] for name in groups}
        for name, g in groups.items():   # warm up: connections, scratch, caches
            for _ in range(3):
                dist.all_reduce(t, group=g)
        for rep in range(reps):
            turns = list(groups.items())
            for name, g in turns if rep % 2 == 0 else reversed(turns):
                times[name].append(time_calls(lambda: dist.all_reduce(t, group=g), calls))
        rows.append((nbytes, {n: statistics.median(v) for n, v in times.items()}))
    return rows


def make_model(width: int, depth: int):
    torch.manual_seed(0)
    layers = []
    for _ in range(depth - 1):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, 8))


def ddp_stepper(group, width, depth, batch):
    """One training step of a DDP model of its own over group (None: the model alone,
    no communication: the compute the others share, timed in the same turns)."""
    ddp = make_model(width, depth) if group is None else \
        DDP(make_model(width, depth), process_group=group)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.001)
    x, y = torch.randn(batch, width), torch.randn(batch, 8)

    def step():
        opt.zero_grad()
        ((ddp(x) - y) ** 2).sum().backward()
        opt.step()
    return step


def ddp_step_times(groups, width, depth, batch, steps, reps):
    """Median seconds per step: the backends take turns step by step (drift on a shared
    machine moves compute 3x within seconds here), each step started together."""
    steppers = {name: ddp_stepper(g, width, depth, batch) for name, g in groups.items()}
    for step in steppers.values():
        for _ in range(3):
            step()
    times = {name: [] for name in groups}
    turns = list(steppers.items())
    for i in range(steps * reps):
        for name, step in turns[i % len(turns):] + turns[:i % len(turns)]:
            dist.barrier()
            start = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(v) for name, v in times.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--min-bytes", default="8")
    ap.add_argument("--max-bytes", default="64M")
    ap.add_argument("--steps", type=int, default=20, help="DDP steps per repetition")
    ap.add_argument("--variants", action="store_true",
                    help="also fold with every call blocking and every call on a request "
                         "(FOLD_TORCH_BLOCKING_MAX=inf and 0), for the all_reduce table")
    ap.add_argument("--no-ddp", action="store_true", help="the all_reduce table only")
    args = ap.parse_args()
    torch.set_num_threads(1)

    dist.init_process_group("fold")
    rank, size = dist.get_rank(), dist.get_world_size()
    groups = {"fold": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    if dist.is_mpi_available():
        groups["mpi"] = dist.new_group(backend="mpi")
    names = list(groups)
    if args.variants:
        for name, value in (("fold-blocking", "inf"), ("fold-requests", "0")):
            os.environ["FOLD_TORCH_BLOCKING_MAX"] = value
            groups[name] = dist.new_group(backend="fold")
        del os.environ["FOLD_TORCH_BLOCKING_MAX"]

    sizes, n = [], parse_bytes(args.min_bytes)
    while n <= parse_bytes(args.max_bytes):
        sizes.append(n)
        n *= 4 if n < 64 else 2 if n >= (8 << 20) else 4
    rows = allreduce_table(groups, sizes, args.reps)

    # The test's model, and a wider one whose gradients weigh more; Debian's torch does
    # its matrix products on the reference BLAS, so compute is slow here.
    models = [("3 x Linear(64) (tests/python/torch_ddp.py), batch 16", 64, 3, 16),
              ("4 x Linear(256), batch 32", 256, 4, 32)]
    ddp_rows = []
    ddp_groups = {name: groups[name] for name in names}
    ddp_groups["no comm"] = None
    for label, width, depth, batch in [] if args.no_ddp else models:
        ddp_rows.append((label, ddp_step_times(ddp_groups, width, depth, batch, args.steps,
                                               args.reps)))

    if rank == 0:
        table_names = list(groups)
        others = [n for n in table_names if n != "fold"]
        print(f"# torch {torch.__version__}, {size} ranks, float32 SUM; median of "
              f"{args.reps} repetitions; times in us")
        print("| size | " + " | ".join(table_names) + " | " +
              " | ".join(f"{o} / fold" for o in others) + " |")
        print("|---" * (1 + len(table_names) + len(others)) + "|")
        for nbytes, med in rows:
            cells = [f"{med[n] * 1e6:.1f}" for n in table_names]
            ratios = [f"{med[o] / med['fold']:.2f}x" for o in others]
            print(f"| {human(nbytes)} | " + " | ".join(cells + ratios) + " |")
        others = [n for n in names if n != "fold"]
        if ddp_rows:
            print(f"\n# DDP step (forward, backward with allreduce, SGD): the median of "
                  f"{args.steps * args.reps} steps, the backends taking turns step by step; ms")
            print("| model | " + " | ".join(names + ["no comm"]) + " | " +
                  " | ".join(f"{o} / fold" for o in others) + " |")
            print("|---" * (2 + len(names) + len(others)) + "|")
        for label, med in ddp_rows:
            cells = [f"{med[n] * 1e3:.2f}" for n in names + ["no comm"]]
            ratios = [f"{med[o] / med['fold']:.2f}x" for o in others]
            print(f"| {label} | " + " | ".join(cells + ratios) + " |")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
