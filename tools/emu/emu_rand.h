// The emulator checks' random numbers: splitmix64 on g_rs, which a case reseeds (g_rs = seed) so
// that it draws the same values whatever ran before it.
#pragma once

#include <cstdint>

extern "C" {
#include "ref/numerics.h"
}

static uint64_t g_rs;

static inline uint64_t rnd()
{
    uint64_t z = (g_rs += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Uniform in [-a, a): as drawn (urnd_f32), or rounded to bf16 (urnd: values a bf16 tensor can hold).
static inline float urnd_f32(float a) { return (2.0f * (float)(rnd() >> 40) / 16777216.0f - 1.0f) * a; }
static inline float urnd(float a) { return as_bf16(urnd_f32(a)); }
