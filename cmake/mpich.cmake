# MPICH beside Open MPI. Debian installs the two side by side: MPICH's headers under
# /usr/include/<triplet>/mpich, libmpich, mpicc.mpich, mpiexec.mpich (Hydra), while the
# `mpi` and `mpirun` alternatives, and so FindMPI, keep Open MPI (its priority is
# higher). The MPI shim is then built a second time against MPICH (libfold-mpich.so).
# Sets, when MPICH is there, FOLD_MPICH is on and FindMPI did not find MPICH itself:
#   FOLD_MPICH_FOUND      TRUE
#   PkgConfig::MPICH      imported target: MPICH's headers and libmpich (pkg-config mpich)
#   FOLD_MPICH_MPIEXEC    Hydra's launcher (mpiexec.mpich)
#   FOLD_MPICH_VERSION    from pkg-config
# fold_mpich_fortran() adds fold_mpich_fortran (libmpichfort and MPICH's modules) once
# Fortran is enabled.
option(FOLD_MPICH "Build the MPI shim for MPICH too (libfold-mpich.so), where installed" ON)
set(FOLD_MPICH_FOUND FALSE)
if(FOLD_MPICH)
  if(MPI_C_FOUND AND "${MPI_C_LIBRARIES}" MATCHES "mpich")
    message(STATUS "fold-mpich: the MPI found is MPICH already; no second shim")
  else()
    pkg_check_modules(MPICH QUIET IMPORTED_TARGET GLOBAL mpich)
    find_program(FOLD_MPICH_MPIEXEC NAMES mpiexec.mpich mpiexec.hydra)
    if(MPICH_FOUND)
      set(FOLD_MPICH_FOUND TRUE)
      set(FOLD_MPICH_VERSION ${MPICH_VERSION})
      message(STATUS "fold-mpich: MPICH ${MPICH_VERSION} found; building libfold-mpich.so")
    else()
      message(STATUS "fold-mpich: no MPICH (pkg-config mpich); libfold-mpich.so is not built")
    endif()
  endif()
endif()

function(fold_mpich_fortran)
  find_library(FOLD_MPICH_FORT_LIBRARY mpichfort)
  if(FOLD_MPICH_FORT_LIBRARY AND NOT TARGET fold_mpich_fortran)
    add_library(fold_mpich_fortran INTERFACE IMPORTED GLOBAL)
    # MPICH's mpi.mod and mpi_f08.mod live beside its mpi.h.
    set_target_properties(fold_mpich_fortran PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${MPICH_INCLUDE_DIRS}"
      INTERFACE_LINK_LIBRARIES "${FOLD_MPICH_FORT_LIBRARY};PkgConfig::MPICH"
      # MPICH's mpi module passes choice buffers without interfaces: a buffer of
      # another type than the previous call's is an error to gfortran without this,
      # as mpifort.mpich's own flags say, and a warning (so no -w: -Werror) with it.
      INTERFACE_COMPILE_OPTIONS "-fallow-argument-mismatch;-w")
  endif()
endfunction()
