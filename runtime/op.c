/*
 * User-operation registry. A user op is a slot in a fixed table; its fold_op_t is
 * FOLD_OP_USER_FIRST + slot, so lookups are an index, not a search. Freed slots are
 * reused (lowest first). One process-wide mutex guards the table: ops are created
 * and freed rarely, and a lookup happens once per local reduction, not per element.
 */
#include "codec/reduce_kernel.h"
#include "log.h"

#include <fold/fold.h>

#include <pthread.h>

#define USER_OP_SLOTS 256

typedef struct user_op {
    fold_user_op_fn fn;   /* NULL: slot free */
    void           *arg;
    int             commutative;
} user_op_t;

static user_op_t user_ops[USER_OP_SLOTS];
static pthread_mutex_t user_ops_lock = PTHREAD_MUTEX_INITIALIZER;

/* The slot of a user op value, or -1 if the value cannot name one. */
static int user_op_slot(fold_op_t op)
{
    long slot = (long)op - FOLD_OP_USER_FIRST;
    return (slot >= 0 && slot < USER_OP_SLOTS) ? (int)slot : -1;
}

int fold_op_create(fold_user_op_fn fn, void *arg, int commutative, fold_op_t *op)
{
    if (fn == NULL || op == NULL) {
        fold_error("fold_op_create: %s is NULL", fn == NULL ? "fn" : "op");
        return FOLD_ERR_INVALID_ARG;
    }

    pthread_mutex_lock(&user_ops_lock);
    int slot = 0;
    while (slot < USER_OP_SLOTS && user_ops[slot].fn != NULL) {
        slot++;
    }
    if (slot < USER_OP_SLOTS) {
        user_ops[slot] = (user_op_t){.fn = fn, .arg = arg, .commutative = commutative != 0};
    }
    pthread_mutex_unlock(&user_ops_lock);

    if (slot == USER_OP_SLOTS) {
        fold_error("fold_op_create: all %d user-op slots are in use", USER_OP_SLOTS);
        return FOLD_ERR_NO_MEMORY;
    }
    *op = (fold_op_t)(FOLD_OP_USER_FIRST + slot);
    return FOLD_OK;
}

int fold_op_free(fold_op_t op)
{
    int slot = user_op_slot(op);
    int found = 0;

    if (slot >= 0) {
        pthread_mutex_lock(&user_ops_lock);
        found = user_ops[slot].fn != NULL;
        user_ops[slot] = (user_op_t){0};
        pthread_mutex_unlock(&user_ops_lock);
    }
    if (!found) {
        fold_error("fold_op_free: op %d is not a registered user op", (int)op);
        return FOLD_ERR_INVALID_ARG;
    }
    return FOLD_OK;
}

int fold_user_op_lookup(fold_op_t op, fold_user_op_fn *fn, void **arg, int *commutative)
{
    int slot = user_op_slot(op);
    if (slot < 0) {
        return FOLD_ERR_INVALID_ARG;
    }

    pthread_mutex_lock(&user_ops_lock);
    user_op_t entry = user_ops[slot];
    pthread_mutex_unlock(&user_ops_lock);

    if (entry.fn == NULL) {
        return FOLD_ERR_INVALID_ARG;
    }
    *fn = entry.fn;
    *arg = entry.arg;
    *commutative = entry.commutative;
    return FOLD_OK;
}

int fold_op_is_commutative(fold_op_t op)
{
    if ((int)op >= 0 && op < FOLD_OP_PREDEFINED_COUNT) {
        return 1;
    }
    fold_user_op_fn fn;
    void *arg;
    int commutative;
    return fold_user_op_lookup(op, &fn, &arg, &commutative) == FOLD_OK && commutative;
}
