/*
 * The order in which node-aware calls use the segment. Their flags count calls, so
 * every rank must run them in the order they were started, which is the same on
 * every rank: each call takes the next epoch and waits until it heads the queue.
 * A call that fails midway leaves the flags out of step: the node is then broken
 * and refuses further node-aware calls (the executor checks).
 */
#include "node/node.h"

#include <stddef.h>

void fold_node_turn_take(fold_node_t *node, fold_node_turn_t *turn)
{
    turn->epoch = ++node->epoch;
    turn->next  = NULL;
    if (node->tail != NULL) {
        node->tail->next = turn;
    } else {
        node->head = turn;
    }
    node->tail = turn;
}

void fold_node_turn_leave(fold_node_t *node, fold_node_turn_t *turn, int failed)
{
    if (turn->epoch == 0) {
        return;
    }
    fold_node_turn_t *prev = NULL;
    for (fold_node_turn_t *t = node->head; t != NULL; prev = t, t = t->next) {
        if (t != turn) {
            continue;
        }
        if (prev != NULL) {
            prev->next = t->next;
        } else {
            node->head = t->next;
        }
        if (node->tail == t) {
            node->tail = prev;
        }
        break;
    }
    turn->next  = NULL;
    turn->epoch = 0;
    if (failed) {
        node->broken = 1;
    }
}
