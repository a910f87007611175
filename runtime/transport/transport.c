#include "transport.h"

#include <string.h>

const fold_tl_ops_t *const fold_tl_all[] = {&fold_tl_ucp_ops, &fold_tl_ofi_ops,
                                            &fold_tl_loopback_ops, NULL};

const char *fold_tl_cap_name(unsigned flag)
{
    switch (flag) {
    case FOLD_TL_CAP_ORDERED:    return "in-order matching of messages with one peer and tag";
    case FOLD_TL_CAP_SEND_REUSE: return "send buffers free for reuse once the send completes";
    case FOLD_TL_CAP_TRUNCATION: return "over-long messages reported as truncated";
    default:                     return NULL;
    }
}

const fold_tl_ops_t *fold_tl_find(const char *name)
{
    for (int i = 0; fold_tl_all[i] != NULL; i++) {
        if (strcmp(fold_tl_all[i]->name, name) == 0) {
            return fold_tl_all[i];
        }
    }
    return NULL;
}
