/* The reference's numerics against torch's own values (tests/data/torch_kernels.json, written by
 * tests/torch/make_fixtures.py on a machine with torch): act_quant bit for bit, the fp8 linear and
 * kernel.py's sparse attention to the f32 summation order inside a dot product (the reference's
 * BLAS and torch's own kernels add in different orders: at most one bf16 step, almost always the
 * same bits), model.py's RMSNorm with a bf16 weight, and torch.topk's order on the rows that drive
 * introselect to its depth limit, exactly. Run from the repository root. */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/precision.h"
#include "ref/attention.h"
#include "ref/fp8_linear.h"
#include "ref/numerics.h"
#include "ref/quant.h"
#include "ref/rmsnorm.h"
#include "ref/topk.h"
#include "tests/lib/harness.h"

#define FIXTURE "tests/data/torch_kernels.json"

static cJSON *load(void)
{
    FILE *f = fopen(FIXTURE, "rb");
    REQUIRE(f, "%s: not found (run from the repository root; tests/torch/make_fixtures.py writes it)", FIXTURE);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    REQUIRE(text && fread(text, 1, (size_t)n, f) == (size_t)n, "%s: read failed", FIXTURE);
    fclose(f);
    text[n] = 0;
    cJSON *doc = cJSON_Parse(text);
    free(text);
    REQUIRE(doc, "%s: not JSON", FIXTURE);
    return doc;
}

static int num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    REQUIRE(cJSON_IsNumber(v), "%s: field %s missing", FIXTURE, k);
    return v->valueint;
}

/* An array field as n values of the given kind: 'b' bf16 bits, 'f' f32 bits, 'u' bytes, 'i' ints. */
static void *arr(const cJSON *o, const char *k, char kind, int64_t want)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, k);
    REQUIRE(cJSON_IsArray(a) && cJSON_GetArraySize(a) == want, "%s: field %s: want %lld values", FIXTURE, k,
            (long long)want);
    size_t esz = kind == 'u' ? 1 : 4;
    void *out = malloc(esz * (size_t)(want ? want : 1));
    REQUIRE(out, "out of memory");
    int64_t i = 0;
    for (const cJSON *v = a->child; v; v = v->next, i++) {
        double d = v->valuedouble;
        if (kind == 'b')
            ((float *)out)[i] = as_bf16_to_f32((uint16_t)d);
        else if (kind == 'f')
            ((float *)out)[i] = as_bits_f32((uint32_t)(int64_t)d);
        else if (kind == 'u')
            ((uint8_t *)out)[i] = (uint8_t)d;
        else
            ((int32_t *)out)[i] = (int32_t)d;
    }
    return out;
}

/* got within one bf16 step of torch's (summation order), and how many are bit-exact. */
static void close_to_torch(const char *what, const float *got, const float *want, int64_t n, double min_exact)
{
    int64_t exact = 0, bad = 0;
    for (int64_t i = 0; i < n; i++) {
        exact += got[i] == want[i];
        if (fabsf(got[i] - want[i]) > fabsf(want[i]) * 0x1p-8f + 1e-30f && bad++ < 3)
            as_test_fail(__FILE__, __LINE__, "%s: element %lld: %.9g, torch %.9g", what, (long long)i, got[i], want[i]);
    }
    CHECK((double)exact >= min_exact * (double)n, "%s: %lld of %lld bit-exact with torch", what, (long long)exact,
          (long long)n);
    as_test_note("%s: %lld of %lld elements bit-exact with torch, the rest within one bf16 step", what,
                 (long long)exact, (long long)n);
}

TEST(torch_kernels_fp8_linear)
{
    cJSON *doc = load();
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(doc, "fp8_linear");
    REQUIRE(cJSON_IsArray(cases) && cJSON_GetArraySize(cases) > 0, "%s: no fp8_linear cases", FIXTURE);
    for (const cJSON *c = cases->child; c; c = c->next) {
        int m = num(c, "m"), k = num(c, "k"), n = num(c, "n"), B = num(c, "block");
        int64_t sr = (n + B - 1) / B, sc = (k + B - 1) / B;
        float *x = arr(c, "x", 'b', (int64_t)m * k), *sx_t = arr(c, "sx", 'f', (int64_t)m * k / 32);
        float *y_t = arr(c, "y", 'b', (int64_t)m * n);
        uint8_t *w = arr(c, "w", 'u', (int64_t)n * k), *ws = arr(c, "ws", 'u', sr * sc);
        uint8_t *xq_t = arr(c, "xq", 'u', (int64_t)m * k);
        /* act_quant: bit for bit */
        float *xq = malloc(sizeof(float) * (size_t)k), *sx = malloc(sizeof(float) * (size_t)(k / 32));
        int bad = 0;
        for (int t = 0; t < m; t++) {
            as_act_quant(x + (int64_t)t * k, k, xq, sx);
            for (int i = 0; i < k; i++)
                bad += as_e4m3_bits(xq[i]) != xq_t[(int64_t)t * k + i];
            for (int b = 0; b < k / 32; b++)
                bad += sx[b] != sx_t[t * (k / 32) + b];
        }
        CHECK(bad == 0, "act_quant %dx%d: %d codes or scales differ from torch's", m, k, bad);
        /* the fp8 linear, on the decode path row by row and the prefill path */
        AsWTensor scale = {.dtype = AS_DT_F8_E8M0, .ndim = 2, .shape = {sr, sc}, .data = ws};
        AsWTensor wt = {.dtype = AS_DT_F8_E4M3, .ndim = 2, .shape = {n, k}, .data = w, .scale = &scale, .block = B};
        float *y = malloc(sizeof(float) * (size_t)m * n);
        char what[96];
        for (int t = 0; t < m; t++)
            as_fp8_linear(x + (int64_t)t * k, 1, &wt, y + (int64_t)t * n);
        snprintf(what, sizeof what, "fp8 linear %dx%d -> %d, %dx%d scales, decode", m, k, n, B, B);
        close_to_torch(what, y, y_t, (int64_t)m * n, 0.95);
        as_fp8_linear(x, m, &wt, y);
        snprintf(what, sizeof what, "fp8 linear %dx%d -> %d, %dx%d scales, prefill", m, k, n, B, B);
        close_to_torch(what, y, y_t, (int64_t)m * n, 0.95);
        free(x), free(sx_t), free(y_t), free(w), free(ws), free(xq_t), free(xq), free(sx), free(y);
    }
    cJSON_Delete(doc);
}

TEST(torch_kernels_sparse_attn)
{
    cJSON *doc = load();
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(doc, "sparse_attn");
    REQUIRE(cJSON_IsArray(cases) && cJSON_GetArraySize(cases) > 0, "%s: no sparse_attn cases", FIXTURE);
    for (const cJSON *c = cases->child; c; c = c->next) {
        int s = num(c, "s"), nh = num(c, "nh"), hd = num(c, "hd"), nrows = num(c, "nrows"), topk = num(c, "topk");
        const cJSON *note = cJSON_GetObjectItemCaseSensitive(c, "note");
        float *q = arr(c, "q", 'b', (int64_t)s * nh * hd), *rows = arr(c, "rows", 'b', (int64_t)nrows * hd);
        float *sink = arr(c, "sink", 'f', nh), *o_t = arr(c, "o", 'b', (int64_t)s * nh * hd);
        int32_t *idx = arr(c, "idx", 'i', (int64_t)s * topk);
        float scale = as_bits_f32((uint32_t)num(c, "scale"));
        float *o = malloc(sizeof(float) * (size_t)s * nh * hd);
        as_sparse_attention(q, rows, nrows, idx, topk, sink, o, s, nh, hd, scale);
        char what[160];
        snprintf(what, sizeof what, "sparse attention (%s)", cJSON_IsString(note) ? note->valuestring : "?");
        close_to_torch(what, o, o_t, (int64_t)s * nh * hd, 0.9);
        free(q), free(rows), free(sink), free(o_t), free(idx), free(o);
    }
    cJSON_Delete(doc);
}

TEST(torch_kernels_rmsnorm_bf16_weight)
{
    cJSON *doc = load();
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(doc, "rmsnorm");
    REQUIRE(cJSON_IsArray(cases) && cJSON_GetArraySize(cases) > 0, "%s: no rmsnorm cases", FIXTURE);
    for (const cJSON *c = cases->child; c; c = c->next) {
        int rows = num(c, "rows"), n = num(c, "n");
        double eps = cJSON_GetObjectItemCaseSensitive(c, "eps")->valuedouble;
        float *x = arr(c, "x", 'b', (int64_t)rows * n), *w = arr(c, "w", 'f', n), *y_t = arr(c, "y", 'b', (int64_t)rows * n);
        /* the weight as the model holds it: through the loader's rounding (an F32 tensor) */
        AsWTensor wt = {.dtype = AS_DT_F32, .ndim = 1, .shape = {n}, .data = w};
        float *wb = as_wt_norm_f32(&wt), *y = malloc(sizeof(float) * (size_t)rows * n);
        REQUIRE(wb && y, "out of memory");
        as_rmsnorm(x, wb, y, rows, n, (float)eps);
        char what[64];
        snprintf(what, sizeof what, "rmsnorm %dx%d, f32 weight held as bf16", rows, n);
        close_to_torch(what, y, y_t, (int64_t)rows * n, 0.95);
        free(x), free(w), free(y_t), free(wb), free(y);
    }
    cJSON_Delete(doc);
}

TEST(torch_kernels_topk_depth_limit_order)
{
    cJSON *doc = load();
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(doc, "topk_depth_limit");
    REQUIRE(cJSON_IsArray(cases) && cJSON_GetArraySize(cases) > 0, "%s: no topk_depth_limit cases", FIXTURE);
    for (const cJSON *c = cases->child; c; c = c->next) {
        int n = num(c, "n"), k = num(c, "k");
        int32_t *vi = arr(c, "values", 'i', n), *order_t = arr(c, "unsorted_order", 'i', k);
        float *v = malloc(sizeof(float) * (size_t)n);
        int32_t *order = malloc(sizeof(int32_t) * (size_t)k);
        for (int i = 0; i < n; i++)
            v[i] = (float)vi[i];
        long long before = as_topk_depth_limit_hits();
        as_topk_torch_order(v, n, k, order, NULL);
        CHECK(as_topk_depth_limit_hits() > before, "n %d, k %d: the row did not reach the depth limit", n, k);
        int first = -1;
        for (int i = 0; i < k && first < 0; i++)
            if (order[i] != order_t[i])
                first = i;
        CHECK(first < 0, "n %d, k %d: torch.topk's unsorted order differs at %d: %d, torch %d", n, k, first,
              first < 0 ? 0 : order[first], first < 0 ? 0 : order_t[first]);
        free(vi), free(order_t), free(v), free(order);
    }
    as_test_note("%d rows through introselect's depth-limit fallback: torch's unsorted order exactly",
                 cJSON_GetArraySize(cases));
    cJSON_Delete(doc);
}
