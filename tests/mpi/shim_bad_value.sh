#!/bin/sh
# A FOLD_MPI_* value refused on rank 1 only: the run goes on with rank 0's settings on
# every rank (the program passes), and rank 1 says which value it ignored. MPIRUN is
# Open MPI's mpirun or MPICH's mpiexec.mpich: both take an MPMD line, with -x and -env
# for one part's variables.
# Usage: shim_bad_value.sh MPIRUN SHIM PROGRAM
set -u
if "$1" --version 2>/dev/null | grep -q HYDRA; then
    out=$("$1" -genv LD_PRELOAD "$2" -genv MPIR_CVAR_DEVICE_COLLECTIVES none -n 1 "$3" : \
          -env FOLD_MPI_VERBOSE 7 -n 1 "$3" 2>&1)
else
    out=$("$1" --allow-run-as-root --oversubscribe --bind-to none -x LD_PRELOAD="$2" -n 1 "$3" : \
          -x LD_PRELOAD="$2" -x FOLD_MPI_VERBOSE=7 -n 1 "$3" 2>&1)
fi
rc=$?
printf '%s\n' "$out"
if [ $rc -ne 0 ]; then
    echo "FAIL: the run exited with $rc"; exit 1
fi
if ! printf '%s\n' "$out" |
        grep -qF "rank 1: ignoring 1 FOLD_MPI_* value refused here (FOLD_MPI_VERBOSE='7')"; then
    echo "FAIL: rank 1 did not say it ignored FOLD_MPI_VERBOSE='7'"; exit 1
fi
echo "shim_bad_value: passed"
