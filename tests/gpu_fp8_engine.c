/* The engine's fp8 precision in the checkpoint's form (engine/fp8_proj.c): the fp8 projections' weights as
 * e4m3 codes and block scales (half the bytes of the bf16 upload) unless the fp8_qdq knob (--fp8-qdq) asks
 * for the bf16 upload; the two forms give the same bits in every tensor of every layer (the e4m3 GEMV is
 * the bf16 GEMV of the dequantised weight, a prefill dequantises into the same cuBLAS call), and both
 * match the reference layer by layer (SPEC 6 through the driver: 0 mismatches), prefills of 1 to 40
 * tokens (the GEMV up to 8 rows, the GEMM above) and decode steps. tests/gpu_engine.c and
 * tests/gpu_graph.c run fp8 precision in the default form, the flash model and the graph included. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/driver.h"
#include "engine/internal.h"
#include "model/precision.h"
#include "tests/lib/harness.h"
#include "tests/lib/model_fixture.h"

/* An engine on tiny in fp8 precision, in the codes form (qdq: with the fp8_qdq knob, the bf16 upload). */
static AsEngine *tiny_fp8_engine(AsModel *m, int qdq)
{
    AsError err = {0};
    REQUIRE(as_model_set_precision(m, AS_PREC_FP8, &err) == 0, "tiny in fp8 precision: %s", err.msg);
    AsEngineKnobs k;
    as_engine_knobs_default(&k);
    k.fp8_qdq = qdq;
    AsEngine *e = NULL;
    AsEngineOptions eo = {.device = 0, .knobs = &k};
    const int rc = as_engine_create(m, &eo, &e, &err);
    REQUIRE(rc == 0, "engine%s: %s", qdq ? " (--fp8-qdq)" : "", err.msg);
    return e;
}

GPU_TEST(gpu_fp8_engine_form_taken)
{
    AsModel *m = as_test_model("tiny", NULL, 1);
    AsEngine *form = tiny_fp8_engine(m, 0), *qdq = tiny_fp8_engine(m, 1);
    CHECK(form->fp8_form, "fp8 precision without --fp8-qdq: the codes form is off");
    CHECK(!qdq->fp8_form, "with --fp8-qdq the codes form is on");
    int64_t fp8_weights = 0, wrong = 0;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const AsDevLayerWeights *a = &form->w[l], *b = &qdq->w[l];
        const AsDevWeight *wa[] = {&a->wq_a, &a->wq_b, &a->wkv, &a->wo_b, &a->i_wq_b};
        const AsDevWeight *wb[] = {&b->wq_a, &b->wq_b, &b->wkv, &b->wo_b, &b->i_wq_b};
        for (int i = 0; i < 5; i++) {
            if (!wa[i]->d)
                continue;
            fp8_weights++;
            wrong += !wa[i]->fp8 || !wb[i]->fp8 || wb[i]->type != AS_DW_BF16 || wa[i]->type != AS_DW_FP8 || !wa[i]->ws;
        }
    }
    CHECK(fp8_weights > 0 && wrong == 0, "%lld of %lld fp8 projections not uploaded in the form their engine runs",
          (long long)wrong, (long long)fp8_weights);
    CHECK(form->weight_bytes < qdq->weight_bytes, "the codes form holds %zu weight bytes, the bf16 upload %zu",
          form->weight_bytes, qdq->weight_bytes);
    as_test_note("tiny fp8: weights on the device %zu bytes as codes, %zu as the bf16 upload", form->weight_bytes,
                 qdq->weight_bytes);
    as_engine_destroy(form);
    as_engine_destroy(qdq);
    as_test_model_free(m);
}

enum { MAX_RUNS = 512 };
/* FNV-1a of every engine tensor of every layer run, in step order (the driver's hook). */
typedef struct {
    uint64_t h[MAX_RUNS][AS_T_COUNT];
    int step[MAX_RUNS], layer[MAX_RUNS];
    int n;
} Hashes;

static void hash_hook(void *ctx, int step, int layer, const AsRun *got, const AsRun *ref, const AsLayerDiff *diff)
{
    (void)ref, (void)diff;
    Hashes *H = ctx;
    if (!got || H->n >= MAX_RUNS)
        return;
    for (int t = 0; t < AS_T_COUNT; t++) {
        const AsHostTensor *x = &got->t[t];
        uint64_t h = 1469598103934665603ULL;
        const unsigned char *b = x->data;
        const size_t bytes = (size_t)as_ht_numel(x) * (x->type == AS_VT_U8 ? 1 : 4);
        for (size_t i = 0; i < bytes; i++)
            h = (h ^ b[i]) * 1099511628211ULL;
        H->h[H->n][t] = x->data ? h : 0;
    }
    H->step[H->n] = step, H->layer[H->n] = layer;
    H->n++;
}

/* Prefill then decode steps through the driver; returns the layer runs judged a mismatch (the first named). */
static int run_vs_reference(const char *name, int qdq, int prefill, int decode, Hashes *H)
{
    setenv("ATTNSCOPE_CACHE", getenv("ATTNSCOPE_GPU_CACHE") ? getenv("ATTNSCOPE_GPU_CACHE") : as_test_tmpdir(), 1);
    AsEngineKnobs k;
    as_engine_knobs_default(&k);
    k.fp8_qdq = qdq;
    AsDriverOptions o;
    as_driver_options_default(&o);
    o.knobs = &k;
    o.model = "tiny";
    o.quiet = true;
    o.precision = AS_PREC_FP8;
    AsDriver *d = NULL;
    AsError err = {0};
    const int rc = as_driver_open(&o, &d, &err);
    REQUIRE(rc == 0, "%s: open: %s", name, err.msg);
    REQUIRE(d->got_kind == AS_GOT_ENGINE, "%s: the engine is not in use: %s", name, d->note);
    H->n = 0;
    as_driver_set_hook(d, hash_hook, H);
    int mismatches = 0, runs = 0;
    for (int step = 0; step <= decode; step++) {
        const int r = step == 0 ? as_driver_prefill(d, prefill, &err) : as_driver_decode(d, 1, &err);
        REQUIRE(r == 0, "%s: step %d: %s", name, step, err.msg);
        for (int l = 0; l < d->model.cfg.n_layers; l++, runs++)
            if (d->diff[l].verdict == AS_V_MISMATCH && mismatches++ == 0)
                as_test_note("%s: step %d, layer %d: the first mismatch", name, step, l);
    }
    as_test_note("%s: %d layer runs, %d mismatches", name, runs, mismatches);
    as_driver_close(d);
    return mismatches;
}

GPU_TEST(gpu_fp8_engine_tiny_both_forms_vs_reference)
{
    const int sizes[] = {1, 8, 9, 13, 40};
    static Hashes H[2];
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        for (int qdq = 0; qdq < 2; qdq++) {
            char name[96];
            snprintf(name, sizeof name, "tiny fp8 (%s) prefill %d + 5 decode", qdq ? "bf16 upload" : "e4m3 codes",
                     sizes[i]);
            CHECK(run_vs_reference(name, qdq, sizes[i], 5, &H[qdq]) == 0, "%s: layer runs out of SPEC 6", name);
        }
        /* the two forms: the same bits, tensor by tensor */
        int differ = 0;
        CHECK(H[0].n == H[1].n && H[0].n > 0, "prefill %d: %d and %d layer runs hashed", sizes[i], H[0].n, H[1].n);
        for (int r = 0; r < H[0].n && r < H[1].n; r++)
            for (int t = 0; t < AS_T_COUNT; t++)
                if (H[0].h[r][t] != H[1].h[r][t] && differ++ == 0)
                    as_test_note("prefill %d: step %d layer %d %s differs between the forms", sizes[i], H[0].step[r],
                                 H[0].layer[r], as_tensor_desc[t].name);
        CHECK(differ == 0, "prefill %d + 5 decode: %d tensors differ between the codes form and the bf16 upload",
              sizes[i], differ);
    }
}
