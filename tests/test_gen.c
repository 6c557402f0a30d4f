/* Synthetic models and inputs: the same bytes for the same seed, values from the documented
 * formula, the documented distributions, inputs seeded per position. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/digest.h"
#include "model/gen.h"
#include "model/inputs.h"
#include "model/model_load.h"
#include "model/weights.h"
#include "ref/numerics.h"
#include "tests/harness.h"

/* SHA-256 of `attnscope gen --preset tiny --seed 0`'s model.safetensors: the generator, the
 * preset and the file layout together. A change here changes every synthetic model: regenerate,
 * say so, and update docs/MODEL_FILES.md. */
#define TINY_SEED0_SHA256 "72727947ea3ef16b7e4bbb57d863081d6bd6b7c548a6e5e63b609c73ebfc5bd5"

static void gen_tiny(const char *dir, uint64_t seed)
{
    AsConfig c;
    AsError err = {0};
    REQUIRE(as_config_preset("tiny", &c, &err) == AS_OK, "tiny: %s", err.msg);
    REQUIRE(as_gen_model(&c, seed, "tiny", dir, false, &err) == AS_OK, "gen %s: %s", dir, err.msg);
}

static void file_sha(const char *dir, const char *name, char hex[65])
{
    char path[600];
    AsError err = {0};
    snprintf(path, sizeof path, "%s/%s", dir, name);
    REQUIRE(as_sha256_file(path, hex, &err) == AS_OK, "sha256 %s: %s", path, err.msg);
}

TEST(gen_same_seed_same_bytes_other_seed_other_bytes)
{
    char a[512], b[512], c[512];
    snprintf(a, sizeof a, "%s/a", as_test_tmpdir());
    snprintf(b, sizeof b, "%s/b/nested", as_test_tmpdir());
    snprintf(c, sizeof c, "%s/c", as_test_tmpdir());
    gen_tiny(a, 7);
    gen_tiny(b, 7);
    gen_tiny(c, 8);
    char ha[65], hb[65], hc[65];
    file_sha(a, "model.safetensors", ha);
    file_sha(b, "model.safetensors", hb);
    file_sha(c, "model.safetensors", hc);
    CHECK(!strcmp(ha, hb), "seed 7 twice: the same model.safetensors (%s vs %s)", ha, hb);
    CHECK(strcmp(ha, hc), "seeds 7 and 8: different model.safetensors");
    file_sha(a, "config.json", ha);
    file_sha(b, "config.json", hb);
    CHECK(!strcmp(ha, hb), "seed 7 twice: the same config.json");
    AsModel ma, mc;
    AsError err = {0};
    REQUIRE(as_model_load(a, 0, &ma, &err) == AS_OK, "load a: %s", err.msg);
    REQUIRE(as_model_load(c, 0, &mc, &err) == AS_OK, "load c: %s", err.msg);
    CHECK(strcmp(ma.digest, mc.digest), "model digests of seeds 7 and 8 differ");
    as_model_free(&ma);
    as_model_free(&mc);
}

TEST(gen_tiny_seed0_bytes_are_pinned)
{
    char dir[512], h[65];
    snprintf(dir, sizeof dir, "%s/tiny", as_test_tmpdir());
    gen_tiny(dir, 0);
    file_sha(dir, "model.safetensors", h);
    CHECK(!strcmp(h, TINY_SEED0_SHA256), "tiny seed 0 model.safetensors SHA-256 %s, pinned %s", h, TINY_SEED0_SHA256);
}

/* Element k of a generated tensor as docs/MODEL_FILES.md defines it. */
static float expected(const AsLayerTensor *lt, uint64_t seed, uint64_t k)
{
    uint64_t h = as_gen_hash(as_gen_key(seed, as_gen_fnv1a(lt->name)), k);
    switch (lt->kind) {
    case AS_WK_NORM: return (float)(1.0 + 0.1 * as_gen_uniform(h));
    case AS_WK_SINK: return (float)(2.0 * as_gen_uniform(h));
    case AS_WK_GATE: return (float)(as_gen_normal(h) * (4.0 / sqrt((double)lt->shape[1])));
    case AS_WK_F32: return (float)(as_gen_normal(h) * (1.0 / sqrt((double)lt->shape[1])));
    case AS_WK_PROJ: return as_bf16((float)(as_gen_normal(h) * (1.0 / sqrt((double)lt->shape[1]))));
    }
    return 0;
}

TEST(gen_values_follow_the_documented_formula)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/tiny", as_test_tmpdir());
    gen_tiny(dir, 5);
    AsModel m;
    AsError err = {0};
    REQUIRE(as_model_load(dir, 0, &m, &err) == AS_OK, "load: %s", err.msg);
    int checked = 0;
    for (int l = 0; l < m.cfg.n_layers; l++) {
        AsLayerTensor lt[AS_LAYER_MAX_TENSORS];
        int n = as_layer_tensors(&m.cfg, l, lt);
        for (int j = 0; j < n; j++) {
            const AsWTensor *t = as_model_find(&m, lt[j].name);
            REQUIRE(t, "%s present", lt[j].name);
            int64_t rows = as_wt_rows(t), cols = as_wt_cols(t), count = rows * cols;
            float *v = malloc((size_t)count * sizeof *v);
            REQUIRE(v, "alloc");
            as_wt_rows_f32(t, 0, rows, v);
            int64_t bad = -1;
            for (int64_t k = 0; k < count && bad < 0; k++)
                if (v[k] != expected(&lt[j], 5, (uint64_t)k))
                    bad = k;
            CHECK(bad < 0, "%s: element %lld is the formula's", lt[j].name, (long long)bad);
            CHECK(t->dtype == (lt[j].kind == AS_WK_PROJ ? AS_DT_BF16 : AS_DT_F32), "%s: dtype %s", lt[j].name,
                  as_dtype_name(t->dtype));
            free(v);
            checked++;
        }
    }
    CHECK(checked == m.n_tensors, "every tensor checked (%d of %d)", checked, m.n_tensors);
    as_model_free(&m);
}

TEST(gen_distributions_as_documented)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/tiny", as_test_tmpdir());
    gen_tiny(dir, 11);
    AsModel m;
    AsError err = {0};
    REQUIRE(as_model_load(dir, 0, &m, &err) == AS_OK, "load: %s", err.msg);
    double proj_sum = 0, proj_sq = 0, proj_n = 0, gate_sq = 0, gate_n = 0, wkv_sq = 0, wkv_n = 0;
    float norm_lo = 9, norm_hi = -9, sink_lo = 9, sink_hi = -9, worst_z = 0;
    for (int i = 0; i < m.n_tensors; i++) {
        const AsWTensor *t = &m.tensors[i];
        int64_t rows = as_wt_rows(t), cols = as_wt_cols(t), count = rows * cols;
        float *v = malloc((size_t)count * sizeof *v);
        REQUIRE(v, "alloc");
        as_wt_rows_f32(t, 0, rows, v);
        bool gate = strstr(t->name, "wgate"), c_wkv = strstr(t->name, "compressor.wkv") && t->dtype == AS_DT_F32;
        for (int64_t k = 0; k < count; k++) {
            double x = v[k];
            if (t->ndim == 1 && strstr(t->name, "attn_sink")) {
                sink_lo = v[k] < sink_lo ? v[k] : sink_lo, sink_hi = v[k] > sink_hi ? v[k] : sink_hi;
            } else if (t->ndim == 1) {
                norm_lo = v[k] < norm_lo ? v[k] : norm_lo, norm_hi = v[k] > norm_hi ? v[k] : norm_hi;
            } else {
                double z = x * sqrt((double)cols) / (gate ? 4.0 : 1.0); /* back to unit variance */
                worst_z = fabs(z) > worst_z ? (float)fabs(z) : worst_z;
                if (gate)
                    gate_sq += x * x, gate_n++;
                else if (c_wkv)
                    wkv_sq += x * x, wkv_n++;
                if (!gate)
                    proj_sum += z, proj_sq += z * z, proj_n++;
            }
        }
        free(v);
    }
    double mean = proj_sum / proj_n, var = proj_sq / proj_n - mean * mean;
    CHECK(fabs(mean) < 0.02 && fabs(var - 1) < 0.05, "projections ~ N(0, 1/in): scaled mean %.4f, var %.4f over %.0f",
          mean, var, proj_n);
    CHECK(worst_z <= 2 * 1.7320508f * 1.01f, "bounded at 2*sqrt(3) sigma (worst %.3f, bf16 rounding allowed)",
          (double)worst_z);
    CHECK(norm_lo >= 0.9f && norm_hi <= 1.1f && norm_hi - norm_lo > 0.15f, "norm weights in 1 +- 0.1: [%g, %g]",
          (double)norm_lo, (double)norm_hi);
    CHECK(sink_lo >= -2 && sink_hi < 2 && sink_lo < 0 && sink_hi > 0, "sinks in [-2, 2), both signs: [%g, %g]",
          (double)sink_lo, (double)sink_hi);
    double ratio = sqrt((gate_sq / gate_n) / (wkv_sq / wkv_n));
    CHECK(fabs(ratio - 4) < 0.4, "ratio-2 wgate is 4x the compressor wkv's scale: %.2f", ratio);
    as_model_free(&m);
}

TEST(gen_generator_moments_and_vectors)
{
    CHECK(as_gen_fnv1a("") == 0xcbf29ce484222325ull && as_gen_fnv1a("a") == 0xaf63dc4c8601ec8cull,
          "FNV-1a 64 test vectors");
    uint64_t key = as_gen_key(123, as_gen_fnv1a("moments"));
    double s = 0, sq = 0, worst = 0, us = 0, ulo = 1, uhi = -1;
    const int n = 1 << 20;
    for (int i = 0; i < n; i++) {
        uint64_t h = as_gen_hash(key, (uint64_t)i);
        double z = as_gen_normal(h), u = as_gen_uniform(h);
        s += z, sq += z * z, worst = fabs(z) > worst ? fabs(z) : worst;
        us += u, ulo = u < ulo ? u : ulo, uhi = u > uhi ? u : uhi;
    }
    double mean = s / n, var = sq / n - mean * mean;
    CHECK(fabs(mean) < 0.005 && fabs(var - 1) < 0.01, "normal-ish: mean %.5f, variance %.5f", mean, var);
    CHECK(worst <= 2 * 1.7320508075688772, "bounded at 2*sqrt(3): worst %.4f", worst);
    CHECK(worst > 2.5, "the tails are reached: worst %.4f", worst);
    CHECK(fabs(us / n) < 0.005 && ulo >= -1 && uhi < 1, "uniform in [-1, 1): mean %.5f, [%g, %g]", us / n, ulo, uhi);
    CHECK(as_gen_hash(key, 0) != as_gen_hash(key, 1) && as_gen_key(1, 5) != as_gen_key(2, 5),
          "elements and seeds give different hashes");
}

TEST(inputs_are_seeded_per_position)
{
    enum { DIM = 64, S = 6 };
    float prefill[S * DIM], one[DIM], other[S * DIM];
    as_inputs_synthetic(9, 0, S, DIM, prefill);
    int bad = -1;
    for (int p = 0; p < S; p++) {
        as_inputs_synthetic(9, p, 1, DIM, one);
        if (memcmp(one, prefill + p * DIM, sizeof one) && bad < 0)
            bad = p;
    }
    CHECK(bad < 0, "decoding position p gives the prefill's row p (first differing p %d)", bad);
    float tail[2 * DIM];
    as_inputs_synthetic(9, 4, 2, DIM, tail);
    CHECK(!memcmp(tail, prefill + 4 * DIM, sizeof tail), "a chunk at pos0 = 4 equals rows 4..5 of the prefill");
    double s = 0, sq = 0;
    bool all_bf16 = true;
    for (int i = 0; i < S * DIM; i++) {
        all_bf16 &= as_bf16(prefill[i]) == prefill[i];
        s += prefill[i], sq += (double)prefill[i] * prefill[i];
    }
    CHECK(all_bf16, "inputs are bf16 values");
    CHECK(fabs(s / (S * DIM)) < 0.2 && fabs(sq / (S * DIM) - 1) < 0.25, "inputs ~ N(0, 1): mean %.3f, mean square %.3f",
          s / (S * DIM), sq / (S * DIM));
    as_inputs_synthetic(10, 0, S, DIM, other);
    CHECK(memcmp(other, prefill, sizeof other), "another seed gives other inputs");
    CHECK(memcmp(prefill, prefill + DIM, DIM * sizeof(float)), "positions differ");
}

TEST(gen_refuses_an_output_path_that_is_a_file)
{
    char path[512];
    snprintf(path, sizeof path, "%s/file", as_test_tmpdir());
    FILE *f = fopen(path, "w");
    REQUIRE(f, "create");
    fclose(f);
    AsConfig c;
    AsError err = {0};
    REQUIRE(as_config_preset("tiny", &c, &err) == AS_OK, "tiny");
    CHECK(as_gen_model(&c, 0, "tiny", path, false, &err) == AS_EBADINPUT && strstr(err.msg, path),
          "gen into a file refused naming it: %s", err.msg);
}
