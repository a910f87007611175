#!/usr/bin/env python3
"""mpi4py's Allreduce and Reduce on numpy arrays, every dtype x op the MPI shim serves,
checked on every rank against numpy's reduction of all ranks' known inputs. Run by
tests/mpi/shim_run.sh without and with LD_PRELOAD=libfold-mpi.so: it compares this
program's "digest:" line between the two runs and the shim's call totals with the
"expect:" line (every call served by fold).
"""
import hashlib
import sys
import zlib

try:
    import numpy as np
    from mpi4py import MPI
except ImportError as e:
    print(f"SKIPPED: {e.name} is not installed (python3-numpy, python3-mpi4py)")
    sys.exit(77)

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()

INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
OPS = {
    "SUM": (MPI.SUM, np.add), "PROD": (MPI.PROD, np.multiply),
    "MIN": (MPI.MIN, np.minimum), "MAX": (MPI.MAX, np.maximum),
    "BAND": (MPI.BAND, np.bitwise_and), "BOR": (MPI.BOR, np.bitwise_or),
    "BXOR": (MPI.BXOR, np.bitwise_xor), "LAND": (MPI.LAND, np.logical_and),
    "LOR": (MPI.LOR, np.logical_or), "LXOR": (MPI.LXOR, np.logical_xor),
}
CASES = [(t, op) for t in INTS for op in OPS] + \
        [(t, op) for t in (np.float32, np.float64) for op in ("SUM", "PROD", "MIN", "MAX")] + \
        [(t, op) for t in (np.complex64, np.complex128) for op in ("SUM", "PROD")] + \
        [(np.bool_, op) for op in ("LAND", "LOR", "LXOR")]
COUNTS = [1, 7, 1000, 70001]


def rank_input(r, dtype, op, count, salt):
    """Rank r's input, which every rank can compute: small values (exact products and
    sums), full bit patterns for the bitwise ops, zeros among the logical ones."""
    rng = np.random.default_rng(zlib.crc32(f"{r} {np.dtype(dtype)} {op} {count} {salt}".encode()))
    if dtype == np.bool_:
        return rng.integers(0, 2, count).astype(np.bool_)
    if op in ("BAND", "BOR", "BXOR"):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, count, dtype=dtype, endpoint=True)
    lo, hi = (0, 3) if op == "PROD" else (0, 2) if op.startswith("L") else (0, 9)
    if np.dtype(dtype).kind in "iu" or op == "PROD":
        lo = lo if np.dtype(dtype).kind == "u" else -hi
    values = rng.integers(lo, hi, count, endpoint=True)
    if np.dtype(dtype).kind == "c":
        values = values + 1j * rng.integers(lo, hi, count, endpoint=True)
    return values.astype(dtype)


def reference(inputs, dtype, op):
    out = inputs[0]
    for x in inputs[1:]:
        out = OPS[op][1](out, x)
    return out.astype(dtype)


failures, calls, digest = 0, {"allreduce": 0, "reduce": 0}, hashlib.sha256()


def check(got, want, what):
    global failures
    # Signed zeros hashed alike: a complex product's zero parts take their sign from the
    # order of multiplication, which differs between fold and the MPI library.
    digest.update((got + 0 if got.dtype.kind in "fc" else got).tobytes())
    if not np.array_equal(got, want):
        failures += 1
        if failures <= 10:
            bad = np.flatnonzero(got != want)
            print(f"FAIL rank {rank}: {what}: {len(bad)} differ, first [{bad[0]}]: "
                  f"got {got[bad[0]]}, want {want[bad[0]]}", flush=True)


case_no = 0
for dtype, op in CASES:
    mpi_op = OPS[op][0]
    for count in COUNTS:
        for in_place in (False, True):
            case_no += 1
            what = f"{np.dtype(dtype)} {op} count {count}{' in place' if in_place else ''}"
            inputs = [rank_input(r, dtype, op, count, "allreduce") for r in range(size)]
            want = reference(inputs, dtype, op)
            send = inputs[rank].copy()
            if in_place:
                comm.Allreduce(MPI.IN_PLACE, send, op=mpi_op)
                check(send, want, "Allreduce " + what)
            else:
                recv = np.zeros_like(send)
                comm.Allreduce(send, recv, op=mpi_op)
                check(recv, want, "Allreduce " + what)
                check(send, inputs[rank], "Allreduce's input kept " + what)
            calls["allreduce"] += 1

            root = case_no % size
            inputs = [rank_input(r, dtype, op, count, "reduce") for r in range(size)]
            want = reference(inputs, dtype, op)
            send = inputs[rank].copy()
            recv = np.zeros_like(send) if rank == root else None
            if in_place and rank == root:
                comm.Reduce(MPI.IN_PLACE, send, op=mpi_op, root=root)
                check(send, want, f"Reduce to {root} " + what)
            else:
                comm.Reduce(send, recv, op=mpi_op, root=root)
                if rank == root:
                    check(recv, want, f"Reduce to {root} " + what)
                check(send, inputs[rank], f"Reduce's input kept {what}")
            calls["reduce"] += 1

digests = comm.gather(digest.hexdigest()[:16], root=0)
all_failures = comm.gather(failures, root=0)
if rank == 0:
    n_all, n_red = calls["allreduce"] * size, calls["reduce"] * size
    print("digest: " + " ".join(digests))
    print(f"expect: fold={n_all + n_red} (allreduce={n_all} reduce={n_red}) pmpi=0 ()")
    print(f"mpi4py_check: {sum(all_failures)} failures over {size} ranks")
sys.exit(1 if comm.bcast(sum(all_failures) if rank == 0 else None, root=0) else 0)
