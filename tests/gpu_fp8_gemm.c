/* kernels/fp8_gemm.cu against its CPU twin ref/fp8_linear.c (as_fp8_linear, the prefill path: act_quant
 * of every row, then the 32-wide blocks in order), with tests/gpu_fp8_gemv.c's rule: per element exact,
 * one bf16 ulp, or within 2^-16 mag (the blocks' f32 order) on exact-grid data and on the fallback, 2^-8 mag
 * on random data through the tensor cores (their fp8 accumulation inside a block); SPEC 6 over the tensor.
 * Cases: the flash prefill shapes (wq_a at 4096 tokens, the others at 256 to 4096 as the CPU twin's time
 * allows), tiny's, and awkward ones: 1, 9, 127, 129, 200 tokens (a 128-token tile's edges), outputs not a
 * multiple of the 128-wide tile or of 8, n_in 32, 96, 160, 224 (a 128-byte stage cut short), 128-blocks;
 * the GEMV fallback (other devices) on some of them. The wgmma kernel runs on a compute capability 9.0
 * device only; elsewhere the cases check the fallback and say so. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "ref/fp8_linear.h"
#include "tests/lib/fp8_cases.h"
#include "tests/lib/gpu_fp8.h"
#include "tests/lib/gpu_util.h"
#include "tests/lib/harness.h"

int as_k_fp8_gemm_cfg(const AsFp8Weight *w, const AsFp8Act *x, int s, as_bf16_t *y, int64_t ldy, int fallback,
                      cudaStream_t st);

typedef struct {
    const char *name;
    int s, n_out, n_in, B;
} Case;

static int64_t run_gemm(const Case *c, int grid, int fallback, uint64_t seed)
{
    if (as_test_fp8_small_only() && (int64_t)c->s * c->n_out * c->n_in > ((int64_t)1 << 24)) {
        as_test_note("%s: skipped (AS_KTEST_SMALL)", c->name);
        return 0;
    }
    const int s = c->s, no = c->n_out, ni = c->n_in;
    AsTestFp8Case k;
    as_test_fp8_case(&k, no, ni, c->B, s, grid, seed);
    const float *x = k.x;
    const AsTestFp8Dev d = k.d;
    const AsFp8Act xa = k.xa;
    const int wgmma = !fallback && as_k_fp8_gemm_applies(&d.w, &xa);
    const int64_t ldy = no + 5;
    uint16_t *dy = as_gpu_alloc(2 * (size_t)(s + 1) * ldy);
    as_gpu_poison(dy, 2 * (size_t)(s + 1) * ldy);
    char what[200];
    snprintf(what, sizeof what, "fp8 gemm %s s=%d %dx%d block %d%s%s", c->name, s, no, ni, c->B,
             wgmma ? " (wgmma)" : " (GEMV fallback)", grid ? " grid" : "");
    as_gpu_check_launch(as_k_fp8_gemm_cfg(&d.w, &xa, s, dy, ldy, fallback, 0), what);
    uint16_t *got = as_test_xmalloc(2 * (size_t)(s + 1) * ldy);
    as_gpu_get_bytes(got, dy, 2 * (size_t)(s + 1) * ldy);
    float *want = as_test_xmalloc(sizeof(float) * (size_t)s * no);
    double *mag = as_test_xmalloc(sizeof(double) * (size_t)s * no);
    as_fp8_linear(x, s, &k.f.w, want);
    as_test_fp8_magnitudes(x, s, &k.f.w, 0, mag);
    const AsTestFp8Cmp r = as_test_fp8_compare(what, got, ldy, want, mag, s, no, grid || !wgmma ? 0x1p-16 : 0x1p-8);
    int64_t outside = 0;
    for (int t = 0; t <= s; t++)
        for (int64_t o = t < s ? no : 0; o < ldy; o++)
            outside += got[t * ldy + o] != 0xffff;
    CHECK(r.bad == 0, "%s: %lld of %lld outputs outside the rule", what, (long long)r.bad, (long long)s * no);
    CHECK(r.spec6_ok, "%s: max error %.3g beyond SPEC 6's %.3g", what, r.max_err, r.max_want * 0x1p-7 + 1e-4);
    CHECK(outside == 0, "%s: %lld elements written outside the output", what, (long long)outside);
    as_test_fp8_note(what, &r);
    free(got), free(want), free(mag);
    as_gpu_free(dy);
    as_test_fp8_case_free(&k);
    return r.bad;
}

GPU_TEST(gpu_fp8_gemm_flash_shapes)
{
    const Case cases[] = {{"wq_a", 4096, 1280, 5120, 32}, {"wq_b", 512, 32768, 1280, 32}, {"wkv", 4096, 512, 5120, 32},
                          {"wo_b", 256, 5120, 8192, 32},  {"indexer.wq_b", 1024, 4096, 1280, 32}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_gemm(&cases[i], 0, 0, 10 + i);
        run_gemm(&cases[i], 1, 0, 20 + i);
    }
}

GPU_TEST(gpu_fp8_gemm_tiny_and_awkward)
{
    const Case cases[] = {{"tiny wq_a", 20, 32, 64, 32},     {"tiny wq_b", 20, 256, 32, 32},   {"tiny wkv", 9, 64, 64, 32},
                          {"tiny wo_b", 17, 64, 32, 32},     {"one token", 1, 300, 160, 32},  {"9 tokens", 9, 129, 96, 32},
                          {"127 tokens", 127, 13, 224, 32},  {"129 tokens", 129, 100, 32, 32}, {"200 tokens", 200, 384, 416, 128},
                          {"257 tokens", 257, 1000, 1312, 32}, {"128-block tail", 130, 77, 160, 128}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_gemm(&cases[i], 0, 0, 30 + i);
        run_gemm(&cases[i], 1, 0, 50 + i);
    }
}

GPU_TEST(gpu_fp8_gemm_fallback)
{
    const Case cases[] = {{"fallback", 19, 300, 1312, 32}, {"fallback tiny wq_b", 12, 256, 32, 32},
                          {"fallback 128-blocks", 33, 200, 384, 128}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_gemm(&cases[i], 0, 1, 70 + i);
}
