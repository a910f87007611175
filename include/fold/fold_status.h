/*
 * fold status codes. 0 is success, FOLD_INPROGRESS means "not finished yet",
 * every negative value is an error; fold_status_string() names each one.
 */
#ifndef FOLD_STATUS_H
#define FOLD_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fold_status {
    FOLD_OK                  =   0,
    FOLD_INPROGRESS          =   1,
    FOLD_ERR_INVALID_ARG     =  -1, /* NULL buffer, bad root, unknown datatype or op, ... */
    FOLD_ERR_NO_MEMORY       =  -2,
    FOLD_ERR_UNSUPPORTED     =  -3, /* valid request this build or transport cannot serve */
    FOLD_ERR_NOT_INITIALIZED =  -4, /* handle used after fold_finalize() or never created */
    FOLD_ERR_TIMEOUT         =  -5, /* a wait exceeded FOLD_TIMEOUT */
    FOLD_ERR_TRANSPORT       =  -6, /* the network layer reported a failure */
    FOLD_ERR_BOOTSTRAP       =  -7, /* PMIx or the out-of-band allgather failed */
    FOLD_ERR_TRUNCATED       =  -8, /* a peer sent more than expected: mismatched calls */
    FOLD_ERR_PEER_FAILED     =  -9, /* a peer process is unreachable or died */
    FOLD_ERR_NOT_FOUND       = -10, /* unknown algorithm, transport or variable name */
    FOLD_ERR_MALFORMED       = -11, /* malformed data (e.g. a corrupt encoded buffer) */
    FOLD_ERR_CANCELED        = -12,
    FOLD_ERR_BUSY            = -13, /* too many outstanding operations */
    FOLD_ERR_MISMATCH        = -14, /* the ranks called with different arguments */
    FOLD_ERR_IN_USE          = -15, /* another thread is inside a call on this context */
    FOLD_ERR_LAST            = -16
} fold_status_t;

/* A static, human-readable name for any status value (never NULL). */
const char *fold_status_string(int status);

/* What differed between the ranks' arguments in the last mismatch this thread found
 * since it last asked (a call that returned FOLD_ERR_MISMATCH, or whose log named
 * one), as FOLD_MISMATCH_* bits, and forgets it; 0 if it found none (a rank told by
 * another that their calls differ may know no more). The MPI shim reports a count
 * alone as MPI_ERR_TRUNCATE. */
#define FOLD_MISMATCH_COLLECTIVE (1u << 0)
#define FOLD_MISMATCH_COUNT      (1u << 1)
#define FOLD_MISMATCH_DATATYPE   (1u << 2)
#define FOLD_MISMATCH_OP         (1u << 3)
#define FOLD_MISMATCH_ROOT       (1u << 4)
#define FOLD_MISMATCH_IN_PLACE   (1u << 5)
#define FOLD_MISMATCH_CALL       (1u << 6)   /* the call's number on its communicator */
#define FOLD_MISMATCH_MEMORY     (1u << 7)   /* buffers in fold memory on some ranks only,
                                                where that changes the algorithm */
unsigned fold_mismatch_fields(void);

#ifdef __cplusplus
}
#endif
#endif
