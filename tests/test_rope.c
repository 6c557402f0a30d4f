/* RoPE (ref/rope): a pair at a known angle, the YaRN ramp on small and flash configs, inverse
 * undoing forward, positions past the table. */
#include <math.h>
#include <string.h>

#include "ref/numerics.h"
#include "ref/rope.h"
#include "tests/lib/harness.h"

TEST(rope_pair_known_angle)
{
    AsRopeTable t;
    REQUIRE(as_rope_init(&t, 4, 8, 10000.0, false, 1, 0, 0, 0) == 0, "init");
    /* f[0] = 1 / 10000^0 = 1; f[1] = 1 / 10000^0.5 = 0.01 (f32: 0.0099999998) */
    CHECK(t.freq[0] == 1.0f, "f[0] = %a", t.freq[0]);
    CHECK(t.freq[1] == 1.0f / powf(10000.0f, 0.5f), "f[1] = %a", t.freq[1]);
    /* width 6, rd 4: channels 0,1 untouched; pair (2,3) angle pos * 1; pair (4,5) angle pos * 0.01 */
    float x[6] = {7, 9, 1, 0, 1, 1};
    int pos = 1;
    as_rope_rows(x, 1, 6, 6, &pos, &t, false);
    CHECK(x[0] == 7 && x[1] == 9, "channels before the last rd must not move");
    /* (1 + 0i)(cos 1 + i sin 1) = 0.5403 + 0.8415i -> bf16 0.5390625, 0.83984375 */
    CHECK(x[2] == 0.5390625f && x[3] == 0.83984375f, "pair 0: %.9g %.9g", x[2], x[3]);

    /* (1 + i)(cos 1 + i sin 1): re = cos 1 - sin 1 = -0.3012 -> -0.30078125,
     * im = sin 1 + cos 1 = 1.3818 -> 1.3828125 */
    float y[4] = {1, 1, 0, 0};
    as_rope_rows(y, 1, 4, 4, &pos, &t, false);
    CHECK(y[0] == -0.30078125f && y[1] == 1.3828125f, "(1+i) at angle 1: %.9g %.9g", y[0], y[1]);
    /* inverse at the same angle: (1 + i)(cos 1 - i sin 1): re = cos + sin, im = cos - sin */
    float z[4] = {1, 1, 0, 0};
    as_rope_rows(z, 1, 4, 4, &pos, &t, true);
    CHECK(z[0] == 1.3828125f && z[1] == -0.30078125f, "inverse (1+i) at angle 1: %.9g %.9g", z[0], z[1]);
    /* position 0 is the identity */
    float e[4] = {0.3f, -0.7f, 2, 3};
    int p0 = 0;
    as_rope_rows(e, 1, 4, 4, &p0, &t, false);
    CHECK(e[0] == as_bf16(0.3f) && e[1] == as_bf16(-0.7f) && e[2] == 2 && e[3] == 3, "pos 0 changes the row");
    as_rope_free(&t);
}

TEST(rope_yarn_ramp_small)
{
    /* rd 8, base 1e4, original 4096, beta_fast 32, beta_slow 1, factor 4:
     * corr(32) = 8 ln(4096 / (64 pi)) / (2 ln 1e4) = 1.309 -> low = 1;
     * corr(1)  = 8 ln(4096 / (2 pi)) / (2 ln 1e4) = 2.814 -> high = 3;
     * ramp_k = clamp((k - 1) / 2, 0, 1) = 0, 0, 0.5, 1. */
    AsRopeTable p, y;
    REQUIRE(as_rope_init(&p, 8, 4, 10000.0, false, 1, 0, 0, 0) == 0, "init plain");
    REQUIRE(as_rope_init(&y, 8, 4, 10000.0, true, 4.0, 4096, 32, 1) == 0, "init yarn");
    CHECK(y.freq[0] == p.freq[0] && y.freq[1] == p.freq[1], "ramp 0: unchanged (%a %a)", y.freq[0], y.freq[1]);
    CHECK(y.freq[2] == p.freq[2] / 4.0f * 0.5f + p.freq[2] * 0.5f, "ramp 0.5: %a", y.freq[2]);
    CHECK(fabsf(y.freq[2] - 0.00625f) < 1e-9f, "ramp 0.5: %.9g, want ~0.00625", y.freq[2]);
    CHECK(y.freq[3] == p.freq[3] / 4.0f, "ramp 1: f / factor (%a)", y.freq[3]);
    /* the tables follow the frequencies */
    CHECK(y.cos[3 * 4 + 2] == cosf(3.0f * y.freq[2]) && y.sin[3 * 4 + 2] == sinf(3.0f * y.freq[2]), "table");
    as_rope_free(&p);
    as_rope_free(&y);
}

TEST(rope_yarn_flash_config)
{
    /* rd 64, base 160000, original 65536, beta 32 / 1, factor 16:
     * corr(32) = 15.45 -> low 15; corr(1) = 24.71 -> high 25; ramp_k = (k - 15) / 10. */
    AsConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.rope_head_dim = 64;
    cfg.max_seq = 32;
    cfg.rope_theta = 10000;
    cfg.compress_rope_theta = 160000;
    cfg.rope_factor = 16;
    cfg.original_seq_len = 65536;
    cfg.beta_fast = 32;
    cfg.beta_slow = 1;
    AsRopeTable r0, r2, plain;
    REQUIRE(as_rope_init_for_ratio(&r0, &cfg, 0) == 0 && as_rope_init_for_ratio(&r2, &cfg, 2) == 0, "init");
    REQUIRE(as_rope_init(&plain, 64, 32, 160000.0, false, 1, 0, 0, 0) == 0, "init plain");
    CHECK(r0.freq[1] == 1.0f / powf(10000.0f, 2.0f / 64.0f), "ratio 0 is plain rope_theta");
    for (int k = 0; k < 32; k++) {
        float f = plain.freq[k];
        float ramp = k <= 15 ? 0.0f : k >= 25 ? 1.0f : (float)(k - 15) / 10.0f;
        float want = f / 16.0f * ramp + f * (1.0f - ramp);
        CHECK(r2.freq[k] == want, "k %d: %a, want %a (ramp %g)", k, r2.freq[k], want, ramp);
    }
    CHECK(r2.freq[15] == plain.freq[15] && r2.freq[25] == plain.freq[25] / 16.0f, "ramp ends at 15 and 25");
    as_rope_free(&r0);
    as_rope_free(&r2);
    as_rope_free(&plain);
}

TEST(rope_inverse_undoes_forward)
{
    enum { S = 5, H = 3, W = 24, RD = 16 };
    AsRopeTable t;
    REQUIRE(as_rope_init(&t, RD, 64, 160000.0, true, 16, 65536, 32, 1) == 0, "init");
    float x[S * H * W], orig[S * H * W];
    uint32_t seed = 3;
    for (int i = 0; i < S * H * W; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = orig[i] = as_bf16((float)(seed >> 8) / 16777216.0f * 2 - 1);
    }
    as_rope_heads(x, S, H, W, 40, &t, false);
    as_rope_heads(x, S, H, W, 40, &t, true);
    int bad = 0;
    for (int i = 0; i < S * H * W; i++)
        if (fabsf(x[i] - orig[i]) > 0x1p-7f && bad++ < 3) /* two bf16 roundings of |x| <= 1.5 */
            as_test_fail(__FILE__, __LINE__, "element %d: %.9g back to %.9g", i, orig[i], x[i]);

    /* as_rope_heads == as_rope_rows with per-row positions; positions past the table equal a
     * larger table's */
    AsRopeTable big;
    REQUIRE(as_rope_init(&big, RD, 200, 160000.0, true, 16, 65536, 32, 1) == 0, "init big");
    float a[S * H * W], b[S * H * W];
    memcpy(a, orig, sizeof a);
    memcpy(b, orig, sizeof b);
    int pos[S * H];
    for (int r = 0; r < S * H; r++)
        pos[r] = 100 + r / H;
    as_rope_heads(a, S, H, W, 100, &t, false); /* 100.. is past t's 64 positions */
    as_rope_rows(b, S * H, W, W, pos, &big, false);
    CHECK(memcmp(a, b, sizeof a) == 0, "positions past the table differ from the table's values");
    as_rope_free(&t);
    as_rope_free(&big);
}
