/* driver/diagnose.h: which stages a convention re-runs, from what, and how the result is judged.
 *
 * The work run starts as the layer's recorded tensors: the checked side's where it stores them (what its
 * next stage consumed), the reference's elsewhere (they are within the rule of the checked side's up to
 * the tensor diagnosed, which is the first that is not). For a convention, the stages re-run are those the
 * tensor depends on that the convention bends or that read a re-run stage's output; each re-run stage's
 * outputs that the checked side stores must still match it (a convention that changes what the checked
 * side got right is not its convention); the tensor itself must match within the rule, with no flip at a
 * bit-identical quantiser input. The reference's own conventions are tried first: when they reproduce the
 * tensor from the checked side's inputs, its difference is inherited and no convention is named. */
#include "driver/diagnose.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/quant.h"
#include "ref/stage.h"

#define ROW(n) (sizeof(float) * (size_t)(n))

/* ---- the state before a layer ---- */

int as_layer_before_capture(const AsRefState *st, const AsConfig *cfg, int l, int step, AsLayerBefore *b)
{
    const int n = cfg->window * cfg->head_dim;
    b->valid = false;
    if (b->ring_n < n) {
        float *p = realloc(b->ring, ROW(n));
        if (!p)
            return -1;
        b->ring = p;
        b->ring_n = n;
    }
    memcpy(b->ring, st->layer[l].ring, ROW(n));
    b->prov = st->shared.prov;
    b->step = step;
    b->valid = true;
    return 0;
}

void as_layer_before_free(AsLayerBefore *b)
{
    free(b->ring);
    memset(b, 0, sizeof *b);
}

/* ---- quantiser flips that no input explains ---- */

static int quant_block(AsQuantKind q)
{
    return q == AS_QZ_FP8 ? AS_FP8_BLOCK : q == AS_QZ_FP4_E8M0 ? AS_FP4_E8M0_BLOCK : AS_FP4_E4M3_BLOCK;
}

/* Elements of a quantised tensor that differ between a and b although the quantiser's whole input block
 * (the pre twin) is bit-identical on both: the same input, the same scale, a different rounding. */
static int64_t same_input_flips(const AsRun *a, const AsRun *b, AsTensorId id)
{
    const AsTensorDesc *d = &as_tensor_desc[id];
    if (d->quant == AS_QZ_NONE || d->pre == AS_T_COUNT)
        return 0;
    const AsHostTensor *qa = &a->t[id], *qb = &b->t[id], *pa = &a->t[d->pre], *pb = &b->t[d->pre];
    int64_t n = as_ht_numel(qa);
    if (!n || n != as_ht_numel(qb) || n != as_ht_numel(pa) || n != as_ht_numel(pb) || qa->ndim < 1)
        return 0;
    const int64_t last = qa->shape[qa->ndim - 1], bs = quant_block(d->quant);
    const float *va = qa->data, *vb = qb->data, *xa = pa->data, *xb = pb->data;
    int64_t flips = 0;
    for (int64_t b0 = 0; b0 < n; b0 += bs) {
        int64_t len = last - b0 % last < bs ? last - b0 % last : bs;
        if (memcmp(xa + b0, xb + b0, ROW(len)) || !memcmp(va + b0, vb + b0, ROW(len)))
            continue;
        for (int64_t i = b0; i < b0 + len; i++)
            flips += va[i] != vb[i];
        b0 += len - bs; /* a short block at the end of a row */
    }
    return flips;
}

/* The first tensor in forward order out of the rule; else the first with flips at identical inputs. */
static AsTensorId target(const AsRun *got, const AsRun *ref, const AsLayerDiff *diff, int64_t *flips)
{
    *flips = 0;
    for (int i = 0; i < AS_T_FIRST_STATE; i++)
        if (diff->t[i].verdict == AS_V_MISMATCH)
            return (AsTensorId)i;
    for (int i = 0; i < AS_T_FIRST_STATE; i++)
        if ((*flips = same_input_flips(got, ref, (AsTensorId)i)) > 0)
            return (AsTensorId)i;
    return AS_T_COUNT;
}

bool as_diagnosis_wanted(const AsRun *got, const AsRun *ref, const AsLayerDiff *diff)
{
    int64_t flips;
    return target(got, ref, diff, &flips) != AS_T_COUNT;
}

/* ---- re-running stages ---- */

typedef struct {
    const AsRefModel *rm;
    const AsLayerBefore *before;
    const AsRun *got;
    const AsLayerPlan *p;
    const AsCompareOptions *cmp;  /* strict: both sides present */
    AsRun base, work;             /* the recorded tensors; the same with a convention's stages re-run */
    float *ring;                  /* the ring a re-run window stage updates */
    uint8_t *cand;                /* the candidate mask a user applies (the recorded one) */
    AsStageProj proj;             /* the recorded inputs' projections, for the conventions that keep them */
} Rerun;

/* Whether layer p's forward runs stage s in this step (the others' tensors are absent or published by
 * another layer, and stay as recorded). */
static bool stage_here(const AsLayerPlan *p, AsStageId s)
{
    switch (s) {
    case AS_STG_LATENT: return p->stores_latents;
    case AS_STG_IK: return p->stores_keys;
    case AS_STG_KEYS: return p->stores_keys && p->keys_from.layer == p->layer;
    case AS_STG_IQ:
    case AS_STG_W:
    case AS_STG_SCORES:
    case AS_STG_CSEL: return p->indexes;
    case AS_STG_ROWS_B: return p->stores_latents && p->rows_b_from.layer == p->layer;
    default: return true;
    }
}

/* Rows [row0, row0 + n) of dst ([rows][width]) become src's n rows (NULL: zeros, the fresh rows a cache
 * has before they are written). */
static int write_rows(AsHostTensor *dst, int row0, int n, const AsHostTensor *src, int width)
{
    if (!dst->data || dst->shape[0] < row0 + n || (src && as_ht_numel(src) < (int64_t)n * width))
        return -1;
    float *d = (float *)dst->data + (size_t)row0 * width;
    if (src)
        memcpy(d, src->data, ROW((size_t)n * width));
    else
        memset(d, 0, ROW((size_t)n * width));
    return 0;
}

/* Stage s under the context's convention, on the work run. */
static int run_stage(Rerun *r, const AsStageCtx *c, AsStageId s)
{
    const AsConfig *cfg = &r->rm->m->cfg;
    AsRun *w = &r->work;
    switch (s) {
    case AS_STG_QR: return as_stage_qr(c, w);
    case AS_STG_Q: return as_stage_q(c, w);
    case AS_STG_KV: return as_stage_kv(c, w);
    case AS_STG_WINDOW:
        memcpy(r->ring, r->before->ring, ROW((size_t)cfg->window * cfg->head_dim));
        return as_stage_window(c, r->ring, w);
    case AS_STG_LATENT: return as_stage_latent(c, w);
    case AS_STG_IK: return as_stage_ik(c, w);
    case AS_STG_KEYS:
        return write_rows(&w->t[AS_T_KEYS], c->p->cache_row0, c->p->n_new,
                          as_stage_keys_written(c) ? &w->t[AS_T_IK] : NULL, cfg->index_head_dim);
    case AS_STG_IQ: return as_stage_iq(c, w);
    case AS_STG_W: return as_stage_w(c, w);
    case AS_STG_SCORES: return as_stage_scores(c, r->cand, w);
    case AS_STG_CSEL: return as_stage_csel(c, w);
    case AS_STG_ROWS_B:
        return write_rows(&w->t[AS_T_ROWS_B], c->p->cache_row0, c->p->n_new, &w->t[AS_T_LATENT_Q], cfg->head_dim);
    case AS_STG_IDX: return as_stage_idx(c, w);
    case AS_STG_O: return as_stage_o(c, w);
    case AS_STG_O_BACK: return as_stage_o_back(c, w);
    case AS_STG_OG: return as_stage_og(c, w);
    case AS_STG_OUT: return as_stage_out(c, w);
    default: return -1;
    }
}

/* The stages tensor t depends on, itself included. */
static uint32_t needed_for(AsStageId t)
{
    uint32_t need = AS_STG_BIT(t);
    for (int s = t; s >= 0; s--)
        if (need & AS_STG_BIT(s))
            need |= as_stage_deps((AsStageId)s);
    return need;
}

/* The stages to re-run when `bent` are bent, for tensor stage t. */
static uint32_t rerun_set(const AsLayerPlan *p, AsStageId t, uint32_t bent)
{
    const uint32_t need = needed_for(t);
    uint32_t run = 0;
    for (int s = 0; s <= (int)t; s++) {
        const uint32_t b = AS_STG_BIT(s);
        if ((need & b) && stage_here(p, (AsStageId)s) && ((bent & b) || (as_stage_deps((AsStageId)s) & run)))
            run |= b;
    }
    return run;
}

/* Puts the work run's tensors of stage s back as recorded. */
static int restore(Rerun *r, AsStageId s)
{
    for (int i = 0; i < AS_T_FIRST_STATE; i++) {
        if (as_stage_of((AsTensorId)i) != s)
            continue;
        const AsHostTensor *b = &r->base.t[i];
        if (!b->data) {
            as_run_clear(&r->work, (AsTensorId)i);
            continue;
        }
        void *d = as_run_shape(&r->work, (AsTensorId)i, b->ndim, b->shape[0], b->shape[1], b->shape[2]);
        if (!d)
            return -1;
        memcpy(d, b->data, (size_t)as_ht_numel(b) * (b->type == AS_VT_U8 ? 1 : 4));
    }
    return 0;
}

/* Whether the work run's tensor id reproduces the checked side's: within the rule, no flip at an
 * identical input. */
static bool reproduces(const Rerun *r, AsTensorId id, double *max_abs)
{
    AsTensorDiff td;
    as_compare_tensor(r->got, &r->work, id, r->cmp, &td);
    if (max_abs)
        *max_abs = td.max_abs;
    return td.verdict != AS_V_MISMATCH && !td.shape_differs && !td.absent_got && !td.absent_want &&
           same_input_flips(r->got, &r->work, id) == 0;
}

/* The checked side's tensors that stage s writes: -1 when one of them contradicts the work run. */
static bool consistent(const Rerun *r, AsStageId s)
{
    for (int i = 0; i < AS_T_FIRST_STATE; i++)
        if (as_stage_of((AsTensorId)i) == s && r->got->t[i].data && r->work.t[i].data &&
            !reproduces(r, (AsTensorId)i, NULL))
            return false;
    return true;
}

typedef enum { TRY_NO, TRY_YES, TRY_SKIPPED, TRY_OOM } TryResult;

/* Whether the checked side stores every tensor of stage s that the reference has. */
static bool stage_stored(const Rerun *r, AsStageId s)
{
    for (int i = 0; i < AS_T_FIRST_STATE; i++)
        if (as_stage_of((AsTensorId)i) == s && r->base.t[i].data && !r->got->t[i].data)
            return false;
    return true;
}

/* Whether it stores some tensor of stage s. */
static bool stage_seen(const Rerun *r, AsStageId s)
{
    for (int i = 0; i < AS_T_FIRST_STATE; i++)
        if (as_stage_of((AsTensorId)i) == s && r->got->t[i].data)
            return true;
    return false;
}

/* Whether stage s's inputs are what the checked side's stage s read: re-run (in `run`) or stored by it. */
static bool inputs_known(const Rerun *r, AsStageId s, uint32_t run)
{
    const uint32_t deps = as_stage_deps(s);
    for (int d = 0; d < AS_STG_COUNT; d++)
        if ((deps & AS_STG_BIT(d)) && !(run & AS_STG_BIT(d)) && !stage_stored(r, (AsStageId)d))
            return false;
    return true;
}

/* Convention conv re-run for tensor t (stages bent: bent). After the tensor, the stages it bends further
 * on whose inputs are known and whose outputs the checked side stores are re-run too: they must match
 * (two conventions that bend the tensor alike are told apart where they bend something else). */
static TryResult try_convention(Rerun *r, AsConvention conv, uint32_t bent, AsTensorId t, double *max_abs)
{
    const AsStageId ts = as_stage_of(t);
    uint32_t run = rerun_set(r->p, ts, bent);
    if (!(run & AS_STG_BIT(ts)))
        return TRY_SKIPPED; /* nothing it bends reaches the tensor */
    const AsStageCtx c = {r->rm, r->p, conv, &r->proj};
    TryResult res = TRY_YES;
    for (int s = 0; s < AS_STG_COUNT && res == TRY_YES; s++) {
        const uint32_t b = AS_STG_BIT(s);
        if (s > (int)ts && (bent & b) && stage_here(r->p, (AsStageId)s) && stage_seen(r, (AsStageId)s) &&
            inputs_known(r, (AsStageId)s, run))
            run |= b;
        if (!(run & b))
            continue;
        if (run_stage(r, &c, (AsStageId)s))
            res = TRY_OOM;
        else if (s == (int)ts && !reproduces(r, t, max_abs))
            res = TRY_NO;
        else if (s != (int)ts && !consistent(r, (AsStageId)s))
            res = TRY_NO;
    }
    for (int s = 0; s < AS_STG_COUNT; s++)
        if ((run & AS_STG_BIT(s)) && restore(r, (AsStageId)s))
            res = TRY_OOM;
    return res;
}

/* The work run's starting point: the reference's tensors, the checked side's where it stores them with
 * the reference's shape. */
static int build_base(Rerun *r, const AsRun *ref)
{
    if (as_run_copy(&r->base, ref))
        return -1;
    for (int i = 0; i < AS_T_FIRST_STATE; i++) {
        const AsHostTensor *g = &r->got->t[i];
        AsHostTensor *b = &r->base.t[i];
        if (g->data && b->data && g->type == b->type && g->ndim == b->ndim && as_ht_numel(g) == as_ht_numel(b) &&
            !memcmp(g->shape, b->shape, sizeof g->shape))
            memcpy(b->data, g->data, (size_t)as_ht_numel(b) * (b->type == AS_VT_U8 ? 1 : 4));
    }
    return as_run_copy(&r->work, &r->base);
}

static void rerun_free(Rerun *r)
{
    as_run_free(&r->base);
    as_run_free(&r->work);
    free(r->ring);
    free(r->cand);
    as_stage_proj_free(&r->proj);
}

int as_diagnose_layer(const AsRefModel *rm, const AsLayerBefore *before, const AsRun *got, const AsRun *ref,
                      const AsLayerDiff *diff, const AsCompareOptions *cmp, AsDiagnosis *out)
{
    memset(out, 0, sizeof *out);
    out->layer = ref->layer;
    out->step = ref->step;
    out->tensor = target(got, ref, diff, &out->same_input_flips);
    if (out->tensor == AS_T_COUNT)
        return 0;
    out->by_flips = diff->t[out->tensor].verdict != AS_V_MISMATCH;
    if (as_stage_of(out->tensor) == AS_STG_COUNT) {
        snprintf(out->note, sizeof out->note, "%s is an input of every stage the catalogue bends: nothing to re-run",
                 as_tensor_desc[out->tensor].name);
        return 0;
    }
    if (!before || !before->valid || before->step != ref->step) {
        snprintf(out->note, sizeof out->note, "the reference's state before layer %d of step %d was not kept",
                 ref->layer, ref->step);
        return 0;
    }
    const AsConfig *cfg = &rm->m->cfg;
    AsLayerPlan p;
    AsSharedProv after;
    AsError err = {0};
    if (as_plan_layer(cfg, ref->layer, ref->step, ref->start_pos, ref->s, &before->prov, AS_FAULT_NONE, &p, &after,
                      &err)) {
        snprintf(out->note, sizeof out->note, "no plan for the layer: %.200s", err.msg);
        return 0;
    }
    const AsStageId ts = as_stage_of(out->tensor);
    if (!stage_here(&p, ts)) {
        const AsProvenance f = ts == AS_STG_KEYS ? p.keys_from : ts == AS_STG_ROWS_B ? p.rows_b_from
                               : ts == AS_STG_CSEL ? p.sel_from : p.cand_from;
        snprintf(out->note, sizeof out->note, "%s is what layer %d published in step %d: it follows from that layer",
                 as_tensor_desc[out->tensor].name, f.layer, f.step);
        return 0;
    }
    AsCompareOptions strict = cmp ? *cmp : (AsCompareOptions){0};
    if (!cmp)
        as_compare_options_default(&strict);
    strict.got_partial = strict.want_partial = false;
    strict.require = 0;
    Rerun r = {rm, before, got, &p, &strict, {0}, {0}, NULL, NULL, {NULL, NULL, NULL}};
    as_run_init(&r.base);
    as_run_init(&r.work);
    int rc = -1;
    r.ring = malloc(ROW((size_t)cfg->window * cfg->head_dim));
    if (!r.ring || build_base(&r, ref) || as_stage_proj_make(rm, &p, &r.base, &r.proj))
        goto out;
    const AsHostTensor *cand = &r.base.t[AS_T_CAND];
    if (p.applies_cand) {
        if (!cand->data || as_ht_numel(cand) != (int64_t)p.s * p.width || !(r.cand = malloc((size_t)as_ht_numel(cand))))
            goto out;
        memcpy(r.cand, cand->data, (size_t)as_ht_numel(cand));
    }
    out->ran = true;
    double m;
    TryResult t = try_convention(&r, AS_CONV_NONE, AS_STG_BIT(as_stage_of(out->tensor)), out->tensor, &m);
    if (t == TRY_OOM)
        goto out;
    if (t == TRY_YES) {
        out->inherited = true;
        rc = 0;
        goto out;
    }
    for (int i = 1; i < AS_CONV_COUNT; i++) {
        if (!as_stage_conv_applies(rm, p.layer, (AsConvention)i))
            continue;
        t = try_convention(&r, (AsConvention)i, as_conv_desc[i].stages, out->tensor, &m);
        if (t == TRY_OOM)
            goto out;
        if (t == TRY_SKIPPED)
            continue;
        out->n_tried++;
        if (t == TRY_YES)
            out->match[out->n_match++] = (AsDiagMatch){(AsConvention)i, m};
    }
    rc = 0;
out:
    rerun_free(&r);
    if (rc)
        out->ran = false;
    return rc;
}

struct AsDiagnoser {
    const AsConfig *cfg;
    AsLayerBefore before[AS_MAX_LAYERS];
    int first_step[AS_MAX_LAYERS];  /* the step a layer was diagnosed at (-1: not yet) */
};

AsDiagnoser *as_diagnoser_new(const AsConfig *cfg)
{
    AsDiagnoser *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->cfg = cfg;
    for (int l = 0; l < AS_MAX_LAYERS; l++)
        g->first_step[l] = -1;
    return g;
}

void as_diagnoser_free(AsDiagnoser *g)
{
    if (!g)
        return;
    for (int l = 0; l < AS_MAX_LAYERS; l++)
        as_layer_before_free(&g->before[l]);
    free(g);
}

int as_diagnoser_before(AsDiagnoser *g, const AsRefState *st, int l, int step)
{
    return as_layer_before_capture(st, g->cfg, l, step, &g->before[l]);
}

const AsLayerBefore *as_diagnoser_layer_before(const AsDiagnoser *g, int l) { return &g->before[l]; }

int as_diagnoser_after(AsDiagnoser *g, const AsRefModel *rm, const AsRun *got, const AsRun *ref,
                       const AsLayerDiff *diff, const AsCompareOptions *cmp, AsDiagnosis *out)
{
    const int l = ref->layer;
    if (!as_diagnosis_wanted(got, ref, diff))
        return 0;
    if (g->first_step[l] >= 0 && g->first_step[l] != ref->step) {
        int64_t flips;
        memset(out, 0, sizeof *out);
        out->layer = l;
        out->step = ref->step;
        out->tensor = target(got, ref, diff, &flips);
        snprintf(out->note, sizeof out->note, "diagnosed at its first such run (step %d); the checked side's state "
                 "has diverged from the reference's since", g->first_step[l]);
        return 1;
    }
    g->first_step[l] = ref->step;
    return as_diagnose_layer(rm, &g->before[l], got, ref, diff, cmp, out) ? -1 : 1;
}

void as_diagnosis_text(const AsDiagnosis *d, char *buf, size_t n)
{
    if (!n)
        return;
    buf[0] = '\0';
    const char *name = d->tensor != AS_T_COUNT ? as_tensor_desc[d->tensor].name : "-";
    if (!d->ran) {
        snprintf(buf, n, "layer %d %s: %s", d->layer, name, d->note[0] ? d->note : "nothing to diagnose");
        return;
    }
    size_t used = 0;
    int k = snprintf(buf, n, "layer %d %s: ", d->layer, name);
    used = k > 0 ? (size_t)k : 0;
    if (used < n && d->by_flips)
        used += (size_t)snprintf(buf + used, n - used, "%lld elements differ at bit-identical quantiser inputs; ",
                                 (long long)d->same_input_flips);
    if (used < n && d->inherited) {
        snprintf(buf + used, n - used, "%s (inherited, no convention of the catalogue)", as_conv_desc[0].means);
        return;
    }
    if (used < n && !d->n_match) {
        snprintf(buf + used, n - used, "none of the catalogue reproduces it (%d conventions tried)", d->n_tried);
        return;
    }
    for (int i = 0; i < d->n_match && used < n; i++) {
        const AsConvDesc *c = &as_conv_desc[d->match[i].conv];
        used += (size_t)snprintf(buf + used, n - used, "%smatches the reference with %s: %s", i ? "; or " : "",
                                 c->with, c->means);
    }
    if (used < n && d->n_match > 1)
        snprintf(buf + used, n - used, " (indistinguishable on this data)");
}
