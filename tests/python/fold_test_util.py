"""What the rank scripts share: the skip when torch or the backend is missing, the
start of the default process group, and a checker that counts and reports."""
import sys

SKIP = 77   # ctest's SKIP_RETURN_CODE for these tests


def skip(why: str):
    print(f"SKIPPED: {why}", flush=True)
    sys.exit(SKIP)


def init_fold():
    """Imports torch and fold, starts the default group on "fold"; (rank, size)."""
    try:
        import torch.distributed as dist
    except ImportError:
        skip("python3-torch is not installed (scripts/install-deps.sh installs it)")
    import fold
    if not fold.backend_available:
        skip("fold's torch backend was not built (needs libtorch-dev and pybind11-dev)")
    dist.init_process_group("fold")
    return dist.get_rank(), dist.get_world_size()


class Checker:
    """Counts checks; keeps the first failures' descriptions."""

    def __init__(self, rank: int):
        self.rank, self.passed, self.failures = rank, 0, []

    def check(self, ok: bool, what: str):
        if ok:
            self.passed += 1
        else:
            self.failures.append(what)
            if len(self.failures) <= 20:
                print(f"FAIL rank {self.rank}: {what}", flush=True)

    def raises(self, fn, exc_type, words, what: str):
        """fn() must raise exc_type with every one of words in its message."""
        try:
            fn()
        except exc_type as e:
            missing = [w for w in words if w not in str(e)]
            self.check(not missing, f"{what}: message lacks {missing}: {e}")
            return
        except Exception as e:   # noqa: BLE001 - the wrong kind is the failure reported
            self.check(False, f"{what}: raised {type(e).__name__} instead: {e}")
            return
        self.check(False, f"{what}: did not raise")

    def finish(self, name: str):
        print(f"{name}: rank {self.rank}: {self.passed} checks passed, "
              f"{len(self.failures)} failed", flush=True)
        sys.exit(1 if self.failures else 0)
