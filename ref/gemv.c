/* The decode GEMV: memory bound, so each variant streams 4 rows of W at once against one x
 * (x stays in L1/L2) and widens bf16 by a 16-bit shift. While a block of 4 rows is summed, the
 * next block (the bytes right after it) is prefetched into L2: with short rows (wq_b: 2.5 KiB)
 * the hardware prefetcher alone left much of the bandwidth unused. FMA is used only inside the
 * dot product's accumulation (the summation order is free there); tails run scalar. */
#include "ref/gemv.h"

#include <immintrin.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "ref/numerics.h"

/* ---- portable ---- */

static inline float w_bf16(const uint8_t *p, int64_t i)
{
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    return as_bf16_to_f32(h);
}

static inline float w_f32(const uint8_t *p, int64_t i)
{
    float v;
    memcpy(&v, p + 4 * i, 4);
    return v;
}

/* Four partial sums per row so the adds do not serialise on one register. */
#define PORTABLE_DOT(NAME, LOAD)                                                       \
    static float NAME(const float *x, const uint8_t *w, int64_t cols)                  \
    {                                                                                  \
        float a0 = 0, a1 = 0, a2 = 0, a3 = 0;                                          \
        int64_t i = 0;                                                                 \
        for (; i + 4 <= cols; i += 4) {                                                \
            a0 += x[i] * LOAD(w, i);                                                   \
            a1 += x[i + 1] * LOAD(w, i + 1);                                           \
            a2 += x[i + 2] * LOAD(w, i + 2);                                           \
            a3 += x[i + 3] * LOAD(w, i + 3);                                           \
        }                                                                              \
        for (; i < cols; i++)                                                          \
            a0 += x[i] * LOAD(w, i);                                                   \
        return (a0 + a1) + (a2 + a3);                                                  \
    }
PORTABLE_DOT(dot_bf16_portable, w_bf16)
PORTABLE_DOT(dot_f32_portable, w_f32)

static void gemv_bf16_portable(const float *x, const uint8_t *w, int64_t cols, int64_t n, float *y)
{
    for (int64_t o = 0; o < n; o++)
        y[o] = dot_bf16_portable(x, w + 2 * o * cols, cols);
}

static void gemv_f32_portable(const float *x, const uint8_t *w, int64_t cols, int64_t n, float *y)
{
    for (int64_t o = 0; o < n; o++)
        y[o] = dot_f32_portable(x, w + 4 * o * cols, cols);
}

/* ---- AVX2 + FMA: 8 lanes ---- */

#define AVX2 __attribute__((target("avx2,fma")))

AVX2 static inline __m256 bf16x8_avx2(const uint8_t *p)
{
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)p);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

AVX2 static inline float hsum_avx2(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#define AVX2_GEMV(NAME, ESZ, LOADV, TAILDOT)                                           \
    AVX2 static void NAME(const float *x, const uint8_t *w, int64_t cols, int64_t n, float *y) \
    {                                                                                  \
        const int64_t body = cols & ~(int64_t)7;                                       \
        int64_t o = 0;                                                                 \
        for (; o + 4 <= n; o += 4) {                                                   \
            const uint8_t *r0 = w + ESZ * o * cols, *r1 = r0 + ESZ * cols;             \
            const uint8_t *r2 = r1 + ESZ * cols, *r3 = r2 + ESZ * cols;                \
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                \
            const uintptr_t pf = (uintptr_t)r3 + ESZ * cols; /* next block; may be past \
                                          the tensor: a prefetch never faults */        \
            for (int64_t i = 0; i < body; i += 8) {                                    \
                _mm_prefetch((const char *)(pf + 4 * ESZ * i), _MM_HINT_T1);           \
                _mm_prefetch((const char *)(pf + 4 * ESZ * i + 64), _MM_HINT_T1);      \
                __m256 xv = _mm256_loadu_ps(x + i);                                    \
                a0 = _mm256_fmadd_ps(LOADV(r0 + ESZ * i), xv, a0);                     \
                a1 = _mm256_fmadd_ps(LOADV(r1 + ESZ * i), xv, a1);                     \
                a2 = _mm256_fmadd_ps(LOADV(r2 + ESZ * i), xv, a2);                     \
                a3 = _mm256_fmadd_ps(LOADV(r3 + ESZ * i), xv, a3);                     \
            }                                                                          \
            y[o] = hsum_avx2(a0) + TAILDOT(x + body, r0 + ESZ * body, cols - body);    \
            y[o + 1] = hsum_avx2(a1) + TAILDOT(x + body, r1 + ESZ * body, cols - body); \
            y[o + 2] = hsum_avx2(a2) + TAILDOT(x + body, r2 + ESZ * body, cols - body); \
            y[o + 3] = hsum_avx2(a3) + TAILDOT(x + body, r3 + ESZ * body, cols - body); \
        }                                                                              \
        for (; o < n; o++) {                                                           \
            const uint8_t *r0 = w + ESZ * o * cols;                                    \
            __m256 a0 = _mm256_setzero_ps();                                           \
            for (int64_t i = 0; i < body; i += 8)                                      \
                a0 = _mm256_fmadd_ps(LOADV(r0 + ESZ * i), _mm256_loadu_ps(x + i), a0); \
            y[o] = hsum_avx2(a0) + TAILDOT(x + body, r0 + ESZ * body, cols - body);    \
        }                                                                              \
    }
#define F32X8(p) _mm256_loadu_ps((const float *)(const void *)(p))
AVX2_GEMV(gemv_bf16_avx2, 2, bf16x8_avx2, dot_bf16_portable)
AVX2_GEMV(gemv_f32_avx2, 4, F32X8, dot_f32_portable)

/* ---- AVX-512: 16 lanes ---- */

#define AVX512 __attribute__((target("avx512f")))

AVX512 static inline __m512 bf16x16_avx512(const uint8_t *p)
{
    __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

#define AVX512_GEMV(NAME, ESZ, LOADV, TAILDOT)                                         \
    AVX512 static void NAME(const float *x, const uint8_t *w, int64_t cols, int64_t n, float *y) \
    {                                                                                  \
        const int64_t body = cols & ~(int64_t)15;                                      \
        int64_t o = 0;                                                                 \
        for (; o + 4 <= n; o += 4) {                                                   \
            const uint8_t *r0 = w + ESZ * o * cols, *r1 = r0 + ESZ * cols;             \
            const uint8_t *r2 = r1 + ESZ * cols, *r3 = r2 + ESZ * cols;                \
            __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                \
            const uintptr_t pf = (uintptr_t)r3 + ESZ * cols; /* next block; may be past \
                                          the tensor: a prefetch never faults */        \
            for (int64_t i = 0; i < body; i += 16) {                                   \
                _mm_prefetch((const char *)(pf + 4 * ESZ * i), _MM_HINT_T1);           \
                _mm_prefetch((const char *)(pf + 4 * ESZ * i + 64), _MM_HINT_T1);      \
                __m512 xv = _mm512_loadu_ps(x + i);                                    \
                a0 = _mm512_fmadd_ps(LOADV(r0 + ESZ * i), xv, a0);                     \
                a1 = _mm512_fmadd_ps(LOADV(r1 + ESZ * i), xv, a1);                     \
                a2 = _mm512_fmadd_ps(LOADV(r2 + ESZ * i), xv, a2);                     \
                a3 = _mm512_fmadd_ps(LOADV(r3 + ESZ * i), xv, a3);                     \
            }                                                                          \
            y[o] = _mm512_reduce_add_ps(a0) + TAILDOT(x + body, r0 + ESZ * body, cols - body); \
            y[o + 1] = _mm512_reduce_add_ps(a1) + TAILDOT(x + body, r1 + ESZ * body, cols - body); \
            y[o + 2] = _mm512_reduce_add_ps(a2) + TAILDOT(x + body, r2 + ESZ * body, cols - body); \
            y[o + 3] = _mm512_reduce_add_ps(a3) + TAILDOT(x + body, r3 + ESZ * body, cols - body); \
        }                                                                              \
        for (; o < n; o++) {                                                           \
            const uint8_t *r0 = w + ESZ * o * cols;                                    \
            __m512 a0 = _mm512_setzero_ps();                                           \
            for (int64_t i = 0; i < body; i += 16)                                     \
                a0 = _mm512_fmadd_ps(LOADV(r0 + ESZ * i), _mm512_loadu_ps(x + i), a0); \
            y[o] = _mm512_reduce_add_ps(a0) + TAILDOT(x + body, r0 + ESZ * body, cols - body); \
        }                                                                              \
    }
#define F32X16(p) _mm512_loadu_ps((const void *)(p))
AVX512_GEMV(gemv_bf16_avx512, 2, bf16x16_avx512, dot_bf16_portable)
AVX512_GEMV(gemv_f32_avx512, 4, F32X16, dot_f32_portable)

/* ---- fp8 e4m3 with B x B block scales (B = 32 or 128) ----
 * Each weight is decoded exactly as as_wt_rows_f32 does, w = bf16(fp8 * scale), in vector form:
 * the code's low 7 bits shifted to f32 bit 20 are the magnitude times 2^-120 (the exponent field
 * lands in f32's, and an e4m3 subnormal m * 2^-9 becomes the f32 subnormal m * 2^-129), so one
 * multiplication by 2^120 gives it exactly; the sign is or-ed back; 0x7f / 0xff and NaN scales
 * give NaN; then the product with the scale in f32 and bf16 round-to-nearest-even on the bits. */

AVX512 static inline __m512 fp8x16_avx512(const uint8_t *p, __m512 s)
{
    __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
    __m512i m = _mm512_and_si512(b, _mm512_set1_epi32(0x7f));
    __m512 v = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(m, 20)), _mm512_set1_ps(0x1p120f));
    __m512i sign = _mm512_slli_epi32(_mm512_and_si512(b, _mm512_set1_epi32(0x80)), 24);
    __m512 w = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(v), sign)), s);
    __m512i u = _mm512_castps_si512(w);
    __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd));
    r = _mm512_and_si512(r, _mm512_set1_epi32((int)0xffff0000u));
    __mmask16 nan = _mm512_cmpeq_epi32_mask(m, _mm512_set1_epi32(0x7f)) | _mm512_cmp_ps_mask(w, w, _CMP_UNORD_Q);
    return _mm512_mask_mov_ps(_mm512_castsi512_ps(r), nan, _mm512_set1_ps(NAN));
}

AVX2 static inline __m256 fp8x8_avx2(const uint8_t *p, __m256 s)
{
    __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p));
    __m256i m = _mm256_and_si256(b, _mm256_set1_epi32(0x7f));
    __m256 v = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(m, 20)), _mm256_set1_ps(0x1p120f));
    __m256i sign = _mm256_slli_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x80)), 24);
    __m256 w = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_or_si256(_mm256_castps_si256(v), sign)), s);
    __m256i u = _mm256_castps_si256(w);
    __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd));
    r = _mm256_and_si256(r, _mm256_set1_epi32((int)0xffff0000u));
    __m256 nan = _mm256_or_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(m, _mm256_set1_epi32(0x7f))),
                              _mm256_cmp_ps(w, w, _CMP_UNORD_Q));
    return _mm256_blendv_ps(_mm256_castsi256_ps(r), _mm256_set1_ps(NAN), nan);
}

/* The scalar twin, for column tails. */
static inline float fp8_weight(uint8_t b, float s) { return as_bf16(as_e4m3_from_bits(b) * s); }

/* Rows in blocks of 4 sharing the x loads (a short last block repeats its last row and drops
 * the extra results); per B-column block each row broadcasts its own scale. */
#define FP8_GEMV(NAME, ATTR, VEC, LANES, ZERO, SET1, LOADX, FMA, DECODE, HSUM)            \
    ATTR static void NAME(const float *x, const uint8_t *w, int64_t cols, int64_t n, int64_t r0, \
                          const float *sc, int64_t ldsc, int64_t blk, float *y)             \
    {                                                                                     \
        for (int64_t o = 0; o < n; o += 4) {                                              \
            const uint8_t *row[4];                                                        \
            const float *srow[4];                                                         \
            for (int k = 0; k < 4; k++) {                                                 \
                int64_t ok = o + k < n ? o + k : n - 1;                                   \
                row[k] = w + ok * cols;                                                   \
                srow[k] = sc + ((r0 + ok) / blk - r0 / blk) * ldsc; \
            }                                                                             \
            VEC a0 = ZERO(), a1 = a0, a2 = a0, a3 = a0;                                   \
            float t0 = 0, t1 = 0, t2 = 0, t3 = 0;                                         \
            for (int64_t c0 = 0; c0 < cols; c0 += blk) {                      \
                const int64_t cb = c0 / blk;                                  \
                const int64_t c1 = c0 + blk < cols ? c0 + blk : cols; \
                const VEC s0 = SET1(srow[0][cb]), s1 = SET1(srow[1][cb]);                 \
                const VEC s2 = SET1(srow[2][cb]), s3 = SET1(srow[3][cb]);                 \
                int64_t c = c0;                                                           \
                for (; c + LANES <= c1; c += LANES) {                                     \
                    VEC xv = LOADX(x + c);                                                \
                    a0 = FMA(DECODE(row[0] + c, s0), xv, a0);                             \
                    a1 = FMA(DECODE(row[1] + c, s1), xv, a1);                             \
                    a2 = FMA(DECODE(row[2] + c, s2), xv, a2);                             \
                    a3 = FMA(DECODE(row[3] + c, s3), xv, a3);                             \
                }                                                                         \
                for (; c < c1; c++) {                                                     \
                    t0 += x[c] * fp8_weight(row[0][c], srow[0][cb]);                      \
                    t1 += x[c] * fp8_weight(row[1][c], srow[1][cb]);                      \
                    t2 += x[c] * fp8_weight(row[2][c], srow[2][cb]);                      \
                    t3 += x[c] * fp8_weight(row[3][c], srow[3][cb]);                      \
                }                                                                         \
            }                                                                             \
            const float r[4] = {HSUM(a0) + t0, HSUM(a1) + t1, HSUM(a2) + t2, HSUM(a3) + t3}; \
            for (int k = 0; k < 4 && o + k < n; k++)                                      \
                y[o + k] = r[k];                                                          \
        }                                                                                 \
    }
FP8_GEMV(gemv_fp8_avx512, AVX512, __m512, 16, _mm512_setzero_ps, _mm512_set1_ps, _mm512_loadu_ps,
         _mm512_fmadd_ps, fp8x16_avx512, _mm512_reduce_add_ps)
FP8_GEMV(gemv_fp8_avx2, AVX2, __m256, 8, _mm256_setzero_ps, _mm256_set1_ps, _mm256_loadu_ps,
         _mm256_fmadd_ps, fp8x8_avx2, hsum_avx2)

/* The AVX-512BW fp8 kernel decodes in 3 operations instead: the sign-extended code shifted to
 * f32 bit 20 and masked keeps the sign in bit 31 and the 7 magnitude bits as an f32 exponent and
 * mantissa, a float worth exactly value * 2^-120 (subnormals included); times s * 2^120 (exact
 * for |s| < 2^7) it is value * s rounded once, as the decoder computes it. Per 128-column block:
 * power-of-two scales in [2^-117, 2^6] make every product exact in bf16, so the rounding is
 * skipped; other finite scales below 2^7 round on the bits; NaN codes, NaN / inf / huge scales
 * go through the scalar decoder. */

#define AVX512BW __attribute__((target("avx512f,avx512bw")))

enum { SCALE_EXACT, SCALE_ROUND, SCALE_SCALAR };

static inline int fp8_scale_kind(float s)
{
    if (!(fabsf(s) < 0x1p7f))
        return SCALE_SCALAR;
    if ((as_f32_bits(s) & 0x7fffffu) == 0 && fabsf(s) >= 0x1p-117f)
        return SCALE_EXACT;
    return SCALE_ROUND;
}

AVX512BW static inline __m512 e4m3x16_over_2p120(const uint8_t *p)
{
    __m512i b = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
    return _mm512_castsi512_ps(_mm512_and_si512(_mm512_slli_epi32(b, 20), _mm512_set1_epi32((int)0x87f00000u)));
}

/* bf16 round-to-nearest-even on the bits (finite or inf inputs: NaN never reaches it). */
AVX512BW static inline __m512 bf16_round_avx512(__m512 w)
{
    __m512i u = _mm512_castps_si512(w);
    __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd));
    return _mm512_castsi512_ps(_mm512_and_si512(r, _mm512_set1_epi32((int)0xffff0000u)));
}

/* Any NaN code (0x7f, 0xff) among n bytes: 64 at a time, the rest one by one. */
AVX512BW static inline bool has_nan_code(const uint8_t *p, int64_t n)
{
    const __m512i m7f = _mm512_set1_epi8(0x7f);
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        if (_mm512_cmpeq_epi8_mask(_mm512_and_si512(_mm512_loadu_si512((const void *)(p + i)), m7f), m7f))
            return true;
    for (; i < n; i++)
        if ((p[i] & 0x7f) == 0x7f)
            return true;
    return false;
}

AVX512BW static void gemv_fp8_avx512bw(const float *x, const uint8_t *w, int64_t cols, int64_t n, int64_t r0,
                                       const float *sc, int64_t ldsc, int64_t blk, float *y)
{
    for (int64_t o = 0; o < n; o += 4) {
        const uint8_t *row[4];
        const float *srow[4];
        for (int k = 0; k < 4; k++) { /* a short last block repeats its last row */
            int64_t ok = o + k < n ? o + k : n - 1;
            row[k] = w + ok * cols;
            srow[k] = sc + ((r0 + ok) / blk - r0 / blk) * ldsc;
        }
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        float t[4] = {0, 0, 0, 0};
        for (int64_t c0 = 0; c0 < cols; c0 += blk) {
            const int64_t cb = c0 / blk;
            const int64_t c1 = c0 + blk < cols ? c0 + blk : cols;
            const float sk[4] = {srow[0][cb], srow[1][cb], srow[2][cb], srow[3][cb]};
            int kind = SCALE_EXACT;
            for (int k = 0; k < 4; k++) {
                int kk = fp8_scale_kind(sk[k]);
                kind = kk > kind ? kk : kind;
                if (kind != SCALE_SCALAR && has_nan_code(row[k] + c0, c1 - c0))
                    kind = SCALE_SCALAR;
            }
            int64_t c = c0;
            if (kind != SCALE_SCALAR) {
                const __m512 s0 = _mm512_set1_ps(sk[0] * 0x1p120f), s1 = _mm512_set1_ps(sk[1] * 0x1p120f);
                const __m512 s2 = _mm512_set1_ps(sk[2] * 0x1p120f), s3 = _mm512_set1_ps(sk[3] * 0x1p120f);
                if (kind == SCALE_EXACT)
                    for (; c + 16 <= c1; c += 16) {
                        __m512 xv = _mm512_loadu_ps(x + c);
                        a0 = _mm512_fmadd_ps(_mm512_mul_ps(e4m3x16_over_2p120(row[0] + c), s0), xv, a0);
                        a1 = _mm512_fmadd_ps(_mm512_mul_ps(e4m3x16_over_2p120(row[1] + c), s1), xv, a1);
                        a2 = _mm512_fmadd_ps(_mm512_mul_ps(e4m3x16_over_2p120(row[2] + c), s2), xv, a2);
                        a3 = _mm512_fmadd_ps(_mm512_mul_ps(e4m3x16_over_2p120(row[3] + c), s3), xv, a3);
                    }
                else
                    for (; c + 16 <= c1; c += 16) {
                        __m512 xv = _mm512_loadu_ps(x + c);
                        a0 = _mm512_fmadd_ps(bf16_round_avx512(_mm512_mul_ps(e4m3x16_over_2p120(row[0] + c), s0)), xv, a0);
                        a1 = _mm512_fmadd_ps(bf16_round_avx512(_mm512_mul_ps(e4m3x16_over_2p120(row[1] + c), s1)), xv, a1);
                        a2 = _mm512_fmadd_ps(bf16_round_avx512(_mm512_mul_ps(e4m3x16_over_2p120(row[2] + c), s2)), xv, a2);
                        a3 = _mm512_fmadd_ps(bf16_round_avx512(_mm512_mul_ps(e4m3x16_over_2p120(row[3] + c), s3)), xv, a3);
                    }
            }
            for (; c < c1; c++) /* tail, or the whole block on the scalar path */
                for (int k = 0; k < 4; k++)
                    t[k] += x[c] * fp8_weight(row[k][c], sk[k]);
        }
        const float r[4] = {_mm512_reduce_add_ps(a0) + t[0], _mm512_reduce_add_ps(a1) + t[1],
                            _mm512_reduce_add_ps(a2) + t[2], _mm512_reduce_add_ps(a3) + t[3]};
        for (int k = 0; k < 4 && o + k < n; k++)
            y[o + k] = r[k];
    }
}

/* ---- dispatch ---- */

static atomic_int g_forced; /* AsIsa; AUTO = best this CPU has */

static AsIsa best_isa(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return AS_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return AS_ISA_AVX2;
    return AS_ISA_PORTABLE;
}

AsIsa as_gemv_isa(void)
{
    AsIsa f = (AsIsa)atomic_load(&g_forced);
    return f != AS_ISA_AUTO ? f : best_isa();
}

int as_gemv_force_isa(AsIsa isa)
{
    AsIsa best = best_isa();
    if ((isa == AS_ISA_AVX512 && best != AS_ISA_AVX512) ||
        (isa == AS_ISA_AVX2 && best == AS_ISA_PORTABLE))
        return -1;
    atomic_store(&g_forced, (int)isa);
    return 0;
}

const char *as_isa_name(AsIsa isa)
{
    switch (isa) {
    case AS_ISA_AUTO: return "auto";
    case AS_ISA_PORTABLE: return "portable";
    case AS_ISA_AVX2: return "avx2+fma";
    case AS_ISA_AVX512: return "avx512f";
    }
    return "?";
}

void as_gemv_bf16(const float *x, const void *w, int64_t cols, int64_t n, float *y)
{
    switch (as_gemv_isa()) {
    case AS_ISA_AVX512: gemv_bf16_avx512(x, w, cols, n, y); return;
    case AS_ISA_AVX2: gemv_bf16_avx2(x, w, cols, n, y); return;
    default: gemv_bf16_portable(x, w, cols, n, y); return;
    }
}

void as_gemv_f32(const float *x, const void *w, int64_t cols, int64_t n, float *y)
{
    switch (as_gemv_isa()) {
    case AS_ISA_AVX512: gemv_f32_avx512(x, w, cols, n, y); return;
    case AS_ISA_AVX2: gemv_f32_avx2(x, w, cols, n, y); return;
    default: gemv_f32_portable(x, w, cols, n, y); return;
    }
}

bool as_gemv_fp8(const float *x, const void *w, int64_t cols, int64_t n, int64_t r0, const float *scale,
                 int64_t ldscale, int block, float *y)
{
    switch (as_gemv_isa()) {
    case AS_ISA_AVX512:
        if (__builtin_cpu_supports("avx512bw"))
            gemv_fp8_avx512bw(x, w, cols, n, r0, scale, ldscale, block, y);
        else
            gemv_fp8_avx512(x, w, cols, n, r0, scale, ldscale, block, y);
        return true;
    case AS_ISA_AVX2: gemv_fp8_avx2(x, w, cols, n, r0, scale, ldscale, block, y); return true;
    default: return false;
    }
}
