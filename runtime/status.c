#include <fold/fold.h>

const char *fold_status_string(int status)
{
    switch (status) {
    case FOLD_OK:                  return "success";
    case FOLD_INPROGRESS:          return "operation in progress";
    case FOLD_ERR_INVALID_ARG:     return "invalid argument";
    case FOLD_ERR_NO_MEMORY:       return "out of memory";
    case FOLD_ERR_UNSUPPORTED:     return "unsupported operation";
    case FOLD_ERR_NOT_INITIALIZED: return "not initialized (or already finalized)";
    case FOLD_ERR_TIMEOUT:         return "timed out";
    case FOLD_ERR_TRANSPORT:       return "transport error";
    case FOLD_ERR_BOOTSTRAP:       return "bootstrap (PMIx or out-of-band) error";
    case FOLD_ERR_TRUNCATED:       return "message truncated (mismatched calls)";
    case FOLD_ERR_PEER_FAILED:     return "peer failed or unreachable";
    case FOLD_ERR_NOT_FOUND:       return "not found";
    case FOLD_ERR_MALFORMED:       return "malformed data";
    case FOLD_ERR_CANCELED:        return "canceled";
    case FOLD_ERR_BUSY:            return "resource busy";
    case FOLD_ERR_IN_USE:          return "another thread is using this context";
    case FOLD_ERR_MISMATCH:        return "mismatched calls (the ranks passed different arguments)";
    default:                       return "unknown status";
    }
}

const char *fold_version_string(void)
{
    return FOLD_VERSION_STRING;
}
