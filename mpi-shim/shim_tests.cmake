# The shim's tests (sources in tests/mpi): plain MPI programs, linked with neither fold
# nor the shim, run by shim_run.sh without and with LD_PRELOAD of the shim. Registered
# once per shim with the same list:
#   fold_mpi_shim_tests(PREFIX MPI_C MPI_FORTRAN HAVE_F08 MPIRUN SHIM_TARGET
#                       CHECK_NPS TYPE_NPS)
# PREFIX names the programs and tests: mpi_reduce_check / mpi_shim_check_np2 for the
# Open MPI shim, mpich_reduce_check / mpich_shim_check_np2 for the MPICH one. MPIRUN is
# Open MPI's mpirun or MPICH's mpiexec.mpich; tests/mpi/mpi_launch.sh starts either.
# MPI_FORTRAN (empty: none) builds the Fortran programs, HAVE_F08 the mpi_f08 one.
# CHECK_NPS and TYPE_NPS are the rank counts of mpi_reduce_check and of the datatype,
# user-op and derived-type checks: the rank count matters to fold's algorithms, which
# one library's run covers, not to the MPI ABI the shim is compiled for.

set(FOLD_MPI_TEST_DIR ${CMAKE_SOURCE_DIR}/tests/mpi)

function(fold_mpi_shim_tests p mpi_c mpi_fortran have_f08 mpirun shim_target check_nps
         type_nps)
  if(NOT mpirun)
    message(STATUS "fold-${p}: no launcher, the shim's tests are not registered")
    return()
  endif()
  add_library(fold_${p}_test_util STATIC ${FOLD_MPI_TEST_DIR}/shim_test.c)
  target_link_libraries(fold_${p}_test_util PUBLIC ${mpi_c})
  foreach(program mpi_reduce_check mpi_fallback mpi_spawn mpi_solver mpi_threads
                  mpi_allreduce_bench mpi_serve_advice mpi_mismatch mpi_comm_churn
                  mpi_types_check mpi_userop_check mpi_derived_check mpi_alloc_mem
                  mpi_first_calls mpi_struct_userop mpi_intercomm_check mpi_p2p_stream)
    string(REGEX REPLACE "^mpi_" "${p}_" target ${program})
    add_executable(${target} ${FOLD_MPI_TEST_DIR}/${program}.c)
    target_link_libraries(${target} PRIVATE fold_${p}_test_util Threads::Threads m)
    set(${program} $<TARGET_FILE:${target}>)
  endforeach()

  set(run sh ${FOLD_MPI_TEST_DIR}/shim_run.sh)
  set(launch sh ${FOLD_MPI_TEST_DIR}/mpi_launch.sh ${mpirun})
  # fold serves every size: the routes then depend on the program alone.
  set(serve_all --env FOLD_MPI_ALLREDUCE_MIN=0 --env FOLD_MPI_ALLREDUCE_MAX=inf
    --env FOLD_MPI_REDUCE_MIN=0 --env FOLD_MPI_REDUCE_MAX=inf)
  set(serve_all_vars FOLD_MPI_ALLREDUCE_MIN=0 FOLD_MPI_ALLREDUCE_MAX=inf
    FOLD_MPI_REDUCE_MIN=0 FOLD_MPI_REDUCE_MAX=inf)
  set(shim $<TARGET_FILE:${shim_target}>)
  # test(NAME COMMAND...): NAME is the test's name after "<prefix>_shim_".
  macro(test name)
    add_test(NAME ${p}_shim_${name} COMMAND ${ARGN})
    set_tests_properties(${p}_shim_${name} PROPERTIES TIMEOUT 180 LABELS mp
                         SKIP_RETURN_CODE 77)
  endmacro()

  foreach(np ${check_nps})
    test(check_np${np} ${run} ${serve_all} ${mpirun} ${shim} ${np} ${mpi_reduce_check})
  endforeach()
  # Pair types with MAXLOC/MINLOC, complex types with SUM/PROD: fold against the MPI
  # library on the same calls.
  # User ops (MPI_Op_create), commutative and not, against the MPI library on the
  # same calls; predefined ops on derived types without gaps, against the base-type
  # call. 5 ranks oversubscribe the 2 cores CI has.
  foreach(np ${type_nps})
    test(types_np${np} ${run} ${serve_all} ${mpirun} ${shim} ${np} ${mpi_types_check})
    test(userop_np${np} ${run} ${serve_all} ${mpirun} ${shim} ${np} ${mpi_userop_check})
    test(derived_np${np} ${run} ${serve_all} ${mpirun} ${shim} ${np} ${mpi_derived_check})
  endforeach()
  # User ops on structs of several types and a non-commutative one on a contiguous type,
  # as opaque elements; intercommunicators split unevenly (1+2, 2+3), both groups' roots.
  foreach(np 3 4)
    test(struct_userop_np${np} ${run} ${serve_all} ${mpirun} ${shim} ${np}
      ${mpi_struct_userop})
  endforeach()
  foreach(np 3 5)
    test(intercomm_np${np} ${run} ${serve_all} ${mpirun} ${shim} ${np} ${mpi_intercomm_check})
  endforeach()
  test(disabled_np2 ${run} --disabled ${mpirun} ${shim} 2 ${mpi_solver})
  test(fallback_np3 ${run} --env FOLD_MPI_ALLREDUCE_MIN=64
    --env FOLD_MPI_ALLREDUCE_MAX=512 --env FOLD_MPI_REDUCE_MIN=64
    --env FOLD_MPI_REDUCE_MAX=512 ${mpirun} ${shim} 3 ${mpi_fallback})
  test(spawn_np2 ${run} ${serve_all} ${mpirun} ${shim} 2 ${mpi_spawn})
  # No range set: the tuning file's serve lines decide each call's route.
  test(serve_advice_np2 ${run} --env FOLD_TUNE_FILE=${FOLD_MPI_TEST_DIR}/serve_split.tune
    ${mpirun} ${shim} 2 ${mpi_serve_advice})
  # The application-style run keeps the default thresholds.
  test(solver_np4 ${run} ${mpirun} ${shim} 4 ${mpi_solver})
  test(threads_np3 ${run} ${serve_all} ${mpirun} ${shim} 3 ${mpi_threads})
  # MPI_Alloc_mem gives fold memory with FOLD_MPI_ALLOC_MEM=1 (the program checks its
  # mappings), and MPI_Free_mem takes either kind back.
  foreach(np 2 3)
    test(alloc_mem_np${np} ${run} ${serve_all} --env FOLD_MPI_ALLOC_MEM=1 ${mpirun} ${shim}
      ${np} ${mpi_alloc_mem})
  endforeach()
  # Mismatched calls fail on every rank with FOLD_CHECK=1 (the MPI library alone would
  # hang on some: not run through shim_run.sh).
  test(mismatch_np3 ${launch} 3 LD_PRELOAD=${shim} FOLD_CHECK=1 FOLD_TIMEOUT=30
    ${serve_all_vars} -- ${mpi_mismatch})
  # The same mistakes with the default checks (where the ranks meet), on 2, 3 and 5
  # ranks: every rank that gets a result fails, and a correct call after succeeds.
  foreach(np 2 3 5)
    test(mismatch_default_np${np} ${launch} ${np} LD_PRELOAD=${shim} FOLD_TIMEOUT=30
      ${serve_all_vars} -- ${mpi_mismatch})
    set_tests_properties(${p}_shim_mismatch_default_np${np} PROPERTIES
                         PASS_REGULAR_EXPRESSION "passed: 0 failures")
  endforeach()
  # Many communicators: 16 duplicates kept, then 100 made and freed (each fold
  # communicator with its node segment; tests/shm_ns_test.sh runs it on a small /dev/shm).
  test(comm_churn_np2 ${run} ${serve_all} ${mpirun} ${shim} 2 ${mpi_comm_churn} 16 100)
  # A FOLD_MPI_* value refused on rank 1 only: rank 0's settings apply, rank 1 says so.
  test(bad_value_np2 sh ${FOLD_MPI_TEST_DIR}/shim_bad_value.sh ${mpirun} ${shim}
    ${mpi_reduce_check})
  # The benchmark's own check, briefly, through the shim.
  test(bench_np2 ${launch} 2 LD_PRELOAD=${shim} FOLD_MPI_ALLREDUCE_MIN=0
    FOLD_MPI_ALLREDUCE_MAX=inf -- ${mpi_allreduce_bench} -b 8 -e 1048576 -n 20 -k)

  # The first-calls benchmark, briefly, through the shim (docs/results/first-calls.md).
  test(first_calls_np2 ${launch} 2 LD_PRELOAD=${shim} -- ${mpi_first_calls} -b 4096
    -e 262144 -n 12 -k 2 -v -a)

  # The held-out check, where an OSU micro-benchmarks build for this library is given
  # (-DFOLD_OSU_MPI_DIR=... for Open MPI, -DFOLD_OSU_MPICH_DIR=... for MPICH: the
  # directory holding osu_allreduce and osu_reduce): their own validation (-c).
  string(TOUPPER ${p} upper)
  if(FOLD_OSU_${upper}_DIR)
    test(osu_np2 sh ${FOLD_MPI_TEST_DIR}/osu_check.sh ${mpirun} ${shim}
      ${FOLD_OSU_${upper}_DIR} 2)
  endif()

  # Fortran programs, when a Fortran compiler and the library's Fortran bindings are there.
  if(NOT mpi_fortran)
    message(STATUS "fold-${p}: no Fortran MPI, the Fortran tests are not registered")
    return()
  endif()
  set(programs mpi_fortran)
  if(have_f08)
    list(APPEND programs mpi_fortran_f08)
  endif()
  foreach(program ${programs})
    string(REGEX REPLACE "^mpi_" "${p}_" target ${program})
    add_executable(${target} ${FOLD_MPI_TEST_DIR}/${program}.f90)
    target_link_libraries(${target} PRIVATE ${mpi_fortran})
    # Each program's modules apart: both libraries' mpi.mod have one name.
    set_target_properties(${target} PROPERTIES
      Fortran_MODULE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/${target}.mod)
    string(REPLACE "mpi_" "" name ${program})
    test(${name}_np3 ${run} --env FOLD_MPI_ALLREDUCE_MIN=8
      --env FOLD_MPI_ALLREDUCE_MAX=inf --env FOLD_MPI_REDUCE_MIN=8
      --env FOLD_MPI_REDUCE_MAX=inf ${mpirun} ${shim} 3 $<TARGET_FILE:${target}>)
  endforeach()
endfunction()
