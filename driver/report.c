#include "driver/report.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/precision.h"
#include "model/safetensors.h"
#include "model/version.h"

/* One JUnit test case: step x layer. */
typedef struct {
    int step, layer, start_pos;
    bool prefill;
    AsVerdict verdict;
    char failure[512];     /* "" when it passed */
    char cause[512];       /* a layer that is not a pass: its first tensor out of rule, why, the worst element */
    uint64_t compared, absent; /* tensors compared; stored by the reference, not by the checked side */
    char *diagnosis;       /* its diagnosis (driver/diagnose.h, escaped; owned), NULL when none */
} Case;

#define MAX_NOTES 16

struct AsReport {
    cJSON *root, *steps, *cur_step;
    int cur_step_no;
    Case *cases;
    int n_cases, cap_cases;
    AsVerdict worst;
    int worst_step, worst_layer;
    AsTensorId worst_tensor;
    char name[256], got_name[48], model_name[256], note[256];
    char error[600];
    bool compared;
    bool expectation_set, expectation_met;
    char expectation[300];
    bool div_searched, div_found;
    AsDivergence div;
    bool first_found;
    int first_step, first_layer;
    AsTensorId first_tensor;
    char notes[MAX_NOTES][600];
    int n_notes;
    cJSON *notes_json;
    uint64_t seen, absent; /* tensors compared, absent, over every layer reported */
    /* quantisation error (bf16 source given): the worst max_rel over value tensors */
    char bf16_name[256];
    bool qerr_seen;
    double qerr_rel;
    int qerr_step, qerr_layer;
    AsTensorId qerr_tensor;
};

static int rank(AsVerdict v) { return as_verdict_rank(v); }

/* Text from outside (paths, names, messages) into the JSON, escaped as above. */
static cJSON *add_text(cJSON *obj, const char *key, const char *text)
{
    char safe[2048];
    as_text_escape(text, safe, sizeof safe);
    return cJSON_AddStringToObject(obj, key, safe);
}

static void copy_text(char *dst, size_t n, const char *text) { as_text_escape(text, dst, n); }

AsReport *as_report_new(const char *name, const AsModel *m, const char *checked, const char *mode, const char *note)
{
    AsReport *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    copy_text(r->name, sizeof r->name, name);
    copy_text(r->got_name, sizeof r->got_name, checked);
    copy_text(r->model_name, sizeof r->model_name, m->weights_name);
    copy_text(r->note, sizeof r->note, note);
    r->compared = strcmp(checked, "none") != 0;
    r->worst = AS_V_NOT_RUN;
    r->worst_step = r->worst_layer = -1;
    r->worst_tensor = AS_T_COUNT;
    r->cur_step_no = -1;
    r->root = cJSON_CreateObject();
    cJSON_AddStringToObject(r->root, "format", "attnscope-report");
    cJSON_AddNumberToObject(r->root, "format_version", 1);
    add_text(r->root, "name", name);
    cJSON_AddStringToObject(r->root, "attnscope_version", as_version());
    cJSON *model = cJSON_AddObjectToObject(r->root, "model");
    add_text(model, "weights", m->weights_name);
    cJSON_AddStringToObject(model, "digest", m->digest);
    cJSON_AddStringToObject(model, "precision", as_precision_name(m->precision));
    char *cfg = as_config_to_json(&m->cfg);
    cJSON *cj = cfg ? cJSON_Parse(cfg) : NULL;
    free(cfg);
    if (cj)
        cJSON_AddItemToObject(model, "config", cj);
    add_text(r->root, "checked", checked);
    cJSON_AddStringToObject(r->root, "mode", mode);
    add_text(r->root, "note", note);
    r->steps = cJSON_AddArrayToObject(r->root, "steps");
    return r;
}

void as_report_free(AsReport *r)
{
    if (!r)
        return;
    cJSON_Delete(r->root);
    for (int i = 0; i < r->n_cases; i++)
        free(r->cases[i].diagnosis);
    free(r->cases);
    free(r);
}

static cJSON *tensor_json(AsTensorId id, const AsTensorDiff *t)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "verdict", as_verdict_name(t->verdict));
    cJSON_AddNumberToObject(o, "numel", (double)t->numel);
    if (t->shape_differs)
        cJSON_AddBoolToObject(o, "shape_differs", 1);
    if (t->cause != AS_CAUSE_NONE)
        cJSON_AddStringToObject(o, "cause", as_cause_name(t->cause));
    if (t->cause == AS_CAUSE_INHERITED && t->from.layer >= 0) {
        cJSON *f = cJSON_AddObjectToObject(o, "from");
        cJSON_AddNumberToObject(f, "layer", t->from.layer);
        cJSON_AddNumberToObject(f, "step", t->from.step);
    }
    if (as_tensor_desc[id].selection) {
        cJSON_AddNumberToObject(o, "rows_differ", (double)t->n_rows_differ);
        cJSON_AddNumberToObject(o, "near_ties", (double)t->n_near_tie);
        cJSON_AddNumberToObject(o, "real", (double)t->n_real);
        if (t->n_tie_order) {
            cJSON_AddNumberToObject(o, "tie_order", (double)t->n_tie_order);
            cJSON_AddStringToObject(o, "tie_convention", as_tie_fit_name(t->tie_fit));
        }
        if (t->explained)
            cJSON_AddBoolToObject(o, "explained", 1);
        cJSON *ex = cJSON_AddArrayToObject(o, "examples");
        for (int i = 0; i < t->n_seldiffs && i < 4; i++) {
            const AsSelDiff *sd = &t->seldiff[i];
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "query", (double)sd->query);
            cJSON_AddItemToObject(e, "only_got", cJSON_CreateIntArray(sd->only_got, sd->n_only_got < 8 ? sd->n_only_got : 8));
            cJSON_AddItemToObject(e, "only_want",
                                  cJSON_CreateIntArray(sd->only_want, sd->n_only_want < 8 ? sd->n_only_want : 8));
            cJSON_AddNumberToObject(e, "margin_ulp", sd->margin);
            cJSON_AddBoolToObject(e, "near_tie", sd->near_tie);
            cJSON_AddBoolToObject(e, "tie_order", sd->tie_order);
            cJSON_AddItemToArray(ex, e);
        }
        return o;
    }
    cJSON_AddNumberToObject(o, "max_abs", t->max_abs);
    cJSON_AddNumberToObject(o, "want_max", t->want_max);
    cJSON_AddNumberToObject(o, "tol", t->tol);
    cJSON_AddNumberToObject(o, "max_rel", t->max_rel);
    cJSON_AddNumberToObject(o, "n_bad", (double)t->n_bad);
    cJSON_AddNumberToObject(o, "n_flips", (double)t->n_flips);
    if (t->n_flips_wide)
        cJSON_AddNumberToObject(o, "n_flips_wide", (double)t->n_flips_wide);
    if (t->explained) {
        /* beyond the bf16 rule, but the checked side matches the reference on its own inputs */
        cJSON_AddBoolToObject(o, "explained", 1);
        cJSON_AddNumberToObject(o, "explained_max_abs", t->explained_max_abs);
    }
    if (t->worst >= 0) {
        cJSON *w = cJSON_AddObjectToObject(o, "worst");
        char coord[128];
        as_format_coord(id, t->worst_coord, as_tensor_desc[id].ndim, coord, sizeof coord);
        cJSON_AddStringToObject(w, "at", coord);
        cJSON_AddNumberToObject(w, "got", t->worst_got);
        cJSON_AddNumberToObject(w, "want", t->worst_want);
        cJSON_AddNumberToObject(w, "ulp", (double)t->worst_ulp);
    }
    return o;
}

/* "out: max |diff| 0.031 > tol 0.0078 at token 3, channel 17 (got 1.25, want 1.28, 2 ulp)" */
static void describe(AsTensorId id, const AsTensorDiff *t, char *buf, size_t n)
{
    if (as_tensor_desc[id].selection) {
        const AsSelDiff *sd = t->n_seldiffs ? &t->seldiff[0] : NULL;
        int k = snprintf(buf, n, "%s: %ld queries differ (%ld real, %ld near-ties, %ld tie-order)",
                         as_tensor_desc[id].name, (long)t->n_rows_differ, (long)t->n_real, (long)t->n_near_tie,
                         (long)t->n_tie_order);
        if (sd && k > 0 && (size_t)k < n)
            snprintf(buf + k, n - (size_t)k, "; query %ld: %d only in got (first %d), %d only in want (first %d), margin %g",
                     (long)sd->query, sd->n_only_got, sd->n_only_got ? sd->only_got[0] : -1, sd->n_only_want,
                     sd->n_only_want ? sd->only_want[0] : -1, sd->margin);
        return;
    }
    if (t->absent_got || t->absent_want) {
        snprintf(buf, n, "%s: %s", as_tensor_desc[id].name,
                 t->absent_got ? "not stored by the checked side (required)" : "stored by the checked side only");
        return;
    }
    if (t->shape_differs) {
        snprintf(buf, n, "%s: shapes differ", as_tensor_desc[id].name);
        return;
    }
    char coord[128] = "-";
    if (t->worst >= 0)
        as_format_coord(id, t->worst_coord, as_tensor_desc[id].ndim, coord, sizeof coord);
    snprintf(buf, n, "%s: max |diff| %.4g > tol %.4g at %s (got %.6g, want %.6g, %ld ulp); %ld bad, %ld flips",
             as_tensor_desc[id].name, t->max_abs, t->tol, coord, t->worst_got, t->worst_want, (long)t->worst_ulp,
             (long)t->n_bad, (long)t->n_flips);
}

void as_report_layer(AsReport *r, const AsStepInfo *st, int layer, const AsLayerDiff *diff)
{
    if (st->step != r->cur_step_no) {
        r->cur_step = cJSON_CreateObject();
        cJSON_AddNumberToObject(r->cur_step, "step", st->step);
        cJSON_AddStringToObject(r->cur_step, "kind", st->prefill ? "prefill" : "decode");
        cJSON_AddNumberToObject(r->cur_step, "start_pos", st->start_pos);
        cJSON_AddNumberToObject(r->cur_step, "tokens", st->s);
        cJSON_AddArrayToObject(r->cur_step, "layers");
        cJSON_AddItemToArray(r->steps, r->cur_step);
        r->cur_step_no = st->step;
    }
    cJSON *lj = cJSON_CreateObject();
    cJSON_AddNumberToObject(lj, "layer", layer);
    AsVerdict v = diff ? diff->verdict : AS_V_NOT_RUN;
    cJSON_AddStringToObject(lj, "verdict", as_verdict_name(v));
    Case c = {st->step, layer, st->start_pos, st->prefill, v, "", "", 0, 0, NULL};
    if (diff) {
        if (diff->worst_tensor != AS_T_COUNT)
            cJSON_AddStringToObject(lj, "worst_tensor", as_tensor_desc[diff->worst_tensor].name);
        /* what was compared, and what the reference has that the checked side does not store */
        cJSON *cj = cJSON_AddArrayToObject(lj, "compared"), *aj = cJSON_AddArrayToObject(lj, "absent");
        for (int i = 0; i < AS_T_COUNT; i++) {
            const AsTensorDiff *t = &diff->t[i];
            if (t->verdict != AS_V_ABSENT && t->verdict != AS_V_NOT_RUN) {
                c.compared |= (uint64_t)1 << i;
                cJSON_AddItemToArray(cj, cJSON_CreateString(as_tensor_desc[i].name));
            } else if (t->verdict == AS_V_ABSENT && t->absent_got && !t->absent_want) {
                c.absent |= (uint64_t)1 << i;
                cJSON_AddItemToArray(aj, cJSON_CreateString(as_tensor_desc[i].name));
            }
        }
        r->seen |= c.compared;
        r->absent |= c.absent;
        if (v > AS_V_PASS) {
            /* the cause: the first tensor out of rule (a mismatch's first mismatch), why, its worst element */
            char why[200], line[400];
            AsTensorId ct = as_layer_cause(diff, why, sizeof why);
            if (ct != AS_T_COUNT) {
                const AsTensorDiff *t = &diff->t[ct];
                cJSON *cause = cJSON_AddObjectToObject(lj, "cause");
                cJSON_AddStringToObject(cause, "tensor", as_tensor_desc[ct].name);
                cJSON_AddStringToObject(cause, "why", why);
                if (t->worst >= 0) {
                    char coord[128];
                    as_format_coord(ct, t->worst_coord, as_tensor_desc[ct].ndim, coord, sizeof coord);
                    cJSON_AddStringToObject(cause, "at", coord);
                    cJSON_AddNumberToObject(cause, "got", t->worst_got);
                    cJSON_AddNumberToObject(cause, "want", t->worst_want);
                }
                as_tensor_diff_line(ct, t, line, sizeof line);
                cJSON_AddStringToObject(cause, "line", line);
                int k = snprintf(c.cause, sizeof c.cause, "%s: %s; ", as_tensor_desc[ct].name, why);
                if (k > 0 && (size_t)k < sizeof c.cause)
                    snprintf(c.cause + k, sizeof c.cause - (size_t)k, "%.*s", (int)(sizeof c.cause - (size_t)k - 1),
                             line);
            }
        }
        cJSON *tj = cJSON_AddObjectToObject(lj, "tensors");
        for (int i = 0; i < AS_T_COUNT; i++)
            if (diff->t[i].verdict != AS_V_ABSENT && diff->t[i].verdict != AS_V_NOT_RUN)
                cJSON_AddItemToObject(tj, as_tensor_desc[i].name, tensor_json((AsTensorId)i, &diff->t[i]));
        if (v == AS_V_MISMATCH) {
            /* the first mismatching tensor in forward order carries the message */
            for (int i = 0; i < AS_T_COUNT; i++)
                if (diff->t[i].verdict == AS_V_MISMATCH) {
                    describe((AsTensorId)i, &diff->t[i], c.failure, sizeof c.failure);
                    if (!r->first_found) {
                        r->first_found = true;
                        r->first_step = st->step;
                        r->first_layer = layer;
                        r->first_tensor = (AsTensorId)i;
                    }
                    break;
                }
        }
        if (rank(v) > rank(r->worst)) {
            r->worst = v;
            r->worst_step = st->step;
            r->worst_layer = layer;
            r->worst_tensor = diff->worst_tensor;
        }
    }
    cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(r->cur_step, "layers"), lj);
    if (r->n_cases == r->cap_cases) {
        int cap = r->cap_cases ? r->cap_cases * 2 : 64;
        Case *nc = realloc(r->cases, sizeof(Case) * (size_t)cap);
        if (!nc)
            return;
        r->cases = nc;
        r->cap_cases = cap;
    }
    r->cases[r->n_cases++] = c;
}

void as_report_divergence(AsReport *r, const AsDivergence *dv, bool searched)
{
    r->div_searched = searched;
    r->div_found = dv->found;
    r->div = *dv;
    cJSON *o = cJSON_AddObjectToObject(r->root, "first_divergence");
    cJSON_AddBoolToObject(o, "found", dv->found);
    if (dv->found) {
        cJSON_AddNumberToObject(o, "step", dv->step);
        cJSON_AddNumberToObject(o, "layer", dv->layer);
        cJSON_AddNumberToObject(o, "start_pos", dv->start_pos);
        cJSON_AddStringToObject(o, "tensor", as_tensor_desc[dv->tensor].name);
        cJSON_AddItemToObject(o, "diff", tensor_json(dv->tensor, &dv->diff));
    }
}

void as_report_bf16_model(AsReport *r, const AsModel *bf16)
{
    copy_text(r->bf16_name, sizeof r->bf16_name, bf16->weights_name);
    cJSON *b = cJSON_AddObjectToObject(r->root, "bf16_model");
    cJSON_AddStringToObject(b, "weights", r->bf16_name);
    cJSON_AddStringToObject(b, "digest", bf16->digest);
}

static cJSON *last_layer(const AsReport *r);

void as_report_quant_error(AsReport *r, int layer, const AsLayerDiff *q)
{
    cJSON *lj = last_layer(r);
    if (!lj || !q)
        return;
    cJSON *qj = cJSON_AddObjectToObject(lj, "quant_error");
    for (int i = 0; i < AS_T_COUNT; i++) {
        const AsTensorDiff *t = &q->t[i];
        if (t->verdict == AS_V_ABSENT || t->verdict == AS_V_NOT_RUN)
            continue;
        cJSON *o = cJSON_AddObjectToObject(qj, as_tensor_desc[i].name);
        if (as_tensor_desc[i].selection) {
            cJSON_AddNumberToObject(o, "rows_differ", (double)t->n_rows_differ);
            continue;
        }
        cJSON_AddNumberToObject(o, "max_abs", t->max_abs);
        cJSON_AddNumberToObject(o, "max_rel", t->max_rel);
        cJSON_AddNumberToObject(o, "want_max", t->want_max);
        if (isfinite(t->max_rel) && (!r->qerr_seen || t->max_rel > r->qerr_rel)) {
            r->qerr_seen = true;
            r->qerr_rel = t->max_rel;
            r->qerr_step = r->cur_step_no;
            r->qerr_layer = layer;
            r->qerr_tensor = (AsTensorId)i;
        }
    }
}

/* The JSON of the layer just reported (NULL before any). */
static cJSON *last_layer(const AsReport *r)
{
    cJSON *layers = r->cur_step ? cJSON_GetObjectItemCaseSensitive(r->cur_step, "layers") : NULL;
    int n = layers ? cJSON_GetArraySize(layers) : 0;
    return n ? cJSON_GetArrayItem(layers, n - 1) : NULL;
}

void as_report_diagnosis(AsReport *r, const AsDiagnosis *d)
{
    cJSON *lj = last_layer(r);
    if (!lj || !r->n_cases)
        return;
    char text[800];
    as_diagnosis_text(d, text, sizeof text);
    cJSON *o = cJSON_AddObjectToObject(lj, "diagnosis");
    cJSON_AddBoolToObject(o, "ran", d->ran);
    if (d->tensor != AS_T_COUNT)
        cJSON_AddStringToObject(o, "tensor", as_tensor_desc[d->tensor].name);
    if (d->ran) {
        cJSON_AddStringToObject(o, "trigger", d->by_flips ? "flips at bit-identical inputs" : "mismatch");
        if (d->same_input_flips)
            cJSON_AddNumberToObject(o, "same_input_flips", (double)d->same_input_flips);
        cJSON_AddBoolToObject(o, "inherited", d->inherited);
        cJSON_AddNumberToObject(o, "tried", d->n_tried);
        cJSON *ms = cJSON_AddArrayToObject(o, "matches");
        for (int i = 0; i < d->n_match; i++) {
            const AsConvDesc *c = &as_conv_desc[d->match[i].conv];
            cJSON *m = cJSON_CreateObject();
            cJSON_AddStringToObject(m, "convention", c->name);
            cJSON_AddStringToObject(m, "with", c->with);
            cJSON_AddStringToObject(m, "means", c->means);
            cJSON_AddNumberToObject(m, "max_abs", d->match[i].max_abs);
            cJSON_AddItemToArray(ms, m);
        }
    }
    if (d->note[0])
        add_text(o, "note", d->note);
    add_text(o, "text", text);
    char safe[sizeof text];
    copy_text(safe, sizeof safe, text);
    Case *c = &r->cases[r->n_cases - 1];
    free(c->diagnosis);
    c->diagnosis = strdup(safe);
}

void as_report_note(AsReport *r, const char *line)
{
    if (!r->notes_json)
        r->notes_json = cJSON_AddArrayToObject(r->root, "notes");
    char safe[600];
    copy_text(safe, sizeof safe, line);
    cJSON_AddItemToArray(r->notes_json, cJSON_CreateString(safe));
    if (r->n_notes < MAX_NOTES)
        snprintf(r->notes[r->n_notes++], sizeof r->notes[0], "%s", safe);
}

void as_report_error(AsReport *r, const AsError *err)
{
    copy_text(r->error, sizeof r->error, err->msg);
    cJSON_AddStringToObject(r->root, "error", r->error);
}

void as_report_expectation(AsReport *r, bool met, const char *what)
{
    r->expectation_set = true;
    r->expectation_met = met;
    copy_text(r->expectation, sizeof r->expectation, what);
    cJSON *o = cJSON_AddObjectToObject(r->root, "expectation");
    cJSON_AddStringToObject(o, "expected", r->expectation);
    cJSON_AddBoolToObject(o, "met", met);
}

AsVerdict as_report_verdict(const AsReport *r) { return r->worst; }

bool as_report_first_mismatch(const AsReport *r, int *step, int *layer, AsTensorId *tensor)
{
    if (r->first_found) {
        *step = r->first_step;
        *layer = r->first_layer;
        *tensor = r->first_tensor;
    }
    return r->first_found;
}
int as_report_layers(const AsReport *r) { return r->n_cases; }

/* Writes text to path atomically (model/safetensors.h: a temporary beside it, fsync, rename). */
static int write_atomic(const char *path, const char *text, AsError *err)
{
    char tmp[AS_ATOMIC_TMP_MAX];
    FILE *f;
    int rc = as_atomic_create(path, tmp, sizeof tmp, &f, err);
    if (rc)
        return rc;
    const size_t n = strlen(text);
    if (fwrite(text, 1, n, f) != n) {
        rc = as_err(err, AS_ERUNTIME, "%s: write failed (%s)", path, strerror(errno));
        as_atomic_abort(f, tmp);
        return rc;
    }
    return as_atomic_commit(f, tmp, path, err);
}

int as_report_write_json(const AsReport *r, const char *path, AsError *err)
{
    cJSON *copy = cJSON_Duplicate(r->root, 1);
    if (!copy)
        return as_err(err, AS_ERUNTIME, "out of memory for the report");
    cJSON_AddStringToObject(copy, "verdict", r->error[0] ? "error" : as_verdict_name(r->worst));
    char *text = cJSON_Print(copy);
    cJSON_Delete(copy);
    if (!text)
        return as_err(err, AS_ERUNTIME, "out of memory printing the report");
    size_t n = strlen(text);
    char *withnl = malloc(n + 2);
    int rc;
    if (!withnl) {
        rc = as_err(err, AS_ERUNTIME, "out of memory");
    } else {
        memcpy(withnl, text, n);
        memcpy(withnl + n, "\n", 2);
        rc = write_atomic(path, withnl, err);
    }
    free(withnl);
    cJSON_free(text);
    return rc;
}

static void xml_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\n' || *s == '\t')
                fputc(*s, f);
        }
    }
}

/* "x q idx o out" for a tensor mask ("none" when empty). */
static void mask_names(uint64_t m, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < AS_T_COUNT && used < n; i++)
        if ((m >> i) & 1)
            used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? " " : "", as_tensor_desc[i].name);
    if (!m)
        snprintf(buf, n, "none");
}

static void junit_lists(FILE *f, const Case *c)
{
    char names[600];
    mask_names(c->compared, names, sizeof names);
    fprintf(f, "compared: %s\n", names);
    if (c->absent) {
        mask_names(c->absent, names, sizeof names);
        fprintf(f, "absent (not stored by the checked side, not judged): %s\n", names);
    }
}

/* A layer case's cause line (when it has one), its diagnosis, then what was compared and absent. */
static void junit_cause_and_lists(FILE *f, const Case *c)
{
    if (c->cause[0]) {
        fprintf(f, "\ncause: ");
        xml_escape(f, c->cause);
    }
    if (c->diagnosis) {
        fprintf(f, "\ndiagnosis: ");
        xml_escape(f, c->diagnosis);
    }
    fprintf(f, "\n");
    junit_lists(f, c);
}

int as_report_write_junit(const AsReport *r, const char *path, AsError *err)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return as_err(err, AS_ERUNTIME, "out of memory for the JUnit report");
    /* A script with an expectation is one test, the expectation: its layers' mismatches are what it
     * looked for, listed as output, and the counts agree with the exit code. */
    const bool expect = r->expectation_set && !r->error[0];
    int failures = 0;
    for (int i = 0; i < r->n_cases; i++)
        failures += r->cases[i].verdict == AS_V_MISMATCH;
    if (expect)
        failures = r->expectation_met ? 0 : 1;
    int errors = r->error[0] ? 1 : 0;
    const int tests = r->n_cases + errors + (expect ? 1 : 0);
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"attnscope\" tests=\"%d\" failures=\"%d\" "
               "errors=\"%d\">\n", tests, failures, errors);
    fprintf(f, "  <testsuite name=\"");
    xml_escape(f, r->name);
    fprintf(f, "\" tests=\"%d\" failures=\"%d\" errors=\"%d\">\n", tests, failures, errors);
    if (expect) {
        fprintf(f, "    <testcase classname=\"run\" name=\"expect\"");
        if (r->expectation_met) {
            fprintf(f, ">\n      <system-out>expectation met: ");
            xml_escape(f, r->expectation);
            fprintf(f, "</system-out>\n    </testcase>\n");
        } else {
            fprintf(f, ">\n      <failure message=\"expectation not met: ");
            xml_escape(f, r->expectation);
            fprintf(f, "\" type=\"expectation\">expectation not met: ");
            xml_escape(f, r->expectation);
            fprintf(f, "</failure>\n    </testcase>\n");
        }
    }
    for (int i = 0; i < r->n_cases; i++) {
        const Case *c = &r->cases[i];
        fprintf(f, "    <testcase classname=\"step%04d.%s.pos%d\" name=\"layer %02d\"", c->step,
                c->prefill ? "prefill" : "decode", c->start_pos, c->layer);
        if (c->verdict == AS_V_MISMATCH && !expect) {
            fprintf(f, ">\n      <failure message=\"");
            xml_escape(f, c->failure);
            if (c->diagnosis) {
                fprintf(f, "; diagnosis: ");
                xml_escape(f, c->diagnosis);
            }
            fprintf(f, "\" type=\"mismatch\">step %d, layer %d: ", c->step, c->layer);
            xml_escape(f, c->failure);
            junit_cause_and_lists(f, c);
            fprintf(f, "</failure>\n    </testcase>\n");
        } else if (c->verdict == AS_V_NOT_RUN) {
            fprintf(f, ">\n      <skipped message=\"reference only: nothing compared\"/>\n    </testcase>\n");
        } else {
            fprintf(f, ">\n      <system-out>%s", as_verdict_name(c->verdict));
            if (c->verdict == AS_V_MISMATCH) { /* under an expectation: what it looked for */
                fprintf(f, ": ");
                xml_escape(f, c->failure);
            }
            junit_cause_and_lists(f, c);
            fprintf(f, "</system-out>\n    </testcase>\n");
        }
    }
    if (errors) {
        fprintf(f, "    <testcase classname=\"run\" name=\"run\">\n      <error message=\"");
        xml_escape(f, r->error);
        fprintf(f, "\"/>\n    </testcase>\n");
    }
    fprintf(f, "  </testsuite>\n</testsuites>\n");
    fclose(f);
    int rc = buf ? write_atomic(path, buf, err) : as_err(err, AS_ERUNTIME, "out of memory");
    free(buf);
    return rc;
}

void as_report_summary(const AsReport *r, FILE *f)
{
    int count[AS_V_COUNT] = {0};
    for (int i = 0; i < r->n_cases; i++)
        count[r->cases[i].verdict]++;
    fprintf(f, "attnscope %s %s: model %s, checked: %s\n", strncmp(r->got_name, "dump:", 5) ? "run" : "check", r->name,
            r->model_name, r->got_name);
    if (!r->compared)
        fprintf(f, "  %s: the reference ran alone, nothing was compared\n", r->note);
    for (int i = 0; i < r->n_notes; i++)
        fprintf(f, "  note: %s\n", r->notes[i]);
    fprintf(f, "  %d layer runs: %d pass, %d with quantisation flips, %d near-ties, %d tie-order, %d inherited, "
               "%d mismatches%s\n", r->n_cases, count[AS_V_PASS], count[AS_V_FLIPS], count[AS_V_NEAR_TIE],
            count[AS_V_TIE_ORDER], count[AS_V_INHERITED], count[AS_V_MISMATCH],
            count[AS_V_NOT_RUN] ? " (reference only)" : "");
    if (r->seen && r->absent) { /* a partial run (a check of another engine's dump): say what was judged */
        char names[600];
        mask_names(r->seen, names, sizeof names);
        fprintf(f, "  compared: %s\n", names);
        mask_names(r->absent, names, sizeof names);
        fprintf(f, "  absent (not stored by the checked side, not judged): %s\n", names);
    }
    int shown = 0;
    for (int i = 0; i < r->n_cases && shown < 5; i++)
        if (r->cases[i].verdict == AS_V_MISMATCH) {
            fprintf(f, "  MISMATCH step %d (%s, pos %d) layer %d: %s\n", r->cases[i].step,
                    r->cases[i].prefill ? "prefill" : "decode", r->cases[i].start_pos, r->cases[i].layer,
                    r->cases[i].failure);
            if (r->cases[i].diagnosis)
                fprintf(f, "    diagnosis: %s\n", r->cases[i].diagnosis);
            shown++;
        }
    if (count[AS_V_MISMATCH] > shown)
        fprintf(f, "  ... and %d more mismatching layer runs (see the JSON report)\n", count[AS_V_MISMATCH] - shown);
    /* diagnosed although within the rule: flips at bit-identical quantiser inputs */
    shown = 0;
    for (int i = 0; i < r->n_cases && shown < 5; i++)
        if (r->cases[i].verdict != AS_V_MISMATCH && r->cases[i].diagnosis) {
            fprintf(f, "  %s step %d (%s, pos %d) layer %d, diagnosis: %s\n", as_verdict_name(r->cases[i].verdict),
                    r->cases[i].step, r->cases[i].prefill ? "prefill" : "decode", r->cases[i].start_pos,
                    r->cases[i].layer, r->cases[i].diagnosis);
            shown++;
        }
    /* the explained ones that are not plain flips: why each is not a pass */
    int explained = count[AS_V_NEAR_TIE] + count[AS_V_TIE_ORDER] + count[AS_V_INHERITED];
    shown = 0;
    for (int i = 0; i < r->n_cases && shown < 8; i++) {
        const Case *c = &r->cases[i];
        if (c->verdict != AS_V_NEAR_TIE && c->verdict != AS_V_TIE_ORDER && c->verdict != AS_V_INHERITED)
            continue;
        fprintf(f, "  %s step %d (%s, pos %d) layer %d: %s\n", as_verdict_name(c->verdict), c->step,
                c->prefill ? "prefill" : "decode", c->start_pos, c->layer, c->cause);
        shown++;
    }
    if (explained > shown)
        fprintf(f, "  ... and %d more explained layer runs (see the JSON report)\n", explained - shown);
    if (r->div_searched && r->div_found)
        fprintf(f, "  first divergence: step %d (pos %d), layer %d, tensor %s\n", r->div.step, r->div.start_pos,
                r->div.layer, as_tensor_desc[r->div.tensor].name);
    else if (r->div_searched)
        fprintf(f, "  first divergence: none within the steps run\n");
    if (r->bf16_name[0] && r->qerr_seen)
        fprintf(f, "  quantisation error (reference on %s vs on %s): worst max_rel %.4g at step %d, layer %d, %s\n",
                r->model_name, r->bf16_name, r->qerr_rel, r->qerr_step, r->qerr_layer,
                as_tensor_desc[r->qerr_tensor].name);
    if (r->error[0])
        fprintf(f, "  ERROR: %s\n", r->error);
    if (r->expectation_set)
        fprintf(f, "  expectation %s: %s\n", r->expectation_met ? "met" : "NOT met", r->expectation);
    fprintf(f, "verdict: %s\n", r->error[0] ? "error" : as_verdict_name(r->worst));
}

int as_report_write_all(const AsReport *r, const char *json, const char *junit, FILE *summary, AsError *err)
{
    int rc = 0;
    if (json)
        rc = as_report_write_json(r, json, err);
    if (!rc && junit)
        rc = as_report_write_junit(r, junit, err);
    as_report_summary(r, summary);
    return rc;
}
