! MPI_ALLREDUCE and MPI_REDUCE from Fortran (use mpi), which Open MPI's bindings send
! straight to PMPI_*: the shim's Fortran entry points must see them. Double precision
! and integer data, out of place and with Fortran's MPI_IN_PLACE, on MPI_COMM_WORLD
! and a split communicator in reverse rank order, MPI_MAXLOC on MPI_2INTEGER, a sum
! of MPI_DOUBLE_COMPLEX, and two ops made with MPI_OP_CREATE (one not commutative),
! which fold runs with Fortran's arguments; every result checked. Prints the
! "digest:" and "expect:" lines shim_run.sh compares; run it with fold serving
! 8 .. 8000 bytes (FOLD_MPI_*_MIN, FOLD_MPI_*_MAX).
module fortran_user_ops
  use mpi
  implicit none
  ! Only its own names: gfortran finds MPICH's MPI routines ambiguous when they reach
  ! the program through this module as well as through its own use mpi.
  private
  public :: wrong_types, keep_first, add_doubles
  integer :: wrong_types = 0
contains
  ! a op b = a: associative, not commutative; the result is rank 0's input.
  subroutine keep_first(invec, inoutvec, len, datatype)
    integer :: len, datatype
    integer :: invec(len), inoutvec(len)
    if (datatype /= MPI_INTEGER) wrong_types = wrong_types + 1
    inoutvec = invec
  end subroutine keep_first

  subroutine add_doubles(invec, inoutvec, len, datatype)
    integer :: len, datatype
    double precision :: invec(len), inoutvec(len)
    if (datatype /= MPI_DOUBLE_PRECISION) wrong_types = wrong_types + 1
    inoutvec = inoutvec + invec
  end subroutine add_doubles
end module fortran_user_ops

program mpi_fortran
  use mpi
  use fortran_user_ops
  implicit none
  integer, parameter :: n = 1000
  integer :: ierr, rank, nranks, sub, subrank, subsize, root
  integer :: failures, nallreduce, nreduce, total_failures
  double precision :: x(n), y(n)
  integer :: k(n), m(n)
  integer :: pin(2, 100), pout(2, 100), j
  double complex :: zin(100), zout(100)
  integer(kind=8) :: digest
  integer :: first_op, add_op

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  failures = 0
  nallreduce = 0
  nreduce = 0
  digest = 0

  ! Sum of doubles, out of place, then in place.
  call fill_doubles(x, rank)
  call MPI_Allreduce(x, y, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  nallreduce = nallreduce + 1
  call check_sum(y, nranks)
  call MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  nallreduce = nallreduce + 1
  call check_sum(x, nranks)

  ! Max of integers to the last rank, in place there.
  root = nranks - 1
  call fill_integers(k, rank)
  if (rank == root) then
     call MPI_Reduce(MPI_IN_PLACE, k, n, MPI_INTEGER, MPI_MAX, root, MPI_COMM_WORLD, ierr)
     call check_max(k, nranks)
  else
     call MPI_Reduce(k, m, n, MPI_INTEGER, MPI_MAX, root, MPI_COMM_WORLD, ierr)
  end if
  nreduce = nreduce + 1

  ! MAXLOC on pairs of integers (value, rank): the largest value and the lowest rank
  ! holding it. Then a sum of double complex numbers.
  do j = 1, 100
     pin(1, j) = val(rank, j)
     pin(2, j) = rank
     zin(j) = dcmplx(dble(val(rank, j)), dble(val(rank, j + 1)))
  end do
  call MPI_Allreduce(pin, pout, 100, MPI_2INTEGER, MPI_MAXLOC, MPI_COMM_WORLD, ierr)
  nallreduce = nallreduce + 1
  call check_maxloc(pout, nranks)
  call MPI_Allreduce(zin, zout, 100, MPI_DOUBLE_COMPLEX, MPI_SUM, MPI_COMM_WORLD, ierr)
  nallreduce = nallreduce + 1
  call check_complex_sum(zout, nranks)

  ! User ops: the first rank's integers to everybody, a sum of doubles to rank 0.
  call MPI_Op_create(keep_first, .false., first_op, ierr)
  call MPI_Op_create(add_doubles, .true., add_op, ierr)
  call fill_integers(k, rank)
  call MPI_Allreduce(k, m, n, MPI_INTEGER, first_op, MPI_COMM_WORLD, ierr)
  nallreduce = nallreduce + 1
  call check_first(m)
  call fill_doubles(x, rank)
  call MPI_Reduce(x, y, n, MPI_DOUBLE_PRECISION, add_op, 0, MPI_COMM_WORLD, ierr)
  nreduce = nreduce + 1
  if (rank == 0) call check_sum(y, nranks)
  call MPI_Op_free(first_op, ierr)
  call MPI_Op_free(add_op, ierr)
  failures = failures + wrong_types

  ! The same on a split communicator whose ranks run in reverse world order.
  call MPI_Comm_split(MPI_COMM_WORLD, 0, nranks - rank, sub, ierr)
  call MPI_Comm_rank(sub, subrank, ierr)
  call MPI_Comm_size(sub, subsize, ierr)
  call fill_doubles(x, subrank)
  call MPI_Allreduce(x, y, n, MPI_DOUBLE_PRECISION, MPI_SUM, sub, ierr)
  nallreduce = nallreduce + 1
  call check_sum(y, subsize)
  call fill_integers(k, subrank)
  call MPI_Reduce(k, m, n, MPI_INTEGER, MPI_MAX, 0, sub, ierr)
  nreduce = nreduce + 1
  if (subrank == 0) call check_max(m, subsize)
  call MPI_Comm_free(sub, ierr)

  ! 4 bytes: below any FOLD_MPI_REDUCE_MIN but 0, so the MPI library takes it.
  call MPI_Reduce(failures, total_failures, 1, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
     write (*, '(a, i0)') 'digest: ', digest
     write (*, '(a, i0, a, i0, a, i0, a, i0, a, i0, a)') 'expect: fold=', &
          (nallreduce + nreduce) * nranks, ' (allreduce=', nallreduce * nranks, &
          ' reduce=', nreduce * nranks, ') pmpi=', nranks, ' (small=', nranks, ')'
     if (total_failures > 0) then
        write (*, '(a, i0, a)') 'FAILED: ', total_failures, ' wrong results'
     else
        write (*, '(a)') 'passed'
     end if
  end if
  call MPI_Bcast(total_failures, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  call MPI_Finalize(ierr)
  if (total_failures > 0) error stop 1

contains

  integer function val(r, i)
    integer, intent(in) :: r, i
    val = mod(r * 7 + i * 3, 11) - 5
  end function val

  subroutine fill_doubles(a, r)
    double precision, intent(out) :: a(n)
    integer, intent(in) :: r
    integer :: j
    do j = 1, n
       a(j) = dble(val(r, j))
    end do
  end subroutine fill_doubles

  subroutine fill_integers(a, r)
    integer, intent(out) :: a(n)
    integer, intent(in) :: r
    integer :: j
    do j = 1, n
       a(j) = val(r, j)
    end do
  end subroutine fill_integers

  subroutine check_sum(a, p)
    double precision, intent(in) :: a(n)
    integer, intent(in) :: p
    integer :: j, r
    double precision :: want
    do j = 1, n
       want = 0
       do r = 0, p - 1
          want = want + dble(val(r, j))
       end do
       if (abs(a(j) - want) > 0) failures = failures + 1
       digest = mod(digest * 31_8 + int(a(j), 8) + 17_8, 1000000007_8)
    end do
  end subroutine check_sum

  subroutine check_max(a, p)
    integer, intent(in) :: a(n)
    integer, intent(in) :: p
    integer :: j, r, want
    do j = 1, n
       want = val(0, j)
       do r = 1, p - 1
          want = max(want, val(r, j))
       end do
       if (a(j) /= want) failures = failures + 1
       digest = mod(digest * 31_8 + int(a(j), 8) + 17_8, 1000000007_8)
    end do
  end subroutine check_max

  subroutine check_first(a)
    integer, intent(in) :: a(n)
    integer :: j
    do j = 1, n
       if (a(j) /= val(0, j)) failures = failures + 1
       digest = mod(digest * 31_8 + int(a(j), 8) + 17_8, 1000000007_8)
    end do
  end subroutine check_first

  subroutine check_maxloc(a, p)
    integer, intent(in) :: a(2, 100)
    integer, intent(in) :: p
    integer :: i, r, want, at
    do i = 1, 100
       want = val(0, i)
       at = 0
       do r = 1, p - 1
          if (val(r, i) > want) then
             want = val(r, i)
             at = r
          end if
       end do
       if (a(1, i) /= want .or. a(2, i) /= at) failures = failures + 1
       digest = mod(digest * 31_8 + int(a(1, i) * 64 + a(2, i), 8) + 17_8, 1000000007_8)
    end do
  end subroutine check_maxloc

  subroutine check_complex_sum(a, p)
    double complex, intent(in) :: a(100)
    integer, intent(in) :: p
    integer :: i, r
    double precision :: re, im
    do i = 1, 100
       re = 0
       im = 0
       do r = 0, p - 1
          re = re + dble(val(r, i))
          im = im + dble(val(r, i + 1))
       end do
       if (abs(dble(a(i)) - re) > 0 .or. abs(aimag(a(i)) - im) > 0) failures = failures + 1
       digest = mod(digest * 31_8 + int(dble(a(i)) * 64 + aimag(a(i)), 8) + 17_8, &
                    1000000007_8)
    end do
  end subroutine check_complex_sum

end program mpi_fortran
