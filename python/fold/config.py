"""fold's configuration as fold_info shows it: the tables of FOLD_* variables."""
import os
import subprocess
from typing import Dict, NamedTuple

from ._build import FOLD_INFO


class Setting(NamedTuple):
    name: str          # FOLD_TIMEOUT
    default: str
    value: str         # what a fold started now would use: the environment's, or default
    from_env: bool
    valid: bool        # False when the environment's value is refused
    description: str
    table: str         # "fold runtime", "fold MPI shim", ...


def _fold_info_path() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(here, FOLD_INFO))


def info(*args: str) -> str:
    """fold_info's output for args (e.g. "-a", "-c", "-v") as text."""
    return subprocess.run([_fold_info_path(), *args], check=True, capture_output=True,
                          text=True).stdout


def _parse(text: str) -> Dict[str, Setting]:
    """fold_info -c's blocks: a '# title (PREFIX* environment variables)' header per
    table, then per variable '# description...', '# default: D', 'NAME=VALUE[  # note]',
    with '#' lines between."""
    settings: Dict[str, Setting] = {}
    table, doc, default = "", [], ""
    for line in text.splitlines():
        if line.strip() == "#":
            continue
        if line.startswith("# ") and line.endswith("environment variables)"):
            table, doc = line[2:line.rindex(" (")], []
        elif line.startswith("# default: "):
            default = line[len("# default: "):]
            default = "" if default == "(empty)" else default
        elif line.startswith("# "):
            doc.append(line[2:])
        elif "=" in line:
            assignment, _, note = line.partition("  # ")
            name, _, value = assignment.partition("=")
            settings[name] = Setting(name, default, value, "from the environment" in note,
                                     "not valid" not in note, " ".join(doc), table)
            doc, default = [], ""
    return settings


def config() -> Dict[str, Setting]:
    """Every configuration variable of this fold build, by name (FOLD_TIMEOUT, ...)."""
    return _parse(info("-c"))
