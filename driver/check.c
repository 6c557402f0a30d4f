#include "driver/check.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "driver/dump_source.h"
#include "driver/diagnose.h"
#include "driver/explain.h"
#include "driver/model_find.h"
#include "driver/report.h"
#include "driver/state_io.h"
#include "dumps/dump.h"
#include "model/precision.h"
#include "ref/candidates.h"
#include "ref/indexer.h"

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

/* What the checked side published in this step, for the layers after it (driver/explain.h). */
typedef struct {
    AsExplainContext xc;
    int32_t *sel[AS_MAX_LAYERS];
    uint8_t *cand[AS_MAX_LAYERS];
} Published;

static void published_reset(Published *p, int n_layers)
{
    for (int l = 0; l < n_layers; l++)
        p->xc.pub_sel_n[l] = p->xc.pub_cand_n[l] = -1;
}

static void published_free(Published *p)
{
    for (int l = 0; l < AS_MAX_LAYERS; l++)
        free(p->sel[l]), free(p->cand[l]);
}

/* Visibility lengths of a layer's queries (SPEC 3 step 5c). */
static int *query_lens(const AsRun *r, int ratio)
{
    int *cl = malloc(sizeof(int) * (size_t)(r->s > 0 ? r->s : 1));
    for (int t = 0; cl && t < r->s; t++)
        cl[t] = r->start_pos == 0 ? (t + 1) / ratio : r->width;
    return cl;
}

/* What an index source published on the checked side: its csel, else the compressed columns of its
 * idx, else the top-k of its scores; the candidate source's mask: its cand, else the blocks its scores
 * select (SPEC 3, by the reference's rules and tie convention). */
static void publish(Published *p, const AsConfig *cfg, int l, const AsRun *got)
{
    const AsLayerRole *role = &cfg->role[l];
    const AsHostTensor *sc = &got->t[AS_T_ISCORE];
    bool scores = sc->data && role->ratio > 0 && got->width > 0 && as_ht_numel(sc) == (int64_t)got->s * got->width;
    if (role->index_source) {
        const AsHostTensor *cs = &got->t[AS_T_CSEL], *ix = &got->t[AS_T_IDX];
        int64_t s = got->s, k = got->k, n = s * k;
        int32_t *c = realloc(p->sel[l], sizeof(int32_t) * (size_t)(n + 1));
        if (c) {
            p->sel[l] = c;
            if (cs->data && as_ht_numel(cs) == n) {
                memcpy(c, cs->data, sizeof(int32_t) * (size_t)n);
                p->xc.pub_sel_n[l] = n;
            } else if (ix->data && got->topk == got->cols + got->k && as_ht_numel(ix) == s * got->topk) {
                for (int64_t t = 0; t < s; t++)
                    memcpy(c + t * k, (const int32_t *)ix->data + t * got->topk + got->cols, sizeof(int32_t) * (size_t)k);
                p->xc.pub_sel_n[l] = n;
            } else if (scores && k <= got->width) { /* the scores after its masks */
                int *cl = query_lens(got, role->ratio);
                if (cl && !as_index_topk(sc->data, got->s, got->width, got->k, cl, got->rows_a_len, c))
                    p->xc.pub_sel_n[l] = n;
                free(cl);
            }
            p->xc.pub_sel[l] = c;
        }
    }
    if (role->candidate_source && (got->t[AS_T_CAND].data || scores)) {
        int64_t n = got->t[AS_T_CAND].data ? as_ht_numel(&got->t[AS_T_CAND]) : (int64_t)got->s * got->width;
        uint8_t *c = realloc(p->cand[l], (size_t)(n + 1));
        if (c) {
            p->cand[l] = c;
            p->xc.pub_cand[l] = c;
            if (got->t[AS_T_CAND].data) {
                memcpy(c, got->t[AS_T_CAND].data, (size_t)n);
                p->xc.pub_cand_n[l] = n;
            } else {
                int *cl = query_lens(got, role->ratio);
                if (cl && !as_select_candidate_blocks(sc->data, got->s, got->width, cl, cfg->candidate_block_size,
                                                      cfg->candidate_topk_blocks, c))
                    p->xc.pub_cand_n[l] = n;
                free(cl);
            }
        }
    }
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void note(AsReport *rep, bool quiet, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(AsReport *rep, bool quiet, const char *fmt, ...)
{
    char line[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (rep)
        as_report_note(rep, line);
    if (!quiet) {
        char safe[700];
        as_text_escape(line, safe, sizeof safe);
        fprintf(stderr, "attnscope check: %s\n", safe);
    }
}

/* --diagnose after a layer's comparison: its diagnosis into the report (when it calls for one), the time
 * it took summed in *secs (stderr only: reports hold no times). */
static int diagnose_layer(AsDiagnoser *dg, const AsRefModel *rm, const AsRun *got, const AsRun *ref,
                          const AsLayerDiff *d, const AsCompareOptions *cmp, AsReport *rep, double *secs, int *n,
                          AsError *err)
{
    AsDiagnosis dx;
    double t0 = now_s();
    int dr = as_diagnoser_after(dg, rm, got, ref, d, cmp, &dx);
    *secs += now_s() - t0;
    if (dr < 0)
        return as_err(err, AS_ERUNTIME, "out of memory diagnosing layer %d, step %d", ref->layer, ref->step);
    if (dr) {
        as_report_diagnosis(rep, &dx);
        *n += dx.ran;
    }
    return 0;
}

/* Where the replay starts: step 0 (a prefill of s0 tokens), or (a dump with a state_in group) the
 * decode step the state precedes. */
typedef struct {
    int step, pos, s0;
    bool from_state;
} Plan;

static int plan_replay(const AsCheckOptions *o, const AsDumpInfo *info, Plan *p, AsError *err)
{
    const AsDumpStepInfo *f = &info->steps[0];
    memset(p, 0, sizeof *p);
    if (info->has_state_in) {
        const AsDumpStateIn *st = &info->state_in;
        if (st->step > f->step || f->start_pos != st->start_pos + (f->step - st->step))
            return as_err(err, AS_EBADINPUT, "%s: /state_in precedes step %d at position %d, which does not lead to the "
                          "first step stored (step %d at position %d)", o->dump, st->step, st->start_pos, f->step,
                          f->start_pos);
        p->step = st->step, p->pos = st->start_pos, p->from_state = true;
        return 0;
    }
    if (f->step == 0) {
        p->s0 = f->tokens;
        return 0;
    }
    /* step S > 0 at position P without the state before it: the steps before it are a prefill and S - 1
     * decode steps, so the prefill held P - (S - 1) tokens; it is replayed from the inputs */
    int s0 = f->start_pos - (f->step - 1);
    if (s0 < 1)
        return as_err(err, AS_EBADINPUT, "%s: the first step stored is step %d at position %d, which no prefill and "
                      "decode steps lead to", o->dump, f->step, f->start_pos);
    p->s0 = s0;
    return 0;
}

/* Every stored step against the plan, before anything is replayed: step S's kind, position and
 * token count are those the replay reaches it with, and its end is within max_seq. A dump whose
 * later step claims a position that no run leads to is refused at once, not after replaying up to it. */
static int check_positions(const AsCheckOptions *o, const AsDumpInfo *info, const Plan *p, int max_seq, AsError *err)
{
    for (int i = 0; i < info->n_steps; i++) {
        const AsDumpStepInfo *si = &info->steps[i];
        if (si->step < p->step)
            continue; /* before the state_in group: never replayed (plan_replay refused what leads nowhere) */
        bool prefill = si->step == 0;
        long long start = prefill ? 0 : p->step == 0 ? (long long)p->s0 + si->step - 1 : (long long)p->pos + si->step - p->step;
        int s = prefill ? p->s0 : 1;
        if (si->start_pos != start || si->tokens != s || strcmp(si->kind, prefill ? "prefill" : "decode"))
            return as_err(err, AS_EBADINPUT, "%s: step %d is a %s of %d tokens at position %d; the replay reaches it as a "
                          "%s of %d at %lld (step 0 is the prefill, each later step one decoded token)", o->dump,
                          si->step, si->kind, si->tokens, si->start_pos, prefill ? "prefill" : "decode", s, start);
        if (start + s > max_seq)
            return as_err(err, AS_EBADINPUT, "%s: step %d ends at position %lld, past the model's max_seq %d", o->dump,
                          si->step, start + s, max_seq);
    }
    return 0;
}

int as_check_dump(const AsCheckOptions *o, AsError *err)
{
    AsDumpReader *rd = NULL;
    int rc = as_check_open_input(o, &rd, err);
    if (rc)
        return rc;
    const AsDumpInfo *info = as_dump_info(rd);
    char dir[2048], how[1200];
    AsModel m;
    memset(&m, 0, sizeof m);
    AsRefStack k;
    memset(&k, 0, sizeof k);
    AsReport *rep = NULL;
    float *h0 = NULL;
    AsRun got, ref;
    as_run_init(&got);
    as_run_init(&ref);
    AsRun *state = NULL;
    AsLayerDiff *diffs = NULL;
    AsDiagnoser *dg = NULL;
    double diag_s = 0;
    int diagnosed = 0;
    Published *pub = calloc(1, sizeof *pub);
    int n_layers = info->cfg.n_layers;
    as_topk_set_reference_ties(o->ties);
    if (!pub || !(diffs = calloc((size_t)n_layers, sizeof *diffs))) {
        rc = as_err(err, AS_ERUNTIME, "out of memory");
        goto out;
    }
    if ((rc = as_find_dump_model(o->dump, info, o->model, o->quiet, dir, sizeof dir, how, sizeof how, err)) ||
        (rc = as_model_load(dir, info->cfg.max_seq, &m, err)))
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
    bool no_digest = !info->weights_digest[0], other_digest = !no_digest && strcmp(m.digest, info->weights_digest);
    if (other_digest && !o->ignore_digest) {
        rc = as_err(err, AS_EBADINPUT, "%s: weights digest %.12s... differs from the dump's %.12s... (--ignore-digest to "
                    "run anyway)", dir, m.digest, info->weights_digest);
        goto out;
    }
    if (info->n_steps == 0) {
        rc = as_err(err, AS_EBADINPUT, "%s: no steps stored", o->dump);
        goto out;
    }
    Plan plan;
    if ((rc = plan_replay(o, info, &plan, err)) || (rc = check_positions(o, info, &plan, m.cfg.max_seq, err)))
        goto out;
    int tokens = 0, first = 0;
    if ((rc = as_dump_read_inputs(rd, &h0, &tokens, &first, err))) {
        as_err_wrap(err, "a replay needs the token inputs");
        goto out;
    }
    const AsDumpStepInfo *last = &info->steps[info->n_steps - 1];
    int end = last->start_pos + last->tokens;
    if (first > plan.pos || first + tokens < end) {
        rc = as_err(err, AS_EBADINPUT, "%s: the inputs hold positions %d..%d; the replay needs %d..%d (%s)", o->dump,
                    first, first + tokens - 1, plan.pos, end - 1,
                    plan.from_state ? "from the step the state_in group precedes"
                                    : "from position 0, or a state_in group with the state before the first step");
        goto out;
    }
    if ((rc = as_ref_stack_init(&k, &m, err)))
        goto out;
    if (o->diagnose && !(dg = as_diagnoser_new(&m.cfg))) {
        rc = as_err(err, AS_ERUNTIME, "out of memory");
        goto out;
    }
    if (plan.from_state) {
        if (!(state = calloc((size_t)n_layers, sizeof *state))) {
            rc = as_err(err, AS_ERUNTIME, "out of memory");
            goto out;
        }
        if ((rc = as_dump_read_state_in(rd, state, err)) || (rc = as_state_restore(&k, state, &info->state_in, err))) {
            as_err_wrap(err, "%s", o->dump);
            goto out;
        }
    }

    char rnote[600], checked[96];
    snprintf(rnote, sizeof rnote, "replay of %s (%s mode) through the reference%s", o->dump, as_mode_name(o->mode),
             plan.from_state ? ", from the state before its first step (state_in)" : "");
    snprintf(checked, sizeof checked, "dump:%s", o->side ? o->side : "auto");
    rep = as_report_new(o->dump, &m, checked, as_mode_name(o->mode), rnote);
    if (!rep) {
        rc = as_err(err, AS_ERUNTIME, "out of memory");
        goto out;
    }
    if (!o->model)
        note(rep, o->quiet, "model %s: %s", dir, how);
    if (no_digest)
        note(rep, o->quiet, "the dump has no weights_digest: its weights are not verified against %s", dir);
    else if (other_digest)
        note(rep, o->quiet, "weights digest %.12s... differs from the dump's %.12s... (--ignore-digest)", m.digest,
             info->weights_digest);
    if (o->ties != AS_TIES_CPU)
        note(rep, o->quiet, "the reference breaks exact ties %s (--tie-order %s)", as_tie_order_what(o->ties),
             as_tie_order_name(o->ties));
    if (plan.from_state)
        note(rep, o->quiet, "the replay starts at step %d (position %d) from the state_in group%s%s", plan.step,
             plan.pos, info->state_in.side[0] ? " of side " : "", info->state_in.side);
    else if (info->steps[0].step > 0)
        note(rep, o->quiet, "the replay runs a prefill of %d tokens and the decode steps before step %d from the "
             "dump's inputs", plan.s0, info->steps[0].step);

    AsCompareOptions cmp;
    as_compare_options_default(&cmp);
    cmp.cand_block = m.cfg.candidate_block_size;
    cmp.cand_topk_blocks = m.cfg.candidate_topk_blocks;
    cmp.quantised = m.quantised;
    cmp.got_partial = true; /* what the checked side stores is compared; the rest is absent */
    cmp.require = o->require;
    int pos = plan.pos, compared = 0;
    /* progress on stderr for long replays, as run's: a terminal only, never with --quiet */
    bool progress = !o->quiet && isatty(2), shown = false;
    double t0 = now_s(), last_progress = t0;
    for (int step = plan.step; step <= last->step && !rc; step++) {
        const AsDumpStepInfo *si = as_dump_find_step(rd, step);
        bool prefill = step == 0;
        int s = prefill ? plan.s0 : 1, start = prefill ? 0 : pos;
        if (si && (si->start_pos != start || si->tokens != s || strcmp(si->kind, prefill ? "prefill" : "decode"))) {
            rc = as_err(err, AS_EBADINPUT, "%s: step %d is a %s of %d tokens at position %d; the replay has a %s of %d at "
                        "%d (step 0 is the prefill, each later step one decoded token)", o->dump, step, si->kind,
                        si->tokens, si->start_pos, prefill ? "prefill" : "decode", s, start);
            break;
        }
        if ((rc = as_ref_begin_step(&k, h0 + (size_t)(start - first) * m.cfg.dim, start, s, err)))
            break;
        published_reset(pub, n_layers);
        memset(diffs, 0, sizeof *diffs * (size_t)n_layers);
        pub->xc.diff = diffs;
        AsStepInfo stinfo = {step, prefill, start, s, 0};
        for (int l = 0; l < n_layers && !rc; l++) {
            const AsDumpLayerInfo *li = si ? as_dump_find_layer(si, l) : NULL;
            const char *side = li ? pick_side(li, o->side) : NULL;
            bool have = side && !(rc = as_dump_read_run(rd, step, l, side, &got, err));
            if (rc)
                break;
            const float *x = have && o->mode == AS_MODE_TEACHER && got.t[AS_T_X].data ? got.t[AS_T_X].data : NULL;
            if (dg && have && as_diagnoser_before(dg, &k.st, l, step)) {
                rc = as_err(err, AS_ERUNTIME, "out of memory keeping layer %d's state for --diagnose", l);
                break;
            }
            if ((rc = as_ref_next_layer(&k, x, &ref, err))) {
                as_err_wrap(err, "reference, step %d", step);
                break;
            }
            if (!have)
                continue;
            AsLayerDiff *d = &diffs[l];
            as_compare_layer(&got, &ref, &cmp, d);
            as_explain_downstream(&k.rm, &got, &ref, &pub->xc, &cmp, d);
            d->layer = l;
            d->step = step;
            publish(pub, &m.cfg, l, &got);
            as_report_layer(rep, &stinfo, l, d);
            compared++;
            if (dg && (rc = diagnose_layer(dg, &k.rm, &got, &ref, d, &cmp, rep, &diag_s, &diagnosed, err)))
                break;
        }
        pos = start + s;
        double t = now_s();
        if (progress && (t - last_progress > 1.0 || step == last->step)) {
            fprintf(stderr, "\r[%7.1fs] step %d of %d (pos %d)   ", t - t0, step, last->step, start);
            last_progress = t;
            shown = true;
        }
    }
    if (shown)
        fputc('\n', stderr);
    if (!rc && compared == 0)
        rc = as_err(err, AS_EBADINPUT, "%s: no layer holds a side to check%s%s", o->dump, o->side ? " named " : "",
                    o->side ? o->side : "");
    if (rc)
        as_report_error(rep, err);
    else if (!o->quiet)
        fprintf(stderr, "attnscope check: %d layer runs compared\n", compared);
    if (!rc && dg && !o->quiet)
        fprintf(stderr, "attnscope check: %d layer runs diagnosed in %.3f s\n", diagnosed, diag_s);
out:
    as_topk_set_reference_ties(AS_TIES_CPU);
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
        for (int l = 0; state && l < n_layers; l++)
            as_run_free(&state[l]);
        free(state);
        free(diffs);
        as_diagnoser_free(dg);
        if (pub)
            published_free(pub);
        free(pub);
        free(h0);
        if (k.m)
            as_ref_stack_free(&k);
        if (m.cfg.n_layers)
            as_model_free(&m);
        as_dump_close(rd);
        return code;
    }
}
