"""torch's env:// variables from the launcher that started this process.

torch.distributed's env:// rendezvous reads RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT; torchrun sets them, mpirun does not. Under Open MPI's mpirun this fills
in the ones that are unset, so "mpirun -n 4 python3 app.py" with
init_process_group("fold") needs nothing more. MASTER_ADDR/PORT are only filled when
every rank is on this node (127.0.0.1, a port derived from the job's id); across nodes
pass them: mpirun -x MASTER_ADDR=<first node> -x MASTER_PORT=29500 ...
"""
import os
import zlib

_FROM_OPEN_MPI = {
    "RANK": "OMPI_COMM_WORLD_RANK",
    "WORLD_SIZE": "OMPI_COMM_WORLD_SIZE",
    "LOCAL_RANK": "OMPI_COMM_WORLD_LOCAL_RANK",
    "LOCAL_WORLD_SIZE": "OMPI_COMM_WORLD_LOCAL_SIZE",
}


def _job_port(job: str) -> int:
    """A port every rank of the job derives alike, in 20000-39999."""
    return 20000 + zlib.crc32(job.encode()) % 20000


def fill_torch_env(environ=os.environ) -> None:
    """Sets the unset env:// variables from Open MPI's; does nothing outside mpirun."""
    if "OMPI_COMM_WORLD_RANK" not in environ:
        return
    for torch_name, ompi_name in _FROM_OPEN_MPI.items():
        if torch_name not in environ and ompi_name in environ:
            environ[torch_name] = environ[ompi_name]
    one_node = environ.get("OMPI_COMM_WORLD_SIZE") == environ.get("OMPI_COMM_WORLD_LOCAL_SIZE")
    job = environ.get("PMIX_NAMESPACE") or environ.get("OMPI_MCA_ess_base_jobid")
    if one_node and job:
        environ.setdefault("MASTER_ADDR", "127.0.0.1")
        environ.setdefault("MASTER_PORT", str(_job_port(job)))
