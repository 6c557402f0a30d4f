/* Deterministic inputs for the quantiser tests (tests/test_quants.c) and for the ggml oracle
 * that produced their expected digests (tests/lib/oracle/ggml_oracle.c): the same values on every
 * machine (integer hashing and exact float arithmetic only). */
#ifndef AS_TEST_QUANTS_INPUTS_H
#define AS_TEST_QUANTS_INPUTS_H

#include <stdint.h>
#include <string.h>

#define AS_QI_CASES 10
#define AS_QI_N 2048 /* values per case: 8 Q2_K super-blocks, 64 Q8_0 blocks */

static inline uint64_t as_qi_hash(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Uniform in [-1, 1) with 24 random bits (exact in a float). */
static inline float as_qi_uniform(uint64_t h) { return (float)(int32_t)(h >> 40) * 0x1p-23f - 1.0f; }

/* Sum of four uniforms: roughly normal, sd about 1.15. */
static inline float as_qi_normal(uint64_t h)
{
    float s = 0;
    for (int k = 0; k < 4; k++)
        s += as_qi_uniform(as_qi_hash(h + (uint64_t)k));
    return s;
}

static inline float as_qi_bf16(float x) /* round to bf16, nearest even */
{
    uint32_t u;
    memcpy(&u, &x, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}

/* Value i of case c:
 * 0 normal sd ~1; 1 normal sd ~0.02 (weight-like); 2 normal + 3 (all positive); 3 normal - 3 (all
 * negative); 4 uniform [-1, 1); 5 sparse spikes in zeros; 6 sub-blocks that are all zero, constant,
 * or one outlier; 7 super-blocks alternating scale 1e4 and 1e-6; 8 bf16-rounded normal; 9 exact
 * 2-bit grids (k * s + m, k in 0..3). */
static inline float as_qi_value(int c, int i)
{
    uint64_t h = as_qi_hash(((uint64_t)c << 32) | (uint64_t)i);
    int sub = i / 16, sb = i / 256;
    switch (c) {
    case 0: return as_qi_normal(h);
    case 1: return 0.02f * as_qi_normal(h);
    case 2: return as_qi_normal(h) + 3.0f;
    case 3: return as_qi_normal(h) - 3.0f;
    case 4: return as_qi_uniform(h);
    case 5: return (h & 31) == 0 ? 4.0f * as_qi_uniform(h >> 5) : 0.0f;
    case 6: {
        int kind = sub % 4;
        if (kind == 0) return 0.0f;
        if (kind == 1) return -0.75f;
        if (kind == 2) return i % 16 == 5 ? 8.0f : 0.01f * as_qi_uniform(h);
        return as_qi_uniform(h);
    }
    case 7: return (sb % 2 ? 1e-6f : 1e4f) * as_qi_normal(h);
    case 8: return as_qi_bf16(as_qi_normal(h));
    default: return (float)(h % 4) * (float)(1 + sub % 3) - (float)(sub % 2);
    }
}

#endif
