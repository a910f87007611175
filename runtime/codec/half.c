/*
 * IEEE binary16 and bfloat16 <-> float32, in portable integer arithmetic so the
 * result does not depend on the FPU's rounding mode or flush-to-zero setting.
 * Narrowing rounds to nearest, ties to even. A NaN stays a NaN with its sign and
 * the top bits of its payload, and comes out quiet (as F16C hardware does).
 */
#include "reduce_kernel.h"

#include <stdint.h>
#include <string.h>

#define F32_SIGN      0x80000000u
#define F32_ABS       0x7fffffffu
#define F32_INF       0x7f800000u
#define F32_QUIET     0x00400000u
#define F32_MANT      0x007fffffu
#define F32_HIDDEN    0x00800000u

#define F16_INF       0x7c00u
#define F16_QUIET     0x0200u
#define F16_MANT      0x03ffu
#define F16_MIN_NORM  0x0400u

#define BF16_QUIET    0x0040u

/* Exponent bias difference between float32 (127) and binary16 (15). */
#define F32_F16_REBIAS ((uint32_t)(127 - 15) << 23)

static float float_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static uint32_t bits_from_float(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

float fold_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t mag = h & 0x7fffu;

    if (mag >= F16_INF) {
        uint32_t bits = F32_INF | ((mag & F16_MANT) << 13);
        return float_from_bits(sign | (mag > F16_INF ? bits | F32_QUIET : bits));
    }
    if (mag >= F16_MIN_NORM) {
        return float_from_bits(sign | ((mag << 13) + F32_F16_REBIAS));
    }
    /* Subnormal or zero: mag * 2^-24 is exact in float32 (a small integer scaled
     * by a power of two whose result is a normal float). */
    float magnitude = (float)mag * 0x1p-24f;
    return float_from_bits(sign | bits_from_float(magnitude));
}

/* Shifts right by `shift` (1..31), rounding to nearest, ties to even. */
static uint32_t shift_round_even(uint32_t value, unsigned shift)
{
    uint32_t kept = value >> shift;
    uint32_t rest = value & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1);
    return kept + (rest > halfway || (rest == halfway && (kept & 1u)));
}

uint16_t fold_float_to_half(float f)
{
    uint32_t u = bits_from_float(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t mag = u & F32_ABS;

    if (mag > F32_INF) {
        return (uint16_t)(sign | F16_INF | F16_QUIET | ((mag >> 13) & F16_MANT));
    }
    /* 65520 is halfway between the largest half (65504) and 2^16; the tie goes to
     * the even neighbour, which is infinity. */
    if (mag >= 0x477ff000u) {
        return (uint16_t)(sign | F16_INF);
    }
    if (mag >= 0x38800000u) {
        /* Normal half (>= 2^-14): rebias, then drop 13 mantissa bits rounding to
         * even. A carry out of the mantissa correctly bumps the exponent. */
        return (uint16_t)(sign | shift_round_even(mag - F32_F16_REBIAS, 13));
    }
    /* Subnormal half: the result is round(|f| * 2^24) units of 2^-24. With
     * |f| = m * 2^(e - 150) that is m >> (126 - e); below 2^-25 it rounds to 0. */
    unsigned exponent = mag >> 23;
    unsigned shift = 126u - exponent;
    if (shift > 24) {
        return sign;
    }
    uint32_t mantissa = (mag & F32_MANT) | F32_HIDDEN;
    return (uint16_t)(sign | shift_round_even(mantissa, shift));
}

float fold_bf16_to_float(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    if ((u & F32_ABS) > F32_INF) {
        u |= F32_QUIET;
    }
    return float_from_bits(u);
}

uint16_t fold_float_to_bf16(float f)
{
    uint32_t u = bits_from_float(f);
    if ((u & F32_ABS) > F32_INF) {
        return (uint16_t)((u >> 16) | BF16_QUIET);
    }
    /* bfloat16 is the top half of a float32: round the bottom 16 bits away. A carry
     * into the exponent is correct, including overflow to infinity. */
    return (uint16_t)(shift_round_even(u, 16));
}
