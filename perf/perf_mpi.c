#include "perf_mpi.h"

#include <limits.h>
#include <mpi.h>
#include <stdio.h>

int perf_mpi_built(void)
{
    return 1;
}

int perf_mpi_init(int *argc, char ***argv, int *rank, int *size)
{
    if (MPI_Init(argc, argv) != MPI_SUCCESS) {
        fprintf(stderr, "fold_perf: MPI_Init failed\n");
        return -1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    return 0;
}

int perf_mpi_initialized(void)
{
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    return initialized && !finalized;
}

void perf_mpi_finalize(void)
{
    if (perf_mpi_initialized()) {
        MPI_Finalize();
    }
}

void perf_mpi_abort(int code)
{
    MPI_Abort(MPI_COMM_WORLD, code);
}

int perf_mpi_barrier(void)
{
    return MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
}

int perf_mpi_oob_allgather(const void *sendbuf, void *recvbuf, size_t len, void *arg)
{
    (void)arg;
    if (len > INT_MAX) {
        return -1;
    }
    /* MPI_Allgather takes a non-const send buffer in MPI-2 headers. */
    return MPI_Allgather((void *)sendbuf, (int)len, MPI_BYTE, recvbuf, (int)len, MPI_BYTE,
                         MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
}

static MPI_Datatype mpi_dtype(fold_dtype_t dtype)
{
    switch (dtype) {
    case FOLD_INT8:    return MPI_INT8_T;
    case FOLD_INT16:   return MPI_INT16_T;
    case FOLD_INT32:   return MPI_INT32_T;
    case FOLD_INT64:   return MPI_INT64_T;
    case FOLD_UINT8:   return MPI_UINT8_T;
    case FOLD_UINT16:  return MPI_UINT16_T;
    case FOLD_UINT32:  return MPI_UINT32_T;
    case FOLD_UINT64:  return MPI_UINT64_T;
    case FOLD_FLOAT32: return MPI_FLOAT;
    case FOLD_FLOAT64: return MPI_DOUBLE;
    case FOLD_FLOAT_INT:  return MPI_FLOAT_INT;
    case FOLD_DOUBLE_INT: return MPI_DOUBLE_INT;
    case FOLD_LONG_INT:   return MPI_LONG_INT;
    case FOLD_2INT:       return MPI_2INT;
    case FOLD_SHORT_INT:  return MPI_SHORT_INT;
    case FOLD_COMPLEX_FLOAT32: return MPI_C_FLOAT_COMPLEX;
    case FOLD_COMPLEX_FLOAT64: return MPI_C_DOUBLE_COMPLEX;
    default:           return MPI_DATATYPE_NULL;
    }
}

static MPI_Op mpi_op(fold_op_t op)
{
    switch (op) {
    case FOLD_OP_SUM:  return MPI_SUM;
    case FOLD_OP_PROD: return MPI_PROD;
    case FOLD_OP_MIN:  return MPI_MIN;
    case FOLD_OP_MAX:  return MPI_MAX;
    case FOLD_OP_BAND: return MPI_BAND;
    case FOLD_OP_BOR:  return MPI_BOR;
    case FOLD_OP_BXOR: return MPI_BXOR;
    case FOLD_OP_LAND: return MPI_LAND;
    case FOLD_OP_LOR:  return MPI_LOR;
    case FOLD_OP_LXOR: return MPI_LXOR;
    case FOLD_OP_MAXLOC: return MPI_MAXLOC;
    case FOLD_OP_MINLOC: return MPI_MINLOC;
    default:           return MPI_OP_NULL;
    }
}

int perf_mpi_supports(fold_dtype_t dtype, fold_op_t op, size_t count, const char **why)
{
    int is_float = dtype == FOLD_FLOAT32 || dtype == FOLD_FLOAT64;
    int is_logical = op == FOLD_OP_LAND || op == FOLD_OP_LOR || op == FOLD_OP_LXOR;
    if (mpi_dtype(dtype) == MPI_DATATYPE_NULL) {
        *why = "MPI has no predefined datatype for it";
    } else if (mpi_op(op) == MPI_OP_NULL) {
        *why = "MPI has no predefined op for it";
    } else if (is_float && is_logical) {
        *why = "MPI's logical ops take integer datatypes only";
    } else if (count > INT_MAX) {
        *why = "the count exceeds MPI's int";
    } else {
        return 1;
    }
    return 0;
}

int perf_mpi_collective(perf_coll_t coll, const void *sendbuf, void *recvbuf, size_t count,
                        fold_dtype_t dtype, fold_op_t op, int root, int inplace)
{
    MPI_Datatype type = mpi_dtype(dtype);
    MPI_Op mop = mpi_op(op);
    int rc;
    if (coll == PERF_COLL_ALLREDUCE) {
        rc = MPI_Allreduce(inplace ? MPI_IN_PLACE : sendbuf, recvbuf, (int)count, type, mop,
                           MPI_COMM_WORLD);
    } else {
        int rank;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        /* MPI_IN_PLACE is for the root only; elsewhere the input is passed as sendbuf,
         * and the (insignificant) receive buffer must not alias it. */
        const void *in = inplace ? (rank == root ? MPI_IN_PLACE : recvbuf) : sendbuf;
        void *out = rank == root ? recvbuf : NULL;
        rc = MPI_Reduce(in, out, (int)count, type, mop, root, MPI_COMM_WORLD);
    }
    return rc == MPI_SUCCESS ? 0 : -1;
}

const char *perf_mpi_library_version(void)
{
    static char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (version[0] == '\0') {
        MPI_Get_library_version(version, &len);
        /* Keep the first line: Open MPI appends repository details after a comma. */
        for (int i = 0; i < len && version[i] != '\0'; i++) {
            if (version[i] == '\n' || version[i] == ',') {
                version[i] = '\0';
                break;
            }
        }
    }
    return version;
}
