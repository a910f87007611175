#!/usr/bin/env bash
# Installs what fold needs from Debian 12's packages, when missing. Needs root (or sudo).
set -euo pipefail

packages=(build-essential cmake pkg-config libucx-dev libfabric-dev libhwloc-dev libpmix-dev
          libcriterion-dev openmpi-bin libopenmpi-dev gnuplot-nox iproute2
          clang libclang-rt-14-dev    # clang + libFuzzer: the codec fuzzers (tests/fuzz)
          mpich libmpich-dev          # the MPI shim built for MPICH too (libfold-mpich.so)
          slurmctld slurmd slurm-client munge)   # Slurm on namespaced nodes (tests/multinode)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

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

if [ ${#missing[@]} -eq 0 ]; then
    pin_open_mpi
    exit 0
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
pin_open_mpi
