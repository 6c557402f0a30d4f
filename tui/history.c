#include "tui/history.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dumps/dump.h"
#include "model/precision.h"

static size_t run_bytes(const AsRun *r)
{
    size_t b = 0;
    for (int i = 0; i < AS_T_COUNT; i++)
        b += (size_t)as_ht_numel(&r->t[i]) * (r->t[i].type == AS_VT_U8 ? 1 : 4);
    return b;
}

void tui_history_init(TuiHistory *h, size_t budget)
{
    memset(h, 0, sizeof *h);
    if (budget == (size_t)-1) {
        const char *e = getenv("ATTNSCOPE_TUI_HISTORY_MB");
        long mb = e && *e ? atol(e) : 1024;
        budget = (size_t)(mb > 0 ? mb : 0) << 20;
    }
    h->budget = budget;
    h->full_step = h->full_layer = -1;
}

void tui_history_reset(TuiHistory *h)
{
    for (int i = 0; i < h->n; i++) {
        as_run_free(&h->v[i].ref);
        as_run_free(&h->v[i].got);
        free(h->v[i].diff);
    }
    h->n = 0;
    h->bytes = 0;
    h->full = false;
    h->full_step = h->full_layer = -1;
}

void tui_history_free(TuiHistory *h)
{
    tui_history_reset(h);
    free(h->v);
    size_t budget = h->budget;
    memset(h, 0, sizeof *h);
    h->budget = budget;
}

static int stop(TuiHistory *h, const AsStepInfo *cur, int layer)
{
    if (!h->full) {
        h->full = true;
        h->full_step = cur->step;
        h->full_layer = layer;
    }
    return -1;
}

int tui_history_add(TuiHistory *h, const AsStepInfo *cur, int layer, const AsRun *got, const AsRun *ref,
                    const AsLayerDiff *diff)
{
    if (cur->step == 0 && layer == 0)
        tui_history_reset(h);
    if (h->full)
        return -1;
    size_t need = run_bytes(ref) + (got ? run_bytes(got) : 0) + (diff ? sizeof *diff : 0) + sizeof(TuiRec);
    if (h->bytes + need > h->budget)
        return stop(h, cur, layer);
    if (h->n == h->cap) {
        int cap = h->cap ? h->cap * 2 : 64;
        TuiRec *v = realloc(h->v, sizeof *v * (size_t)cap);
        if (!v)
            return stop(h, cur, layer);
        h->v = v;
        h->cap = cap;
    }
    TuiRec *r = &h->v[h->n];
    memset(r, 0, sizeof *r);
    r->step = cur->step;
    r->layer = layer;
    r->prefill = cur->prefill;
    r->start_pos = cur->start_pos;
    r->s = cur->s;
    as_run_init(&r->ref);
    as_run_init(&r->got);
    bool ok = as_run_copy(&r->ref, ref) == 0;
    if (ok && got) {
        r->has_got = true;
        ok = as_run_copy(&r->got, got) == 0;
    }
    if (ok && diff) {
        r->diff = malloc(sizeof *r->diff);
        ok = r->diff != NULL;
        if (ok)
            *r->diff = *diff;
    }
    if (!ok) {
        as_run_free(&r->ref);
        as_run_free(&r->got);
        free(r->diff);
        return stop(h, cur, layer);
    }
    h->n++;
    h->bytes += need;
    return 0;
}

int tui_history_steps(const TuiHistory *h)
{
    int n = 0;
    for (int i = 0; i < h->n; i++)
        if (i == 0 || h->v[i].step != h->v[i - 1].step)
            n++;
    return n;
}

/* ---- saving ------------------------------------------------------------------------------ */

static const char *dump_mode(const AsDriver *d)
{
    return d->got_kind == AS_GOT_NONE ? "reference-only" : as_mode_name(d->opt.mode);
}

static int create(AsDriver *d, const char *path, AsDumpWriter **w, AsError *err)
{
    AsDumpMeta meta = {.cfg = &d->model.cfg, .weights_name = d->model.weights_name,
                       .weights_digest = d->model.digest, .precision = as_precision_name(d->model.precision),
                       .mode = dump_mode(d)};
    return as_dump_create(path, &meta, w, err);
}

static int cancelled(AsDriver *d, AsError *err)
{
    if (atomic_load(&d->cancel))
        return as_err(err, AS_ECANCELLED, "save cancelled: nothing written");
    return 0;
}

int tui_save_step(AsDriver *d, const char *path, char *msg, size_t n, AsError *err)
{
    if (d->cur.step < 0)
        return as_err(err, AS_EBADINPUT, "nothing to save: no step has run (p prefills)");
    AsDumpWriter *w = NULL;
    int rc = create(d, path, &w, err);
    if (rc)
        return rc;
    const AsStepInfo *c = &d->cur;
    /* what a replay needs (attnscope check): a decode step with the reference's state before it
     * (/state_in) and its own inputs; without that state, the inputs from position 0 (the steps
     * before it are then replayed) */
    bool with_state = !c->prefill && d->state_in_valid && d->state_in_info.step == c->step;
    float *h0 = NULL;
    if (with_state || c->prefill) {
        rc = as_dump_write_inputs(w, d->h0, c->s, c->start_pos, err);
    } else if (!(h0 = malloc(sizeof *h0 * (size_t)(c->start_pos + c->s) * (size_t)d->model.cfg.dim))) {
        rc = as_err(err, AS_ERUNTIME, "out of memory for the inputs from position 0");
    } else {
        rc = as_driver_inputs(d, 0, c->start_pos + c->s, h0, err);
        if (!rc)
            rc = as_dump_write_inputs(w, h0, c->start_pos + c->s, 0, err);
    }
    free(h0);
    if (!rc && with_state)
        rc = as_dump_write_state_in(w, &d->state_in_info, d->state_in, err);
    if (!rc)
        rc = as_dump_begin_step(w, c->step, c->prefill ? "prefill" : "decode", c->start_pos, c->s, err);
    int layers = 0;
    for (int l = 0; !rc && l < d->model.cfg.n_layers; l++) {
        if (!d->layer_done[l])
            continue;
        if ((rc = cancelled(d, err)))
            break;
        const AsRun *got = d->got_kind == AS_GOT_NONE ? NULL : &d->got_run[l];
        rc = as_dump_write_layer(w, c->step, l, got, &d->ref_run[l], got ? &d->diff[l] : NULL, AS_DUMP_ALL_TENSORS,
                                 err);
        layers++;
    }
    if (rc) {
        as_dump_abort(w);
        return rc;
    }
    if ((rc = as_dump_commit(w, err)))
        return rc;
    snprintf(msg, n, "saved step %d (%s, %d layer%s) to %s%s: attnscope check replays it", c->step,
             c->prefill ? "prefill" : "decode", layers, layers == 1 ? "" : "s", path,
             c->prefill ? "" : with_state ? " with the state before it" : " with the inputs from position 0");
    return 0;
}

int tui_save_run(AsDriver *d, const TuiHistory *h, const char *path, char *msg, size_t n, AsError *err)
{
    if (d->cur.step < 0)
        return as_err(err, AS_EBADINPUT, "nothing to save: no step has run (p prefills)");
    if (h->n == 0)
        return as_err(err, AS_EBADINPUT, "no run recorded%s: s saves the current step",
                      h->budget ? "" : " (ATTNSCOPE_TUI_HISTORY_MB=0 turned recording off)");
    AsDumpWriter *w = NULL;
    int rc = create(d, path, &w, err);
    if (rc)
        return rc;
    int dim = d->model.cfg.dim, steps = 0, cur_step = -1;
    float *h0 = NULL;
    for (int i = 0; !rc && i < h->n; i++) {
        const TuiRec *r = &h->v[i];
        if ((rc = cancelled(d, err)))
            break;
        if (r->step != cur_step) {
            float *nh = realloc(h0, sizeof *h0 * (size_t)r->s * (size_t)dim);
            if (!nh) {
                rc = as_err(err, AS_ERUNTIME, "out of memory for the inputs of step %d", r->step);
                break;
            }
            h0 = nh;
            rc = as_driver_inputs(d, r->start_pos, r->s, h0, err);
            if (!rc)
                rc = as_dump_write_inputs(w, h0, r->s, r->start_pos, err);
            if (!rc)
                rc = as_dump_begin_step(w, r->step, r->prefill ? "prefill" : "decode", r->start_pos, r->s, err);
            cur_step = r->step;
            steps++;
        }
        if (!rc)
            rc = as_dump_write_layer(w, r->step, r->layer, r->has_got ? &r->got : NULL, &r->ref, r->diff,
                                     AS_DUMP_ALL_TENSORS, err);
    }
    free(h0);
    if (rc) {
        as_dump_abort(w);
        return rc;
    }
    if ((rc = as_dump_commit(w, err)))
        return rc;
    const TuiRec *last = &h->v[h->n - 1];
    int k = snprintf(msg, n, "saved the run: %d step%s (0..%d, %d layers) to %s", steps, steps == 1 ? "" : "s",
                     last->step, h->n, path);
    if (h->full && k > 0 && (size_t)k < n)
        snprintf(msg + k, n - (size_t)k, "; recording stopped at step %d layer %d (ATTNSCOPE_TUI_HISTORY_MB)",
                 h->full_step, h->full_layer);
    return 0;
}
