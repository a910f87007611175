#!/usr/bin/env python3
"""Runs NP ranks of a Python script under torch's env:// rendezvous, as torchrun would
(MASTER_ADDR/MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE), without a
launcher: fold then bootstraps over the c10d Store.

Usage: launch_env.py NP SCRIPT [ARGS...]
       launch_env.py --torchrun NP SCRIPT [ARGS...]   torchrun starts the ranks, on a free
                                                      port (its --standalone takes 29400)
Exit status: 0 when every rank passed, 77 when every rank skipped, else the first
failure's (a rank that fails stops the others). Each rank's output is printed with its
rank in front.
"""
import os
import socket
import subprocess
import sys
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(np_: int, script: str, args) -> int:
    try:
        import torch.distributed.run   # noqa: F401 - only whether it is there
    except ImportError:
        print("SKIPPED: python3-torch is not installed (no torchrun)")
        return 77
    # --redirects 1 --tee 1: torch 1.13's default "0" parses to None on Python 3.11
    # (IntFlag iteration skips 0) and torchrun fails before starting a rank.
    return subprocess.call([sys.executable, "-m", "torch.distributed.run", "--nnodes", "1",
                            "--nproc_per_node", str(np_), "--redirects", "1", "--tee", "1",
                            "--master_addr", "127.0.0.1",
                            "--master_port", str(free_port()), script, *args])


def main() -> int:
    if sys.argv[1] == "--torchrun":
        return torchrun(int(sys.argv[2]), sys.argv[3], sys.argv[4:])
    np_, script, args = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    timeout = float(os.environ.get("FOLD_TEST_TIMEOUT", "600"))
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               WORLD_SIZE=str(np_), LOCAL_WORLD_SIZE=str(np_))
    ranks = []
    for r in range(np_):
        rank_env = dict(env, RANK=str(r), LOCAL_RANK=str(r))
        ranks.append(subprocess.Popen([sys.executable, script, *args], env=rank_env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    deadline = time.monotonic() + timeout
    codes = [None] * np_
    while None in codes:
        for r, p in enumerate(ranks):
            if codes[r] is None:
                codes[r] = p.poll()
        failed = [c for c in codes if c not in (None, 0, 77)]
        if failed or time.monotonic() > deadline:
            for p in ranks:
                if p.poll() is None:
                    p.kill()
            if not failed:
                print(f"launch_env: timed out after {timeout:.0f} s")
                codes = [c if c is not None else 124 for c in codes]
            break
        time.sleep(0.05)
    for r, p in enumerate(ranks):
        out = p.communicate()[0]
        codes[r] = p.returncode if codes[r] is None else codes[r]
        for line in out.splitlines():
            print(f"[{r}] {line}")
    if all(c == 77 for c in codes):
        return 77
    bad = [c for c in codes if c != 0]
    return bad[0] if bad else 0


if __name__ == "__main__":
    sys.exit(main())
