#include "driver/explain.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref/candidates.h"
#include "ref/indexer.h"

static bool ok(AsVerdict v) { return v != AS_V_MISMATCH; }

/* The worst verdict among the tensors before `id` in forward order. */
static AsVerdict upstream(const AsLayerDiff *d, AsTensorId id)
{
    AsVerdict worst = AS_V_PASS;
    for (int i = 0; i < (int)id; i++) {
        AsVerdict v = d->t[i].verdict;
        if (v == AS_V_MISMATCH)
            return v;
        if (v == AS_V_NEAR_TIE || (v == AS_V_FLIPS && worst != AS_V_NEAR_TIE))
            worst = v;
    }
    return worst;
}

static void rejudge(AsLayerDiff *d)
{
    static const int rank[AS_V_COUNT] = {[AS_V_NOT_RUN] = 0, [AS_V_ABSENT] = 1, [AS_V_PASS] = 2,
                                         [AS_V_FLIPS] = 3,   [AS_V_NEAR_TIE] = 4, [AS_V_MISMATCH] = 5};
    d->verdict = AS_V_ABSENT;
    d->worst_tensor = AS_T_COUNT;
    for (int i = 0; i < AS_T_COUNT; i++)
        if (rank[d->t[i].verdict] > rank[d->verdict]) {
            d->verdict = d->t[i].verdict;
            d->worst_tensor = (AsTensorId)i;
        }
}

/* Marks tensor id explained (inherited) when got matches the recomputation held in `redo`. */
static bool settle(const AsRun *got, const AsRun *redo, AsTensorId id, const AsCompareOptions *opt, AsLayerDiff *d)
{
    AsTensorDiff again;
    as_compare_tensor(got, redo, id, opt, &again);
    if (again.verdict == AS_V_MISMATCH || again.shape_differs || again.absent_got || again.absent_want)
        return false;
    AsTensorDiff *t = &d->t[id];
    t->explained = true;
    t->explained_max_abs = again.max_abs;
    t->verdict = upstream(d, id) == AS_V_NEAR_TIE ? AS_V_NEAR_TIE : AS_V_FLIPS;
    return true;
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

/* Recomputes stage id from the checked side's own inputs into redo; false when it cannot. */
static bool recompute(const AsRefModel *rm, const AsRun *got, const AsExplainContext *ctx, AsTensorId id, AsRun *redo)
{
    const AsConfig *cfg = &rm->m->cfg;
    const AsLayerRole *role = &cfg->role[got->layer];
    int l = got->layer, s = got->s;
    const AsHostTensor *g = &got->t[id];
    if (!g->data)
        return false;
    void *y = as_run_shape(redo, id, g->ndim, g->shape[0], g->shape[1], g->shape[2]);
    if (!y)
        return false;
    switch (id) {
    case AS_T_ISCORE: {
        Rules r;
        const AsHostTensor *iq = &got->t[AS_T_IQ], *k = &got->t[AS_T_KEYS], *w = &got->t[AS_T_W];
        if (!rules(cfg, got, &r) || !iq->data || !k->data || !w->data || k->shape[0] != r.width)
            return false;
        /* a candidate user's mask is the one its source published (by the rule, not the run's claim) */
        const uint8_t *cand = NULL;
        if (role->uses_candidates) {
            int src = cfg->candidate_source;
            if (ctx && ctx->pub_cand[src] && ctx->pub_cand_n[src] == (int64_t)s * r.width)
                cand = ctx->pub_cand[src];
            else if (!ctx && got->t[AS_T_CAND].data && as_ht_numel(&got->t[AS_T_CAND]) == (int64_t)s * r.width)
                cand = got->t[AS_T_CAND].data; /* a dump replay: the mask the dump says it applied */
            else
                return false;
        }
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
            const AsHostTensor *sc = &got->t[AS_T_ISCORE];
            int *cl = compress_lens(got, r.width, role->ratio);
            bool fine = cl && sc->data &&
                        !as_select_candidate_blocks(sc->data, s, r.width, cl, cfg->candidate_block_size,
                                                    cfg->candidate_topk_blocks, y);
            free(cl);
            return fine;
        }
        /* a user applies the mask its source published in this step */
        int src = cfg->candidate_source;
        if (!ctx || src < 0 || !ctx->pub_cand[src] || ctx->pub_cand_n[src] != as_ht_numel(g) ||
            (ctx->diff && !ok(ctx->diff[src].t[AS_T_CAND].verdict)))
            return false;
        memcpy(y, ctx->pub_cand[src], (size_t)as_ht_numel(g));
        return true;
    }
    case AS_T_CSEL: {
        if (role->index_source) {
            Rules r;
            const AsHostTensor *sc = &got->t[AS_T_ISCORE];
            if (!rules(cfg, got, &r) || !sc->data || g->shape[1] != r.k)
                return false;
            int *cl = compress_lens(got, r.width, role->ratio);
            bool fine = cl && !as_index_topk(sc->data, s, r.width, r.k, cl, r.rows_a_len, y);
            free(cl);
            return fine;
        }
        /* a reusing layer attends the selection its source published in this step */
        int src = got->sel_from.layer;
        if (!ctx || src < 0 || !ctx->pub_sel[src] || ctx->pub_sel_n[src] != as_ht_numel(g) ||
            (ctx->diff && !ok(ctx->diff[src].t[AS_T_CSEL].verdict)))
            return false;
        memcpy(y, ctx->pub_sel[src], sizeof(int32_t) * (size_t)as_ht_numel(g));
        return true;
    }
    case AS_T_IDX: {
        const AsHostTensor *w = &got->t[AS_T_WIDX], *c = &got->t[AS_T_CSEL];
        int cols = got->start_pos == 0 ? (got->s < cfg->window ? got->s : cfg->window) : cfg->window;
        if (!w->data || got->cols != cols || got->cols + got->k != got->topk || (got->k && !c->data))
            return false;
        for (int t = 0; t < s; t++) {
            memcpy((int32_t *)y + (size_t)t * got->topk, (int32_t *)w->data + (size_t)t * got->cols,
                   sizeof(int32_t) * (size_t)got->cols);
            if (got->k)
                memcpy((int32_t *)y + (size_t)t * got->topk + got->cols, (int32_t *)c->data + (size_t)t * got->k,
                       sizeof(int32_t) * (size_t)got->k);
        }
        return true;
    }
    case AS_T_O: {
        const AsHostTensor *q = &got->t[AS_T_Q], *ra = &got->t[AS_T_ROWS_A], *rb = &got->t[AS_T_ROWS_B];
        return q->data && ra->data && got->t[AS_T_IDX].data &&
               !as_ref_attend(rm, l, q->data, ra->data, got->rows_a_len, rb->data, rb->data ? got->rows_b_len : 0,
                              got->t[AS_T_IDX].data, got->topk, s, y);
    }
    case AS_T_O_BACK:
        if (!got->t[AS_T_O].data)
            return false;
        as_ref_rotate_back(rm, l, got->t[AS_T_O].data, s, got->start_pos, y);
        return true;
    case AS_T_OG:
        return got->t[AS_T_O_BACK].data && !as_ref_project_out(rm, l, got->t[AS_T_O_BACK].data, s, y, NULL);
    case AS_T_OUT:
        if (!got->t[AS_T_OG].data)
            return false;
        as_ref_project_wo_b(rm, l, got->t[AS_T_OG].data, s, y);
        return true;
    default:
        return false;
    }
}

void as_explain_downstream(const AsRefModel *rm, const AsRun *got, const AsExplainContext *ctx,
                           const AsCompareOptions *opt, AsLayerDiff *diff)
{
    /* the stages that only consume earlier tensors, in forward order */
    static const AsTensorId stages[] = {AS_T_ISCORE, AS_T_CAND, AS_T_CSEL, AS_T_IDX,
                                        AS_T_O,      AS_T_O_BACK, AS_T_OG, AS_T_OUT};
    AsRun redo;
    as_run_init(&redo);
    redo.layer = got->layer;
    redo.s = got->s;
    for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++) {
        AsTensorId id = stages[i];
        if (diff->t[id].verdict != AS_V_MISMATCH)
            continue; /* passes on its own (or absent) */
        if (!ok(upstream(diff, id)) || !recompute(rm, got, ctx, id, &redo) || !settle(got, &redo, id, opt, diff))
            break; /* a real mismatch: what follows it cannot be told apart */
    }
    as_run_free(&redo);
    rejudge(diff);
}
