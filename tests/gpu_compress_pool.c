/* kernels/compress_pool.cu against the reference's ratio >= 2 compressor. Two twins:
 *   - ref/compressor.c as_compress_pooled itself, fed x = [ckv | csc] with selection weights
 *     (wkv = [I 0], wgate = [0 I], f32: the projections reproduce ckv and csc exactly), norm
 *     weights 1: its partial-group state must equal the kernel's bit for bit, and its latents
 *     (after its rmsnorm) must equal as_rmsnorm of the kernel's latents;
 *   - as_softmax_pool (ref/attention.c) on the same groups: the kernel's pre-norm latents.
 * Latents may differ by 1 bf16 ulp only where the device's expf and glibc's differ in the last
 * f32 bit (counted and reported; none expected); the state is copied, never rounded: exact.
 * Prefill of odd / even s (s < r, s == r, groups plus a remainder), then chains of decode steps
 * carrying the state (start_pos odd and even, groups completing every r steps), each step
 * compared; r = 2 at the flash (hd 512) and tiny (hd 64) widths, r = 4 for generality. Score
 * channels mix ordinary values, exact ties (equal scores), huge spreads (weights that underflow
 * to 0) and near-equal scores. The latent buffer is poisoned before every call: rows past the
 * completed groups must stay poison. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ref/attention.h"
#include "ref/compressor.h"
#include "ref/numerics.h"
#include "ref/rmsnorm.h"
#include "tests/lib/gpu_util.h"
#include "tests/lib/harness.h"

/* ---- helpers ---- */

/* ---- the compressor's context: selection weights, state on both sides ---- */

typedef struct {
    const char *geom;
    int r, hd;
    float eps;
    float *wkv_data, *wgate_data, *norm;
    AsWTensor wkv, wgate;
    float *part_kv, *part_sc;    /* host state (the reference's) */
    float *dpart_kv, *dpart_sc;  /* device state */
    int64_t near_latents;        /* pre-norm latents 1 ulp from as_softmax_pool, all steps */
    int64_t latents_checked;
    int steps;
} Ctx;

static void ctx_init(Ctx *c, const char *geom, int r, int hd)
{
    memset(c, 0, sizeof *c);
    c->geom = geom;
    c->r = r;
    c->hd = hd;
    c->eps = 1e-20f;
    const int64_t nw = (int64_t)hd * 2 * hd;
    c->wkv_data = as_test_xmalloc(sizeof(float) * (size_t)nw);
    c->wgate_data = as_test_xmalloc(sizeof(float) * (size_t)nw);
    memset(c->wkv_data, 0, sizeof(float) * (size_t)nw);
    memset(c->wgate_data, 0, sizeof(float) * (size_t)nw);
    for (int o = 0; o < hd; o++) {
        c->wkv_data[(int64_t)o * 2 * hd + o] = 1.0f;        /* kv[o] = x[o] */
        c->wgate_data[(int64_t)o * 2 * hd + hd + o] = 1.0f; /* score[o] = x[hd + o] */
    }
    AsWTensor *w[2] = {&c->wkv, &c->wgate};
    float *data[2] = {c->wkv_data, c->wgate_data};
    for (int k = 0; k < 2; k++) {
        memset(w[k], 0, sizeof *w[k]);
        snprintf(w[k]->name, sizeof w[k]->name, "test.compressor.%s.weight", k ? "wgate" : "wkv");
        w[k]->dtype = AS_DT_F32;
        w[k]->ndim = 2;
        w[k]->shape[0] = hd;
        w[k]->shape[1] = 2 * hd;
        w[k]->data = data[k];
        w[k]->nbytes = (int64_t)sizeof(float) * nw;
        w[k]->scale = NULL;
    }
    c->norm = as_test_xmalloc(sizeof(float) * (size_t)hd);
    for (int i = 0; i < hd; i++)
        c->norm[i] = 1.0f;
    const int64_t ns = (int64_t)r * hd;
    c->part_kv = as_test_xmalloc(sizeof(float) * (size_t)ns);
    c->part_sc = as_test_xmalloc(sizeof(float) * (size_t)ns);
    c->dpart_kv = as_gpu_alloc(sizeof(float) * (size_t)ns);
    c->dpart_sc = as_gpu_alloc(sizeof(float) * (size_t)ns);
}

static void ctx_free(Ctx *c)
{
    free(c->wkv_data), free(c->wgate_data), free(c->norm), free(c->part_kv), free(c->part_sc);
    as_gpu_free(c->dpart_kv);
    as_gpu_free(c->dpart_sc);
}

/* The empty state on both sides (the reference's: kv 0, score -inf); checks the reset kernel. */
static void ctx_reset(Ctx *c)
{
    const int64_t ns = (int64_t)c->r * c->hd;
    as_gpu_poison(c->dpart_kv, sizeof(float) * (size_t)ns);
    as_gpu_poison(c->dpart_sc, sizeof(float) * (size_t)ns);
    as_gpu_check_launch(as_k_compress_state_reset(c->dpart_kv, c->dpart_sc, (int)ns, 0), "as_k_compress_state_reset");
    for (int64_t i = 0; i < ns; i++) {
        c->part_kv[i] = 0.0f;
        c->part_sc[i] = -INFINITY;
    }
    float *kv = as_test_xmalloc(sizeof(float) * (size_t)ns), *sc = as_test_xmalloc(sizeof(float) * (size_t)ns);
    as_gpu_get_f32(kv, c->dpart_kv, ns);
    as_gpu_get_f32(sc, c->dpart_sc, ns);
    int64_t bad = 0;
    for (int64_t i = 0; i < ns; i++)
        if ((as_f32_bits(kv[i]) != 0u || as_f32_bits(sc[i]) != 0xff800000u) && bad++ < 3)
            as_test_note("state reset %s r=%d hd=%d: [%lld]: kv 0x%08x (want 0), score 0x%08x (want -inf 0xff800000)",
                         c->geom, c->r, c->hd, (long long)i, as_f32_bits(kv[i]), as_f32_bits(sc[i]));
    CHECK(bad == 0, "state reset %s r=%d hd=%d: %lld of %lld state elements not (0, -inf)", c->geom, c->r, c->hd,
          (long long)bad, (long long)ns);
    free(kv), free(sc);
}

/* Projections of s tokens: ckv [s][hd], csc [s][hd] (f32, not bf16 values: the compressor's
 * GEMM outputs are unrounded). Score channel d by d % 4: ordinary [-8, 8]; one value for every
 * token (exact ties); a spread of [-200, 200] (weights underflow to 0); near-equal [-1e-3, 1e-3]. */
static void make_inputs(float *ckv, float *csc, int s, int hd, uint64_t seed)
{
    as_fill_uniform(ckv, (int64_t)s * hd, 4.0f, seed, 0);
    as_fill_uniform(csc, (int64_t)s * hd, 1.0f, seed + 31, 0);
    for (int t = 0; t < s; t++)
        for (int d = 0; d < hd; d++) {
            float *v = &csc[(int64_t)t * hd + d];
            switch (d % 4) {
            case 0: *v *= 8.0f; break;
            case 1: *v = 0.5f + 0.125f * (float)(d % 7); break;
            case 2: *v *= 200.0f; break;
            default: *v *= 1e-3f; break;
            }
        }
}

/* One call: prefill (start_pos 0, s tokens) or decode (s 1). */
static void step(Ctx *c, int s, int start_pos, uint64_t seed, int quiet)
{
    const int r = c->r, hd = c->hd;
    char what[200];
    snprintf(what, sizeof what, "compress_pool %s r=%d hd=%d %s s=%d start_pos=%d", c->geom, r, hd,
             start_pos ? "decode" : "prefill", s, start_pos);
    const int n_exp = start_pos == 0 ? s / r : ((start_pos + 1) % r == 0);
    const int cap = n_exp + 1; /* one poison row past the latents */

    float *ckv = as_test_xmalloc(sizeof(float) * (size_t)s * hd), *csc = as_test_xmalloc(sizeof(float) * (size_t)s * hd);
    make_inputs(ckv, csc, s, hd, seed);
    float *x = as_test_xmalloc(sizeof(float) * (size_t)s * 2 * hd);
    for (int t = 0; t < s; t++) {
        memcpy(x + (int64_t)t * 2 * hd, ckv + (int64_t)t * hd, sizeof(float) * (size_t)hd);
        memcpy(x + (int64_t)t * 2 * hd + hd, csc + (int64_t)t * hd, sizeof(float) * (size_t)hd);
    }

    /* device */
    float *dckv = as_gpu_f32(ckv, (int64_t)s * hd), *dcsc = as_gpu_f32(csc, (int64_t)s * hd);
    as_bf16_t *dlat = as_gpu_alloc(sizeof(uint16_t) * (size_t)cap * hd);
    as_gpu_poison(dlat, sizeof(uint16_t) * (size_t)cap * hd);
    as_gpu_check_launch(as_k_compress_pool(dckv, dcsc, s, r, hd, start_pos, c->dpart_kv, c->dpart_sc, dlat, 0), what);
    uint16_t *got = as_test_xmalloc(sizeof(uint16_t) * (size_t)cap * hd);
    as_gpu_get_bytes(got, dlat, sizeof(uint16_t) * (size_t)cap * hd);

    /* reference: as_compress_pooled (state + normalised latents) */
    float *want_norm = as_test_xmalloc(sizeof(float) * (size_t)cap * hd);
    int *pos = as_test_xmalloc(sizeof(int) * (size_t)cap);
    int n_new = as_compress_pooled(x, s, r, &c->wkv, &c->wgate, c->norm, c->eps, hd, start_pos, c->part_kv,
                                   c->part_sc, want_norm, pos);
    REQUIRE(n_new == n_exp, "%s: as_compress_pooled made %d latents, SPEC says %d", what, n_new, n_exp);

    /* reference: the pooling alone, on the groups the reference pooled */
    float *want_pool = as_test_xmalloc(sizeof(float) * (size_t)cap * hd);
    for (int g = 0; g < n_new; g++) {
        if (start_pos == 0)
            as_softmax_pool(ckv + (int64_t)g * r * hd, csc + (int64_t)g * r * hd, r, hd, want_pool + (int64_t)g * hd);
        else
            as_softmax_pool(c->part_kv, c->part_sc, r, hd, want_pool); /* the state after this step's write */
    }

    /* state: exact */
    const int64_t ns = (int64_t)r * hd;
    float *skv = as_test_xmalloc(sizeof(float) * (size_t)ns), *ssc = as_test_xmalloc(sizeof(float) * (size_t)ns);
    as_gpu_get_f32(skv, c->dpart_kv, ns);
    as_gpu_get_f32(ssc, c->dpart_sc, ns);
    int64_t state_bad = 0;
    for (int64_t i = 0; i < ns; i++) {
        uint32_t gk = as_f32_bits(skv[i]), wk = as_f32_bits(c->part_kv[i]);
        uint32_t gs = as_f32_bits(ssc[i]), ws = as_f32_bits(c->part_sc[i]);
        if ((gk != wk || gs != ws) && state_bad++ < 6)
            as_test_note("%s: state row %lld channel %lld: kv got %a want %a, score got %a want %a", what,
                         (long long)(i / hd), (long long)(i % hd), (double)skv[i], (double)c->part_kv[i],
                         (double)ssc[i], (double)c->part_sc[i]);
    }
    CHECK(state_bad == 0, "%s: partial state differs from as_compress_pooled's at %lld of %lld elements", what,
          (long long)state_bad, (long long)ns);

    /* pre-norm latents against as_softmax_pool: <= 1 ulp (expf), counted */
    uint16_t *bpool = as_test_xmalloc(sizeof(uint16_t) * (size_t)cap * hd);
    for (int64_t i = 0; i < (int64_t)n_new * hd; i++)
        bpool[i] = as_bf16_bits(want_pool[i]);
    char sub[320];
    snprintf(sub, sizeof sub, "%s latent (pre-norm) vs as_softmax_pool", what);
    AsBf16Diff dp = as_diff_bf16(sub, got, bpool, n_new, hd, 1);
    CHECK(dp.bad == 0, "%s: %lld of %lld pre-norm latent values more than 1 bf16 ulp from as_softmax_pool", what,
          (long long)dp.bad, (long long)n_new * hd);
    c->near_latents += dp.near;
    c->latents_checked += (int64_t)n_new * hd;

    /* as_rmsnorm of the kernel's latents against as_compress_pooled's: exact for rows whose
     * pre-norm values were exact, <= 1 ulp otherwise */
    if (n_new > 0) {
        float *glat = as_test_xmalloc(sizeof(float) * (size_t)n_new * hd), *gnorm = as_test_xmalloc(sizeof(float) * (size_t)n_new * hd);
        for (int64_t i = 0; i < (int64_t)n_new * hd; i++)
            glat[i] = as_bf16_to_f32(got[i]);
        as_rmsnorm(glat, c->norm, gnorm, n_new, hd, c->eps);
        uint16_t *bg = as_test_xmalloc(sizeof(uint16_t) * (size_t)hd), *bw = as_test_xmalloc(sizeof(uint16_t) * (size_t)hd);
        int64_t norm_bad = 0;
        for (int g = 0; g < n_new; g++) {
            int row_exact = 1;
            for (int d = 0; d < hd; d++) {
                bg[d] = as_bf16_bits(gnorm[(int64_t)g * hd + d]);
                bw[d] = as_bf16_bits(want_norm[(int64_t)g * hd + d]);
                row_exact &= got[(int64_t)g * hd + d] == bpool[(int64_t)g * hd + d];
            }
            snprintf(sub, sizeof sub, "%s latent %d (after rmsnorm) vs as_compress_pooled", what, g);
            AsBf16Diff dn = as_diff_bf16(sub, bg, bw, 1, hd, row_exact ? 0 : 1);
            norm_bad += dn.bad;
        }
        CHECK(norm_bad == 0, "%s: %lld normalised latent values differ from as_compress_pooled's", what,
              (long long)norm_bad);
        free(glat), free(gnorm), free(bg), free(bw);
    }

    /* rows past the latents: still poison */
    int64_t over = 0;
    for (int64_t i = (int64_t)n_new * hd; i < (int64_t)cap * hd; i++)
        over += got[i] != 0xffff;
    CHECK(over == 0, "%s: %lld values written past the %d latent rows", what, (long long)over, n_new);

    if (!quiet || as_test_failed())
        as_test_note("%s: state %lld/%lld exact; %d latents: %lld/%lld pre-norm exact, %lld at 1 ulp (expf)", what,
                     (long long)(ns - state_bad), (long long)ns, n_new,
                     (long long)((int64_t)n_new * hd - dp.near - dp.bad), (long long)n_new * hd, (long long)dp.near);
    c->steps++;

    free(ckv), free(csc), free(x), free(got), free(want_norm), free(pos), free(want_pool), free(skv), free(ssc),
        free(bpool);
    as_gpu_free(dckv);
    as_gpu_free(dcsc);
    as_gpu_free(dlat);
}

/* Reset, prefill s0, then `steps` decode steps carrying the state. */
static void chain(Ctx *c, int s0, int steps, uint64_t seed)
{
    ctx_reset(c);
    c->near_latents = c->latents_checked = 0;
    c->steps = 0;
    step(c, s0, 0, seed, 0);
    for (int k = 0; k < steps; k++)
        step(c, 1, s0 + k, seed + 1 + (uint64_t)k, 0);
    as_test_note("compress_pool %s r=%d hd=%d: prefill %d + %d decode steps: %lld latent values, %lld at 1 ulp from "
                 "as_softmax_pool (expf)", c->geom, c->r, c->hd, s0, steps, (long long)c->latents_checked,
                 (long long)c->near_latents);
    CHECK(c->near_latents * 100 <= c->latents_checked, "compress_pool %s r=%d: %lld of %lld latent values at 1 ulp: "
          "more than expf's last bit explains", c->geom, c->r, (long long)c->near_latents,
          (long long)c->latents_checked);
}

GPU_TEST(gpu_compress_pool_flash_r2)
{
    Ctx c;
    ctx_init(&c, "flash", 2, 512);
    const int s0[] = {1, 2, 7, 8, 512, 513};
    for (int i = 0; i < 6; i++)
        chain(&c, s0[i], 6, 1000 + 100 * (uint64_t)i);
    ctx_free(&c);
}

GPU_TEST(gpu_compress_pool_tiny_r2_and_r4)
{
    Ctx c;
    ctx_init(&c, "tiny", 2, 64);
    const int s0[] = {1, 3, 4, 9};
    for (int i = 0; i < 4; i++)
        chain(&c, s0[i], 7, 2000 + 100 * (uint64_t)i);
    ctx_free(&c);
    ctx_init(&c, "tiny", 4, 64);
    const int s4[] = {1, 5, 8, 11};
    for (int i = 0; i < 4; i++)
        chain(&c, s4[i], 9, 3000 + 100 * (uint64_t)i);
    ctx_free(&c);
}

GPU_TEST(gpu_compress_pool_refuses_bad_sizes)
{
    float *f = (float *)(uintptr_t)16; /* never dereferenced: every call below is refused */
    as_bf16_t *l = (as_bf16_t *)(uintptr_t)16;
    CHECK(as_k_compress_pool(f, f, 4, 1, 64, 0, f, f, l, 0) == (int)cudaErrorInvalidValue, "r = 1 refused");
    CHECK(as_k_compress_pool(f, f, 0, 2, 64, 0, f, f, l, 0) == (int)cudaErrorInvalidValue, "s = 0 refused");
    CHECK(as_k_compress_pool(f, f, 2, 2, 64, 5, f, f, l, 0) == (int)cudaErrorInvalidValue, "decode with s = 2 refused");
    CHECK(as_k_compress_pool(f, f, 4, 2, 0, 0, f, f, l, 0) == (int)cudaErrorInvalidValue, "hd = 0 refused");
    CHECK(as_k_compress_pool(f, f, 4, 2, 64, 0, f, f, NULL, 0) == (int)cudaErrorInvalidValue,
          "no latent buffer while groups complete refused");
    CHECK(as_k_compress_state_reset(f, f, -1, 0) == (int)cudaErrorInvalidValue, "reset n < 0 refused");
}
