#include "transport.h"

#include <string.h>

const fold_tl_ops_t *const fold_tl_all[] = {&fold_tl_ucp_ops, &fold_tl_ofi_ops,
                                            &fold_tl_loopback_ops, NULL};

const fold_tl_ops_t *fold_tl_find(const char *name)
{
    for (int i = 0; fold_tl_all[i] != NULL; i++) {
        if (strcmp(fold_tl_all[i]->name, name) == 0) {
            return fold_tl_all[i];
        }
    }
    return NULL;
}
