! MPI_ALLREDUCE and MPI_REDUCE from Fortran (use mpi), which Open MPI's bindings send
! straight to PMPI_*: the shim's Fortran entry points must see them. Double precision
! and integer data, out of place and with Fortran's MPI_IN_PLACE, on MPI_COMM_WORLD
! and a split communicator in reverse rank order; every result checked. Prints the
! "digest:" and "expect:" lines shim_run.sh compares; run it with fold serving
! 8 .. 8000 bytes (FOLD_MPI_*_MIN, FOLD_MPI_*_MAX).
program mpi_fortran
  use mpi
  implicit none
  integer, parameter :: n = 1000
  integer :: ierr, rank, nranks, sub, subrank, subsize, root
  integer :: failures, nallreduce, nreduce, total_failures
  double precision :: x(n), y(n)
  integer :: k(n), m(n)
  integer(kind=8) :: digest

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

end program mpi_fortran
