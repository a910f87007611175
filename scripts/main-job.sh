#!/usr/bin/env bash
# The main job on a fresh machine: install what fold needs, build it, and run fold_perf on
# local ranks (allreduce and reduce, 8 B .. 64 MiB, checked, MPI timed beside fold).
# Extra arguments go to fold_perf; see perf/run_main_job.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
exec perf/run_main_job.sh "$@"
