/* One layer's plan: SPEC 3's shared-state rules, quirks included, written once. */
#include "ref/plan.h"

#include <string.h>

static const AsProvenance nobody = {-1, -1};

void as_shared_prov_init(AsSharedProv *p)
{
    memset(p, 0, sizeof *p);
    p->compress_kv_from = p->index_k_from = p->sel_from = p->cand_from = nobody;
}

int as_plan_cache_rows(const AsConfig *c, int l)
{
    const int r = c->role[l].ratio;
    return r > 0 ? c->max_seq / r : 0;
}

int as_plan_step(const AsConfig *c, int start_pos, int s, AsError *err)
{
    if (s < 1 || start_pos < 0 || (start_pos > 0 && s != 1))
        return as_err(err, AS_EBADINPUT,
                      "a step is a prefill (start_pos 0, s >= 1) or a decode of one token, not start_pos %d with s %d",
                      start_pos, s);
    if (start_pos > c->max_seq - s)
        return as_err(err, AS_EREFUSED, "position %lld beyond max_seq %d", (long long)start_pos + s - 1, c->max_seq);
    return 0;
}

int as_plan_begin_step(const AsConfig *c, int start_pos, int s, bool started, AsError *err)
{
    int rc = as_plan_step(c, start_pos, s, err);
    if (!rc && start_pos > 0 && !started)
        rc = as_err(err, AS_EBADINPUT, "decode before any prefill");
    return rc;
}

/* Step 5a: the latents a kv source's compressor completes in this call and their positions (a group's
 * first token): ratio 1 one a token; ratio r >= 2 the complete groups of a prefill (the s % r trailing
 * rows wait in the partial group), or in a decode one when (start_pos + 1) % r == 0. */
static void plan_latents(const AsLayerPlan *p, int *n, int *pos0, int *step)
{
    const int r = p->ratio;
    if (r == 1) {
        *n = p->s, *pos0 = p->start_pos, *step = 1;
        return;
    }
    *n = p->prefill ? p->s / r : (p->start_pos + 1) % r == 0;
    *pos0 = p->prefill ? 0 : p->start_pos + 1 - r;
    *step = r;
}

/* Step 5c: an index source that scores, against the shared keys (the aliasing quirk: whatever was
 * published last, read up to width rows), masked by the candidate source's mask after it. */
static int plan_indexer(const AsConfig *c, AsLayerPlan *p, AsSharedProv *sh, AsFault fault, AsError *err)
{
    const AsLayerRole *role = &c->role[p->layer];
    const AsProvenance here = {p->layer, p->step};
    p->indexes = true;
    p->stores_keys = role->key_owner && p->n_new > 0;
    if (p->stores_keys)
        sh->index_k_from = here;
    p->width = p->compress_len;
    if (sh->index_k_from.layer < 0)
        return as_err(err, AS_EREFUSED, "layer %d: index source scores with no published index keys", p->layer);
    p->keys_cap = as_plan_cache_rows(c, sh->index_k_from.layer);
    if (p->width > p->keys_cap)
        return as_err(err, AS_EREFUSED, "layer %d: index width %d exceeds the %d rows of the index keys published by "
                      "layer %d", p->layer, p->width, p->keys_cap, sh->index_k_from.layer);
    p->keys_from = sh->index_k_from;
    if (role->candidate_source) {
        p->makes_cand = true;
        sh->cand_from = here;
        sh->cand_s = p->s;
        sh->cand_width = p->width;
        p->cand_from = here;
    } else if (role->uses_candidates && fault != AS_FAULT_CAND_MASK_OFF) {
        if (sh->cand_from.layer < 0 || sh->cand_s != p->s || sh->cand_width != p->width)
            return as_err(err, AS_EREFUSED, "layer %d: candidate mask is %dx%d (layer %d, step %d) but the scores are "
                          "%dx%d", p->layer, sh->cand_s, sh->cand_width, sh->cand_from.layer, sh->cand_from.step,
                          p->s, p->width);
        p->applies_cand = true;
        p->cand_from = sh->cand_from;
    }
    p->k = c->index_topk < p->width ? c->index_topk : p->width;
    p->sel_offset = fault == AS_FAULT_NO_OFFSET ? 0 : p->rows_a_len;
    sh->sel_from = here;
    sh->sel_s = p->s;
    sh->sel_k = p->k;
    p->sel_from = here;
    return 0;
}

/* Step 5 of a ratio > 0 layer: compressor, publication, indexer / empty selection / reuse, cache write,
 * rows_b. The kv source's cache is published before anything reads it (5b, even when no group
 * completed), so a kv source always attends its own. */
static int plan_compressed(const AsConfig *c, AsLayerPlan *p, AsSharedProv *sh, AsFault fault, AsError *err)
{
    const AsLayerRole *role = &c->role[p->layer];
    const AsProvenance here = {p->layer, p->step};
    p->compress_len = (p->start_pos + p->s) / p->ratio;
    p->cache_row0 = p->start_pos / p->ratio;
    plan_latents(p, &p->n_new, &p->latent_pos0, &p->latent_pos_step);
    if (role->kv_source) {
        p->compresses = true;
        sh->compress_kv_from = here;
    } else {
        p->n_new = 0;
    }
    if (role->index_source && p->compress_len > 0) {
        int rc = plan_indexer(c, p, sh, fault, err);
        if (rc)
            return rc;
    } else if (role->index_source) {
        /* the indexer does not run; the selection published is empty ([s][0]), so the layers reusing it
         * attend no compressed position (model.py's _compress_topk_idxs) */
        p->publishes_empty = true;
        sh->sel_from = p->sel_from = here;
        sh->sel_s = p->s;
        sh->sel_k = 0;
    } else if (sh->sel_from.layer >= 0) {
        if (sh->sel_s != p->s)
            return as_err(err, AS_EREFUSED, "layer %d: the shared selection (layer %d, step %d) has %d rows, the step %d",
                          p->layer, sh->sel_from.layer, sh->sel_from.step, sh->sel_s, p->s);
        p->reuses = true;
        p->k = sh->sel_k;
        p->sel_from = sh->sel_from;
    }
    p->stores_latents = p->compresses && p->n_new > 0;
    if (sh->compress_kv_from.layer < 0)
        return as_err(err, AS_EREFUSED, "layer %d (ratio %d): no compressed cache has been published: it must not attend",
                      p->layer, p->ratio);
    p->rows_b_cap = as_plan_cache_rows(c, sh->compress_kv_from.layer);
    if (p->compress_len > p->rows_b_cap)
        return as_err(err, AS_EREFUSED, "layer %d: compress_len %d exceeds the %d rows of layer %d's cache", p->layer,
                      p->compress_len, p->rows_b_cap, sh->compress_kv_from.layer);
    p->rows_b_len = p->compress_len;
    p->rows_b_from = sh->compress_kv_from;
    return 0;
}

int as_plan_layer(const AsConfig *c, int l, int step, int start_pos, int s, const AsSharedProv *in, AsFault fault,
                  AsLayerPlan *p, AsSharedProv *out, AsError *err)
{
    if (l < 0 || l >= c->n_layers)
        return as_err(err, AS_EBADINPUT, "layer %d out of range (0..%d)", l, c->n_layers - 1);
    if (as_plan_step(c, start_pos, s, err))
        return as_err_wrap(err, "layer %d", l);
    AsLayerPlan q;
    memset(&q, 0, sizeof q);
    q.layer = l;
    q.step = step;
    q.start_pos = start_pos;
    q.s = s;
    q.ratio = c->role[l].ratio;
    q.prefill = start_pos == 0;
    q.rows_b_from = q.keys_from = q.sel_from = q.cand_from = nobody;
    q.rows_a_len = q.prefill ? s : c->window;
    q.cols = q.prefill && s < c->window ? s : c->window;
    AsSharedProv sh = *in;
    if (q.ratio > 0) {
        int rc = plan_compressed(c, &q, &sh, fault, err);
        if (rc)
            return rc;
    }
    q.topk = q.cols + q.k;
    *p = q;
    *out = sh;
    return 0;
}

void as_plan_to_run(const AsLayerPlan *p, AsRun *run)
{
    run->layer = p->layer;
    run->step = p->step;
    run->start_pos = p->start_pos;
    run->s = p->s;
    run->ratio = p->ratio;
    run->rows_a_len = p->rows_a_len;
    run->rows_b_len = p->rows_b_len;
    run->cols = p->cols;
    run->k = p->k;
    run->topk = p->topk;
    run->width = p->width;
    run->compress_len = p->compress_len;
    run->n_new = p->n_new;
    run->indexer_ran = p->indexes;
    run->rows_b_from = p->rows_b_from;
    run->keys_from = p->keys_from;
    run->sel_from = p->sel_from;
    run->cand_from = p->cand_from;
}
