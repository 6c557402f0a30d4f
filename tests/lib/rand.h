/* The tests' random draws: splitmix64 on g_rs, which a case reseeds (g_rs = seed) so that it draws
 * the same values whatever ran before it. One copy per test file (static). */
#ifndef AS_TEST_RAND_H
#define AS_TEST_RAND_H

#include <stdint.h>

static uint64_t g_rs;

static inline uint64_t rnd(void)
{
    uint64_t z = (g_rs += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-a, a), as drawn (not rounded). */
static inline float urnd(float a) { return (2.0f * (float)(rnd() >> 40) / 16777216.0f - 1.0f) * a; }

#endif
