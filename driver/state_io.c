#include "driver/state_io.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROW(n) (sizeof(float) * (size_t)(n))

int as_state_capture(const AsRefStack *k, int step, int start_pos, AsRun *layers, AsDumpStateIn *si)
{
    const AsConfig *cfg = &k->m->cfg;
    int hd = cfg->head_dim, ihd = cfg->index_head_dim;
    memset(si, 0, sizeof *si);
    si->step = step;
    si->start_pos = start_pos;
    const AsRefShared *sh = &k->st.shared;
    si->compress_kv_from = sh->prov.compress_kv_from;
    si->index_k_from = sh->prov.index_k_from;
    si->sel_from = sh->prov.sel_from;
    si->cand_from = sh->prov.cand_from;
    snprintf(si->side, sizeof si->side, "ref");
    for (int l = 0; l < cfg->n_layers; l++) {
        const AsRefLayerState *ls = &k->st.layer[l];
        const AsLayerRole *role = &cfg->role[l];
        AsRun *r = &layers[l];
        as_run_free(r);
        r->layer = l;
        r->ratio = role->ratio;
        float *p = as_run_shape(r, AS_T_ST_RING, 2, cfg->window, hd, 0);
        if (!p)
            return -1;
        memcpy(p, ls->ring, ROW((size_t)cfg->window * hd));
        if (ls->part_kv) {
            float *a = as_run_shape(r, AS_T_ST_PART_KV, 2, role->ratio, hd, 0);
            float *b = as_run_shape(r, AS_T_ST_PART_SC, 2, role->ratio, hd, 0);
            if (!a || !b)
                return -1;
            memcpy(a, ls->part_kv, ROW((size_t)role->ratio * hd));
            memcpy(b, ls->part_sc, ROW((size_t)role->ratio * hd));
        }
        if (ls->ccache) {
            float *c = as_run_shape(r, AS_T_ST_CCACHE, 2, ls->ccache_rows, hd, 0);
            if (!c)
                return -1;
            memcpy(c, ls->ccache, ROW((size_t)ls->ccache_rows * hd));
        }
        if (ls->ikcache) {
            float *c = as_run_shape(r, AS_T_ST_IKCACHE, 2, ls->ikcache_rows, ihd, 0);
            if (!c)
                return -1;
            memcpy(c, ls->ikcache, ROW((size_t)ls->ikcache_rows * ihd));
        }
    }
    return 0;
}

/* rows x width floats of tensor id, at most cap rows; -1 when it does not fit. */
static int put_rows(const AsHostTensor *t, int64_t width, int cap, float *dst, int *rows)
{
    if (!t->data || t->ndim != 2 || t->shape[1] != width || t->shape[0] > cap)
        return -1;
    memcpy(dst, t->data, ROW(t->shape[0] * width));
    *rows = (int)t->shape[0];
    return 0;
}

int as_state_restore(AsRefStack *k, const AsRun *layers, const AsDumpStateIn *si, AsError *err)
{
    const AsConfig *cfg = &k->m->cfg;
    int hd = cfg->head_dim, ihd = cfg->index_head_dim;
    if (si->start_pos < 1 || si->start_pos >= cfg->max_seq)
        return as_err(err, AS_EBADINPUT, "state_in: position %d is outside the model's max_seq %d", si->start_pos,
                      cfg->max_seq);
    /* a layer that reuses a selection before any index source of the step would read the stale one */
    for (int l = 0; l < cfg->n_layers; l++) {
        const AsLayerRole *role = &cfg->role[l];
        if (role->ratio > 0 && !role->index_source && role->select_from < 0)
            return as_err(err, AS_EBADINPUT, "state_in: layer %d reuses a selection before any index source runs in "
                          "the step; the state_in group does not hold the shared selection", l);
    }
    as_ref_stack_reset(k);
    for (int l = 0; l < cfg->n_layers; l++) {
        AsRefLayerState *ls = &k->st.layer[l];
        const AsLayerRole *role = &cfg->role[l];
        const AsRun *r = &layers[l];
        const AsHostTensor *ring = &r->t[AS_T_ST_RING];
        int rows = 0;
        if (put_rows(ring, hd, cfg->window, ls->ring, &rows) || rows != cfg->window)
            return as_err(err, AS_EBADINPUT, "state_in: layer %d: state.ring must be [%d][%d]", l, cfg->window, hd);
        if (ls->part_kv) {
            int a = 0, b = 0;
            if (put_rows(&r->t[AS_T_ST_PART_KV], hd, role->ratio, ls->part_kv, &a) ||
                put_rows(&r->t[AS_T_ST_PART_SC], hd, role->ratio, ls->part_sc, &b) || a != role->ratio ||
                b != role->ratio)
                return as_err(err, AS_EBADINPUT, "state_in: layer %d: the partial group must be [%d][%d]", l,
                              role->ratio, hd);
        }
        if (ls->ccache && put_rows(&r->t[AS_T_ST_CCACHE], hd, ls->cap, ls->ccache, &ls->ccache_rows))
            return as_err(err, AS_EBADINPUT, "state_in: layer %d: state.ccache holds more rows than the cache's %d "
                          "(max_seq %d)", l, ls->cap, cfg->max_seq);
        if (ls->ikcache && put_rows(&r->t[AS_T_ST_IKCACHE], ihd, ls->cap, ls->ikcache, &ls->ikcache_rows))
            return as_err(err, AS_EBADINPUT, "state_in: layer %d: state.ikcache holds more rows than the cache's %d "
                          "(max_seq %d)", l, ls->cap, cfg->max_seq);
    }
    AsRefShared *sh = &k->st.shared;
    int kv = si->compress_kv_from.layer, ik = si->index_k_from.layer;
    if (kv >= 0) {
        if (kv >= cfg->n_layers || !k->st.layer[kv].ccache)
            return as_err(err, AS_EBADINPUT, "state_in: compress_kv_from names layer %d, which has no compressed cache",
                          kv);
        sh->prov.compress_kv_from = si->compress_kv_from;
    }
    if (ik >= 0) {
        if (ik >= cfg->n_layers || !k->st.layer[ik].ikcache)
            return as_err(err, AS_EBADINPUT, "state_in: index_k_from names layer %d, which has no index-key cache", ik);
        sh->prov.index_k_from = si->index_k_from;
    }
    /* the stack as if step si->step - 1 (a decode at start_pos - 1) had just finished */
    k->started = true;
    k->step = si->step - 1;
    k->start_pos = si->start_pos - 1;
    k->s = 1;
    k->next_layer = cfg->n_layers;
    return 0;
}
