"""fold as a torch.distributed backend: dist.init_process_group("fold").

Each process group gets its own fold context. fold bootstraps over the group's c10d
Store (the env:// rendezvous' TCPStore; FOLD_TORCH_BOOTSTRAP=store) or, under a PMIx
launcher when the group is the launcher's whole job, through PMIx itself
(FOLD_TORCH_BOOTSTRAP=pmix); the default, auto, picks. Every group of the whole job may
bootstrap through PMIx: each context publishes under keys of its own, numbered in the
order the process makes them, which is the same on every rank since torch makes groups
collectively. Collectives fold does not serve
go to a gloo process group made beside it (FOLD_TORCH_DELEGATE=gloo, the default) or
raise (none). all_reduce and reduce of at most FOLD_TORCH_BLOCKING_MAX bytes (default
2048; fold's size syntax: 64k, 1M, inf) run blocking, larger ones on fold's requests.
"""
import atexit
import os
import re

_registered = False

try:
    import torch.distributed as _dist
    from . import _C
    backend_available = _dist.is_available()
except ImportError:
    _C = None
    backend_available = False


def library_version():
    """The version of libfold the backend runs on, or None without the backend."""
    return _C.version() if backend_available else None


def _bootstrap(rank: int, size: int) -> str:
    choice = os.environ.get("FOLD_TORCH_BOOTSTRAP", "auto")
    if choice in ("store", "pmix"):
        return choice
    if choice != "auto":
        raise ValueError(f"FOLD_TORCH_BOOTSTRAP={choice}: expected auto, store or pmix")
    # PMIx knows the launcher's job only: use it when this group is that job, in order.
    pmix_rank = os.environ.get("PMIX_RANK")
    job_size = os.environ.get("OMPI_COMM_WORLD_SIZE")
    if pmix_rank is not None and job_size is not None and \
            int(pmix_rank) == rank and int(job_size) == size:
        return "pmix"
    return "store"


def _delegate(store, rank, size, timeout):
    choice = os.environ.get("FOLD_TORCH_DELEGATE", "gloo")
    if choice == "none":
        return None
    if choice != "gloo":
        raise ValueError(f"FOLD_TORCH_DELEGATE={choice}: expected gloo or none")
    return _dist.ProcessGroupGloo(_dist.PrefixStore("fold-delegate", store), rank, size,
                                  timeout)


def _blocking_max() -> int:
    text = os.environ.get("FOLD_TORCH_BLOCKING_MAX", "2048")
    m = re.fullmatch(r"(\d+)([kKMG]?)i?B?|inf", text)
    if m is None:
        raise ValueError(f"FOLD_TORCH_BLOCKING_MAX={text}: expected bytes (2048, 64k, 1M, inf)")
    if text == "inf":
        return 2 ** 64 - 1
    return int(m.group(1)) << {"": 0, "k": 10, "K": 10, "M": 20, "G": 30}[m.group(2)]


def _create_process_group(store, rank, size, timeout):
    delegate = _delegate(store, rank, size, timeout)
    return _C.ProcessGroupFold(store, rank, size, _bootstrap(rank, size), delegate,
                               _blocking_max())


def register_backend() -> bool:
    """Registers "fold" with torch.distributed, once; False without torch or the backend."""
    global _registered
    if not backend_available:
        return False
    if not _registered:
        _dist.Backend.register_backend("fold", _create_process_group)
        # fold's finalize is collective: every rank runs it here at exit, unless
        # destroy_process_group() ran it before.
        atexit.register(_C.shutdown_all)
        _registered = True
    return True
