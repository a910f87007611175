"""fold: allreduce and reduce for CPU clusters, from Python.

    import fold                                   # registers the "fold" backend
    torch.distributed.init_process_group("fold")  # env:// (torchrun, MASTER_ADDR/PORT)
                                                  # or under mpirun

- ``fold.__version__``: this package's fold version; ``fold.library_version()`` the
  libfold the backend runs on.
- ``fold.config()``: every FOLD_* variable (default, value, description), as
  ``fold_info -c`` prints them; ``fold.info("-a")`` any fold_info output as text.
- ``fold.register_backend()``: registers fold with torch.distributed (done on import
  when torch and the backend are there; ``fold.backend_available`` says whether).
- Under mpirun, importing fold fills in torch's RANK, WORLD_SIZE, LOCAL_RANK,
  LOCAL_WORLD_SIZE, and on one node MASTER_ADDR/MASTER_PORT, where they are unset
  (``fold.launcher``).
"""
from ._build import VERSION as __version__
from .config import config, info
from .launcher import fill_torch_env
from .torch_backend import backend_available, library_version, register_backend

fill_torch_env()
register_backend()

__all__ = ["__version__", "backend_available", "config", "fill_torch_env", "info",
           "library_version", "register_backend"]
