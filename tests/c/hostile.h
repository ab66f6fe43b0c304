/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The attacker's numbers of the hostile-peer tests: a xorshift generator
 * with a fixed seed (a failing run repeats itself) and the values an
 * attacker would pick near a valid one.
 */
#ifndef FI_XPU_TEST_HOSTILE_H
#define FI_XPU_TEST_HOSTILE_H

#include <stdint.h>

static uint64_t rng_state = 0x243f6a8885a308d3ULL;

static inline uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* A value an attacker would pick near `v`. */
static inline uint64_t evil(uint64_t v)
{
	switch (rnd() % 6) {
	case 0: return rnd();
	case 1: return v - 1 - rnd() % 64;
	case 2: return v + 1 + rnd() % 64;
	case 3: return UINT64_MAX - rnd() % 4096;
	case 4: return (uint64_t)1 << (rnd() % 64);
	default: return 0;
	}
}

#endif
