/* The engine's fp8 precision in the checkpoint's form (engine/fp8_proj.c): taken with the fp8_form
 * knob (--fp8-form) on a compute capability 9.0 device (the fp8 projections' weights as e4m3 codes and block
 * scales, fewer bytes than the bf16 upload), never on another device; and in both forms the tiny
 * model against the reference layer by layer (SPEC 6 through the driver: 0 mismatches), prefills of 1 to
 * 40 tokens (the fp8 GEMV up to 8 rows, the wgmma GEMM above) and decode steps. tests/gpu_engine.c and
 * tests/gpu_graph.c run fp8 precision in the default form, the flash model and the graph included. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/driver.h"
#include "engine/internal.h"
#include "model/precision.h"
#include "tests/lib/harness.h"
#include "tests/lib/model_fixture.h"

static int device_is_sm90(void)
{
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
    return major == 9 && minor == 0;
}

/* An engine on tiny in fp8 precision, with the fp8_form knob (qdq: without it). */
static AsEngine *tiny_fp8_engine(AsModel *m, int qdq)
{
    AsError err = {0};
    REQUIRE(as_model_set_precision(m, AS_PREC_FP8, &err) == 0, "tiny in fp8 precision: %s", err.msg);
    AsEngineKnobs k;
    as_engine_knobs_default(&k);
    k.fp8_form = !qdq;
    AsEngine *e = NULL;
    AsEngineOptions eo = {.device = 0, .knobs = &k};
    const int rc = as_engine_create(m, &eo, &e, &err);
    REQUIRE(rc == 0, "engine%s: %s", qdq ? "" : " (--fp8-form)", err.msg);
    return e;
}

GPU_TEST(gpu_fp8_engine_form_taken)
{
    AsModel *m = as_test_model("tiny", NULL, 1);
    AsEngine *form = tiny_fp8_engine(m, 0), *qdq = tiny_fp8_engine(m, 1);
    const int sm90 = device_is_sm90();
    CHECK(form->fp8_form == sm90, "fp8 form %d on a device that is %sa compute capability 9.0 one", form->fp8_form,
          sm90 ? "" : "not ");
    CHECK(!qdq->fp8_form, "without --fp8-form the fp8 form is on");
    int64_t fp8_weights = 0, wrong = 0;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const AsDevLayerWeights *a = &form->w[l], *b = &qdq->w[l];
        const AsDevWeight *wa[] = {&a->wq_a, &a->wq_b, &a->wkv, &a->wo_b, &a->i_wq_b};
        const AsDevWeight *wb[] = {&b->wq_a, &b->wq_b, &b->wkv, &b->wo_b, &b->i_wq_b};
        for (int i = 0; i < 5; i++) {
            if (!wa[i]->d)
                continue;
            fp8_weights++;
            wrong += !wa[i]->fp8 || !wb[i]->fp8 || wb[i]->type != AS_DW_BF16 ||
                     wa[i]->type != (form->fp8_form ? AS_DW_FP8 : AS_DW_BF16) || (form->fp8_form && !wa[i]->ws);
        }
    }
    CHECK(fp8_weights > 0 && wrong == 0, "%lld of %lld fp8 projections not uploaded in the form their engine runs",
          (long long)wrong, (long long)fp8_weights);
    if (form->fp8_form)
        CHECK(form->weight_bytes < qdq->weight_bytes, "the fp8 form holds %zu weight bytes, the bf16 upload %zu",
              form->weight_bytes, qdq->weight_bytes);
    as_test_note("tiny fp8: %s; weights on the device %zu bytes in the fp8 form, %zu in the QDQ form",
                 sm90 ? "fp8 form taken" : "not a compute capability 9.0 device: QDQ form only", form->weight_bytes,
                 qdq->weight_bytes);
    as_engine_destroy(form);
    as_engine_destroy(qdq);
    as_test_model_free(m);
}

/* Prefill then decode steps through the driver; returns the layer runs judged a mismatch (the first named). */
static int run_vs_reference(const char *name, int qdq, int prefill, int decode)
{
    setenv("ATTNSCOPE_CACHE", getenv("ATTNSCOPE_GPU_CACHE") ? getenv("ATTNSCOPE_GPU_CACHE") : as_test_tmpdir(), 1);
    AsEngineKnobs k;
    as_engine_knobs_default(&k);
    k.fp8_form = !qdq;
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
    for (int qdq = 0; qdq < 2; qdq++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            char name[96];
            snprintf(name, sizeof name, "tiny fp8 (%s) prefill %d + 5 decode", qdq ? "QDQ form" : "fp8 form",
                     sizes[i]);
            CHECK(run_vs_reference(name, qdq, sizes[i], 5) == 0, "%s: layer runs out of SPEC 6", name);
        }
}
