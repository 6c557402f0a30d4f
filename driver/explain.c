#include "driver/explain.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/precision.h"
#include "ref/cancel.h"
#include "ref/candidates.h"
#include "ref/fp8_linear.h"
#include "ref/indexer.h"
#include "ref/linear.h"
#include "ref/stage.h"

static bool ok(AsVerdict v) { return v != AS_V_MISMATCH; }

static const AsProvenance NONE = {-1, -1};

/* The worst verdict among the tensors before `id` in forward order (at least pass). */
static AsVerdict upstream(const AsLayerDiff *d, AsTensorId id)
{
    AsVerdict worst = AS_V_PASS;
    for (int i = 0; i < (int)id; i++) {
        AsVerdict v = d->t[i].verdict;
        if (v == AS_V_MISMATCH)
            return v;
        if (v > worst)
            worst = v;
    }
    return worst;
}

/* The layer and step of the first tensor before id inherited from another layer, or NONE. */
static AsProvenance upstream_from(const AsLayerDiff *d, AsTensorId id)
{
    for (int i = 0; i < (int)id; i++)
        if (d->t[i].verdict == AS_V_INHERITED && d->t[i].from.layer >= 0)
            return d->t[i].from;
    return NONE;
}

static void rejudge(AsLayerDiff *d)
{
    d->verdict = AS_V_ABSENT;
    d->worst_tensor = AS_T_COUNT;
    for (int i = 0; i < AS_T_COUNT; i++)
        if (d->t[i].verdict > d->verdict) {
            d->verdict = d->t[i].verdict;
            d->worst_tensor = (AsTensorId)i;
        }
}

/* The layer's index geometry by SPEC 3's rules (never the checked side's own claims: a faulty
 * engine's scalars would otherwise explain its own fault). */
typedef struct {
    int width, k, rows_a_len;
} Rules;

static bool rules(const AsConfig *cfg, const AsRun *got, Rules *r)
{
    const AsLayerRole *role = &cfg->role[got->layer];
    if (role->ratio <= 0)
        return false;
    r->width = (got->start_pos + got->s) / role->ratio;
    r->k = cfg->index_topk < r->width ? cfg->index_topk : r->width;
    r->rows_a_len = got->start_pos == 0 ? got->s : cfg->window;
    return got->width == r->width && got->rows_a_len == r->rows_a_len;
}

/* Visibility lengths of the layer's queries (SPEC 3 step 5c). */
static int *compress_lens(const AsRun *got, int width, int ratio)
{
    int *cl = malloc(sizeof(int) * (size_t)(got->s > 0 ? got->s : 1));
    for (int t = 0; cl && t < got->s; t++)
        cl[t] = got->start_pos == 0 ? (got->start_pos + t + 1) / ratio : width;
    return cl;
}

/* The stages that only consume earlier tensors, in forward order. */
static const AsTensorId stages[] = {AS_T_Q, AS_T_KV_PRE, AS_T_KV, AS_T_IQ_PRE, AS_T_IQ, AS_T_ISCORE, AS_T_CAND, AS_T_CSEL, AS_T_IDX, AS_T_O, AS_T_O_BACK, AS_T_OG, AS_T_OUT};

static bool is_stage(AsTensorId id)
{
    for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++)
        if (stages[i] == id)
            return true;
    return false;
}

/* The checked side as its stages see it: its own tensors, the stages it does not store recomputed from
 * them (in `filled`), the reference's values for anything else it does not store. */
typedef struct {
    const AsRefModel *rm;
    const AsRun *got, *want;
    const AsExplainContext *ctx;
    const AsLayerDiff *diff;
    AsRun filled;
    const AsHostTensor *eff[AS_T_COUNT];
    AsProvenance from[AS_T_COUNT];   /* the layer a filled stage inherited from (NONE: none) */
    bool busy[AS_T_COUNT];
} Side;

static bool recompute(Side *c, AsTensorId id, AsRun *redo, AsProvenance *from);

/* Tensor id as the checked side's next stage gets it (NULL: nobody has it). A cross-layer origin
 * it carries is noted in *from (when from is not set yet). */
static const AsHostTensor *input(Side *c, AsTensorId id, AsProvenance *from)
{
    if (c->got->t[id].data) {
        const AsTensorDiff *t = &c->diff->t[id];
        if (from && from->layer < 0 && t->verdict == AS_V_INHERITED && t->from.layer >= 0)
            *from = t->from;
        return &c->got->t[id];
    }
    if (!c->eff[id]) {
        c->from[id] = NONE;
        c->eff[id] = &c->want->t[id];
        if (is_stage(id) && c->want->t[id].data && !c->busy[id]) {
            c->busy[id] = true;
            AsProvenance f = NONE;
            if (recompute(c, id, &c->filled, &f)) {
                c->eff[id] = &c->filled.t[id];
                c->from[id] = f;
            }
            c->busy[id] = false;
        }
    }
    if (from && from->layer < 0 && c->from[id].layer >= 0)
        *from = c->from[id];
    return c->eff[id]->data ? c->eff[id] : NULL;
}

static bool same_bytes(const AsHostTensor *a, const void *b, size_t bytes)
{
    return a && a->data && (size_t)as_ht_numel(a) * (a->type == AS_VT_U8 ? 1 : 4) == bytes &&
           memcmp(a->data, b, bytes) == 0;
}

/* Whether the publisher's difference in tensor id (this step) was explained: not a mismatch; where it
 * does not store the tensor, neither what it was derived from (a selection's idx, both's scores). */
static bool publisher_ok(const Side *c, int src, AsTensorId id)
{
    if (!c->ctx->diff)
        return true;
    const AsLayerDiff *pd = &c->ctx->diff[src];
    if (!ok(pd->t[id].verdict))
        return false;
    if (pd->t[id].verdict != AS_V_ABSENT)
        return true;
    return ok(pd->t[AS_T_ISCORE].verdict) && (id != AS_T_CSEL || ok(pd->t[AS_T_IDX].verdict));
}

/* The candidate mask a user layer applied on the checked side: its publisher's (by the reference's
 * provenance), else (no context: a replay without it) the mask the run says it applied. */
static const uint8_t *applied_mask(Side *c, int64_t n, AsProvenance *from)
{
    const AsRun *want = c->want;
    int src = want->cand_from.layer >= 0 ? want->cand_from.layer : c->rm->m->cfg.candidate_source;
    if (c->ctx) {
        if (src < 0 || want->cand_from.step != want->step || !c->ctx->pub_cand[src] || c->ctx->pub_cand_n[src] != n ||
            !publisher_ok(c, src, AS_T_CAND))
            return NULL;
        if (!same_bytes(&want->t[AS_T_CAND], c->ctx->pub_cand[src], (size_t)n))
            *from = (AsProvenance){src, want->cand_from.step};
        return c->ctx->pub_cand[src];
    }
    const AsHostTensor *g = &c->got->t[AS_T_CAND];
    return g->data && as_ht_numel(g) == n ? g->data : NULL;
}

/* Tensor `out` of the reference's stage run on rows [t0, t0 + n) of the checked side's `in`, into the
 * same rows of y (a projection's output from its own input: an fp8 projection turns a flip of its input's
 * act_quant code into a whole row's difference). The rows run as a step of their own at their positions. */
static bool stage_on(Side *c, int (*stage)(const AsStageCtx *, AsRun *), AsTensorId in, AsTensorId out, int t0, int n,
                     void *y, AsProvenance *from)
{
    const AsHostTensor *x = input(c, in, from);
    const AsRun *got = c->got;
    if (!x || x->shape[0] != got->s)
        return false;
    AsLayerPlan p;
    memset(&p, 0, sizeof p);
    p.layer = got->layer, p.step = got->step, p.start_pos = got->start_pos + t0, p.s = n;
    p.ratio = c->rm->m->cfg.role[got->layer].ratio;
    p.prefill = got->start_pos == 0;
    const AsStageCtx ctx = {.rm = c->rm, .p = &p, .conv = as_ref_convention(c->rm)};
    AsRun tmp;
    as_run_init(&tmp);
    tmp.layer = got->layer, tmp.s = n;
    void *xin = as_run_shape(&tmp, in, x->ndim, n, x->shape[1], x->shape[2]);
    bool fine = xin != NULL;
    if (fine) {
        size_t xrow = (size_t)(as_ht_numel(x) / got->s);
        memcpy(xin, (const float *)x->data + (size_t)t0 * xrow, sizeof(float) * xrow * (size_t)n);
        const AsHostTensor *r = &tmp.t[out];
        int64_t yrow = as_ht_numel(&c->want->t[out]) / got->s;
        fine = !stage(&ctx, &tmp) && r->data && as_ht_numel(r) == yrow * n;
        if (fine)
            memcpy((float *)y + (size_t)t0 * (size_t)yrow, r->data, sizeof(float) * (size_t)(yrow * n));
    }
    as_run_free(&tmp);
    return fine;
}

/* The stages whose output row t (a token) depends on row t of their row inputs and on their shared
 * inputs whole. */
static int row_inputs(AsTensorId id, AsTensorId in[2], AsTensorId shared[2])
{
    shared[0] = shared[1] = AS_T_COUNT;
    switch (id) {
    case AS_T_Q:
    case AS_T_IQ_PRE:
    case AS_T_IQ: in[0] = AS_T_QR; return 1;
    case AS_T_KV_PRE:
    case AS_T_KV: in[0] = AS_T_X; return 1;
    case AS_T_O: in[0] = AS_T_Q, in[1] = AS_T_IDX, shared[0] = AS_T_ROWS_A, shared[1] = AS_T_ROWS_B; return 2;
    case AS_T_O_BACK: in[0] = AS_T_O; return 1;
    case AS_T_OG: in[0] = AS_T_O_BACK; return 1;
    case AS_T_OUT: in[0] = AS_T_OG; return 1;
    default: return 0;
    }
}

static size_t elem_bytes(const AsHostTensor *t) { return t->type == AS_VT_U8 ? 1 : 4; }

/* Whether rows t of a and b, tensors of s rows, hold the same bytes. */
static bool row_same(const AsHostTensor *a, const AsHostTensor *b, int s, int t)
{
    size_t row = (size_t)(as_ht_numel(a) / s) * elem_bytes(a);
    return memcmp((const char *)a->data + (size_t)t * row, (const char *)b->data + (size_t)t * row, row) == 0;
}

static bool same_layout(const AsHostTensor *a, const AsHostTensor *b, int s)
{
    return a->data && b->data && a->ndim >= 1 && a->shape[0] == s && b->shape[0] == s &&
           as_ht_numel(a) == as_ht_numel(b) && elem_bytes(a) == elem_bytes(b);
}

/* Whether row t of the checked side's tensor id is beyond the tensor's tolerance of the reference's. */
static bool row_beyond(const Side *c, AsTensorId id, int t)
{
    const AsHostTensor *g = &c->got->t[id], *w = &c->want->t[id];
    int64_t row = as_ht_numel(g) / c->got->s;
    const float *a = (const float *)g->data + t * row, *b = (const float *)w->data + t * row;
    double tol = c->diff->t[id].tol;
    for (int64_t i = 0; i < row; i++)
        if (!(fabs((double)a[i] - (double)b[i]) <= tol))
            return true;
    return false;
}

/* The rows of row-wise stage id to recompute (need[t] = 1), the others being the reference's: the rows
 * whose inputs differ from the reference's (the stage gives the reference's row for the same bytes) and,
 * where the checked side stores the tensor, that differ from the reference's beyond the tolerance (the
 * others pass as they are). Every row where a shared input differs or the shapes do not line up. Returns
 * the number of rows to recompute, -1 when an input is missing (the stage cannot be recomputed). */
static int rows_to_recompute(Side *c, AsTensorId id, uint8_t *need, AsProvenance *from)
{
    const int s = c->got->s;
    AsTensorId in[2], shared[2];
    int n_in = row_inputs(id, in, shared);
    bool all = !same_layout(&c->want->t[id], c->got->t[id].data ? &c->got->t[id] : &c->want->t[id], s);
    memset(need, 0, (size_t)s);
    for (int i = 0; i < n_in; i++) {
        const AsHostTensor *x = input(c, in[i], from), *w = &c->want->t[in[i]];
        if (!x)
            return -1;
        if (!same_layout(x, w, s))
            all = true;
        for (int t = 0; t < s && !all; t++)
            need[t] |= !row_same(x, w, s, t);
    }
    for (int i = 0; i < 2 && shared[i] != AS_T_COUNT; i++) {
        const AsHostTensor *x = input(c, shared[i], from), *w = &c->want->t[shared[i]];
        if (x && !same_bytes(w, x->data, (size_t)as_ht_numel(x) * elem_bytes(x)))
            all = true;
    }
    int n = 0;
    for (int t = 0; t < s; t++) {
        if (all)
            need[t] = 1;
        else if (need[t] && c->got->t[id].data)
            need[t] = row_beyond(c, id, t);
        n += need[t];
    }
    return n;
}

static bool stage_rows(Side *c, AsTensorId id, int t0, int n, void *y, AsProvenance *from);

/* Row-wise stage id into y: the rows rows_to_recompute names by the reference's stage on the checked
 * side's rows (runs closer than a few rows merged: a projection's call streams its whole weight), the
 * others copied from the reference. */
static bool recompute_rows(Side *c, AsTensorId id, void *y, AsProvenance *from)
{
    enum { GAP = 32 };
    const int s = c->got->s;
    if (s <= 0)
        return true; /* no rows */
    uint8_t *need = malloc((size_t)s);
    int n = need ? rows_to_recompute(c, id, need, from) : -1;
    bool fine = n >= 0;
    if (fine && n * 2 > s)
        memset(need, 1, (size_t)s);
    const AsHostTensor *w = &c->want->t[id];
    size_t row = (size_t)(as_ht_numel(w) / s) * elem_bytes(w);
    for (int t = 0; fine && t < s;) {
        if (!need[t]) {
            memcpy((char *)y + (size_t)t * row, (const char *)w->data + (size_t)t * row, row);
            t++;
            continue;
        }
        int last = t;
        for (int u = t + 1; u < s && u - last <= GAP; u++)
            if (need[u])
                last = u;
        fine = stage_rows(c, id, t, last + 1 - t, y, from);
        t = last + 1;
    }
    free(need);
    return fine;
}

/* Rows [t0, t0 + n) of row-wise stage id from the checked side's inputs, into the same rows of y. */
static bool stage_rows(Side *c, AsTensorId id, int t0, int n, void *y, AsProvenance *from)
{
    const AsRefModel *rm = c->rm;
    const AsRun *got = c->got;
    const AsConfig *cfg = &rm->m->cfg;
    const int l = got->layer, s = got->s;
    const size_t yrow = (size_t)(as_ht_numel(&c->want->t[id]) / s);
    float *yt = (float *)y + (size_t)t0 * yrow;
    switch (id) {
    case AS_T_Q: return stage_on(c, as_stage_q, AS_T_QR, AS_T_Q, t0, n, y, from);
    case AS_T_KV_PRE:
    case AS_T_KV: return stage_on(c, as_stage_kv, AS_T_X, id, t0, n, y, from);
    case AS_T_IQ_PRE:
    case AS_T_IQ: return cfg->role[l].index_source && stage_on(c, as_stage_iq, AS_T_QR, id, t0, n, y, from);
    case AS_T_O: {
        const AsHostTensor *q = input(c, AS_T_Q, from), *ra = input(c, AS_T_ROWS_A, from);
        const AsHostTensor *rb = got->rows_b_len ? input(c, AS_T_ROWS_B, from) : NULL;
        const AsHostTensor *ix = input(c, AS_T_IDX, from);
        if (!q || !ra || !ix || (got->rows_b_len && !rb) || as_ht_numel(ix) != (int64_t)s * got->topk ||
            as_ht_numel(q) != (int64_t)s * cfg->n_heads * cfg->head_dim ||
            as_ht_numel(ra) != (int64_t)got->rows_a_len * cfg->head_dim ||
            (rb && as_ht_numel(rb) != (int64_t)got->rows_b_len * cfg->head_dim))
            return false;
        return !as_ref_attend(rm, l, (const float *)q->data + (size_t)t0 * cfg->n_heads * cfg->head_dim, ra->data,
                              got->rows_a_len, rb ? rb->data : NULL, rb ? got->rows_b_len : 0,
                              (const int32_t *)ix->data + (size_t)t0 * got->topk, got->topk, n, yt);
    }
    case AS_T_O_BACK: {
        const AsHostTensor *o = input(c, AS_T_O, from);
        if (!o || (size_t)as_ht_numel(o) != yrow * (size_t)s)
            return false;
        as_ref_rotate_back(rm, l, (const float *)o->data + (size_t)t0 * yrow, n, got->start_pos + t0, yt);
        return true;
    }
    case AS_T_OG: {
        const AsHostTensor *ob = input(c, AS_T_O_BACK, from);
        size_t obrow = ob ? (size_t)(as_ht_numel(ob) / s) : 0;
        return ob && obrow == (size_t)cfg->n_heads * cfg->head_dim &&
               !as_ref_project_out(rm, l, (const float *)ob->data + (size_t)t0 * obrow, n, yt, NULL);
    }
    case AS_T_OUT: {
        const AsHostTensor *og = input(c, AS_T_OG, from);
        const AsWTensor *wo_b = rm->m->layer[l].wo_b;
        size_t ogrow = og ? (size_t)(as_ht_numel(og) / s) : 0;
        if (!og || (int64_t)ogrow != as_wt_cols(wo_b))
            return false;
        const float *x = (const float *)og->data + (size_t)t0 * ogrow;
        if (as_proj_fp8(rm->m, wo_b)) /* the fp8 projection in fp8 precision, as the forward runs it */
            as_fp8_linear(x, n, wo_b, yt);
        else
            as_linear(x, n, wo_b, yt, true);
        return true;
    }
    default: return false;
    }
}

static bool recompute(Side *c, AsTensorId id, AsRun *redo, AsProvenance *from)
{
    const AsRefModel *rm = c->rm;
    const AsRun *got = c->got, *want = c->want;
    const AsConfig *cfg = &rm->m->cfg;
    const AsLayerRole *role = &cfg->role[got->layer];
    int s = got->s;
    const AsHostTensor *g = got->t[id].data ? &got->t[id] : &want->t[id];
    if (!g->data)
        return false;
    void *y = as_run_shape(redo, id, g->ndim, g->shape[0], g->shape[1], g->shape[2]);
    if (!y)
        return false;
    AsTensorId in[2], shared[2];
    if (row_inputs(id, in, shared))
        return recompute_rows(c, id, y, from);
    switch (id) {
    case AS_T_ISCORE: {
        Rules r;
        const AsHostTensor *iq = input(c, AS_T_IQ, from), *k = input(c, AS_T_KEYS, from), *w = input(c, AS_T_W, from);
        if (!rules(cfg, got, &r) || !iq || !k || !w || k->shape[0] != r.width)
            return false;
        /* a candidate user's mask is the one its source published (by the rule, not the run's claim) */
        const uint8_t *cand = NULL;
        if (role->uses_candidates && !(cand = applied_mask(c, (int64_t)s * r.width, from)))
            return false;
        int *cl = compress_lens(got, r.width, role->ratio);
        bool fine = cl && !as_index_scores(iq->data, k->data, w->data, s, cfg->index_n_heads, cfg->index_head_dim,
                                           r.width, y);
        if (fine) {
            as_index_visibility(y, s, r.width, cl);
            for (int64_t i = 0; cand && i < (int64_t)s * r.width; i++)
                if (!cand[i])
                    ((float *)y)[i] = -INFINITY;
        }
        free(cl);
        return fine;
    }
    case AS_T_CAND: {
        Rules r;
        if (!rules(cfg, got, &r))
            return false;
        if (role->candidate_source) {
            const AsHostTensor *sc = input(c, AS_T_ISCORE, from);
            int *cl = compress_lens(got, r.width, role->ratio);
            bool fine = cl && sc &&
                        !as_select_candidate_blocks(sc->data, s, r.width, cl, cfg->candidate_block_size,
                                                    cfg->candidate_topk_blocks, y);
            free(cl);
            return fine;
        }
        /* a user applies the mask its source published in this step */
        if (!c->ctx)
            return false;
        const uint8_t *m = applied_mask(c, as_ht_numel(g), from);
        if (!m)
            return false;
        memcpy(y, m, (size_t)as_ht_numel(g));
        return true;
    }
    case AS_T_CSEL: {
        if (role->index_source) {
            Rules r;
            const AsHostTensor *sc = input(c, AS_T_ISCORE, from);
            if (!rules(cfg, got, &r) || !sc || g->shape[1] != r.k)
                return false;
            int *cl = compress_lens(got, r.width, role->ratio);
            bool fine = cl && !as_index_topk(sc->data, s, r.width, r.k, cl, r.rows_a_len, y);
            free(cl);
            return fine;
        }
        /* a reusing layer attends the selection its source published (the reference's provenance) */
        int src = want->sel_from.layer;
        int64_t n = as_ht_numel(g);
        if (!c->ctx || src < 0 || want->sel_from.step != want->step || !c->ctx->pub_sel[src] ||
            c->ctx->pub_sel_n[src] != n || !publisher_ok(c, src, AS_T_CSEL))
            return false;
        memcpy(y, c->ctx->pub_sel[src], sizeof(int32_t) * (size_t)n);
        if (!same_bytes(&want->t[AS_T_CSEL], c->ctx->pub_sel[src], sizeof(int32_t) * (size_t)n) && from->layer < 0)
            *from = want->sel_from;
        return true;
    }
    case AS_T_IDX: {
        const AsHostTensor *w = input(c, AS_T_WIDX, from);
        const AsHostTensor *cs = got->k ? input(c, AS_T_CSEL, from) : NULL;
        int cols = got->start_pos == 0 ? (got->s < cfg->window ? got->s : cfg->window) : cfg->window;
        if (!w || got->cols != cols || got->cols + got->k != got->topk || (got->k && !cs) ||
            as_ht_numel(w) != (int64_t)s * got->cols || (cs && as_ht_numel(cs) != (int64_t)s * got->k))
            return false;
        for (int t = 0; t < s; t++) {
            memcpy((int32_t *)y + (size_t)t * got->topk, (int32_t *)w->data + (size_t)t * got->cols,
                   sizeof(int32_t) * (size_t)got->cols);
            if (got->k)
                memcpy((int32_t *)y + (size_t)t * got->topk + got->cols, (int32_t *)cs->data + (size_t)t * got->k,
                       sizeof(int32_t) * (size_t)got->k);
        }
        return true;
    }
    default:
        return false;
    }
}

/* Marks tensor id explained (inherited) when got matches the recomputation held in `redo`. */
static bool settle(const AsRun *got, const AsRun *redo, AsTensorId id, AsProvenance from, const AsCompareOptions *opt,
                   AsLayerDiff *d)
{
    AsTensorDiff again;
    AsCompareOptions exact = *opt;
    exact.got_partial = exact.want_partial = false;
    as_compare_tensor(got, redo, id, &exact, &again);
    if (again.verdict == AS_V_MISMATCH || again.shape_differs || again.absent_got || again.absent_want)
        return false;
    AsTensorDiff *t = &d->t[id];
    t->explained = true;
    t->explained_max_abs = again.max_abs;
    t->cause = AS_CAUSE_INHERITED;
    if (from.layer < 0)
        from = upstream_from(d, id);
    if (from.layer >= 0) {
        t->verdict = AS_V_INHERITED;
        t->from = from;
    } else {
        AsVerdict u = upstream(d, id);
        t->verdict = u > AS_V_FLIPS ? u : AS_V_FLIPS;
        t->from = NONE;
    }
    return true;
}

void as_explain_downstream(const AsRefModel *rm, const AsRun *got, const AsRun *want, const AsExplainContext *ctx,
                           const AsCompareOptions *opt, AsLayerDiff *diff)
{
    AsCompareOptions def;
    if (!opt) {
        as_compare_options_default(&def);
        opt = &def;
    }
    Side *c = calloc(1, sizeof *c);
    if (!c)
        return; /* out of memory: the diff stays as compared */
    c->rm = rm, c->got = got, c->want = want, c->ctx = ctx, c->diff = diff;
    as_run_init(&c->filled);
    c->filled.layer = got->layer;
    c->filled.s = got->s;
    AsRun redo;
    as_run_init(&redo);
    redo.layer = got->layer;
    redo.s = got->s;
    bool changed = false;
    for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++) {
        AsTensorId id = stages[i];
        if (as_ref_cancelled())
            break; /* the layer is thrown away: its explanation would be too */
        if (diff->t[id].verdict != AS_V_MISMATCH)
            continue; /* passes on its own (or absent) */
        AsProvenance from = NONE;
        if (!ok(upstream(diff, id)) || !recompute(c, id, &redo, &from) || !settle(got, &redo, id, from, opt, diff))
            break; /* a real mismatch: what follows it cannot be told apart */
        changed = true;
    }
    as_run_free(&redo);
    as_run_free(&c->filled);
    free(c);
    if (changed)
        rejudge(diff);
}
