! MPI_Allreduce and MPI_Reduce through the mpi_f08 module, whose bindings Open MPI
! implements on top of the mpif.h ones: sums of doubles in place and out of place,
! checked. An op made with mpi_f08's MPI_Op_create, which Open MPI sends to
! pmpi_op_create_ where the shim does not see it: its call goes to MPI (reason op),
! still checked. Prints the "digest:" and "expect:" lines shim_run.sh compares; run it
! with fold serving 8 .. 8000 bytes (FOLD_MPI_*_MIN, FOLD_MPI_*_MAX).
module f08_user_ops
  use, intrinsic :: iso_c_binding, only : c_ptr, c_f_pointer
  use mpi_f08
  implicit none
contains
  subroutine add_doubles(invec, inoutvec, len, datatype)
    type(c_ptr), value :: invec, inoutvec
    integer :: len
    type(MPI_Datatype) :: datatype
    double precision, pointer :: a(:), b(:)
    call c_f_pointer(invec, a, [len])
    call c_f_pointer(inoutvec, b, [len])
    b = b + a
    if (datatype /= MPI_DOUBLE_PRECISION) b = b + 1000   ! fails the check
  end subroutine add_doubles
end module f08_user_ops

program mpi_fortran_f08
  use mpi_f08
  use f08_user_ops
  implicit none
  integer, parameter :: n = 1000
  integer :: rank, nranks, j, r, failures, total_failures
  double precision :: x(n), y(n), want(n), z(n)
  type(MPI_Op) :: add_op

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks)
  do j = 1, n
     x(j) = dble(mod(rank * 5 + j, 9) - 4)
     want(j) = 0
     do r = 0, nranks - 1
        want(j) = want(j) + dble(mod(r * 5 + j, 9) - 4)
     end do
  end do
  failures = 0

  call MPI_Allreduce(x, y, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD)
  failures = failures + count(abs(y - want) > 0)
  call MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD)
  failures = failures + count(abs(x - want) > 0)
  y = 0
  ! Every rank now holds the sum, so their maximum is the sum again.
  call MPI_Reduce(x, y, n, MPI_DOUBLE_PRECISION, MPI_MAX, 0, MPI_COMM_WORLD)
  if (rank == 0) failures = failures + count(abs(y - want) > 0)

  ! Every rank holds the sum: the user op's sum is nranks times it.
  call MPI_Op_create(add_doubles, .true., add_op)
  call MPI_Allreduce(x, z, n, MPI_DOUBLE_PRECISION, add_op, MPI_COMM_WORLD)
  failures = failures + count(abs(z - nranks * want) > 0)
  call MPI_Op_free(add_op)

  ! 4 bytes: below any FOLD_MPI_REDUCE_MIN but 0, so the MPI library takes it.
  call MPI_Reduce(failures, total_failures, 1, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD)
  if (rank == 0) then
     write (*, '(a, i0)') 'digest: ', int(sum(y * [(j, j = 1, n)]), 8)
     write (*, '(a, i0, a, i0, a, i0, a, i0, a, i0, a, i0, a)') 'expect: fold=', &
          3 * nranks, ' (allreduce=', 2 * nranks, ' reduce=', nranks, ') pmpi=', 2 * nranks, &
          ' (op=', nranks, ' small=', nranks, ')'
     if (total_failures > 0) then
        write (*, '(a, i0, a)') 'FAILED: ', total_failures, ' wrong results'
     else
        write (*, '(a)') 'passed'
     end if
  end if
  call MPI_Bcast(total_failures, 1, MPI_INTEGER, 0, MPI_COMM_WORLD)
  call MPI_Finalize()
  if (total_failures > 0) error stop 1
end program mpi_fortran_f08
