#!/usr/bin/env bash
# Debian packages from a build tree (cpack -G DEB, cmake/packaging.cmake): installs
# them on this machine with dpkg -i, builds and runs a consumer against the installed
# files (find_package and pkg-config, no prefix given), runs the installed fold_info
# and the installed MPI shim under mpirun (and the MPICH shim, libfold-mpich0, under
# mpiexec.mpich when the build made it), then removes the packages again.
# Needs root (dpkg); elsewhere it only builds and lists the packages.
set -euo pipefail
build=${1:?usage: check-packages.sh BUILD_DIR}
build=$(cd "$build" && pwd)
work=$(mktemp -d)
installed=()
cleanup() {
    if [ ${#installed[@]} -gt 0 ]; then
        dpkg -P "${installed[@]}" >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

(cd "$work" && cpack -G DEB --config "$build/CPackConfig.cmake" >/dev/null)
debs=("$work"/*.deb)
packages=(libfold0 libfold-dev fold-tools libfold-mpi0)
if [ -e "$build/mpi-shim/libfold-mpich.so" ]; then
    packages+=(libfold-mpich0)
fi
if [ -e "$build/python/fold/__init__.py" ]; then
    packages+=(python3-fold)
fi
[ ${#debs[@]} -eq ${#packages[@]} ] ||
    { echo "check-packages: expected ${#packages[@]} packages, got ${#debs[@]}" >&2; exit 1; }
for d in "${debs[@]}"; do
    echo "check-packages: $(basename "$d"): $(dpkg-deb -f "$d" Depends)"
done
# The tools' man pages the build made (cmake/man.cmake) are in fold-tools.
tools_contents=$(dpkg-deb -c "$work"/fold-tools_*.deb)
for page in "$build"/man/*.1; do
    [ -e "$page" ] || continue
    grep -q "/usr/share/man/man1/$(basename "$page")\$" <<<"$tools_contents" ||
        { echo "check-packages: fold-tools lacks $(basename "$page")" >&2; exit 1; }
done
if [ "$(id -u)" -ne 0 ]; then
    echo "check-packages: not root, so the packages were built but not installed"
    exit 0
fi
for p in "${packages[@]}"; do
    if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        echo "check-packages: $p is installed already; not touching this machine" >&2
        exit 1
    fi
done
installed=("${packages[@]}")
dpkg -i "${debs[@]}" >/dev/null

. "$(dirname "$0")/consumer.sh"
build_consumer "$work/consumer"
# ldd's output is taken whole first: under pipefail, grep -q leaving early could end
# ldd with SIGPIPE and fail the check on a consumer that is right (seen once in CI).
libs=$(ldd "$work/consumer/build/consumer")
grep -Eq "libfold.so.0 => (/usr)?/lib/libfold.so.0 " <<<"$libs" ||
    { echo "check-packages: the consumer does not use the installed libfold.so.0:" >&2
      echo "$libs" >&2; exit 1; }
/usr/bin/fold_info -v | head -1

# The installed shim, preloaded into a plain MPI program, serves its MPI_Allreduce.
cat > "$work/mpi.c" <<'C'
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    float in[1024], out[1024];
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 0; i < 1024; i++) in[i] = (float)(rank + i % 7);
    MPI_Allreduce(in, out, 1024, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    int bad = 0;
    for (int i = 0; i < 1024; i++) bad |= out[i] != (float)(size * (size - 1) / 2 + size * (i % 7));
    MPI_Finalize();
    return bad;
}
C
served() {  # served NAME OUTPUT: the shim's totals show both calls served by fold
    echo "$2" | grep -q "fold=2 (allreduce=2" ||
        { echo "check-packages: the installed $1 did not serve the call:" >&2; echo "$2" >&2
          exit 1; }
}
mpicc "$work/mpi.c" -o "$work/mpi"
served libfold-mpi.so "$(mpirun --allow-run-as-root --oversubscribe -n 2 \
    -x LD_PRELOAD=libfold-mpi.so -x FOLD_MPI_VERBOSE=1 -x FOLD_MPI_ALLREDUCE_MIN=0 \
    -x FOLD_MPI_ALLREDUCE_MAX=inf "$work/mpi" 2>&1)"
# The same program built against MPICH, the MPICH shim preloaded under Hydra.
if [[ " ${packages[*]} " == *" libfold-mpich0 "* ]]; then
    mpicc.mpich "$work/mpi.c" -o "$work/mpi-mpich"
    served libfold-mpich.so "$(mpiexec.mpich -n 2 -genv LD_PRELOAD libfold-mpich.so \
        -genv FOLD_MPI_VERBOSE 1 -genv FOLD_MPI_ALLREDUCE_MIN 0 \
        -genv FOLD_MPI_ALLREDUCE_MAX inf "$work/mpi-mpich" 2>&1)"
fi
# The installed Python package, imported from Debian's dist-packages (not the build
# tree), runs the installed fold_info, and where the backend was built, an allreduce
# over torch.distributed on 2 processes.
if [[ " ${packages[*]} " == *" python3-fold "* ]]; then
    (cd "$work" && env -u PYTHONPATH /usr/bin/python3 - <<'PY'
import fold
assert fold.__file__.startswith("/usr/lib/python3/dist-packages/fold/"), fold.__file__
assert "FOLD_TIMEOUT" in fold.config(), "fold.config()"
print("check-packages: python3-fold", fold.__version__, "from", fold.__file__,
      "backend", fold.backend_available)
PY
    )
    if ls "$build"/python/fold/_C*.so >/dev/null 2>&1; then
        (cd "$work" && mpirun --allow-run-as-root --oversubscribe -n 2 -x PYTHONPATH= \
            /usr/bin/python3 -c '
import fold, torch, torch.distributed as dist
assert fold.backend_available and fold.__file__.startswith("/usr/lib/python3/")
dist.init_process_group("fold")
t = torch.full((1000,), float(dist.get_rank() + 1))
dist.all_reduce(t)
assert torch.all(t == 3.0), t[:4]
dist.destroy_process_group()')
        echo "check-packages: the installed torch backend reduced over 2 processes"
    fi
fi
echo "check-packages: ${packages[*]} install, link and run"
