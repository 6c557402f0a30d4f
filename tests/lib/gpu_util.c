#include "tests/lib/gpu_util.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <string.h>

#include "ref/numerics.h"
#include "tests/lib/harness.h"

#define GPU_CHECK(call, what)                                                                  \
    do {                                                                                       \
        cudaError_t rc_ = (call);                                                              \
        REQUIRE(rc_ == cudaSuccess, "%s: %s", what, cudaGetErrorString(rc_));                  \
    } while (0)

void *as_gpu_alloc(size_t bytes)
{
    void *p = NULL;
    GPU_CHECK(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc");
    return p;
}

void as_gpu_free(void *p) { cudaFree(p); }

void *as_gpu_bytes(const void *host, size_t bytes)
{
    void *p = as_gpu_alloc(bytes);
    if (bytes)
        GPU_CHECK(cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
    return p;
}

as_bf16_t *as_gpu_bf16(const float *host, int64_t n)
{
    uint16_t *tmp = malloc(sizeof(uint16_t) * (size_t)(n ? n : 1));
    REQUIRE(tmp, "out of host memory");
    for (int64_t i = 0; i < n; i++)
        tmp[i] = as_bf16_bits(host[i]);
    as_bf16_t *d = as_gpu_bytes(tmp, sizeof(uint16_t) * (size_t)n);
    free(tmp);
    return d;
}

float *as_gpu_f32(const float *host, int64_t n) { return as_gpu_bytes(host, sizeof(float) * (size_t)n); }

void as_gpu_get_bytes(void *host, const void *dev, size_t bytes)
{
    if (bytes)
        GPU_CHECK(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
}

void as_gpu_get_bf16(float *host, const as_bf16_t *dev, int64_t n)
{
    uint16_t *tmp = malloc(sizeof(uint16_t) * (size_t)(n ? n : 1));
    REQUIRE(tmp, "out of host memory");
    as_gpu_get_bytes(tmp, dev, sizeof(uint16_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        host[i] = as_bf16_to_f32(tmp[i]);
    free(tmp);
}

void as_gpu_get_f32(float *host, const float *dev, int64_t n) { as_gpu_get_bytes(host, dev, sizeof(float) * (size_t)n); }

void as_gpu_sync(const char *what) { GPU_CHECK(cudaDeviceSynchronize(), what); }

void as_gpu_check_launch(int rc, const char *what)
{
    REQUIRE(rc == 0, "%s: launch failed: %s", what, cudaGetErrorString((cudaError_t)rc));
    as_gpu_sync(what);
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void as_fill_uniform(float *x, int64_t n, float a, uint64_t seed, int bf16)
{
    uint64_t s = seed * 0x2545f4914f6cdd1dull + 1;
    for (int64_t i = 0; i < n; i++) {
        float u = (float)(splitmix(&s) >> 40) / (float)(1ull << 24); /* [0, 1) */
        float v = (2.0f * u - 1.0f) * a;
        x[i] = bf16 ? as_bf16(v) : v;
    }
}

static int64_t ordered(float v)
{
    int32_t b = (int32_t)as_bf16_bits(v);
    return b & 0x8000 ? -(int64_t)(b & 0x7fff) : (int64_t)b;
}

int64_t as_count_ulp_diffs(const float *got, const float *want, int64_t n, int max_ulp, const char *what)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(got[i]) || isnan(want[i]) || llabs(ordered(got[i]) - ordered(want[i])) > max_ulp) {
            if (bad < 5)
                as_test_note("%s: element %ld: got %.9g, want %.9g", what, (long)i, got[i], want[i]);
            bad++;
        }
    }
    return bad;
}

void *as_test_xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    REQUIRE(p, "out of host memory (%zu bytes)", bytes);
    return p;
}

void as_gpu_poison(void *dev, size_t bytes)
{
    cudaError_t rc = cudaMemset(dev, 0xff, bytes);
    REQUIRE(rc == cudaSuccess, "cudaMemset: %s", cudaGetErrorString(rc));
}

static int64_t ordered_bits(uint16_t b) { return b & 0x8000 ? -(int64_t)(b & 0x7fff) : (int64_t)b; }

AsBf16Diff as_diff_bf16(const char *what, const uint16_t *got, const uint16_t *want, int64_t rows, int64_t cols,
                        int max_ulp)
{
    AsBf16Diff d = {0, 0, 0};
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            uint16_t g = got[r * cols + c], w = want[r * cols + c];
            int gn = as_bf16_is_nan_bits(g), wn = as_bf16_is_nan_bits(w);
            int64_t dist = 0;
            if (gn && wn) {
                d.nans++;
                continue;
            }
            if (g == w)
                continue;
            if (!gn && !wn) {
                dist = llabs(ordered_bits(g) - ordered_bits(w));
                if (dist == 0)
                    dist = 1;
                if (dist <= max_ulp) {
                    d.near++;
                    continue;
                }
            }
            if (d.bad < 6)
                as_test_note("%s: [%lld][%lld]: got 0x%04x (%.9g), want 0x%04x (%.9g), %s%lld ulp", what, (long long)r,
                             (long long)c, g, as_bf16_to_f32(g), w, as_bf16_to_f32(w), gn || wn ? "NaN on one side, " : "",
                             (long long)dist);
            d.bad++;
        }
    return d;
}
