/* GGUF end to end: convert (library and CLI) -> load -> the same geometry and exactly the
 * expected weights; the geometry from metadata completed or contradicted by a config.json beside
 * the file; the reference running a prefill and decodes on a Q2_K model beside its bf16 source
 * (the quantisation error report); the quantised tolerance of driver/compare.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "driver/compare.h"
#include "driver/driver.h"
#include "model/gen.h"
#include "model/gguf.h"
#include "model/model_load.h"
#include "model/quants.h"
#include "ref/numerics.h"
#include "tests/lib/cli_util.h"
#include "tests/lib/harness.h"

static const char *tmp(const char *name)
{
    static char p[4][600];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", as_test_tmpdir(), name);
    return p[k];
}

static void gen(const char *preset, const char *dir)
{
    AsConfig c;
    AsError err = {0};
    REQUIRE(as_config_preset(preset, &c, &err) == AS_OK, "%s: %s", preset, err.msg);
    REQUIRE(as_gen_model(&c, as_config_preset_precision(preset), 7, preset, dir, false, &err) == AS_OK, "gen: %s", err.msg);
}

static bool same_config(const AsConfig *a, const AsConfig *b)
{
    char *x = as_config_to_json(a), *y = as_config_to_json(b);
    bool same = x && y && !strcmp(x, y);
    free(x);
    free(y);
    return same;
}

/* Every layer tensor of the converted model holds exactly what conversion promises: F32 and BF16
 * the source values, Q8_0 / Q2_K ggml's dequantisation of ggml's quantisation of the source row. */
static void check_converted(const AsModel *src, const AsModel *q, AsDType quant, const char *what)
{
    int bad = 0, n = 0;
    for (int l = 0; l < src->cfg.n_layers; l++) {
        AsLayerTensor lt[AS_LAYER_MAX_TENSORS];
        int k = as_layer_tensors(&src->cfg, l, lt);
        for (int j = 0; j < k; j++, n++) {
            const AsWTensor *a = as_model_find(src, lt[j].name), *b = as_model_find(q, lt[j].name);
            REQUIRE(a && b, "%s: %s in both models", what, lt[j].name);
            AsDType want = lt[j].kind == AS_WK_PROJ ? quant : AS_DT_F32;
            if (b->dtype != want || b->ndim != a->ndim || b->shape[0] != a->shape[0] ||
                (a->ndim == 2 && b->shape[1] != a->shape[1])) {
                if (bad++ < 3)
                    CHECK(false, "%s: %s is %s, want %s", what, b->name, as_dtype_name(b->dtype), as_dtype_name(want));
                continue;
            }
            int64_t rows = as_wt_rows(a), cols = as_wt_cols(a);
            float *x = malloc((size_t)cols * sizeof *x), *y = malloc((size_t)cols * sizeof *y);
            float *e = malloc((size_t)cols * sizeof *e);
            void *blk = malloc((size_t)as_dtype_bytes(AS_DT_Q8_0, cols) + (size_t)cols + 64);
            REQUIRE(x && y && e && blk, "out of memory");
            for (int64_t r = 0; r < rows; r++) {
                as_wt_rows_f32(a, r, 1, x);
                as_wt_rows_f32(b, r, 1, y);
                if (want == AS_DT_Q2_K) {
                    as_quantize_row_q2_K(x, blk, cols);
                    as_dequantize_row_q2_K(blk, e, cols);
                } else if (want == AS_DT_Q8_0) {
                    as_quantize_row_q8_0(x, blk, cols);
                    as_dequantize_row_q8_0(blk, e, cols);
                } else {
                    memcpy(e, x, (size_t)cols * sizeof *e);
                }
                if (memcmp(y, e, (size_t)cols * sizeof *y) && bad++ < 3)
                    CHECK(false, "%s: %s row %lld differs from the expected values", what, b->name, (long long)r);
            }
            free(x), free(y), free(e), free(blk);
        }
    }
    CHECK(bad == 0 && n == q->n_tensors, "%s: %d of %d tensors wrong (%d in the file)", what, bad, n, q->n_tensors);
}

TEST(gguf_convert_round_trip)
{
    const char *dir = tmp("tq");
    gen("tiny-q", dir);
    AsModel src, q;
    AsError err = {0};
    REQUIRE(as_model_load(dir, 0, &src, &err) == AS_OK, "load source: %s", err.msg);
    CHECK(!src.quantised, "the bf16 source is not quantised");
    const struct {
        AsDType quant;
        AsGgufNames names;
        const char *file;
    } cases[] = {{AS_DT_Q2_K, AS_GGUF_NAMES_LLAMA, "q2k_llama.gguf"},
                 {AS_DT_Q8_0, AS_GGUF_NAMES_DEEPSEEK, "q80_ds.gguf"},
                 {AS_DT_BF16, AS_GGUF_NAMES_LLAMA, "bf16.gguf"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        AsGgufConvertOptions o = {cases[i].quant, cases[i].names, "tiny-q", false};
        const char *path = tmp(cases[i].file);
        REQUIRE(as_gguf_convert(&src, &o, path, &err) == AS_OK, "convert %s: %s", cases[i].file, err.msg);
        REQUIRE(as_model_load(path, 0, &q, &err) == AS_OK, "load %s: %s", cases[i].file, err.msg);
        CHECK(same_config(&src.cfg, &q.cfg), "%s: the geometry reads back the same", cases[i].file);
        CHECK(q.quantised == (cases[i].quant != AS_DT_BF16), "%s: quantised %d", cases[i].file, q.quantised);
        check_converted(&src, &q, cases[i].quant, cases[i].file);
        /* the file's own names are the chosen scheme */
        AsGguf *g;
        REQUIRE(as_gguf_open(path, &g, &err) == AS_OK, "%s", err.msg);
        bool llama = !strncmp(g->tensors[0].name, "blk.", 4);
        CHECK(llama == (cases[i].names == AS_GGUF_NAMES_LLAMA), "%s: first tensor named %s", cases[i].file,
              g->tensors[0].name);
        const AsGgufKV *kv = as_gguf_find(g, "general.architecture");
        CHECK(kv && kv->val_len == strlen(AS_GGUF_ARCH) && !memcmp(kv->val, AS_GGUF_ARCH, kv->val_len), "arch");
        as_gguf_close(g);
        if (cases[i].quant != AS_DT_BF16) {
            /* a quantised model converted to its own format keeps its blocks byte for byte */
            AsModel again;
            AsGgufConvertOptions o2 = {cases[i].quant, AS_GGUF_NAMES_DEEPSEEK, NULL, false};
            const char *p2 = tmp("again.gguf");
            REQUIRE(as_gguf_convert(&q, &o2, p2, &err) == AS_OK, "re-convert: %s", err.msg);
            REQUIRE(as_model_load(p2, 0, &again, &err) == AS_OK, "%s", err.msg);
            int differ = 0;
            for (int t = 0; t < q.n_tensors; t++) {
                const AsWTensor *a = &q.tensors[t], *b2 = as_model_find(&again, a->name);
                differ += !b2 || b2->dtype != a->dtype || b2->nbytes != a->nbytes || memcmp(a->data, b2->data, (size_t)a->nbytes);
            }
            CHECK(differ == 0, "%s converted again: %d tensors differ", cases[i].file, differ);
            as_model_free(&again);
        }
        as_model_free(&q);
    }
    as_model_free(&src);
}

/* tiny's projections have rows of 64 or 32 values: no Q2_K (refused by name), Q8_0 is fine. */
TEST(gguf_convert_refuses_short_rows)
{
    const char *dir = tmp("tiny");
    gen("tiny", dir);
    AsModel src, q;
    AsError err = {0};
    REQUIRE(as_model_load(dir, 0, &src, &err) == AS_OK, "%s", err.msg);
    AsGgufConvertOptions o = {AS_DT_Q2_K, AS_GGUF_NAMES_LLAMA, NULL, false};
    const char *path = tmp("tiny.gguf");
    CHECK(as_gguf_convert(&src, &o, path, &err) == AS_EBADINPUT && strstr(err.msg, "layers.0.attn.wq_a.weight") &&
              strstr(err.msg, "rows of 64 values cannot be Q2_K"),
          "tiny to Q2_K: %s", err.msg);
    FILE *f = fopen(path, "rb");
    CHECK(!f, "nothing written after a refusal");
    if (f)
        fclose(f);
    o.quant = AS_DT_Q8_0;
    REQUIRE(as_gguf_convert(&src, &o, path, &err) == AS_OK, "tiny to Q8_0: %s", err.msg);
    REQUIRE(as_model_load(path, 0, &q, &err) == AS_OK, "%s", err.msg);
    check_converted(&src, &q, AS_DT_Q8_0, "tiny Q8_0");
    as_model_free(&q);
    as_model_free(&src);
}

/* The geometry: metadata missing attnscope's own keys (as a llama.cpp file would) is completed by
 * a config.json beside it; a config.json that contradicts the metadata is refused by field. */
TEST(gguf_convert_config_json_beside)
{
    AsConfig cfg, got;
    AsError err = {0};
    REQUIRE(as_config_preset("tiny-q", &cfg, &err) == AS_OK, "%s", err.msg);
    AsGgufMeta meta[48];
    memset(meta, 0, sizeof meta);
    snprintf(meta[0].key, sizeof meta[0].key, "general.architecture");
    meta[0].type = AS_GGUF_STRING;
    snprintf(meta[0].str, sizeof meta[0].str, "deepseek4");
    int n = 1 + as_gguf_config_meta(&cfg, "deepseek4", meta + 1, 47);
    /* drop what llama.cpp's DeepSeek-4 files do not carry */
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!strstr(meta[i].key, "kv_source_layers") && !strstr(meta[i].key, "indexer.source_layers") &&
            !strstr(meta[i].key, "candidate_") && !strstr(meta[i].key, "attnscope."))
            meta[k++] = meta[i];
    char dir[600], path[700], cj[700];
    snprintf(dir, sizeof dir, "%s", tmp("partial"));
    REQUIRE(system((snprintf(path, sizeof path, "mkdir -p '%s'", dir), path)) == 0, "mkdir");
    snprintf(path, sizeof path, "%s/model.gguf", dir);
    snprintf(cj, sizeof cj, "%s/config.json", dir);
    REQUIRE(as_gguf_write(path, meta, k, NULL, 0, NULL, &err) == AS_OK, "write: %s", err.msg);
    AsGguf *g;
    REQUIRE(as_gguf_open(path, &g, &err) == AS_OK, "%s", err.msg);
    CHECK(as_gguf_config(g, cj, &got, &err) == AS_EBADINPUT && strstr(err.msg, "missing field") &&
              strstr(err.msg, "model.gguf"),
          "no config.json: %s", err.msg);

    /* the missing fields from a config.json in DeepSeek's spelling, one shared field agreeing */
    FILE *f = fopen(cj, "w");
    REQUIRE(f, "config.json");
    fprintf(f, "{\"kv_source_layers\": [1, 4, 5], \"index_source_layers\": [1, 3, 4, 5, 7, 9],\n"
               " \"candidate_source_layer\": 5, \"candidate_topk_blocks\": 3, \"candidate_block_size\": 4,\n"
               " \"max_seq_len\": 512, \"dim\": 256, \"norm_eps\": 1e-6}\n");
    fclose(f);
    REQUIRE(as_gguf_config(g, cj, &got, &err) == AS_OK, "completed by config.json: %s", err.msg);
    REQUIRE(as_config_validate(&got, &err) == AS_OK, "%s", err.msg);
    CHECK(same_config(&got, &cfg), "metadata + config.json give tiny-q's geometry");

    /* contradictions: same spelling (named with both files), other spelling */
    f = fopen(cj, "w");
    fprintf(f, "{\"kv_source_layer_ids\": [1, 4, 5], \"index_source_layer_ids\": [1, 3, 4, 5, 7, 9],\n"
               " \"candidate_topk_blocks\": 3, \"candidate_block_size\": 4, \"hidden_size\": 128}\n");
    fclose(f);
    CHECK(as_gguf_config(g, cj, &got, &err) == AS_EBADINPUT && strstr(err.msg, "'hidden_size' = 128 disagrees") &&
              strstr(err.msg, "config.json") && strstr(err.msg, "model.gguf"),
          "hidden_size contradicted: %s", err.msg);
    f = fopen(cj, "w");
    fprintf(f, "{\"kv_source_layers\": [1, 4, 5], \"index_source_layers\": [1, 3, 4, 5, 7, 9],\n"
               " \"candidate_topk_blocks\": 3, \"candidate_block_size\": 4, \"rope_scaling\": {\"factor\": 8}}\n");
    fclose(f);
    CHECK(as_gguf_config(g, cj, &got, &err) == AS_EBADINPUT && strstr(err.msg, "'rope_scaling.factor' = 8"),
          "rope_scaling.factor contradicted: %s", err.msg);
    f = fopen(cj, "w");
    fprintf(f, "{\"kv_source_layers\": [1, 4, 5], \"index_source_layers\": [1, 3, 4, 5, 7, 9],\n"
               " \"candidate_topk_blocks\": 3, \"candidate_block_size\": 4, \"dim\": 64}\n");
    fclose(f);
    CHECK(as_gguf_config(g, cj, &got, &err) == AS_EBADINPUT && strstr(err.msg, "'hidden_size' and 'dim'"),
          "dim contradicted: %s", err.msg);
    as_gguf_close(g);

    /* no general.architecture: the keys cannot be found */
    snprintf(meta[0].key, sizeof meta[0].key, "general.name");
    REQUIRE(as_gguf_write(path, meta, k, NULL, 0, NULL, &err) == AS_OK, "write: %s", err.msg);
    REQUIRE(as_gguf_open(path, &g, &err) == AS_OK, "%s", err.msg);
    CHECK(as_gguf_config(g, NULL, &got, &err) == AS_EBADINPUT && strstr(err.msg, "general.architecture"),
          "no arch: %s", err.msg);
    as_gguf_close(g);
}

/* The reference runs a prefill and decodes on the Q2_K model (reference only), beside its bf16
 * source: every layer's quantisation error is there, finite and non-zero after the first
 * projection; the layer input x is the same on both (the bf16 stack takes the quantised
 * reference's). */
TEST(gguf_convert_reference_runs_with_bf16_source)
{
    const char *dir = tmp("tq");
    gen("tiny-q", dir);
    AsModel src;
    AsError err = {0};
    REQUIRE(as_model_load(dir, 0, &src, &err) == AS_OK, "%s", err.msg);
    AsGgufConvertOptions o = {AS_DT_Q2_K, AS_GGUF_NAMES_LLAMA, NULL, false};
    const char *path = tmp("tq.gguf");
    REQUIRE(as_gguf_convert(&src, &o, path, &err) == AS_OK, "%s", err.msg);
    as_model_free(&src);
    AsDriverOptions d;
    as_driver_options_default(&d);
    d.model = path;
    d.bf16_model = dir;
    d.no_engine = true;
    d.quiet = true;
    d.threads = 2;
    AsDriver *drv;
    REQUIRE(as_driver_open(&d, &drv, &err) == AS_OK, "open: %s", err.msg);
    CHECK(drv->model.quantised && drv->cmp.quantised, "the Q2_K model is quantised, the comparison knows");
    REQUIRE(as_driver_prefill(drv, 6, &err) == AS_OK, "prefill: %s", err.msg);
    int bad = 0;
    for (int step = 0; step < 3; step++) {
        if (step && as_driver_decode(drv, 1, &err) != AS_OK)
            REQUIRE(false, "decode: %s", err.msg);
        for (int l = 0; l < drv->model.cfg.n_layers; l++) {
            const AsLayerDiff *q = &drv->qerr[l];
            const AsTensorDiff *out = &q->t[AS_T_OUT], *x = &q->t[AS_T_X], *qr = &q->t[AS_T_QR];
            if (!(x->verdict == AS_V_PASS && x->max_abs == 0) ||
                !(isfinite(out->max_rel) && out->max_rel > 0 && out->max_rel < 2) || !(qr->max_rel > 0)) {
                if (bad++ < 3)
                    CHECK(false, "step %d layer %d: x max_abs %g, qr max_rel %g, out max_rel %g", step, l, x->max_abs,
                          qr->max_rel, out->max_rel);
            }
            const float *o_ref = drv->ref_run[l].t[AS_T_OUT].data;
            for (int64_t i = 0; o_ref && i < as_ht_numel(&drv->ref_run[l].t[AS_T_OUT]); i++)
                if (!isfinite(o_ref[i]) && bad++ < 3)
                    CHECK(false, "step %d layer %d: out[%lld] = %g", step, l, (long long)i, o_ref[i]);
        }
    }
    as_test_note("Q2_K vs bf16, last step, layer 9: out max_rel %.3f, o %.3f, q %.3f",
                 drv->qerr[9].t[AS_T_OUT].max_rel, drv->qerr[9].t[AS_T_O].max_rel, drv->qerr[9].t[AS_T_Q].max_rel);
    as_driver_close(drv);
    /* a bf16 source of another geometry is refused */
    d.bf16_model = "tiny";
    char cache[600];
    snprintf(cache, sizeof cache, "%s", tmp("cache"));
    setenv("ATTNSCOPE_CACHE", cache, 1);
    CHECK(as_driver_open(&d, &drv, &err) == AS_EBADINPUT && strstr(err.msg, "geometry differs"), "%s", err.msg);
    unsetenv("ATTNSCOPE_CACHE");
}

/* The CLI: convert, info showing the types, refusals with exit 2, a run script with bf16_model
 * whose report carries the quantisation error. */
TEST(gguf_convert_cli_convert_info_run)
{
    AsCliResult *r = malloc(sizeof *r);
    REQUIRE(r, "out of memory");
    const char *dir = tmp("tq"), *out = tmp("tq_cli.gguf");
    as_cli_run(r, AS_ARGS("gen", "--preset", "tiny-q", "--seed", "3", "-o", dir));
    REQUIRE(r->status == 0, "gen: %s", r->err);
    as_cli_run(r, AS_ARGS("convert", "--to", "gguf", "--quant", "q2_k", dir, out));
    CHECK(r->status == 0 && strstr(r->out, "Q2_K"), "convert: exit %d, %s %s", r->status, r->out, r->err);
    as_cli_run(r, AS_ARGS("info", out));
    CHECK(r->status == 0 && strstr(r->out, "layers.0.attn.wq_a.weight  ") && strstr(r->out, "Q2_K") &&
              strstr(r->out, "F32") && strstr(r->out, "dim 256, 10 layers"),
          "info on the Q2_K file: exit %d, %.300s", r->status, r->out);
    as_cli_run(r, AS_ARGS("convert", "--to", "gguf", "--quant", "q3_k", dir, out));
    CHECK(r->status == 2 && strstr(r->err, "q3_k"), "--quant q3_k: exit %d, %s", r->status, r->err);
    as_cli_run(r, AS_ARGS("convert", "--to", "gguf", "--quant", "q2_k", "--names", "hf", dir, out));
    CHECK(r->status == 2 && strstr(r->err, "--names"), "--names hf: exit %d, %s", r->status, r->err);
    as_cli_run(r, AS_ARGS("convert", "--to", "safetensors", "--quant", "q2_k", dir, out));
    CHECK(r->status == 2 && strstr(r->err, "--to gguf"), "--to safetensors: exit %d, %s", r->status, r->err);
    as_cli_run(r, AS_ARGS("convert", "--to", "gguf", "--quant", "q2_k", dir, tmp("x.bin")));
    CHECK(r->status == 2 && strstr(r->err, ".gguf"), "output not .gguf: exit %d, %s", r->status, r->err);
    const char *tiny = tmp("tiny_cli");
    as_cli_run(r, AS_ARGS("gen", "--preset", "tiny", "-o", tiny));
    as_cli_run(r, AS_ARGS("convert", "--to", "gguf", "--quant", "q2_k", tiny, tmp("tiny.gguf")));
    CHECK(r->status == 2 && strstr(r->err, "cannot be Q2_K") && strchr(r->err, '\n')[1] == '\0',
          "tiny to Q2_K: exit %d, %s", r->status, r->err);

    /* a run script with "bf16_model": the report has a quant_error per layer */
    const char *script = tmp("q.json"), *rep = tmp("q_report.json");
    FILE *f = fopen(script, "w");
    REQUIRE(f, "script");
    fprintf(f, "{\"name\": \"q2k\", \"model\": \"tq_cli.gguf\", \"bf16_model\": \"tq\", \"engine\": \"off\",\n"
               " \"threads\": 2, \"steps\": [{\"prefill\": 5}, {\"decode\": 1}]}\n");
    fclose(f);
    as_cli_run(r, AS_ARGS("run", script, "--report-json", rep, "--quiet"));
    CHECK(r->status == 0 && strstr(r->out, "quantisation error (reference on"), "run: exit %d, %.400s %s",
          r->status, r->out, r->err);
    char *text = as_slurp(rep, NULL);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(j, "steps");
    const cJSON *l0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(steps, 1), "layers"), 3);
    const cJSON *qe = cJSON_GetObjectItemCaseSensitive(l0, "quant_error");
    const cJSON *qo = cJSON_GetObjectItemCaseSensitive(qe, "out");
    const cJSON *rel = cJSON_GetObjectItemCaseSensitive(qo, "max_rel");
    CHECK(cJSON_IsNumber(rel) && rel->valuedouble > 0 && cJSON_GetObjectItemCaseSensitive(j, "bf16_model"),
          "report: step 1 layer 3 quant_error.out.max_rel present and > 0");
    cJSON_Delete(j);
    free(text);
    /* --bf16-model on the command line: the same, a missing directory is exit 2 */
    as_cli_run(r, AS_ARGS("run", script, "--bf16-model", tmp("nothing"), "--quiet"));
    CHECK(r->status == 2 && strstr(r->err, "bf16 model"), "missing bf16 model: exit %d, %s", r->status, r->err);
    free(r);
}

/* ---- the quantised tolerance (driver/compare.c) ---- */

static float *mk(AsRun *r, AsTensorId id, int64_t d0, int64_t d1)
{
    float *p = as_run_shape(r, id, 2, d0, d1, 0);
    REQUIRE(p, "allocating %s", as_tensor_desc[id].name);
    memset(p, 0, (size_t)(d0 * d1) * sizeof *p);
    return p;
}

static AsTensorDiff cmpq(const AsRun *g, const AsRun *w, AsTensorId id, bool quantised)
{
    AsCompareOptions o;
    as_compare_options_default(&o);
    o.quantised = quantised;
    o.cand_block = 2;
    AsTensorDiff d;
    as_compare_tensor(g, w, id, &o, &d);
    return d;
}

/* tolerance = max|want| * (2^-7 + 0.032) + 1e-4 downstream of a quantised projection. */
TEST(gguf_convert_quantised_tolerance)
{
    AsRun w, g;
    as_run_init(&w);
    as_run_init(&g);
    w.ratio = g.ratio = 2;
    float *wo = mk(&w, AS_T_OUT, 1, 4), *go = mk(&g, AS_T_OUT, 1, 4);
    float *wk = mk(&w, AS_T_ST_PART_KV, 1, 4), *gk = mk(&g, AS_T_ST_PART_KV, 1, 4);
    float *wl = mk(&w, AS_T_LATENT, 1, 4), *gl = mk(&g, AS_T_LATENT, 1, 4);
    float *wx = mk(&w, AS_T_X, 1, 4), *gx = mk(&g, AS_T_X, 1, 4);
    for (int i = 0; i < 4; i++)
        wo[i] = go[i] = wk[i] = gk[i] = wl[i] = gl[i] = wx[i] = gx[i] = 1.0f - 0.25f * i;
    const double q_tol = 0x1p-7 + 0.032 + 1e-4;
    go[1] += 0.03f, gk[1] += 0.03f, gl[1] += 0.03f; /* beyond bf16's 0.0079, within 0.0399 */
    AsTensorDiff d = cmpq(&g, &w, AS_T_OUT, false);
    CHECK(d.verdict == AS_V_MISMATCH, "out +0.03, not quantised: %s", as_verdict_name(d.verdict));
    d = cmpq(&g, &w, AS_T_OUT, true);
    CHECK(d.verdict == AS_V_PASS && fabs(d.tol - q_tol) < 1e-9, "out +0.03, quantised: %s, tol %.6g (want %.6g)",
          as_verdict_name(d.verdict), d.tol, q_tol);
    go[1] += 0.02f;
    d = cmpq(&g, &w, AS_T_OUT, true);
    CHECK(d.verdict == AS_V_MISMATCH, "out +0.05, quantised: %s", as_verdict_name(d.verdict));
    /* not downstream (same input x): the ratio-2 compressor's f32 state and latents stay strict */
    d = cmpq(&g, &w, AS_T_ST_PART_KV, true);
    CHECK(d.verdict == AS_V_MISMATCH, "partial kv state, same x: %s", as_verdict_name(d.verdict));
    d = cmpq(&g, &w, AS_T_LATENT, true);
    CHECK(d.verdict == AS_V_MISMATCH, "ratio-2 latent, same x: %s", as_verdict_name(d.verdict));
    w.ratio = g.ratio = 1;
    d = cmpq(&g, &w, AS_T_LATENT, true);
    CHECK(d.verdict == AS_V_PASS, "ratio-1 latent (a quantised wkv): %s", as_verdict_name(d.verdict));
    /* free mode: the inputs differ, so the whole layer is downstream */
    gx[2] += 0.01f;
    d = cmpq(&g, &w, AS_T_ST_PART_KV, true);
    CHECK(d.verdict == AS_V_PASS, "partial kv state, x differs: %s", as_verdict_name(d.verdict));
    d = cmpq(&g, &w, AS_T_X, true);
    CHECK(d.verdict == AS_V_PASS, "x itself, +0.01: %s", as_verdict_name(d.verdict));
    as_run_free(&w);
    as_run_free(&g);
}

/* Selection boundaries within 8 bf16 ulps are near-ties when quantised (1 ulp otherwise). */
TEST(gguf_convert_quantised_near_tie)
{
    AsRun r[2];
    const float base = 3.0f, lo = as_bf16_to_f32((uint16_t)(as_bf16_bits(3.0f) - 5)); /* 5 ulps below 3 */
    for (int s = 0; s < 2; s++) {
        AsRun *x = &r[s];
        as_run_init(x);
        x->rows_a_len = 3, x->cols = 3, x->k = 2, x->topk = 5, x->width = 8, x->start_pos = 9, x->s = 1, x->ratio = 1;
        float *sc = mk(x, AS_T_ISCORE, 1, 8);
        const float v[8] = {5, s ? lo : base, s ? base : lo, 1, 1, 1, 1, 1};
        memcpy(sc, v, sizeof v);
        int32_t *cs = as_run_shape(x, AS_T_CSEL, 2, 1, 2, 0);
        REQUIRE(cs, "csel");
        cs[0] = 3, cs[1] = (s ? 2 : 1) + 3;
    }
    AsTensorDiff d = cmpq(&r[1], &r[0], AS_T_CSEL, false);
    CHECK(d.verdict == AS_V_MISMATCH, "5 ulps, not quantised: %s", as_verdict_name(d.verdict));
    d = cmpq(&r[1], &r[0], AS_T_CSEL, true);
    CHECK(d.verdict == AS_V_NEAR_TIE && d.seldiff[0].margin == 5, "5 ulps, quantised: %s (margin %g)",
          as_verdict_name(d.verdict), d.seldiff[0].margin);
    as_run_free(&r[0]);
    as_run_free(&r[1]);
}
