#include "ref/stack.h"

#include <stdlib.h>
#include <string.h>

#include "ref/numerics.h"
#include "ref/rmsnorm.h"

int as_ref_stack_init(AsRefStack *k, const AsModel *m, AsError *err)
{
    memset(k, 0, sizeof *k);
    k->m = m;
    int rc = as_ref_model_init(&k->rm, m, err);
    if (rc)
        return rc;
    if ((rc = as_ref_state_init(&k->st, &m->cfg, err))) {
        as_ref_model_free(&k->rm);
        return rc;
    }
    k->next_layer = m->cfg.n_layers;
    return 0;
}

void as_ref_stack_free(AsRefStack *k)
{
    if (!k->m)
        return;
    as_ref_state_free(&k->st, &k->m->cfg);
    as_ref_model_free(&k->rm);
    free(k->h);
    free(k->x);
    memset(k, 0, sizeof *k);
}

void as_ref_stack_reset(AsRefStack *k)
{
    as_ref_state_reset(&k->st, &k->m->cfg);
    k->started = false;
    k->step = 0;
    k->s = 0;
    k->start_pos = 0;
    k->next_layer = k->m->cfg.n_layers;
}

int as_ref_begin_step(AsRefStack *k, const float *h0, int start_pos, int s, AsError *err)
{
    const AsConfig *cfg = &k->m->cfg;
    int rc = as_plan_begin_step(cfg, start_pos, s, k->started, err);
    if (rc)
        return rc;
    if (s > k->h_cap) {
        float *h = realloc(k->h, sizeof(float) * (size_t)s * cfg->dim);
        if (h)
            k->h = h;
        float *x = realloc(k->x, sizeof(float) * (size_t)s * cfg->dim);
        if (x)
            k->x = x;
        if (!h || !x)
            return as_err(err, AS_ERUNTIME, "reference: out of memory for %d tokens", s);
        k->h_cap = s;
    }
    if (start_pos == 0) {
        as_ref_stack_reset(k);
        k->started = true;
    } else {
        k->step++;
    }
    memcpy(k->h, h0, sizeof(float) * (size_t)s * cfg->dim);
    k->s = s;
    k->start_pos = start_pos;
    k->next_layer = 0;
    return 0;
}

int as_ref_next_layer(AsRefStack *k, const float *x_override, AsRun *run, AsError *err)
{
    const AsConfig *cfg = &k->m->cfg;
    int l = k->next_layer;
    if (l >= cfg->n_layers)
        return as_err(err, AS_EBADINPUT, "the step is finished: no next layer");
    int64_t n = (int64_t)k->s * cfg->dim;
    const float *x = x_override;
    if (!x) {
        as_rmsnorm(k->h, k->rm.attn_norm[l], k->x, k->s, cfg->dim, cfg->norm_eps);
        x = k->x;
    }
    int rc = as_ref_layer_forward(&k->rm, &k->st, l, k->step, x, k->start_pos, k->s, run, err);
    if (rc)
        return rc;
    const float *out = run->t[AS_T_OUT].data;
    for (int64_t i = 0; i < n; i++)
        k->h[i] = as_bf16(k->h[i] + out[i]);
    k->next_layer = l + 1;
    return 0;
}

static int run_all(AsRefStack *k, AsError *err)
{
    AsRun run;
    as_run_init(&run);
    int rc = 0;
    while (!rc && k->next_layer < k->m->cfg.n_layers)
        rc = as_ref_next_layer(k, NULL, &run, err);
    as_run_free(&run);
    return rc;
}

int as_ref_prefill(AsRefStack *k, const float *h0, int s, AsError *err)
{
    int rc = as_ref_begin_step(k, h0, 0, s, err);
    return rc ? rc : run_all(k, err);
}

int as_ref_decode(AsRefStack *k, const float *h0, AsError *err)
{
    int pos = k->start_pos + k->s;
    int rc = as_ref_begin_step(k, h0, pos, 1, err);
    return rc ? rc : run_all(k, err);
}
