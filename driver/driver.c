/* Stepping the reference and the checked side together, layer by layer, and comparing. */
#include "driver/driver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver/explain.h"
#include "driver/state_io.h"
#include "driver/inputs_file.h"
#include "model/inputs.h"
#include "model/precision.h"
#include "ref/cancel.h"
#include "ref/linear.h"

const char *as_mode_name(AsMode m) { return m == AS_MODE_FREE ? "free" : "teacher"; }

void as_driver_options_default(AsDriverOptions *o)
{
    memset(o, 0, sizeof *o);
    o->model = "tiny";
    o->weight_seed = 1;
    o->input_seed = 1;
    o->mode = AS_MODE_TEACHER;
}

const AsConfig *as_driver_config(const AsDriver *d) { return &d->model.cfg; }

void as_driver_set_hook(AsDriver *d, AsLayerHook hook, void *ctx)
{
    d->hook = hook;
    d->hook_ctx = ctx;
}

void as_driver_set_mode(AsDriver *d, AsMode m) { d->opt.mode = m; }

static void say(const AsDriver *d, const char *msg)
{
    if (!d->opt.quiet)
        fprintf(stderr, "attnscope: %s\n", msg);
}

/* The checked side: the engine where a device is, else a faulty reference twin when a fault
 * is named, else nothing (reference only). */
static int open_got_side(AsDriver *d, AsError *err)
{
    const AsDriverOptions *o = &d->opt;
    AsFault fault = AS_FAULT_NONE;
    AsConvention conv = AS_CONV_NONE;
    if (o->inject && as_inject_parse(o->inject, &fault, &conv)) {
        char names[512];
        as_inject_names(names, sizeof names);
        return as_err(err, AS_EBADINPUT, "unknown fault '%s' (known: %s)", o->inject, names);
    }
    int devices = o->no_engine ? 0 : as_engine_device_count();
    if (devices > 0 && conv != AS_CONV_NONE) {
        char names[512];
        as_fault_names(names, sizeof names);
        return as_err(err, AS_EBADINPUT, "--inject %s: the engine plants the faults (%s); this convention runs in a "
                      "reference twin: turn the engine off", o->inject, names);
    }
    if (devices > 0) {
        AsEngineOptions eo = {.device = o->device, .inject = o->inject, .host_select = o->host_select,
                              .capture_runs = true, .knobs = o->knobs};
        int rc = as_engine_create(&d->model, &eo, &d->eng, err);
        if (rc)
            return rc;
        d->got_kind = AS_GOT_ENGINE;
        snprintf(d->got_name, sizeof d->got_name, "engine");
        snprintf(d->note, sizeof d->note, "engine on CUDA device %d%s%s", o->device, fault ? ", fault " : "",
                 fault ? o->inject : "");
        return 0;
    }
    if (o->inject) { /* "none" gives a faithful twin: the checker's own control */
        d->twin = calloc(1, sizeof *d->twin);
        if (!d->twin)
            return as_err(err, AS_ERUNTIME, "out of host memory");
        int rc = as_ref_stack_init(d->twin, &d->model, err);
        if (rc) {
            free(d->twin);
            d->twin = NULL;
            return rc;
        }
        d->twin->rm.fault = fault;
        d->twin->rm.conv = conv;
        d->got_kind = AS_GOT_TWIN;
        snprintf(d->got_name, sizeof d->got_name, "ref+%s:%s", conv ? "conv" : "fault", o->inject);
        snprintf(d->note, sizeof d->note, "%s: the %s runs in a reference twin",
                 o->no_engine ? "engine disabled" : "no CUDA device", conv ? "convention" : "fault");
        return 0;
    }
    d->got_kind = AS_GOT_NONE;
    snprintf(d->got_name, sizeof d->got_name, "none");
    snprintf(d->note, sizeof d->note, "reference only: %s", o->no_engine ? "engine disabled" : "no CUDA device");
    return 0;
}

/* The bf16 source of a quantised model: same geometry, its own reference stack. The layer
 * input the quantised reference used is fed to it, so the error shown is each layer's own. */
static int open_bf16_side(AsDriver *d, AsError *err)
{
    const AsDriverOptions *o = &d->opt;
    char dir[1024];
    int rc = as_resolve_model(o->bf16_model, o->weight_seed, dir, sizeof dir, o->quiet, err);
    if (rc)
        return as_err_wrap(err, "bf16 model");
    if (!(d->bf16 = calloc(1, sizeof *d->bf16)))
        return as_err(err, AS_ERUNTIME, "out of host memory");
    if ((rc = as_model_load(dir, d->model.cfg.max_seq, d->bf16, err))) {
        free(d->bf16);
        d->bf16 = NULL;
        return as_err_wrap(err, "bf16 model");
    }
    char *a = as_config_to_json(&d->model.cfg), *b = as_config_to_json(&d->bf16->cfg);
    bool same = a && b && !strcmp(a, b);
    free(a);
    free(b);
    if (!same)
        return as_err(err, AS_EBADINPUT, "bf16 model %s: its geometry differs from %s's", d->bf16->weights_name,
                      d->model.weights_name);
    if (!(d->bf16_ref = calloc(1, sizeof *d->bf16_ref)))
        return as_err(err, AS_ERUNTIME, "out of host memory");
    if ((rc = as_ref_stack_init(d->bf16_ref, d->bf16, err))) {
        free(d->bf16_ref);
        d->bf16_ref = NULL;
        return rc;
    }
    int n = d->model.cfg.n_layers;
    d->bf16_run = calloc((size_t)n, sizeof(AsRun));
    d->qerr = calloc((size_t)n, sizeof(AsLayerDiff));
    if (!d->bf16_run || !d->qerr)
        return as_err(err, AS_ERUNTIME, "out of host memory");
    for (int l = 0; l < n; l++)
        as_run_init(&d->bf16_run[l]);
    return 0;
}

int as_driver_open(const AsDriverOptions *o, AsDriver **out, AsError *err)
{
    *out = NULL;
    AsDriver *d = calloc(1, sizeof *d);
    if (!d)
        return as_err(err, AS_ERUNTIME, "out of host memory");
    d->opt = *o;
    d->cur.step = -1;
    d->torn_layer = -1;
    char dir[1024];
    int rc = as_resolve_model(o->model, o->weight_seed, dir, sizeof dir, o->quiet, err);
    if (!rc)
        rc = as_model_load(dir, o->max_seq, &d->model, err);
    if (!rc && o->precision != AS_PREC_AUTO && (rc = as_model_set_precision(&d->model, o->precision, err)))
        as_model_free(&d->model);
    if (rc) {
        free(d);
        return rc;
    }
    const AsConfig *cfg = &d->model.cfg;
    as_compare_options_default(&d->cmp);
    d->cmp.cand_block = cfg->candidate_block_size;
    d->cmp.cand_topk_blocks = cfg->candidate_topk_blocks;
    d->cmp.quantised = d->model.quantised;
    if (o->threads > 0)
        as_ref_set_threads(o->threads);
    if ((rc = as_ref_stack_init(&d->ref, &d->model, err)))
        goto fail;
    d->ref_run = calloc((size_t)cfg->n_layers, sizeof(AsRun));
    d->got_run = calloc((size_t)cfg->n_layers, sizeof(AsRun));
    d->diff = calloc((size_t)cfg->n_layers, sizeof(AsLayerDiff));
    d->layer_done = calloc((size_t)cfg->n_layers, sizeof(bool));
    d->diag = calloc((size_t)cfg->n_layers, sizeof *d->diag);
    d->diag_valid = calloc((size_t)cfg->n_layers, sizeof(bool));
    if (!d->ref_run || !d->got_run || !d->diff || !d->layer_done || !d->diag || !d->diag_valid) {
        rc = as_err(err, AS_ERUNTIME, "out of host memory");
        goto fail;
    }
    for (int l = 0; l < cfg->n_layers; l++) {
        as_run_init(&d->ref_run[l]);
        as_run_init(&d->got_run[l]);
    }
    if (o->inputs_path &&
        (rc = as_inputs_file_load(o->inputs_path, o->inputs_dataset, cfg->dim, cfg->max_seq, &d->file_inputs,
                                  &d->file_tokens, err)))
        goto fail;
    if ((rc = open_got_side(d, err)))
        goto fail;
    if (d->got_kind != AS_GOT_NONE && !(d->dg = as_diagnoser_new(cfg))) {
        rc = as_err(err, AS_ERUNTIME, "out of host memory");
        goto fail;
    }
    if (o->bf16_model && (rc = open_bf16_side(d, err)))
        goto fail;
    say(d, d->note);
    if (d->bf16_ref) {
        char q[640];
        snprintf(q, sizeof q, "quantisation error: the reference on %s against the reference on %s (bf16)",
                 d->model.weights_name, d->bf16->weights_name);
        say(d, q);
    }
    *out = d;
    return 0;
fail:
    as_driver_close(d);
    return rc;
}

void as_driver_close(AsDriver *d)
{
    if (!d)
        return;
    int n = d->model.cfg.n_layers;
    for (int l = 0; d->ref_run && l < n; l++)
        as_run_free(&d->ref_run[l]);
    for (int l = 0; d->bf16_run && l < n; l++)
        as_run_free(&d->bf16_run[l]);
    free(d->bf16_run), free(d->qerr);
    if (d->bf16_ref) {
        as_ref_stack_free(d->bf16_ref);
        free(d->bf16_ref);
    }
    if (d->bf16) {
        as_model_free(d->bf16);
        free(d->bf16);
    }
    for (int l = 0; d->got_run && l < n; l++)
        as_run_free(&d->got_run[l]);
    free(d->ref_run), free(d->got_run), free(d->diff), free(d->layer_done);
    for (int l = 0; d->state_in && l < n; l++)
        as_run_free(&d->state_in[l]);
    free(d->state_in);
    as_diagnoser_free(d->dg);
    free(d->diag), free(d->diag_valid);
    for (int l = 0; l < AS_MAX_LAYERS; l++)
        free((void *)d->xc.pub_sel[l]), free((void *)d->xc.pub_cand[l]);
    if (d->eng)
        as_engine_destroy(d->eng);
    if (d->twin) {
        as_ref_stack_free(d->twin);
        free(d->twin);
    }
    as_ref_stack_free(&d->ref);
    as_model_free(&d->model);
    free(d->h0);
    free(d->file_inputs);
    free(d);
}

int as_driver_inputs(AsDriver *d, int pos0, int s, float *h0, AsError *err)
{
    int dim = d->model.cfg.dim;
    if (!d->file_inputs) {
        as_inputs_synthetic(d->opt.input_seed, pos0, s, dim, h0);
        return 0;
    }
    if (pos0 + s > d->file_tokens)
        return as_err(err, AS_EBADINPUT, "%s holds %d input rows: position %d is past its end", d->opt.inputs_path,
                      d->file_tokens, pos0 + s - 1);
    memcpy(h0, d->file_inputs + (size_t)pos0 * dim, sizeof(float) * (size_t)s * dim);
    return 0;
}

void as_driver_keep_state_in(AsDriver *d, bool on) { d->keep_state_in = on; }

const char *as_driver_phase_name(int phase)
{
    static const char *const names[AS_PHASE_COUNT] = {"setting up the step", "engine",
                                                      "engine's tensors to the host", "reference", "comparing",
                                                      "explaining", "diagnosing", "bf16 reference"};
    return phase >= 0 && phase < AS_PHASE_COUNT ? names[phase] : "";
}

static void set_phase(AsDriver *d, AsDriverPhase p) { atomic_store(&d->progress_phase, (int)p); }

static int begin_step(AsDriver *d, int start_pos, int s, AsError *err)
{
    set_phase(d, AS_PHASE_BEGIN);
    atomic_store(&d->progress_layer, 0);
    const AsConfig *cfg = &d->model.cfg;
    if (start_pos + s > cfg->max_seq)
        return as_err(err, AS_EBADINPUT, "%s at position %d needs %d positions: beyond max_seq %d (raise max_seq)",
                      start_pos ? "decode" : "prefill", start_pos, start_pos + s, cfg->max_seq);
    if (s > d->h0_cap) {
        float *h = realloc(d->h0, sizeof(float) * (size_t)s * cfg->dim);
        if (!h)
            return as_err(err, AS_ERUNTIME, "out of host memory for %d inputs", s);
        d->h0 = h;
        d->h0_cap = s;
    }
    int rc = as_driver_inputs(d, start_pos, s, d->h0, err);
    d->state_in_valid = false;
    if (!rc && d->keep_state_in && start_pos > 0) {
        if (!d->state_in)
            d->state_in = calloc((size_t)cfg->n_layers, sizeof *d->state_in);
        d->state_in_valid = d->state_in && !as_state_capture(&d->ref, d->cur.step + 1, start_pos, d->state_in,
                                                             &d->state_in_info);
    }
    if (!rc)
        rc = as_ref_begin_step(&d->ref, d->h0, start_pos, s, err);
    if (!rc && d->eng)
        rc = as_engine_begin_step(d->eng, d->h0, start_pos, s, err);
    if (!rc && d->twin)
        rc = as_ref_begin_step(d->twin, d->h0, start_pos, s, err);
    if (!rc && d->bf16_ref)
        rc = as_ref_begin_step(d->bf16_ref, d->h0, start_pos, s, err);
    if (rc)
        return rc;
    d->cur.step = start_pos == 0 ? 0 : d->cur.step + 1;
    d->cur.prefill = start_pos == 0;
    d->cur.start_pos = start_pos;
    d->cur.s = s;
    d->cur.next_layer = 0;
    d->next_pos = start_pos + s;
    for (int l = 0; l < cfg->n_layers; l++) {
        d->xc.pub_sel_n[l] = d->xc.pub_cand_n[l] = -1; /* nothing published in this step yet */
        d->layer_done[l] = false;
        d->diag_valid[l] = false;
        memset(&d->diff[l], 0, sizeof d->diff[l]);
        d->diff[l].layer = l;
        d->diff[l].step = d->cur.step;
        d->diff[l].worst_tensor = AS_T_COUNT;
        if (d->qerr)
            d->qerr[l] = d->diff[l];
    }
    return 0;
}

int as_driver_begin_prefill(AsDriver *d, int s, AsError *err)
{
    if (s < 1)
        return as_err(err, AS_EBADINPUT, "prefill needs at least one token");
    int rc = begin_step(d, 0, s, err);
    if (!rc)
        d->torn_layer = -1;
    return rc;
}

/* A step a cancel cut short inside a layer cannot go on: that layer's state is half written. */
static int refuse_torn(const AsDriver *d, AsError *err)
{
    if (d->torn_layer < 0)
        return 0;
    return as_err(err, AS_EBADINPUT, "step %d was cancelled inside layer %d, whose state is half written: a prefill "
                  "starts over", d->cur.step, d->torn_layer);
}

int as_driver_begin_decode(AsDriver *d, AsError *err)
{
    int rc = refuse_torn(d, err);
    if (rc)
        return rc;
    if (d->cur.step < 0)
        return as_err(err, AS_EBADINPUT, "decode before any prefill");
    if (d->cur.next_layer < d->model.cfg.n_layers)
        return as_err(err, AS_EBADINPUT, "the current step is not finished (layer %d next)", d->cur.next_layer);
    return begin_step(d, d->next_pos, 1, err);
}

/* The host memory the layers' tensors may take: ATTNSCOPE_RUN_BUDGET_MB, else a quarter of the
 * machine's memory (at least 4 GiB). Past it only the latest layers that fit keep theirs (the diffs
 * of all are kept). */
static size_t run_budget(void)
{
    const char *e = getenv("ATTNSCOPE_RUN_BUDGET_MB");
    long mb = e ? atol(e) : 0;
    if (mb > 0)
        return (size_t)mb << 20;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t quarter = pages > 0 && page > 0 ? (size_t)pages / 4 * (size_t)page : 0;
    return quarter > ((size_t)4096 << 20) ? quarter : (size_t)4096 << 20;
}

static size_t run_bytes(const AsRun *r)
{
    size_t b = 0;
    for (int i = 0; i < AS_T_COUNT; i++)
        b += r->t[i].cap;
    return b;
}

/* Keeps a copy of the selection / mask layer l of the checked side published in this step. */
static void remember_published(AsDriver *d, int l, const AsRun *got)
{
    const AsLayerRole *role = &d->model.cfg.role[l];
    if (role->index_source && got->indexer_ran && got->t[AS_T_CSEL].data) {
        int64_t n = as_ht_numel(&got->t[AS_T_CSEL]);
        int32_t *c = realloc((void *)d->xc.pub_sel[l], sizeof(int32_t) * (size_t)(n + 1));
        if (c) {
            memcpy(c, got->t[AS_T_CSEL].data, sizeof(int32_t) * (size_t)n);
            d->xc.pub_sel[l] = c;
            d->xc.pub_sel_n[l] = n;
        }
    }
    if (role->candidate_source && got->t[AS_T_CAND].data) {
        int64_t n = as_ht_numel(&got->t[AS_T_CAND]);
        uint8_t *c = realloc((void *)d->xc.pub_cand[l], (size_t)(n + 1));
        if (c) {
            memcpy(c, got->t[AS_T_CAND].data, (size_t)n);
            d->xc.pub_cand[l] = c;
            d->xc.pub_cand_n[l] = n;
        }
    }
}

/* Both sides' forward of layer l, the comparison and the explanation. */
static int run_layer(AsDriver *d, int l, AsError *err);

int as_driver_step_layer(AsDriver *d, AsError *err)
{
    const AsConfig *cfg = &d->model.cfg;
    int l = d->cur.next_layer;
    int rc = refuse_torn(d, err);
    if (rc)
        return rc;
    if (d->cur.step < 0 || l >= cfg->n_layers)
        return as_err(err, AS_EBADINPUT, "no step in progress: prefill or decode first");
    atomic_store(&d->progress_layer, l);
    /* the reference's long loops (and the comparison's) stop at a cancel */
    as_ref_cancel_watch(&d->cancel);
    rc = run_layer(d, l, err);
    bool cut = as_ref_cancel_cut();
    as_ref_cancel_watch(NULL);
    if (cut) {
        d->torn_layer = l;
        return as_err(err, AS_ECANCELLED, "cancelled inside layer %d of step %d (its state is half written: a "
                      "prefill starts over)", l, d->cur.step);
    }
    if (rc)
        return rc;
    d->diff[l].layer = l;
    d->diff[l].step = d->cur.step;
    d->layer_done[l] = true;
    d->cur.next_layer = l + 1;
    if (d->hook)
        d->hook(d->hook_ctx, d->cur.step, l, d->got_kind == AS_GOT_NONE ? NULL : &d->got_run[l], &d->ref_run[l],
                d->got_kind == AS_GOT_NONE ? NULL : &d->diff[l]);
    /* keep memory bounded at large geometries: the latest layers that fit the budget keep their tensors */
    size_t bytes = run_bytes(&d->ref_run[l]) + run_bytes(&d->got_run[l]);
    if (d->bf16_run)
        bytes += run_bytes(&d->bf16_run[l]);
    size_t keep = bytes ? run_budget() / bytes : (size_t)l + 1;
    if (keep < 1)
        keep = 1; /* the layer just run keeps its tensors whatever their size */
    for (int j = 0; (size_t)(l - j) >= keep; j++) {
        as_run_free(&d->ref_run[j]);
        as_run_free(&d->got_run[j]);
        if (d->bf16_run)
            as_run_free(&d->bf16_run[j]);
    }
    return 0;
}

static int run_layer(AsDriver *d, int l, AsError *err)
{
    AsRun *got = NULL;
    int rc = 0;
    set_phase(d, AS_PHASE_ENGINE);
    if (d->eng) {
        int done;
        rc = as_engine_next_layer(d->eng, &done, err);
        set_phase(d, AS_PHASE_ENGINE_COPY);
        if (!rc)
            rc = as_engine_layer_run(d->eng, &d->got_run[l], err);
        got = &d->got_run[l];
    } else if (d->twin) {
        rc = as_ref_next_layer(d->twin, NULL, &d->got_run[l], err);
        got = &d->got_run[l];
    }
    if (rc)
        return as_err_wrap(err, "%s, step %d", d->got_name, d->cur.step);
    if (as_ref_cancel_cut())
        return 0; /* the checked side's layer was cut short: the caller throws the layer away */
    const float *x = (got && d->opt.mode == AS_MODE_TEACHER) ? got->t[AS_T_X].data : NULL;
    if (d->dg && as_diagnoser_before(d->dg, &d->ref.st, l, d->cur.step))
        return as_err(err, AS_ERUNTIME, "out of host memory keeping layer %d's state", l);
    set_phase(d, AS_PHASE_REFERENCE);
    if ((rc = as_ref_next_layer(&d->ref, x, &d->ref_run[l], err)))
        return as_err_wrap(err, "reference, step %d", d->cur.step);
    if (got) {
        set_phase(d, AS_PHASE_COMPARE);
        as_compare_layer(got, &d->ref_run[l], &d->cmp, &d->diff[l]);
        d->xc.diff = d->diff;
        set_phase(d, AS_PHASE_EXPLAIN);
        as_explain_downstream(&d->ref.rm, got, &d->ref_run[l], &d->xc, &d->cmp, &d->diff[l]);
        remember_published(d, l, got);
        if (d->opt.diagnose)
            set_phase(d, AS_PHASE_DIAGNOSE);
        int dr = d->opt.diagnose ? as_diagnoser_after(d->dg, &d->ref.rm, got, &d->ref_run[l], &d->diff[l], &d->cmp,
                                                      &d->diag[l])
                                 : 0;
        if (dr < 0)
            return as_err(err, AS_ERUNTIME, "out of host memory diagnosing layer %d, step %d", l, d->cur.step);
        d->diag_valid[l] = dr > 0;
    } else
        d->diff[l].verdict = AS_V_NOT_RUN;
    if (d->bf16_ref) {
        set_phase(d, AS_PHASE_BF16);
        if ((rc = as_ref_next_layer(d->bf16_ref, d->ref_run[l].t[AS_T_X].data, &d->bf16_run[l], err)))
            return as_err_wrap(err, "bf16 reference, step %d", d->cur.step);
        AsCompareOptions qo;
        as_compare_options_default(&qo);
        as_compare_layer(&d->ref_run[l], &d->bf16_run[l], &qo, &d->qerr[l]);
    }
    return 0;
}

int as_driver_diagnose(AsDriver *d, int l, AsDiagnosis *out, AsError *err)
{
    if (!d->dg)
        return as_err(err, AS_EBADINPUT, "nothing to diagnose: %s", d->note);
    if (l < 0 || l >= d->model.cfg.n_layers || d->cur.step < 0 || !d->layer_done[l])
        return as_err(err, AS_EBADINPUT, "layer %d has not run in step %d", l, d->cur.step);
    if (!d->ref_run[l].t[AS_T_OUT].data || !d->got_run[l].t[AS_T_X].data)
        return as_err(err, AS_EBADINPUT, "layer %d's tensors of step %d were dropped (ATTNSCOPE_RUN_BUDGET_MB)", l,
                      d->cur.step);
    if (as_diagnose_layer(&d->ref.rm, as_diagnoser_layer_before(d->dg, l), &d->got_run[l], &d->ref_run[l],
                          &d->diff[l], &d->cmp, out))
        return as_err(err, AS_ERUNTIME, "out of host memory diagnosing layer %d, step %d", l, d->cur.step);
    if (!out->ran && !out->note[0])
        snprintf(out->note, sizeof out->note, "every tensor within the rule, no flip at a bit-identical input: "
                 "nothing to diagnose");
    return 0;
}

int as_driver_finish_step(AsDriver *d, AsError *err)
{
    while (d->cur.step >= 0 && d->cur.next_layer < d->model.cfg.n_layers) {
        if (atomic_load(&d->cancel))
            return as_err(err, AS_ECANCELLED, "cancelled at step %d, layer %d", d->cur.step, d->cur.next_layer);
        int rc = as_driver_step_layer(d, err);
        if (rc)
            return rc;
    }
    return 0;
}

int as_driver_prefill(AsDriver *d, int s, AsError *err)
{
    int rc = as_driver_begin_prefill(d, s, err);
    return rc ? rc : as_driver_finish_step(d, err);
}

int as_driver_decode(AsDriver *d, int n, AsError *err)
{
    for (int i = 0; i < n; i++) {
        int rc = as_driver_begin_decode(d, err);
        if (!rc)
            rc = as_driver_finish_step(d, err);
        if (rc)
            return rc;
    }
    return 0;
}

static int verdict_rank(AsVerdict v) { return as_verdict_rank(v); }

AsVerdict as_driver_step_verdict(const AsDriver *d, int *layer, AsTensorId *tensor)
{
    AsVerdict worst = AS_V_NOT_RUN;
    int wl = -1;
    AsTensorId wt = AS_T_COUNT;
    for (int l = 0; l < d->model.cfg.n_layers; l++) {
        if (!d->layer_done[l])
            continue;
        if (verdict_rank(d->diff[l].verdict) > verdict_rank(worst)) {
            worst = d->diff[l].verdict;
            wl = l;
            wt = d->diff[l].worst_tensor;
        }
    }
    if (layer)
        *layer = wl;
    if (tensor)
        *tensor = wt;
    return worst;
}

/* The first tensor in forward order whose verdict is a mismatch. */
static bool first_mismatch(const AsLayerDiff *df, AsTensorId *id)
{
    for (int i = 0; i < AS_T_COUNT; i++)
        if (df->t[i].verdict == AS_V_MISMATCH) {
            *id = (AsTensorId)i;
            return true;
        }
    return false;
}

static int scan_step(AsDriver *d, AsDivergence *out, AsError *err)
{
    while (d->cur.next_layer < d->model.cfg.n_layers) {
        if (atomic_load(&d->cancel))
            return as_err(err, AS_ECANCELLED, "cancelled at step %d, layer %d", d->cur.step, d->cur.next_layer);
        int l = d->cur.next_layer;
        int rc = as_driver_step_layer(d, err);
        if (rc)
            return rc;
        AsTensorId id;
        if (first_mismatch(&d->diff[l], &id)) {
            out->found = true;
            out->step = d->cur.step;
            out->layer = l;
            out->start_pos = d->cur.start_pos;
            out->tensor = id;
            out->diff = d->diff[l].t[id];
            return 0;
        }
    }
    return 0;
}

int as_driver_first_divergence(AsDriver *d, int prefill_s, int max_decode, AsDivergence *out, AsError *err)
{
    memset(out, 0, sizeof *out);
    out->tensor = AS_T_COUNT;
    if (d->got_kind == AS_GOT_NONE)
        return as_err(err, AS_EBADINPUT, "first-divergence needs an engine (or --inject): %s", d->note);
    int rc;
    if (d->cur.step < 0 && (rc = as_driver_begin_prefill(d, prefill_s, err)))
        return rc;
    if ((rc = scan_step(d, out, err)) || out->found)
        return rc;
    for (int i = 0; i < max_decode; i++) {
        if ((rc = as_driver_begin_decode(d, err)) || (rc = scan_step(d, out, err)) || out->found)
            return rc;
    }
    return 0;
}
