/*
 * mpi_p2p_stream: what the MPI library's point-to-point path costs for the traffic of a
 * 2-rank reduce and allreduce, without any collective on top. Rank 1 sends N messages of
 * B bytes to rank 0 one blocking MPI_Send after another (a reduce's traffic), then the
 * two ping-pong N times (an exchange's latency). Run under different PMLs (ob1, ucx)
 * and transport settings, it tells a transport's cost from a collective library's.
 *
 *   mpirun -n 2 mpi_p2p_stream [-n N] BYTES...
 *
 * Prints, per size, microseconds a message of the stream and half a round trip, each
 * the second of two passes (the first connects and warms).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Microseconds per message of n messages of `bytes` from rank 1 to rank 0, each one
 * answered when `reply` (a ping-pong: then half a round trip each); a stream ends once
 * rank 0 has them all. */
static double exchange(char *buf, int bytes, int n, int rank, int reply)
{
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < n; i++) {
        if (rank == 1) {
            MPI_Send(buf, bytes, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
            if (reply) {
                MPI_Recv(buf, bytes, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
        } else if (rank == 0) {
            MPI_Recv(buf, bytes, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (reply) {
                MPI_Send(buf, bytes, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
            }
        }
    }
    if (!reply) {
        MPI_Barrier(MPI_COMM_WORLD);
    }
    return (MPI_Wtime() - t0) / n / (reply ? 2 : 1) * 1e6;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int n = 2000, first = 1;
    if (argc > 2 && strcmp(argv[1], "-n") == 0) {
        n = atoi(argv[2]);
        first = 3;
    }
    if (size < 2 || n < 1 || first >= argc) {
        if (rank == 0) {
            fprintf(stderr, "usage: mpirun -n 2 %s [-n N] BYTES...\n", argv[0]);
        }
        MPI_Finalize();
        return 2;
    }
    if (rank == 0) {
        printf("# bytes  stream_us_per_msg  half_round_trip_us\n");
    }
    for (int a = first; a < argc; a++) {
        const int bytes = atoi(argv[a]);
        char *buf = malloc(bytes > 0 ? (size_t)bytes : 1);
        for (int i = 0; i < bytes; i++) {
            buf[i] = (char)i;
        }
        double s = 0, p = 0;
        for (int pass = 0; pass < 2; pass++) {
            s = exchange(buf, bytes, n, rank, 0);
            p = exchange(buf, bytes, n, rank, 1);
        }
        if (rank == 0) {
            printf("%8d  %17.2f  %18.2f\n", bytes, s, p);
        }
        free(buf);
    }
    MPI_Finalize();
    return 0;
}
