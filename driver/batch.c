#include "driver/batch.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "driver/report.h"
#include "dumps/dump.h"
#include "model/precision.h"
#include "model/safetensors.h"

typedef struct {
    const AsScript *s;
    AsDriver *d;
    AsReport *rep;
    AsDumpWriter *dump;
    int dumped_step;          /* the last step begun in the dump */
    int inputs_written;       /* positions written to the dump's inputs */
    AsError dump_err;
    int dump_rc;
    bool progress;
    double t0, last_progress;
    bool first_diag;          /* first_mismatch_diag holds the diagnosis of the first mismatching layer run */
    AsDiagnosis first_mismatch_diag;
} Batch;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void on_layer(void *ctx, int step, int layer, const AsRun *got, const AsRun *ref, const AsLayerDiff *diff)
{
    Batch *b = ctx;
    AsDriver *d = b->d;
    as_report_layer(b->rep, &d->cur, layer, diff);
    if (d->diag_valid[layer])
        as_report_diagnosis(b->rep, &d->diag[layer]);
    int fs, fl;
    AsTensorId ft;
    if (!b->first_diag && as_report_first_mismatch(b->rep, &fs, &fl, &ft) && fs == step && fl == layer) {
        b->first_diag = true;
        if (d->diag_valid[layer])
            b->first_mismatch_diag = d->diag[layer];
    }
    if (d->qerr)
        as_report_quant_error(b->rep, layer, &d->qerr[layer]);
    if (b->dump && !b->dump_rc && as_intset_has(&b->s->dump_steps, step) && as_intset_has(&b->s->dump_layers, layer)) {
        if (b->dumped_step != step) {
            b->dump_rc = as_dump_begin_step(b->dump, step, d->cur.prefill ? "prefill" : "decode", d->cur.start_pos,
                                            d->cur.s, &b->dump_err);
            b->dumped_step = step;
        }
        if (!b->dump_rc)
            b->dump_rc = as_dump_write_layer(b->dump, step, layer, got, ref, diff, b->s->dump_tensors, &b->dump_err);
    }
    double t = now();
    if (b->progress && (t - b->last_progress > 1.0 || layer == d->model.cfg.n_layers - 1)) {
        fprintf(stderr, "\r[%7.1fs] step %d (%s, pos %d), layer %d/%d: %s   ", t - b->t0, step,
                d->cur.prefill ? "prefill" : "decode", d->cur.start_pos, layer + 1, d->model.cfg.n_layers,
                diff ? as_verdict_name(diff->verdict) : "reference only");
        b->last_progress = t;
    }
}

/* The inputs of the step just begun, appended to the dump. */
static int dump_inputs(Batch *b, AsError *err)
{
    AsDriver *d = b->d;
    if (!b->dump || b->dump_rc || d->cur.start_pos < b->inputs_written)
        return 0;
    int rc = as_dump_write_inputs(b->dump, d->h0, d->cur.s, d->cur.start_pos, err);
    if (!rc)
        b->inputs_written = d->cur.start_pos + d->cur.s;
    return rc;
}

static int run_step(Batch *b, const AsScriptStep *st, AsError *err)
{
    AsDriver *d = b->d;
    int rc = 0;
    switch (st->kind) {
    case AS_SS_PREFILL:
        if (!(rc = as_driver_begin_prefill(d, st->n, err)) && !(rc = dump_inputs(b, err)))
            rc = as_driver_finish_step(d, err);
        break;
    case AS_SS_DECODE:
        for (int i = 0; i < st->n && !rc; i++)
            if (!(rc = as_driver_begin_decode(d, err)) && !(rc = dump_inputs(b, err)))
                rc = as_driver_finish_step(d, err);
        break;
    case AS_SS_FIRST_DIVERGENCE: {
        AsDivergence dv;
        if (d->got_kind == AS_GOT_NONE) {
            /* reference only: run the steps, nothing can diverge */
            if (st->prefill && d->cur.step < 0 && !(rc = as_driver_begin_prefill(d, st->prefill, err)))
                rc = dump_inputs(b, err);
            if (!rc)
                rc = as_driver_finish_step(d, err);
            for (int i = 0; i < st->n && !rc; i++)
                if (!(rc = as_driver_begin_decode(d, err)) && !(rc = dump_inputs(b, err)))
                    rc = as_driver_finish_step(d, err);
            memset(&dv, 0, sizeof dv);
            as_report_divergence(b->rep, &dv, false);
            break;
        }
        if (st->prefill && d->cur.step < 0 && !(rc = as_driver_begin_prefill(d, st->prefill, err)))
            rc = dump_inputs(b, err);
        if (!rc)
            rc = as_driver_first_divergence(d, st->prefill, st->n, &dv, err);
        if (!rc) {
            as_report_divergence(b->rep, &dv, true);
            /* finish the step it stopped in, so the state stays consistent for later steps */
            if (dv.found)
                rc = as_driver_finish_step(d, err);
        }
        break;
    }
    }
    return rc;
}

/* Does the outcome meet the script's expectation? Judged on the first mismatching layer run
 * and its first mismatching tensor in forward order. */
static bool expectation_met(const Batch *b, char *what, size_t n)
{
    const AsExpect *x = &b->s->expect;
    int step, layer;
    AsTensorId tensor;
    bool found = as_report_first_mismatch(b->rep, &step, &layer, &tensor);
    if (x->verdict == AS_V_PASS) {
        snprintf(what, n, "no mismatch");
        return !found;
    }
    int k = snprintf(what, n, "a mismatch");
    if (x->step >= 0 && k > 0 && (size_t)k < n)
        k += snprintf(what + k, n - (size_t)k, " at step %d", x->step);
    if (x->layer >= 0 && k > 0 && (size_t)k < n)
        k += snprintf(what + k, n - (size_t)k, " at layer %d", x->layer);
    if (x->tensor != AS_T_COUNT && k > 0 && (size_t)k < n)
        k += snprintf(what + k, n - (size_t)k, " first in %s", as_tensor_desc[x->tensor].name);
    if (x->diagnosis != AS_CONV_COUNT && k > 0 && (size_t)k < n)
        k += snprintf(what + k, n - (size_t)k, " diagnosed as %s alone", as_conv_desc[x->diagnosis].name);
    const AsDiagnosis *dx = &b->first_mismatch_diag;
    if (found && k > 0 && (size_t)k < n)
        k += snprintf(what + k, n - (size_t)k, " (found: step %d, layer %d, %s", step, layer, as_tensor_desc[tensor].name);
    if (found && x->diagnosis != AS_CONV_COUNT && k > 0 && (size_t)k < n)
        k += snprintf(what + k, n - (size_t)k, ", diagnosed as %s%s", dx->n_match ? as_conv_desc[dx->match[0].conv].name
                                                                                   : "nothing",
                      dx->n_match > 1 ? " and more" : "");
    if (found && k > 0 && (size_t)k < n)
        snprintf(what + k, n - (size_t)k, ")");
    bool named = x->diagnosis == AS_CONV_COUNT || (dx->n_match == 1 && dx->match[0].conv == x->diagnosis);
    return found && named && (x->step < 0 || x->step == step) && (x->layer < 0 || x->layer == layer) &&
           (x->tensor == AS_T_COUNT || x->tensor == tensor);
}

/* Output paths may name directories that do not exist yet (examples/out/...): create them. */
static int make_parent_dirs(const char *path, AsError *err)
{
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return as_err(err, AS_EBADINPUT, "%s: path too long", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return as_err(err, AS_ERUNTIME, "%s: cannot create directory %s (%s)", path, buf, strerror(errno));
        *p = '/';
    }
    return 0;
}

static const char *dump_mode(const AsDriver *d)
{
    return d->got_kind == AS_GOT_NONE ? "reference-only" : as_mode_name(d->opt.mode);
}

int as_batch_run(const AsScript *s, const AsBatchOptions *o, AsError *err)
{
    AsDriverOptions dopt = s->drv;
    dopt.quiet = o->quiet;
    if (o->no_engine)
        dopt.no_engine = true;
    if (o->host_select)
        dopt.host_select = true;
    if (o->knobs)
        dopt.knobs = o->knobs;
    if (o->bf16_model)
        dopt.bf16_model = o->bf16_model;
    if (o->diagnose)
        dopt.diagnose = true;
    Batch b = {.s = s, .dumped_step = -1, .progress = !o->quiet && isatty(2), .t0 = now()};
    const char *dump_path = o->dump_path ? o->dump_path : (s->dump_path[0] ? s->dump_path : NULL);
    const char *json = o->report_json ? o->report_json : (s->report_json[0] ? s->report_json : NULL);
    const char *junit = o->report_junit ? o->report_junit : (s->report_junit[0] ? s->report_junit : NULL);
    const char *outs[] = {dump_path, json, junit};
    int rc = 0;
    /* every output path checked before any work: a directory or socket there fails now, not after the run */
    for (int i = 0; i < 3 && !rc; i++)
        if (outs[i] && !(rc = make_parent_dirs(outs[i], err)))
            rc = as_atomic_check(outs[i], err);
    if (rc)
        return rc;
    rc = as_driver_open(&dopt, &b.d, err);
    if (rc)
        return rc;
    /* positions past max_seq are refused before the first step, not after running up to them */
    long need = 0;
    for (int i = 0; i < s->n_steps; i++)
        need += s->steps[i].kind == AS_SS_FIRST_DIVERGENCE ? (need ? 0 : s->steps[i].prefill) + s->steps[i].n
                                                           : s->steps[i].n;
    if (need > b.d->model.cfg.max_seq) {
        rc = as_err(err, AS_EBADINPUT, "the script's steps need up to %ld positions: beyond max_seq %d (raise max_seq); "
                    "nothing run", need, b.d->model.cfg.max_seq);
        as_driver_close(b.d);
        return rc;
    }
    for (int i = 0; i < AS_T_COUNT; i++)
        b.d->cmp.tol[i] = s->tol[i];
    b.rep = as_report_new(s->name, &b.d->model, b.d->got_name, dump_mode(b.d), b.d->note);
    if (!b.rep) {
        as_driver_close(b.d);
        return as_err(err, AS_ERUNTIME, "out of memory");
    }
    if (b.d->bf16)
        as_report_bf16_model(b.rep, b.d->bf16);
    if (dump_path) {
        AsDumpMeta meta = {.cfg = &b.d->model.cfg, .weights_name = b.d->model.weights_name,
                           .weights_digest = b.d->model.digest,
                           .precision = as_precision_name(b.d->model.precision), .mode = dump_mode(b.d)};
        rc = as_dump_create(dump_path, &meta, &b.dump, err);
    }
    as_driver_set_hook(b.d, on_layer, &b);
    for (int i = 0; i < s->n_steps && !rc; i++)
        rc = run_step(&b, &s->steps[i], err);
    if (b.progress)
        fprintf(stderr, "\n");
    if (!rc && b.dump_rc) {
        *err = b.dump_err;
        rc = b.dump_rc;
    }
    if (b.dump) {
        if (rc)
            as_dump_abort(b.dump);
        else
            rc = as_dump_commit(b.dump, err);
    }
    if (rc)
        as_report_error(b.rep, err);
    int code = rc;
    if (!rc) {
        if (s->expect.set) {
            char what[300];
            bool met = expectation_met(&b, what, sizeof what);
            as_report_expectation(b.rep, met, what);
            code = met ? AS_OK : AS_EMISMATCH;
        } else {
            code = as_report_verdict(b.rep) == AS_V_MISMATCH ? AS_EMISMATCH : AS_OK;
        }
    }
    AsError werr = {0};
    int wrc = as_report_write_all(b.rep, json, junit, stdout, &werr);
    if (wrc && !rc) {
        *err = werr;
        code = wrc;
    }
    as_report_free(b.rep);
    as_driver_close(b.d);
    return code;
}
