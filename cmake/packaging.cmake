# Debian packages from the build: cpack -G DEB in the build directory (or
# scripts/check-packages.sh, which also installs them and builds a consumer).
#   libfold0        the runtime library
#   libfold-dev     headers, the unversioned library link, pkg-config and CMake files
#   fold-tools      fold_info, fold_perf, fold_tune, fold_sim (built with SimGrid)
#   libfold-mpi0    the MPI shim, built for the MPI found at configure time (Open MPI)
#   libfold-mpich0  the MPI shim built for MPICH (libfold-mpich.so), where MPICH is
#                   installed beside it (cmake/mpich.cmake)
#   python3-fold    the Python package and, where it was built, its torch.distributed
#                   backend (python/), for the python3 the build found
# Dependencies on Debian's UCX, libfabric, PMIx, hwloc, OpenMP and MPI packages come
# from the binaries themselves (dpkg-shlibdeps).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME fold)
set(CPACK_PACKAGE_VENDOR "fold")
set(CPACK_PACKAGE_CONTACT "fold developers <fold@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "fold: allreduce and reduce for CPU clusters over UCX and libfabric")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev tools mpi)
if(TARGET fold_mpich)
  list(APPEND CPACK_COMPONENTS_ALL mpich)
endif()
if(FOLD_PYTHON_BUILT)
  list(APPEND CPACK_COMPONENTS_ALL python)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
# dpkg-shlibdeps must find libfold.so.0 of this build for the packages that link it.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR})

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libfold0)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libfold-dev)
set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME fold-tools)
set(CPACK_DEBIAN_MPI_PACKAGE_NAME libfold-mpi0)
set(CPACK_DEBIAN_MPICH_PACKAGE_NAME libfold-mpich0)
set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-fold)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION utils)
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION "fold runtime library")
set(CPACK_COMPONENT_DEV_DESCRIPTION "fold development files (headers, pkg-config, CMake)")
set(CPACK_COMPONENT_TOOLS_DESCRIPTION "fold tools: fold_info, fold_perf, fold_tune, fold_sim")
set(CPACK_COMPONENT_MPI_DESCRIPTION
    "fold's MPI profiling shim: preload libfold-mpi.so into MPI applications")
set(CPACK_COMPONENT_MPICH_DESCRIPTION
    "fold's MPI profiling shim for MPICH: preload libfold-mpich.so into MPICH applications")
# Each package needs the runtime of exactly this version.
set(FOLD_DEB_RUNTIME "libfold0 (= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "${FOLD_DEB_RUNTIME}")
set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS "${FOLD_DEB_RUNTIME}")
set(CPACK_DEBIAN_MPI_PACKAGE_DEPENDS "${FOLD_DEB_RUNTIME}")
set(CPACK_DEBIAN_MPICH_PACKAGE_DEPENDS "${FOLD_DEB_RUNTIME}")
# fold.config runs fold_info; the torch backend needs the torch its extension was built
# against (libtorch's own libraries come in through dpkg-shlibdeps).
set(py_depends "${FOLD_DEB_RUNTIME}, fold-tools (= ${PROJECT_VERSION}), python3 (>= ${FOLD_PYTHON_VERSION})")
if(FOLD_TORCH_BUILT)
  string(APPEND py_depends ", python3-torch")
endif()
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "${py_depends}")
set(CPACK_COMPONENT_PYTHON_DESCRIPTION
    "fold for Python: the fold package and its torch.distributed backend")
include(CPack)
