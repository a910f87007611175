/*
 * FNV-1a, 64 bits: the runtime's one hash for fingerprints (selection settings,
 * communicator shapes). Not for adversarial input.
 */
#ifndef FOLD_HASH_H
#define FOLD_HASH_H

#include <stddef.h>
#include <stdint.h>

#define FOLD_HASH_INIT 0xcbf29ce484222325ull

static inline uint64_t fold_hash(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h = (h ^ p[i]) * 0x100000001b3ull;
    }
    return h;
}

#endif
