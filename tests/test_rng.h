/*
 * The tests' pseudo-random numbers: xorshift64*, deterministic from the seed, good
 * enough to spread bits over inputs.
 */
#ifndef FOLD_TEST_RNG_H
#define FOLD_TEST_RNG_H

#include <stdint.h>

static inline uint64_t rng_next(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

#endif
