#include "driver/check.h"

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "driver/explain.h"
#include "driver/report.h"
#include "dumps/dump.h"
#include "model/precision.h"

/* The model to replay with: --model, else the dump's weights name beside the dump or in the cwd. */
static int find_model(const AsCheckOptions *o, const AsDumpInfo *info, char *dir, size_t n, AsError *err)
{
    if (o->model)
        return as_resolve_model(o->model, 1, dir, n, o->quiet, err);
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", o->dump);
    const char *base = dirname(tmp);
    const char *cands[2] = {base, "."};
    struct stat st;
    for (int i = 0; i < 2; i++) {
        if (snprintf(dir, n, "%s/%s", cands[i], info->weights_name) < (int)n && stat(dir, &st) == 0)
            return 0;
    }
    return as_err(err, AS_EBADINPUT, "%s names weights '%s', not found beside it or here: give --model", o->dump,
                  info->weights_name);
}

/* The side to check in a layer: the one asked for, else the first that is not the reference. */
static const char *pick_side(const AsDumpLayerInfo *li, const char *want)
{
    if (want)
        return as_dump_side_index(li, want) >= 0 ? want : NULL;
    for (int i = 0; i < li->n_sides; i++)
        if (strcmp(li->side[i].name, "ref"))
            return li->side[i].name;
    return NULL;
}

static bool same_geometry(const AsConfig *a, const AsConfig *b)
{
    char *ja = as_config_to_json(a), *jb = as_config_to_json(b);
    bool same = ja && jb && !strcmp(ja, jb);
    free(ja), free(jb);
    return same;
}

int as_check_dump(const AsCheckOptions *o, AsError *err)
{
    AsDumpReader *rd = NULL;
    int rc = as_dump_open(o->dump, &rd, err);
    if (rc)
        return rc;
    const AsDumpInfo *info = as_dump_info(rd);
    char dir[2048];
    AsModel m;
    memset(&m, 0, sizeof m);
    AsRefStack k;
    memset(&k, 0, sizeof k);
    AsReport *rep = NULL;
    float *h0 = NULL;
    AsRun got, ref;
    as_run_init(&got);
    as_run_init(&ref);
    if ((rc = find_model(o, info, dir, sizeof dir, err)) || (rc = as_model_load(dir, info->cfg.max_seq, &m, err)))
        goto out;
    AsPrecision prec = o->precision;
    if (prec == AS_PREC_AUTO && info->precision)
        as_precision_parse(info->precision, false, &prec); /* validated when the dump was opened */
    if (prec != AS_PREC_AUTO && (rc = as_model_set_precision(&m, prec, err)))
        goto out;
    /* the geometry must be the dump's; max_seq may differ (it is a run capacity) */
    AsConfig want = info->cfg;
    want.max_seq = m.cfg.max_seq;
    if (!same_geometry(&m.cfg, &want)) {
        rc = as_err(err, AS_EBADINPUT, "%s: the model's geometry differs from the dump's config", dir);
        goto out;
    }
    if (strcmp(m.digest, info->weights_digest) && !o->ignore_digest) {
        rc = as_err(err, AS_EBADINPUT, "%s: weights digest %.12s... differs from the dump's %.12s... (--ignore-digest to "
                    "run anyway)", dir, m.digest, info->weights_digest);
        goto out;
    }
    int tokens = 0, first = 0;
    if ((rc = as_dump_read_inputs(rd, &h0, &tokens, &first, err)))
        goto out;
    if (first != 0) {
        rc = as_err(err, AS_EBADINPUT, "%s: the inputs start at position %d; a replay needs them from 0", o->dump, first);
        goto out;
    }
    if ((rc = as_ref_stack_init(&k, &m, err)))
        goto out;
    char note[256];
    snprintf(note, sizeof note, "replay of %s (%s mode) through the reference", o->dump, as_mode_name(o->mode));
    char checked[96];
    snprintf(checked, sizeof checked, "dump:%s", o->side ? o->side : "auto");
    rep = as_report_new(o->dump, &m, checked, as_mode_name(o->mode), note);
    if (!rep) {
        rc = as_err(err, AS_ERUNTIME, "out of memory");
        goto out;
    }
    AsCompareOptions cmp;
    as_compare_options_default(&cmp);
    cmp.cand_block = m.cfg.candidate_block_size;
    cmp.quantised = m.quantised;
    int last_step = info->n_steps ? info->steps[info->n_steps - 1].step : -1;
    int pos = 0, compared = 0;
    for (int step = 0; step <= last_step && !rc; step++) {
        const AsDumpStepInfo *si = as_dump_find_step(rd, step);
        int s = si ? si->tokens : 1, start = step == 0 ? 0 : pos;
        if (si && si->start_pos != start) {
            rc = as_err(err, AS_EBADINPUT, "%s: step %d starts at position %d, the replay is at %d", o->dump, step,
                        si->start_pos, start);
            break;
        }
        if (!si && step == 0) {
            rc = as_err(err, AS_EBADINPUT, "%s: no step 0 (the prefill)", o->dump);
            break;
        }
        if (start + s > tokens) {
            rc = as_err(err, AS_EBADINPUT, "%s: step %d needs inputs up to position %d, the dump has %d", o->dump, step,
                        start + s - 1, tokens);
            break;
        }
        if ((rc = as_ref_begin_step(&k, h0 + (size_t)start * m.cfg.dim, start, s, err)))
            break;
        AsStepInfo stinfo = {step, step == 0, start, s, 0};
        for (int l = 0; l < m.cfg.n_layers && !rc; l++) {
            const AsDumpLayerInfo *li = si ? as_dump_find_layer(si, l) : NULL;
            const char *side = li ? pick_side(li, o->side) : NULL;
            bool have = side && !(rc = as_dump_read_run(rd, step, l, side, &got, err));
            if (rc)
                break;
            const float *x = have && o->mode == AS_MODE_TEACHER && got.t[AS_T_X].data ? got.t[AS_T_X].data : NULL;
            if ((rc = as_ref_next_layer(&k, x, &ref, err))) {
                as_err_wrap(err, "reference, step %d", step);
                break;
            }
            if (!have)
                continue;
            AsLayerDiff d;
            memset(&d, 0, sizeof d);
            as_compare_layer(&got, &ref, &cmp, &d);
            as_explain_downstream(&k.rm, &got, &ref, NULL, &cmp, &d);
            d.layer = l;
            d.step = step;
            as_report_layer(rep, &stinfo, l, &d);
            compared++;
        }
        pos = start + s;
    }
    if (!rc && compared == 0)
        rc = as_err(err, AS_EBADINPUT, "%s: no layer holds a side to check%s%s", o->dump, o->side ? " named " : "",
                    o->side ? o->side : "");
    if (rc)
        as_report_error(rep, err);
    else if (!o->quiet)
        fprintf(stderr, "attnscope check: %d layer runs compared\n", compared);
out:
    {
        int code = rc ? rc : (as_report_verdict(rep) == AS_V_MISMATCH ? AS_EMISMATCH : AS_OK);
        if (rep) {
            AsError werr = {0};
            int wrc = as_report_write_all(rep, o->report_json, o->report_junit, stdout, &werr);
            if (wrc && !rc) {
                *err = werr;
                code = wrc;
            }
        }
        as_report_free(rep);
        as_run_free(&got);
        as_run_free(&ref);
        free(h0);
        if (k.m)
            as_ref_stack_free(&k);
        if (m.cfg.n_layers)
            as_model_free(&m);
        as_dump_close(rd);
        return code;
    }
}
