#!/bin/sh
# Starts an MPI program on NP local ranks with Open MPI's mpirun or MPICH's Hydra
# (mpiexec.mpich), whichever MPIRUN is, passing each VAR=VALUE to every rank. The shim's
# tests run through it, so that one test list serves both MPI libraries.
#
# Usage: mpi_launch.sh MPIRUN NP [VAR=VALUE]... -- PROGRAM [ARGS...]
#
# Open MPI: as root, oversubscribed (CI has 2 cores), unbound, variables with -x.
# Hydra: variables with -genv. MPICH 4.0.2 (Debian 12) crashes in its device (ch4)
# collectives on an in-place MPI_Reduce of 8 KiB or more at a root other than 0;
# MPIR_CVAR_DEVICE_COLLECTIVES=none makes it use its generic ones, which are right.
set -u
MPIRUN=${1:?usage: mpi_launch.sh MPIRUN NP [VAR=VALUE]... -- PROGRAM [ARGS...]}
NP=${2:?}
shift 2

# Hydra says so in its --version; Open MPI's mpirun names Open MPI.
if "$MPIRUN" --version 2>/dev/null | grep -q HYDRA; then
    # Rebuilt in place (no arrays in sh): each VAR=VALUE goes to the end as -genv VAR
    # VALUE, then the program's words are moved behind them.
    nvars=0
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        set -- "$@" -genv "${1%%=*}" "${1#*=}"
        shift
        nvars=$((nvars + 1))
    done
    [ $# -gt 0 ] && shift
    nprog=$(($# - 3 * nvars))
    while [ "$nprog" -gt 0 ]; do
        set -- "$@" "$1"
        shift
        nprog=$((nprog - 1))
    done
    exec "$MPIRUN" -n "$NP" -genv MPIR_CVAR_DEVICE_COLLECTIVES none "$@"
fi

vars=""
while [ $# -gt 0 ] && [ "$1" != -- ]; do
    export "${1?}"
    vars="$vars -x ${1%%=*}"
    shift
done
[ $# -gt 0 ] && shift
# shellcheck disable=SC2086 # $vars is an option list
exec "$MPIRUN" --allow-run-as-root --oversubscribe --bind-to none -n "$NP" $vars "$@"
