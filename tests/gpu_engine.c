/* The whole engine against the reference, layer by layer (each reference layer fed the
 * engine's input for that layer), by SPEC section 6, in every regime: prefill s = 1, s < window,
 * s > window, odd s; 300 decode steps at tiny; 512-token prefill + 64 decode steps at flash
 * ($ATTNSCOPE_FLASH_MODEL, a directory written by `attnscope gen --preset flash`). The tiny checks
 * run in both precisions of the same (fp8) weights: bf16 (the projections on bf16(fp8 * scale)) and
 * fp8 (the five fp8 projections as act_quant + fp8 GEMM). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/driver.h"
#include "engine/internal.h"
#include "model/precision.h"
#include "ref/cancel.h"
#include "tests/lib/fault_cases.h"
#include "tests/lib/harness.h"
#include "tests/lib/model_fixture.h"

static const AsPrecision precisions[2] = {AS_PREC_BF16, AS_PREC_FP8};

typedef struct {
    int layer_runs, pass, flips, near_tie, mismatch;
    int64_t flip_elems, wide_flips;
    int bad_tensor[AS_T_COUNT];      /* layer runs where each tensor mismatched */
    int explained[AS_T_COUNT];       /* ... or was found inherited (driver/explain.h) */
    char first_bad[512];
} Tally;

static void tally_step(const AsDriver *d, Tally *t)
{
    for (int l = 0; l < d->model.cfg.n_layers; l++) {
        const AsLayerDiff *df = &d->diff[l];
        t->layer_runs++;
        for (int i = 0; i < AS_T_COUNT; i++) {
            t->flip_elems += df->t[i].n_flips;
            t->wide_flips += df->t[i].n_flips_wide;
            t->bad_tensor[i] += df->t[i].verdict == AS_V_MISMATCH;
            t->explained[i] += df->t[i].explained;
        }
        switch (df->verdict) {
        case AS_V_PASS: t->pass++; break;
        case AS_V_FLIPS: t->flips++; break;
        case AS_V_NEAR_TIE: t->near_tie++; break;
        case AS_V_MISMATCH:
            if (!t->mismatch++) {
                for (int i = 0; i < AS_T_COUNT; i++)
                    if (df->t[i].verdict == AS_V_MISMATCH) {
                        const AsTensorDiff *x = &df->t[i];
                        char coord[96] = "-";
                        if (x->worst >= 0)
                            as_format_coord((AsTensorId)i, x->worst_coord, as_tensor_desc[i].ndim, coord, sizeof coord);
                        snprintf(t->first_bad, sizeof t->first_bad,
                                 "step %d (pos %d), layer %d, %s: max |diff| %.4g > tol %.4g at %s (got %.6g, want "
                                 "%.6g, %ld ulp), %ld bad, %ld flips, %ld rows differ (%ld real)",
                                 d->cur.step, d->cur.start_pos, l, as_tensor_desc[i].name, x->max_abs, x->tol, coord,
                                 x->worst_got, x->worst_want, (long)x->worst_ulp, (long)x->n_bad, (long)x->n_flips,
                                 (long)x->n_rows_differ, (long)x->n_real);
                        break;
                    }
            }
            break;
        default: break;
        }
    }
}

static AsDriver *open_engine_in(const char *model, int max_seq, bool host_select, AsPrecision precision)
{
    setenv("ATTNSCOPE_CACHE", getenv("ATTNSCOPE_GPU_CACHE") ? getenv("ATTNSCOPE_GPU_CACHE") : as_test_tmpdir(), 1);
    AsDriverOptions o;
    as_driver_options_default(&o);
    o.model = model;
    o.quiet = true;
    o.max_seq = max_seq;
    o.host_select = host_select;
    o.precision = precision;
    AsDriver *d;
    AsError err = {0};
    REQUIRE(as_driver_open(&o, &d, &err) == 0, "open %s in %s precision: %s", model, as_precision_name(precision),
            err.msg);
    REQUIRE(d->got_kind == AS_GOT_ENGINE, "the engine is not in use: %s", d->note);
    REQUIRE(precision == AS_PREC_AUTO || d->model.precision == precision, "%s runs in %s precision, not %s", model,
            as_precision_name(d->model.precision), as_precision_name(precision));
    return d;
}

static AsDriver *open_engine(const char *model, int max_seq)
{
    return open_engine_in(model, max_seq, false, AS_PREC_AUTO);
}

static void run_regime(AsDriver *d, const char *name, int prefill, int decode, Tally *t)
{
    AsError err = {0};
    memset(t, 0, sizeof *t);
    REQUIRE(as_driver_prefill(d, prefill, &err) == 0, "%s prefill %d: %s", name, prefill, err.msg);
    tally_step(d, t);
    for (int i = 0; i < decode; i++) {
        REQUIRE(as_driver_decode(d, 1, &err) == 0, "%s decode step %d: %s", name, i + 1, err.msg);
        tally_step(d, t);
    }
    as_test_note("%s: %d layer runs: %d pass, %d with flips (%ld elements, %ld wide), %d near-ties, %d mismatches",
                 name, t->layer_runs, t->pass, t->flips, (long)t->flip_elems, (long)t->wide_flips, t->near_tie,
                 t->mismatch);
    char line[1024] = "";
    size_t used = 0;
    for (int i = 0; i < AS_T_COUNT && used < sizeof line - 64; i++)
        if (t->bad_tensor[i] || t->explained[i])
            used += (size_t)snprintf(line + used, sizeof line - used, " %s %d/%d", as_tensor_desc[i].name,
                                     t->bad_tensor[i], t->explained[i]);
    if (used)
        as_test_note("%s: per tensor, layer runs mismatched / explained as inherited:%s", name, line);
    CHECK(t->mismatch == 0, "%s: first mismatch: %s", name, t->first_bad);
}

GPU_TEST(gpu_engine_tiny_prefill_regimes)
{
    for (int pi = 0; pi < 2; pi++) {
        AsDriver *d = open_engine_in("tiny", 0, false, precisions[pi]);
        int sizes[] = {1, 5, 7, 8, 13, 40};
        for (int i = 0; i < 6; i++) {
            char name[64];
            snprintf(name, sizeof name, "tiny %s prefill s=%d + 3 decode", as_precision_name(precisions[pi]),
                     sizes[i]);
            Tally t;
            run_regime(d, name, sizes[i], 3, &t);
        }
        as_driver_close(d);
    }
}

GPU_TEST(gpu_engine_tiny_300_decode_steps)
{
    for (int pi = 0; pi < 2; pi++) {
        AsDriver *d = open_engine_in("tiny", 0, false, precisions[pi]);
        char name[128];
        snprintf(name, sizeof name,
                 "tiny %s prefill 9 + 300 decode (window wraps, group boundaries, candidate narrowing)",
                 as_precision_name(precisions[pi]));
        Tally t;
        run_regime(d, name, 9, 300, &t);
        as_driver_close(d);
    }
}

/* The host selection path (--host-select: the reference's own top-k code on downloaded scores). */
GPU_TEST(gpu_engine_tiny_host_select)
{
    for (int pi = 0; pi < 2; pi++) {
        AsDriver *d = open_engine_in("tiny", 0, true, precisions[pi]);
        char name[96];
        snprintf(name, sizeof name, "tiny %s prefill 13 + 60 decode, selection on the host",
                 as_precision_name(precisions[pi]));
        Tally t;
        run_regime(d, name, 13, 60, &t);
        as_driver_close(d);
    }
}

/* The two precisions of the same weights differ where they must: fp8's projections see act_quant's
 * inputs, so the engine's residual after the same prefill differs from bf16's (a QDQ that never ran
 * would pass every comparison above if the reference missed it too). */
GPU_TEST(gpu_engine_tiny_precisions_differ)
{
    AsModel *m = as_test_model("tiny", NULL, 1);
    const AsConfig *c = &m->cfg;
    const int s = 13;
    float *h0 = malloc(sizeof(float) * (size_t)s * c->dim), *out[2] = {NULL, NULL};
    REQUIRE(h0, "out of host memory");
    for (int i = 0; i < s * c->dim; i++)
        h0[i] = (float)((i * 37 % 101) - 50) / 32.0f;
    for (int pi = 0; pi < 2; pi++) {
        AsError err = {0};
        if (as_model_set_precision(m, precisions[pi], &err)) {
            as_test_fail(__FILE__, __LINE__, "the %s precision of tiny: %s", as_precision_name(precisions[pi]),
                         err.msg);
            continue;
        }
        AsEngine *e = NULL;
        AsEngineOptions eo = {.device = 0};
        REQUIRE(as_engine_create(m, &eo, &e, &err) == 0, "engine: %s", err.msg);
        CHECK(e->fp8 == (precisions[pi] == AS_PREC_FP8), "%s precision: the engine's fp8 flag is %d",
              as_precision_name(precisions[pi]), e->fp8);
        REQUIRE(as_engine_begin_step(e, h0, 0, s, &err) == 0 && as_engine_finish_step(e, &err) == 0, "prefill: %s",
                err.msg);
        out[pi] = malloc(sizeof(float) * (size_t)s * c->dim);
        REQUIRE(out[pi], "out of host memory");
        REQUIRE(as_engine_residual(e, out[pi], &err) == 0, "residual: %s", err.msg);
        as_engine_destroy(e);
    }
    if (out[0] && out[1]) {
        int64_t differ = 0;
        for (int64_t i = 0; i < (int64_t)s * c->dim; i++)
            differ += out[0][i] != out[1][i];
        as_test_note("tiny prefill %d: the residual after the last layer differs between bf16 and fp8 precision in "
                     "%ld of %ld values", s, (long)differ, (long)s * c->dim);
        CHECK(differ > 0, "fp8 precision gave the bf16 precision's residual bit for bit: no input was quantised");
    }
    free(out[0]), free(out[1]), free(h0);
    as_test_model_free(m);
}

/* An index source with compress_len == 0 (a 1-token prefill at tiny's ratio-2 layers) publishes an
 * EMPTY selection as its own: the shared selection is [1][0] from that layer, and the reuse layers after
 * it attend no compressed row and name it as their selection's source (model.py's _compress_topk_idxs);
 * the ratio-1 index sources after them score (compress_len 1) and publish theirs. */
GPU_TEST(gpu_engine_tiny_empty_selection)
{
    AsModel *m = as_test_model("tiny", NULL, 1);
    const AsConfig *c = &m->cfg;
    float *h0 = malloc(sizeof(float) * (size_t)c->dim);
    REQUIRE(h0, "out of host memory");
    for (int i = 0; i < c->dim; i++)
        h0[i] = (float)((i * 29 % 61) - 30) / 16.0f;
    AsEngine *e = NULL;
    AsError err = {0};
    AsEngineOptions eo = {.device = 0};
    REQUIRE(as_engine_create(m, &eo, &e, &err) == 0, "engine: %s", err.msg);
    REQUIRE(as_engine_begin_step(e, h0, 0, 1, &err) == 0, "prefill 1: %s", err.msg);
    int latest = -1, empty_sources = 0, empty_users = 0;
    for (int l = 0; l < c->n_layers; l++) {
        int done;
        REQUIRE(as_engine_next_layer(e, &done, &err) == 0, "layer %d: %s", l, err.msg);
        const AsLayerRole *r = &c->role[l];
        const AsRun *run = &e->last;
        if (r->ratio == 0)
            continue;
        const int clen = 1 / r->ratio;
        if (r->index_source) {
            latest = l;
            CHECK(run->indexer_ran == (clen > 0), "layer %d (compress_len %d): indexer_ran %d", l, clen,
                  run->indexer_ran);
            empty_sources += clen == 0;
        }
        CHECK(run->sel_from.layer == latest && run->sel_from.step == 0,
              "layer %d: its selection from layer %d step %d, want layer %d step 0", l, run->sel_from.layer,
              run->sel_from.step, latest);
        if (clen == 0) {
            CHECK(run->k == 0 && run->topk == run->cols, "layer %d: k %d topk %d cols %d: it must attend no "
                  "compressed row", l, run->k, run->topk, run->cols);
            const AsSharedProv *sh = &e->sh.prov;
            CHECK(sh->sel_s == 1 && sh->sel_k == 0 && sh->sel_from.layer == latest,
                  "layer %d: the shared selection is %dx%d from layer %d, want the empty [1][0] of layer %d", l,
                  sh->sel_s, sh->sel_k, sh->sel_from.layer, latest);
            empty_users += !r->index_source;
        }
    }
    REQUIRE(as_dev_check_refusals(e, &err) == 0, "prefill 1: %s", err.msg);
    as_test_note("tiny prefill 1: %d index sources published an empty selection, %d reuse layers used one",
                 empty_sources, empty_users);
    CHECK(empty_sources > 0 && empty_users > 0, "tiny's 1-token prefill exercised no empty selection (%d sources, "
          "%d users)", empty_sources, empty_users);
    /* the decode after it scores everywhere again */
    REQUIRE(as_engine_begin_step(e, h0, 1, 1, &err) == 0 && as_engine_finish_step(e, &err) == 0, "decode 1: %s",
            err.msg);
    as_engine_destroy(e);
    free(h0);
    as_test_model_free(m);
}

/* A cancel (ref/cancel.h) stops the copy of a layer's tensors to the host between chunks: with the flag
 * set, every bf16 tensor is left out (absent, nothing written) and the cut is recorded; the copy after it
 * gives the first copy's values again (the device state untouched). */
GPU_TEST(gpu_engine_layer_copy_stops_at_a_cancel)
{
    AsModel *m = as_test_model("tiny", NULL, 1);
    const AsConfig *c = &m->cfg;
    const int s = 9;
    float *h0 = malloc(sizeof(float) * (size_t)s * c->dim);
    REQUIRE(h0, "out of host memory");
    for (int i = 0; i < s * c->dim; i++)
        h0[i] = (float)((i * 37 % 101) - 50) / 32.0f;
    AsEngine *e = NULL;
    AsError err = {0};
    AsEngineOptions eo = {.device = 0};
    REQUIRE(as_engine_create(m, &eo, &e, &err) == 0, "engine: %s", err.msg);
    int done;
    REQUIRE(as_engine_begin_step(e, h0, 0, s, &err) == 0 && as_engine_next_layer(e, &done, &err) == 0,
            "prefill, layer 0: %s", err.msg);
    AsRun a = {0}, b = {0}, z = {0};
    REQUIRE(as_engine_layer_run(e, &a, &err) == 0, "layer 0's tensors: %s", err.msg);
    atomic_int flag = 1;
    as_ref_cancel_watch(&flag);
    REQUIRE(as_engine_layer_run(e, &z, &err) == 0, "layer 0's tensors, cancelled: %s", err.msg);
    const bool cut = as_ref_cancel_cut();
    as_ref_cancel_watch(NULL);
    CHECK(cut, "a cancelled copy of a layer's tensors recorded no cut");
    REQUIRE(as_engine_layer_run(e, &b, &err) == 0, "layer 0's tensors again: %s", err.msg);
    const AsTensorId ids[] = {AS_T_X, AS_T_Q, AS_T_KV, AS_T_O, AS_T_OUT};
    for (size_t k = 0; k < sizeof ids / sizeof ids[0]; k++) {
        const AsHostTensor *ta = &a.t[ids[k]], *tb = &b.t[ids[k]], *tz = &z.t[ids[k]];
        const int64_t n = as_ht_numel(ta);
        REQUIRE(n > 0 && as_ht_numel(tb) == n, "%s: %ld / %ld values", as_tensor_desc[ids[k]].name, (long)n,
                (long)as_ht_numel(tb));
        CHECK(!tz->data, "%s: copied after the cancel (%ld values)", as_tensor_desc[ids[k]].name,
              (long)as_ht_numel(tz));
        const float *va = ta->data, *vb = tb->data;
        int64_t differ = 0, nonzero_a = 0;
        for (int64_t i = 0; i < n; i++) {
            nonzero_a += va[i] != 0.0f;
            differ += memcmp(&va[i], &vb[i], sizeof(float)) != 0;
        }
        CHECK(nonzero_a > 0, "%s: all zero before the cancel", as_tensor_desc[ids[k]].name);
        CHECK(differ == 0, "%s: %ld values differ between the copies before and after the cancel",
              as_tensor_desc[ids[k]].name, (long)differ);
    }
    as_run_free(&a), as_run_free(&b), as_run_free(&z);
    as_engine_destroy(e);
    free(h0);
    as_test_model_free(m);
}

GPU_TEST(gpu_engine_tiny_free_mode)
{
    AsDriver *d = open_engine("tiny", 0);
    as_driver_set_mode(d, AS_MODE_FREE);
    AsError err = {0};
    REQUIRE(as_driver_prefill(d, 16, &err) == 0, "%s", err.msg);
    REQUIRE(as_driver_decode(d, 20, &err) == 0, "%s", err.msg);
    int l;
    AsTensorId id;
    AsVerdict v = as_driver_step_verdict(d, &l, &id);
    as_test_note("free mode after 20 decode steps: worst verdict %s (layer %d, %s)", as_verdict_name(v), l,
                 id == AS_T_COUNT ? "-" : as_tensor_desc[id].name);
    as_driver_close(d);
}

/* The released geometry ($ATTNSCOPE_FLASH_MODEL: `attnscope gen --preset flash`, fp8 as released)
 * in one precision: 512-token prefill + 64 decode steps, engine against reference. */
static void flash_regime(AsPrecision precision)
{
    const char *dir = getenv("ATTNSCOPE_FLASH_MODEL");
    if (!dir || !*dir)
        as_test_skip("ATTNSCOPE_FLASH_MODEL not set (a directory written by attnscope gen --preset flash)");
    AsDriver *d = open_engine_in(dir, 1024, false, precision);
    /* ATTNSCOPE_FLASH_DECODE shortens the decode for a quick look (64 steps: the regime the engine
     * must pass) */
    const char *nd = getenv("ATTNSCOPE_FLASH_DECODE");
    int decode = nd && atoi(nd) > 0 && atoi(nd) <= 64 ? atoi(nd) : 64;
    char name[96];
    snprintf(name, sizeof name, "flash (%s) prefill 512 + %d decode", as_precision_name(d->model.precision), decode);
    Tally t;
    run_regime(d, name, 512, decode, &t);
    as_driver_close(d);
}

GPU_TEST(gpu_engine_flash_prefill512_decode64_fp8) { flash_regime(AS_PREC_FP8); }
GPU_TEST(gpu_engine_flash_prefill512_decode64_bf16) { flash_regime(AS_PREC_BF16); }

/* Every named fault injected into the engine is caught where it first acts, in both precisions. */
GPU_TEST(gpu_engine_faults_caught)
{
    for (int pi = 0; pi < 2; pi++)
        for (int i = 0; i < AS_N_FAULT_CASES; i++) {
            const AsFaultCase *fc = &as_fault_cases[i];
            setenv("ATTNSCOPE_CACHE", getenv("ATTNSCOPE_GPU_CACHE") ? getenv("ATTNSCOPE_GPU_CACHE") : as_test_tmpdir(),
                   1);
            AsDriverOptions o;
            as_driver_options_default(&o);
            o.quiet = true;
            o.inject = as_fault_desc[fc->fault].name;
            o.precision = precisions[pi];
            const char *prec = as_precision_name(precisions[pi]);
            AsDriver *d;
            AsError err = {0};
            REQUIRE(as_driver_open(&o, &d, &err) == 0, "%s %s: %s", prec, o.inject, err.msg);
            REQUIRE(d->got_kind == AS_GOT_ENGINE, "engine in use");
            AsDivergence dv;
            CHECK(as_driver_first_divergence(d, 16, 6, &dv, &err) == 0, "%s %s: %s", prec, o.inject, err.msg);
            CHECK(dv.found && dv.step == fc->step && dv.layer == fc->layer && dv.tensor == fc->tensor,
                  "engine %s %s: caught at step %d, layer %d, %s; want step %d, layer %d, %s", prec, o.inject, dv.step,
                  dv.layer, dv.found ? as_tensor_desc[dv.tensor].name : "nothing", fc->step, fc->layer,
                  as_tensor_desc[fc->tensor].name);
            if (dv.found)
                as_test_note("engine %s %-15s caught at step %d, layer %d, %s", prec, o.inject, dv.step, dv.layer,
                             as_tensor_desc[dv.tensor].name);
            as_driver_close(d);
        }
}
