/*
 * A transport's peers, by context rank, made on first use: a process keeps state
 * only for the ranks it talks to, not an entry per rank of the job. An
 * open-addressing hash table of pointers to the backend's own peer records (which
 * therefore never move), with the last lookup remembered: collectives talk to the
 * same few peers again and again.
 */
#ifndef FOLD_PEER_TABLE_H
#define FOLD_PEER_TABLE_H

#include <stddef.h>

typedef struct fold_peer_table {
    int    *ranks;       /* per slot: the rank, or -1 for an empty slot */
    void  **peers;       /* per slot: the record */
    size_t  cap;         /* slots, a power of two (0 before the first insert) */
    size_t  count;       /* records */
    int     last_rank;   /* the last rank found, -1 for none */
    void   *last;
} fold_peer_table_t;

void  fold_peer_table_init(fold_peer_table_t *t);
/* Forgets every record (the caller frees the records themselves first). */
void  fold_peer_table_release(fold_peer_table_t *t);
/* The record of rank, or NULL. */
void *fold_peer_table_find(fold_peer_table_t *t, int rank);
/* Adds the record of a rank not in the table; FOLD_ERR_NO_MEMORY when it cannot grow. */
int   fold_peer_table_add(fold_peer_table_t *t, int rank, void *peer);

/* Visits every record: for (size_t i = 0; i < t->cap; i++) if (t->ranks[i] >= 0) ... */
static inline void *fold_peer_table_slot(const fold_peer_table_t *t, size_t i)
{
    return t->ranks[i] >= 0 ? t->peers[i] : NULL;
}

#endif
