#!/usr/bin/env bash
# Installs what fold needs from Debian 12's packages, when missing. Needs root (or sudo).
# The Python ones (the fold package's torch backend, its tests, mpi4py through the shim)
# are optional: where they cannot install, fold builds without the backend and the
# Python tests skip, saying so.
set -euo pipefail

packages=(build-essential cmake pkg-config libucx-dev libfabric-dev libhwloc-dev libpmix-dev
          libcriterion-dev openmpi-bin libopenmpi-dev gnuplot-nox iproute2
          clang libclang-rt-14-dev    # clang + libFuzzer: the codec fuzzers (tests/fuzz)
          mpich libmpich-dev          # the MPI shim built for MPICH too (libfold-mpich.so)
          slurmctld slurmd slurm-client munge    # Slurm on namespaced nodes (tests/multinode)
          libsimgrid-dev                         # fold_sim's replays (sim/)
          help2man groff-base)                   # the tools' man pages (cmake/man.cmake)
python_packages=(python3-dev python3-numpy python3-mpi4py python3-torch libtorch-dev
                 pybind11-dev)

missing_of() {   # missing_of PACKAGE...: those not installed
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            echo "$p"
    done
}
mapfile -t missing < <(missing_of "${packages[@]}")
mapfile -t python_missing < <(missing_of "${python_packages[@]}")

# MPICH installs beside Open MPI; mpicc, mpirun and FindMPI must stay Open MPI's. Debian
# gives Open MPI the higher priority, but an alternative set by hand would win: pin it.
#   pin_open_mpi: the alternatives `mpirun` (mpirun, mpiexec) and `mpi` (mpicc, ...).
pin_open_mpi() {
    local alternative command path
    for alternative in mpirun:mpirun mpi:mpicc; do
        command=${alternative#*:} alternative=${alternative%:*}
        path=/usr/bin/$command.openmpi
        if [ -e "$path" ] &&
            [ "$(readlink -f "$(command -v "$command")")" != "$(readlink -f "$path")" ]; then
            echo "install-deps: $command is not Open MPI's; setting the alternative to $path"
            $SUDO update-alternatives --set "$alternative" "$path" >/dev/null
        fi
    done
}

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo

if [ ${#missing[@]} -eq 0 ] && [ ${#python_missing[@]} -eq 0 ]; then
    pin_open_mpi
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
if [ ${#missing[@]} -gt 0 ]; then
    echo "install-deps: installing ${missing[*]}"
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ ${#python_missing[@]} -gt 0 ]; then
    echo "install-deps: installing ${python_missing[*]}"
    $SUDO apt-get install -y -qq --no-install-recommends "${python_missing[@]}" >/dev/null ||
        echo "install-deps: could not install ${python_missing[*]}: fold builds without" \
             "its torch backend and the Python tests skip" >&2
fi
pin_open_mpi
