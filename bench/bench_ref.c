/* Micro-benchmark of the reference's hot paths at the flash geometry: memory read bandwidth
 * (the floor a decode step is measured against), the decode GEMV (GB/s of weights streamed),
 * the prefill linear (GFLOP/s against plain sgemm) and the sparse attention.
 *
 * Not built by `make`; after `make BUILD=build-b build-b/attnscope_tests`:
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -fopenmp -I. bench/bench_ref.c build-b/libattnscope.a \
 *       -lopenblas -lm -o build-b/bench_ref && ./build-b/bench_ref [threads]
 */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/weights.h"
#include "ref/attention.h"
#include "ref/gemm.h"
#include "ref/gemv.h"
#include "ref/linear.h"
#include "ref/numerics.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint32_t seed = 1;
static float rnd(void)
{
    seed = seed * 1664525u + 1013904223u;
    return (float)(seed >> 8) / 16777216.0f * 2 - 1;
}

static AsWTensor bf16_weight(const char *name, int64_t rows, int64_t cols)
{
    AsWTensor t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "%s", name);
    uint16_t *d = malloc((size_t)(rows * cols) * 2);
    for (int64_t i = 0; i < rows * cols; i++)
        d[i] = as_bf16_bits(rnd() * 0.05f);
    t.dtype = AS_DT_BF16;
    t.ndim = 2;
    t.shape[0] = rows;
    t.shape[1] = cols;
    t.data = d;
    t.nbytes = rows * cols * 2;
    return t;
}

/* Sums 16 floats at a time with 4 accumulators: reads every byte, as a GEMV does. */
__attribute__((target("avx512f"))) static float sum_avx512(const float *b, int64_t n)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i + 64 <= n; i += 64) {
        a0 = _mm512_add_ps(a0, _mm512_loadu_ps(b + i));
        a1 = _mm512_add_ps(a1, _mm512_loadu_ps(b + i + 16));
        a2 = _mm512_add_ps(a2, _mm512_loadu_ps(b + i + 32));
        a3 = _mm512_add_ps(a3, _mm512_loadu_ps(b + i + 48));
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

/* An F8_E4M3 weight with F32 block scales (the official checkpoint's storage): arbitrary values,
 * or powers of two (UE8M0-style scales). */
static AsWTensor fp8_weight(const char *name, int64_t rows, int64_t cols, AsWTensor *scale, bool pow2)
{
    AsWTensor t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "%s", name);
    uint8_t *d = malloc((size_t)(rows * cols));
    for (int64_t i = 0; i < rows * cols; i++)
        d[i] = as_e4m3_bits(rnd() * 100);
    int64_t sr = (rows + 127) / 128, sc = (cols + 127) / 128;
    float *s = malloc((size_t)(sr * sc) * 4);
    for (int64_t i = 0; i < sr * sc; i++)
        s[i] = pow2 ? ldexpf(1.0f, -10 - (int)(i % 3)) : 1e-3f * (1 + rnd());
    memset(scale, 0, sizeof *scale);
    *scale = (AsWTensor){.dtype = AS_DT_F32, .ndim = 2, .shape = {sr, sc}, .data = s, .nbytes = sr * sc * 4};
    t = (AsWTensor){.dtype = AS_DT_F8_E4M3, .ndim = 2, .shape = {rows, cols}, .data = d, .nbytes = rows * cols,
                    .scale = scale};
    snprintf(t.name, sizeof t.name, "%s", name);
    return t;
}

/* Best-of-n read bandwidth over a buffer much larger than the caches. */
static double read_bandwidth(int nt)
{
    const int64_t n = (int64_t)1 << 28; /* 1 GiB of floats */
    float *b = malloc((size_t)n * sizeof *b);
#pragma omp parallel for num_threads(nt)
    for (int64_t i = 0; i < n; i++)
        b[i] = (float)(i & 7);
    double best = 0, sink = 0;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now(), s = 0;
        const int64_t chunk = 1 << 16;
#pragma omp parallel for num_threads(nt) reduction(+ : s) schedule(dynamic)
        for (int64_t i = 0; i < n; i += chunk)
            s += sum_avx512(b + i, chunk);
        double dt = now() - t0;
        sink += s;
        if (n * 4 / dt > best)
            best = n * 4 / dt;
    }
    free(b);
    return sink < 0 ? 0 : best / 1e9;
}

static void bench_gemv(const AsWTensor *w)
{
    int64_t rows = w->shape[0], cols = w->shape[1];
    float *x = malloc((size_t)cols * 4), *y = malloc((size_t)rows * 4);
    for (int64_t i = 0; i < cols; i++)
        x[i] = as_bf16(rnd());
    as_linear(x, 1, w, y, true); /* warm */
    double best = 1e9;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now();
        as_linear(x, 1, w, y, true);
        double dt = now() - t0;
        if (dt < best)
            best = dt;
    }
    printf("  GEMV  %-8s %6lldx%-5lld %-7s %7.2f ms  %6.1f GB/s\n", w->name, (long long)rows, (long long)cols,
           as_dtype_name(w->dtype), best * 1e3, (double)w->nbytes / best / 1e9);
    free(x);
    free(y);
}

static void bench_linear_s(const AsWTensor *w, int64_t s)
{
    int64_t rows = w->shape[0], cols = w->shape[1];
    float *x = malloc((size_t)(s * cols) * 4), *y = malloc((size_t)(s * rows) * 4);
    for (int64_t i = 0; i < s * cols; i++)
        x[i] = as_bf16(rnd());
    double best = 1e9;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now();
        as_linear(x, s, w, y, true);
        double dt = now() - t0;
        if (dt < best)
            best = dt;
    }
    printf("  linear %-8s s %4lld  %8.2f ms  %6.1f GFLOP/s\n", w->name, (long long)s, best * 1e3,
           2.0 * s * rows * cols / best / 1e9);
    free(x);
    free(y);
}

static void bench_sgemm(int64_t m, int64_t n, int64_t k)
{
    float *a = malloc((size_t)(m * k) * 4), *b = malloc((size_t)(n * k) * 4), *c = malloc((size_t)(m * n) * 4);
    for (int64_t i = 0; i < m * k; i++)
        a[i] = rnd();
    for (int64_t i = 0; i < n * k; i++)
        b[i] = rnd();
    double best = 1e9;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now();
        as_sgemm_nt(m, n, k, a, k, b, k, c, n); /* serial OpenBLAS on each thread's columns */
        double dt = now() - t0;
        if (dt < best)
            best = dt;
    }
    printf("  as_sgemm_nt %lldx%lldx%lld         %8.2f ms  %6.1f GFLOP/s\n", (long long)m, (long long)n,
           (long long)k, best * 1e3, 2.0 * m * n * k / best / 1e9);
    free(a);
    free(b);
    free(c);
}

static void bench_attention(int64_t s, int64_t topk)
{
    const int nh = 64, hd = 512;
    int64_t nrows = s + 1024;
    float *q = malloc((size_t)(s * nh * hd) * 4), *rows = malloc((size_t)(nrows * hd) * 4);
    float *o = malloc((size_t)(s * nh * hd) * 4), sink[64];
    int32_t *idx = malloc((size_t)(s * topk) * 4);
    for (int64_t i = 0; i < s * nh * hd; i++)
        q[i] = as_bf16(rnd() * 0.1f);
    for (int64_t i = 0; i < nrows * hd; i++)
        rows[i] = as_bf16(rnd());
    for (int h = 0; h < nh; h++)
        sink[h] = rnd();
    for (int64_t t = 0; t < s; t++)
        for (int64_t c = 0; c < topk; c++)
            idx[t * topk + c] = (int32_t)((t * 7 + c * 13) % nrows);
    double t0 = now();
    as_sparse_attention(q, rows, nrows, idx, topk, sink, o, s, nh, hd, 1.0f / sqrtf((float)hd));
    double dt = now() - t0;
    printf("  sparse attention s %lld, 64 heads, hd 512, %lld rows: %8.2f ms  %6.1f GFLOP/s\n", (long long)s,
           (long long)topk, dt * 1e3, 4.0 * s * nh * hd * topk / dt / 1e9);
    free(q);
    free(rows);
    free(o);
    free(idx);
}

int main(int argc, char **argv)
{
    as_ref_set_threads(argc > 1 ? atoi(argv[1]) : 0);
    int nt = as_ref_threads();
    printf("threads %d, GEMV variant %s\n", nt, as_isa_name(as_gemv_isa()));
    double bw = read_bandwidth(nt);
    printf("  memory read bandwidth (streaming, best of 3): %.1f GB/s\n", bw);
    AsWTensor wq_a = bf16_weight("wq_a", 1280, 5120), wq_b = bf16_weight("wq_b", 32768, 1280);
    AsWTensor wkv = bf16_weight("wkv", 512, 5120), wo_a = bf16_weight("wo_a", 8192, 4096);
    AsWTensor wo_b = bf16_weight("wo_b", 5120, 8192);
    const AsWTensor *all[5] = {&wq_a, &wq_b, &wkv, &wo_a, &wo_b};
    double bytes = 0, t_total = 0;
    for (int i = 0; i < 5; i++) {
        bench_gemv(all[i]);
        bytes += (double)all[i]->nbytes;
    }
    /* one decode step's projections, once through (cold caches between tensors) */
    float *x = calloc(8192, 4), *y = calloc(32768, 4);
    for (int i = 0; i < 5; i++) {
        double t0 = now();
        as_linear(x, 1, all[i], y, true);
        t_total += now() - t0;
    }
    printf("  one layer's projections (%.0f MB): %.2f ms = %.1f GB/s; floor at %.1f GB/s: %.2f ms (x%.2f)\n",
           bytes / 1e6, t_total * 1e3, bytes / t_total / 1e9, bw, bytes / bw / 1e6, t_total / (bytes / bw / 1e9));
    free(x);
    free(y);
    for (int pow2 = 0; pow2 < 2; pow2++) {
        AsWTensor f8s, f8 = fp8_weight(pow2 ? "wq_b ue8" : "wq_b f32", 32768, 1280, &f8s, pow2);
        bench_gemv(&f8);
        if (!pow2)
            bench_linear_s(&f8, 512);
        free((void *)f8.data);
        free((void *)f8s.data);
    }
    for (int64_t s = 2; s <= 16; s *= 2)
        bench_linear_s(&wq_b, s);
    bench_linear_s(&wq_b, 512);
    bench_linear_s(&wo_b, 512);
    bench_sgemm(512, 32768, 1280);
    bench_attention(1, 640);
    bench_attention(64, 640);
    for (int i = 0; i < 5; i++)
        free((void *)all[i]->data);
    return 0;
}
