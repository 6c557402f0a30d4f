/* Synthetic models and inputs: the same bytes for the same seed, values from the documented
 * formula, the documented distributions, inputs seeded per position. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/digest.h"
#include "model/gen.h"
#include "model/inputs.h"
#include "model/model_load.h"
#include "model/precision.h"
#include "model/safetensors.h"
#include "model/weights.h"
#include "driver/driver.h"
#include "ref/numerics.h"
#include "tests/lib/cli_util.h"
#include "tests/lib/harness.h"

/* SHA-256 of `attnscope gen --preset tiny --seed 0`'s model.safetensors (fp8, tiny's precision)
 * and of the same with --precision bf16: the generator, the preset and the file layout together. A
 * change here changes every synthetic model: regenerate, say so, raise AS_GEN_FORMAT and update
 * docs/MODEL_FILES.md. */
#define TINY_SEED0_SHA256 "57b2878350c08756b43d74ace83dbe67258eddaf3561aad11d3943b90e0fb49e"
#define TINY_BF16_SEED0_SHA256 "8fd945acf8557ac87abe49ee0cbd2c8444c305377dc768c5cbf4c6793b2272b5"

static void gen_tiny_as(const char *dir, uint64_t seed, AsPrecision prec)
{
    AsConfig c;
    AsError err = {0};
    REQUIRE(as_config_preset("tiny", &c, &err) == AS_OK, "tiny: %s", err.msg);
    REQUIRE(as_gen_model(&c, prec, seed, "tiny", dir, false, &err) == AS_OK, "gen %s: %s", dir, err.msg);
}

/* tiny as its preset says: fp8 */
static void gen_tiny(const char *dir, uint64_t seed) { gen_tiny_as(dir, seed, as_config_preset_precision("tiny")); }

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
    CHECK(!strcmp(h, TINY_SEED0_SHA256), "tiny seed 0 (fp8) model.safetensors SHA-256 %s, pinned %s", h,
          TINY_SEED0_SHA256);
    snprintf(dir, sizeof dir, "%s/tiny16", as_test_tmpdir());
    gen_tiny_as(dir, 0, AS_PREC_BF16);
    file_sha(dir, "model.safetensors", h);
    CHECK(!strcmp(h, TINY_BF16_SEED0_SHA256), "tiny seed 0 bf16 model.safetensors SHA-256 %s, pinned %s", h,
          TINY_BF16_SEED0_SHA256);
}

/* Whether a layer tensor is one of the five fp8 projections (model.py's Linear at the default dtype). */
static bool is_fp8_proj(const AsLayerTensor *lt)
{
    return lt->slot == offsetof(AsLayerWeights, wq_a) || lt->slot == offsetof(AsLayerWeights, wq_b) ||
           lt->slot == offsetof(AsLayerWeights, wkv) || lt->slot == offsetof(AsLayerWeights, wo_b) ||
           lt->slot == offsetof(AsLayerWeights, i_wq_b);
}

/* The value element k of a generated tensor has before storage, as docs/MODEL_FILES.md defines it. */
static float raw_value(const AsLayerTensor *lt, uint64_t seed, uint64_t k)
{
    uint64_t h = as_gen_hash(as_gen_key(seed, as_gen_fnv1a(lt->name)), k);
    switch (lt->kind) {
    case AS_WK_NORM: return (float)(1.0 + 0.1 * as_gen_uniform(h));
    case AS_WK_SINK: return (float)(2.0 * as_gen_uniform(h));
    case AS_WK_GATE: return (float)(as_gen_normal(h) * (4.0 / sqrt((double)lt->shape[1])));
    case AS_WK_F32:
    case AS_WK_PROJ: return (float)(as_gen_normal(h) * (1.0 / sqrt((double)lt->shape[1])));
    }
    return 0;
}

/* The dtype SPEC 1's table stores a tensor in (fp8: the model's precision is fp8). */
static AsDType spec_dtype(const AsLayerTensor *lt, bool fp8)
{
    if (fp8 && is_fp8_proj(lt))
        return AS_DT_F8_E4M3;
    return lt->kind == AS_WK_PROJ || lt->kind == AS_WK_NORM ? AS_DT_BF16 : AS_DT_F32;
}

/* The scale exponent of an fp8 block: the smallest k with amax <= 448 * 2^k (k >= -127). */
static int block_exponent(const AsLayerTensor *lt, uint64_t seed, int64_t br, int64_t bc)
{
    float amax = 0;
    for (int64_t r = br * 32; r < br * 32 + 32 && r < lt->shape[0]; r++)
        for (int64_t c = bc * 32; c < bc * 32 + 32 && c < lt->shape[1]; c++)
            amax = fmaxf(amax, fabsf(raw_value(lt, seed, (uint64_t)(r * lt->shape[1] + c))));
    int k = -127;
    while (amax > ldexpf(448.0f, k))
        k++;
    return k;
}

/* Element k as stored and decoded: bf16 and f32 as the value is, fp8 as bf16(e4m3(v / 2^e) * 2^e). */
static float expected(const AsLayerTensor *lt, bool fp8, uint64_t seed, uint64_t k)
{
    float v = raw_value(lt, seed, k);
    switch (spec_dtype(lt, fp8)) {
    case AS_DT_BF16: return as_bf16(v);
    case AS_DT_F8_E4M3: {
        int64_t r = (int64_t)k / lt->shape[1], c = (int64_t)k % lt->shape[1];
        int e = block_exponent(lt, seed, r / 32, c / 32);
        float q = ldexpf(v, -e);
        q = q > 448 ? 448 : q < -448 ? -448 : q;
        return as_bf16(as_e4m3(q) * ldexpf(1.0f, e));
    }
    default: return v;
    }
}

static void check_formula(AsPrecision prec)
{
    const bool fp8 = prec == AS_PREC_FP8;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/tiny-%s", as_test_tmpdir(), fp8 ? "fp8" : "bf16");
    gen_tiny_as(dir, 5, prec);
    AsModel m;
    AsError err = {0};
    REQUIRE(as_model_load(dir, 0, &m, &err) == AS_OK, "load: %s", err.msg);
    int checked = 0, scales = 0;
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
                if (v[k] != expected(&lt[j], fp8, 5, (uint64_t)k))
                    bad = k;
            CHECK(bad < 0, "%s (%s): element %lld is the formula's", lt[j].name, as_precision_name(prec),
                  (long long)bad);
            CHECK(t->dtype == spec_dtype(&lt[j], fp8), "%s (%s): dtype %s, SPEC's %s", lt[j].name,
                  as_precision_name(prec), as_dtype_name(t->dtype), as_dtype_name(spec_dtype(&lt[j], fp8)));
            if (t->dtype == AS_DT_F8_E4M3) {
                /* the scale tensor holds the exponents themselves */
                const uint8_t *sb = t->scale->data;
                int64_t sbad = -1, ncb = as_wt_cols(t->scale);
                for (int64_t b = 0; b < as_wt_rows(t->scale) * ncb && sbad < 0; b++)
                    if (sb[b] != block_exponent(&lt[j], 5, b / ncb, b % ncb) + 127)
                        sbad = b;
                CHECK(sbad < 0, "%s: scale of block %lld is the smallest 2^e with amax / 2^e <= 448", t->scale->name,
                      (long long)sbad);
                scales++;
            }
            free(v);
            checked++;
        }
    }
    CHECK(checked + scales == m.n_tensors, "every tensor checked (%d + %d scales of %d)", checked, scales,
          m.n_tensors);
    CHECK(fp8 ? scales > 0 : scales == 0, "%d fp8 projections", scales);
    as_model_free(&m);
}

TEST(gen_values_follow_the_documented_formula)
{
    check_formula(AS_PREC_FP8);
    check_formula(AS_PREC_BF16);
}

/* fp8 as SPEC 1 stores it: F8_E4M3 X.weight + F8_E8M0 X.scale [ceil(out/32)][ceil(in/32)] for the five
 * fp8 projections, every other tensor in its own dtype; and the dequantised values those of the bf16
 * generator within e4m3's rounding. */
TEST(gen_fp8_writes_what_spec_says)
{
    char d8[512], d16[512];
    snprintf(d8, sizeof d8, "%s/t8", as_test_tmpdir());
    snprintf(d16, sizeof d16, "%s/t16", as_test_tmpdir());
    gen_tiny_as(d8, 9, AS_PREC_FP8);
    gen_tiny_as(d16, 9, AS_PREC_BF16);
    AsModel a, b;
    AsError err = {0};
    REQUIRE(as_model_load(d8, 0, &a, &err) == AS_OK, "fp8: %s", err.msg);
    REQUIRE(as_model_load(d16, 0, &b, &err) == AS_OK, "bf16: %s", err.msg);
    static const char *const fp8_names[] = {"wq_a", "wq_b", "wkv", "wo_b", "indexer.wq_b"};
    for (int i = 0; i < 5; i++) {
        char w[192], sc[192];
        int l = i == 4 ? 1 : 0; /* layer 1 is an index source */
        snprintf(w, sizeof w, "layers.%d.attn.%s.weight", l, fp8_names[i]);
        snprintf(sc, sizeof sc, "layers.%d.attn.%s.scale", l, fp8_names[i]);
        const AsWTensor *t = as_model_find(&a, w), *s = as_model_find(&a, sc);
        CHECK(t && s && t->dtype == AS_DT_F8_E4M3 && s->dtype == AS_DT_F8_E8M0 && s->ndim == 2 &&
                  s->shape[0] == (t->shape[0] + 31) / 32 && s->shape[1] == (t->shape[1] + 31) / 32 && t->scale == s,
              "%s: F8_E4M3 with %s, F8_E8M0 [ceil(out/32)][ceil(in/32)]", w, sc);
    }
    static const struct {
        const char *name;
        AsDType dt;
    } rest[] = {
        {"layers.0.attn.wo_a.weight", AS_DT_BF16},
        {"layers.1.attn.compressor.wkv.weight", AS_DT_F32},   /* ratio 2 */
        {"layers.1.attn.compressor.wgate.weight", AS_DT_F32},
        {"layers.5.attn.compressor.wkv.weight", AS_DT_BF16},  /* ratio 1 */
        {"layers.1.attn.indexer.weights_proj.weight", AS_DT_BF16},
        {"layers.1.attn.indexer.wk.weight", AS_DT_BF16},
        {"layers.0.attn.attn_sink", AS_DT_F32},
        {"layers.0.attn_norm.weight", AS_DT_BF16},
        {"layers.0.attn.q_norm.weight", AS_DT_BF16},
        {"layers.0.attn.kv_norm.weight", AS_DT_BF16},
        {"layers.1.attn.compressor.norm.weight", AS_DT_BF16},
        {"layers.1.attn.indexer.k_norm.weight", AS_DT_BF16},
    };
    for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) {
        const AsWTensor *t = as_model_find(&a, rest[i].name), *t16 = as_model_find(&b, rest[i].name);
        CHECK(t && t->dtype == rest[i].dt && t16 && t16->dtype == rest[i].dt &&
                  !memcmp(t->data, t16->data, (size_t)t->nbytes),
              "%s: %s in both precisions, the same bytes", rest[i].name, as_dtype_name(rest[i].dt));
    }
    /* dequantised against the bf16 generator: e4m3 keeps 3 mantissa bits (relative 2^-4 after
     * rounding), subnormals within 2^-10 of the block's scale; bf16 itself is within 2^-9 */
    int64_t total = 0, worst_at = -1;
    double worst = 0;
    for (int i = 0; i < a.n_tensors; i++) {
        const AsWTensor *t = &a.tensors[i];
        if (t->dtype != AS_DT_F8_E4M3)
            continue;
        const AsWTensor *u = as_model_find(&b, t->name);
        REQUIRE(u && u->dtype == AS_DT_BF16, "%s is BF16 in the bf16 model", t->name);
        int64_t rows = as_wt_rows(t), cols = as_wt_cols(t);
        float *x = malloc(sizeof(float) * (size_t)(rows * cols)), *y = malloc(sizeof(float) * (size_t)(rows * cols)),
              *sv = as_wt_vec_f32(t->scale);
        REQUIRE(x && y && sv, "alloc");
        as_wt_rows_f32(t, 0, rows, x);
        as_wt_rows_f32(u, 0, rows, y);
        for (int64_t k = 0; k < rows * cols; k++) {
            float s = sv[(k / cols / 32) * as_wt_cols(t->scale) + (k % cols) / 32];
            double tol = fmax(fabs(y[k]) * (0x1p-4 + 0x1p-8), s * 0x1p-10);
            double r = fabs((double)x[k] - y[k]) / tol;
            if (r > worst)
                worst = r, worst_at = total + k;
        }
        total += rows * cols;
        free(x), free(y), free(sv);
    }
    CHECK(total > 0 && worst <= 1.0, "fp8 dequantised within e4m3's rounding of the bf16 values over %lld "
          "elements (worst %.3f of the bound at %lld)", (long long)total, worst, (long long)worst_at);
    as_model_free(&a);
    as_model_free(&b);
}

static void check_distributions(AsPrecision prec)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/tiny-%s", as_test_tmpdir(), as_precision_name(prec));
    gen_tiny_as(dir, 11, prec);
    AsModel m;
    AsError err = {0};
    REQUIRE(as_model_load(dir, 0, &m, &err) == AS_OK, "load: %s", err.msg);
    double proj_sum = 0, proj_sq = 0, proj_n = 0, gate_sq = 0, gate_n = 0, wkv_sq = 0, wkv_n = 0;
    float norm_lo = 9, norm_hi = -9, sink_lo = 9, sink_hi = -9, worst_z = 0;
    for (int i = 0; i < m.n_tensors; i++) {
        const AsWTensor *t = &m.tensors[i];
        if (t->dtype == AS_DT_F8_E8M0)
            continue; /* block scales: checked by gen_values_follow_the_documented_formula */
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
    const char *pn = as_precision_name(prec);
    CHECK(fabs(mean) < 0.02 && fabs(var - 1) < 0.05,
          "%s: projections ~ N(0, 1/in): scaled mean %.4f, var %.4f over %.0f", pn, mean, var, proj_n);
    /* e4m3 rounds by up to 2^-4 relative where bf16 rounds by 2^-9 */
    CHECK(worst_z <= 2 * 1.7320508f * (prec == AS_PREC_FP8 ? 1.0625f : 1.01f),
          "%s: bounded at 2*sqrt(3) sigma (worst %.3f, the storage's rounding allowed)", pn, (double)worst_z);
    /* stored as bf16: the ends of 1 +- 0.1 round to 0.8984375 and 1.1015625 */
    CHECK(norm_lo >= as_bf16(0.9f) && norm_hi <= as_bf16(1.1f) && norm_hi - norm_lo > 0.15f,
          "%s: norm weights in bf16(1 +- 0.1): [%g, %g]", pn,
          (double)norm_lo, (double)norm_hi);
    CHECK(sink_lo >= -2 && sink_hi < 2 && sink_lo < 0 && sink_hi > 0, "%s: sinks in [-2, 2), both signs: [%g, %g]", pn,
          (double)sink_lo, (double)sink_hi);
    double ratio = sqrt((gate_sq / gate_n) / (wkv_sq / wkv_n));
    CHECK(fabs(ratio - 4) < 0.4, "%s: ratio-2 wgate is 4x the compressor wkv's scale: %.2f", pn, ratio);
    as_model_free(&m);
}

TEST(gen_distributions_as_documented)
{
    check_distributions(AS_PREC_FP8);
    check_distributions(AS_PREC_BF16);
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

TEST(gen_inputs_are_seeded_per_position)
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
    CHECK(as_gen_model(&c, AS_PREC_FP8, 0, "tiny", path, false, &err) == AS_EBADINPUT && strstr(err.msg, path),
          "gen into a file refused naming it: %s", err.msg);
}

/* --layout released: what each file holds, and the same bytes for the same seed. */
TEST(gen_released_layout_files)
{
    char dir[512], again[512], path[700];
    snprintf(dir, sizeof dir, "%s/rel", as_test_tmpdir());
    snprintf(again, sizeof again, "%s/rel2", as_test_tmpdir());
    AsConfig c;
    AsError err = {0};
    REQUIRE(as_config_preset("tiny", &c, &err) == AS_OK, "tiny");
    AsGenOptions o = {.precision = AS_PREC_FP8, .layout = AS_GEN_LAYOUT_RELEASED, .shards = 3, .seed = 2};
    REQUIRE(as_gen_model_opts(&c, &o, dir, &err) == AS_OK, "gen released: %s", err.msg);
    REQUIRE(as_gen_model_opts(&c, &o, again, &err) == AS_OK, "gen released again: %s", err.msg);
    static const char *const files[] = {"config.json", "inference/config.json", "model.safetensors.index.json",
                                        "model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                                        "model-00003-of-00003.safetensors"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char ha[65], hb[65];
        file_sha(dir, files[i], ha);
        file_sha(again, files[i], hb);
        CHECK(!strcmp(ha, hb), "%s: the same bytes for the same seed", files[i]);
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    CHECK(access(path, F_OK) != 0, "no model.safetensors in the released layout");

    /* config.json: the geometry in text_config; inference/config.json: flat, SPEC's names, dtype */
    AsConfig hf, ds;
    snprintf(path, sizeof path, "%s/config.json", dir);
    REQUIRE(as_config_load(path, &hf, &err) == AS_OK && as_config_validate(&hf, &err) == AS_OK, "%s: %s", path,
            err.msg);
    char *text = as_slurp(path, NULL);
    CHECK(text && strstr(text, "\"text_config\"") && !strstr(text, "\"dtype\""), "config.json nests text_config");
    free(text);
    snprintf(path, sizeof path, "%s/inference/config.json", dir);
    REQUIRE(as_config_load(path, &ds, &err) == AS_OK && as_config_validate(&ds, &err) == AS_OK, "%s: %s", path,
            err.msg);
    text = as_slurp(path, NULL);
    CHECK(text && strstr(text, "\"window_size\"") && strstr(text, "\"dtype\":\t\"fp8\""),
          "inference/config.json is flat with dtype fp8");
    free(text);
    CHECK(ds.dtype == AS_PREC_FP8 && hf.dtype == AS_PREC_AUTO, "dtype fp8 in inference/config.json only");
    ds.dtype = AS_PREC_AUTO;
    CHECK(!memcmp(&hf, &c, sizeof c) && !memcmp(&ds, &c, sizeof c), "both configs are tiny's geometry");

    /* the index names a shard for every tensor of every shard, and only those */
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    AsStIndex ix;
    REQUIRE(as_st_read_index(path, &ix, &err) == AS_OK, "index: %s", err.msg);
    CHECK(ix.n_shards == 3, "3 shards in the index (%d)", ix.n_shards);
    int listed = 0, attn_in_last = 0, extras_in_layers = 0;
    for (int k = 0; k < ix.n_shards; k++) {
        AsWeightFile *f = NULL;
        AsWTensor *t = NULL;
        int n = 0, cap = 0;
        snprintf(path, sizeof path, "%s/%s", dir, ix.shards[k]);
        REQUIRE(as_st_open(path, &f, &t, &n, &cap, &err) == AS_OK, "%s: %s", path, err.msg);
        for (int i = 0; i < n; i++) {
            int e = 0;
            while (e < ix.n_entries && strcmp(ix.names[e], t[i].name))
                e++;
            CHECK(e < ix.n_entries && ix.shard_of[e] == k, "%s: listed in the index for %s", t[i].name, ix.shards[k]);
            bool attn = strstr(t[i].name, ".attn") && !strncmp(t[i].name, "layers.", 7) && atoi(t[i].name + 7) < 10;
            attn = attn || (strstr(t[i].name, ".attn_norm.weight") && !strncmp(t[i].name, "layers.", 7) &&
                            atoi(t[i].name + 7) < 10);
            attn_in_last += attn && k == ix.n_shards - 1;
            extras_in_layers += !attn && k < ix.n_shards - 1;
        }
        listed += n;
        as_st_close(f);
        free(t);
    }
    CHECK(listed == ix.n_entries, "every index entry is in its shard (%d of %d)", listed, ix.n_entries);
    CHECK(attn_in_last == 0 && extras_in_layers == 10 * 6, "the last shard holds no attention tensor (%d); the "
          "others 6 stand-ins a layer (%d)", attn_in_last, extras_in_layers);
    as_st_index_free(&ix);
}

/* `attnscope gen`'s options: precision, layout and shards; mistakes exit 2 in one line, writing nothing. */
TEST(gen_cli_precision_layout_and_mistakes)
{
    AsCliResult *r = malloc(sizeof *r);
    REQUIRE(r, "alloc");
    char d8[512], d16[512], drel[512], bad[512];
    snprintf(d8, sizeof d8, "%s/cli8", as_test_tmpdir());
    snprintf(d16, sizeof d16, "%s/cli16", as_test_tmpdir());
    snprintf(drel, sizeof drel, "%s/clirel", as_test_tmpdir());
    snprintf(bad, sizeof bad, "%s/nothing", as_test_tmpdir());
    as_cli_run(r, AS_ARGS("gen", "--preset", "tiny", "-o", d8));
    CHECK(r->status == 0 && strstr(r->out, "fp8"), "gen --preset tiny: fp8 by default: exit %d, %s%s", r->status,
          r->out, r->err);
    char h[65];
    file_sha(d8, "model.safetensors", h);
    CHECK(!strcmp(h, TINY_SEED0_SHA256), "the CLI writes the pinned fp8 bytes");
    as_cli_run(r, AS_ARGS("gen", "--preset", "tiny", "--precision", "bf16", "-o", d16));
    file_sha(d16, "model.safetensors", h);
    CHECK(r->status == 0 && !strcmp(h, TINY_BF16_SEED0_SHA256), "--precision bf16 overrides the preset's: exit %d",
          r->status);
    as_cli_run(r, AS_ARGS("gen", "--preset", "tiny-q", "-o", bad));
    CHECK(r->status == 0 && strstr(r->out, "bf16"), "tiny-q is bf16: %s", r->out);
    as_cli_run(r, AS_ARGS("gen", "--preset", "tiny", "--layout", "released", "--shards", "2", "-o", drel));
    CHECK(r->status == 0, "--layout released --shards 2: exit %d, %s", r->status, r->err);
    as_cli_run(r, AS_ARGS("info", drel));
    CHECK(r->status == 0 && strstr(r->out, "1 file"), "info loads the released layout (one shard opened): %s%s",
          r->out, r->err);

    snprintf(bad, sizeof bad, "%s/never", as_test_tmpdir());
    static const struct {
        const char *opt, *val, *says;
    } cases[] = {
        {"--precision", "fp16", "--precision"},
        {"--layout", "sharded", "--layout"},
        {"--shards", "1", "--shards"},
        {"--shards", "12", "--shards 12"}, /* tiny has 10 layers: at most 11 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bool shards = !strcmp(cases[i].opt, "--shards");
        if (shards)
            as_cli_run(r, AS_ARGS("gen", "--preset", "tiny", "--layout", "released", cases[i].opt, cases[i].val, "-o",
                                  bad));
        else
            as_cli_run(r, AS_ARGS("gen", "--preset", "tiny", cases[i].opt, cases[i].val, "-o", bad));
        int lines = 0;
        for (const char *p = r->err; *p; p++)
            lines += *p == '\n';
        CHECK(r->status == 2 && strstr(r->err, cases[i].says) && lines == 1 && access(bad, F_OK) != 0,
              "%s %s: exit 2, one line naming it, nothing written (exit %d: %s)", cases[i].opt, cases[i].val,
              r->status, r->err);
    }
    as_cli_run(r, AS_ARGS("gen", "--preset", "tiny", "--shards", "3", "-o", bad));
    CHECK(r->status == 2 && strstr(r->err, "--layout released") && access(bad, F_OK) != 0,
          "--shards without the released layout: exit %d, %s", r->status, r->err);
    free(r);
}

/* Cached presets: the precision and the generator's format in the directory name, so a model an
 * older generator wrote is never reused. */
TEST(gen_cached_presets_name_precision_and_format)
{
    char cache[512], dir[1024], want[1100];
    snprintf(cache, sizeof cache, "%s/cache", as_test_tmpdir());
    const char *old = getenv("ATTNSCOPE_CACHE");
    char *saved = old ? strdup(old) : NULL;
    setenv("ATTNSCOPE_CACHE", cache, 1);
    AsError err = {0};
    int rc = as_resolve_model("tiny", 3, dir, sizeof dir, true, &err);
    snprintf(want, sizeof want, "%s/tiny-fp8-g%d-s3", cache, AS_GEN_FORMAT);
    CHECK(rc == AS_OK && !strcmp(dir, want), "tiny seed 3 cached in %s (got %s: %s)", want, dir, err.msg);
    AsModel m;
    if (!rc && as_model_load(dir, 0, &m, &err) == AS_OK) {
        CHECK(m.precision == AS_PREC_FP8, "the cached tiny is fp8");
        as_model_free(&m);
    }
    rc = as_resolve_model("tiny-q", 3, dir, sizeof dir, true, &err);
    snprintf(want, sizeof want, "%s/tiny-q-bf16-g%d-s3", cache, AS_GEN_FORMAT);
    CHECK(rc == AS_OK && !strcmp(dir, want), "tiny-q seed 3 cached in %s (got %s)", want, dir);
    if (saved)
        setenv("ATTNSCOPE_CACHE", saved, 1);
    else
        unsetenv("ATTNSCOPE_CACHE");
    free(saved);
}
