#include "ref/synthetic_state.h"

#include <math.h>
#include <string.h>

#include "ref/quant.h"

static float rnd(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return (float)(*s >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
}

static void fill(float *x, int64_t n, uint64_t *s, void (*quant)(float *, int64_t, int), int block)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = rnd(s);
    quant(x, n, block);
}

int as_ref_stack_fast_forward(AsRefStack *k, int context, uint64_t seed, AsError *err)
{
    const AsConfig *c = &k->m->cfg;
    if (context < 1 || context >= c->max_seq)
        return as_err(err, AS_EBADINPUT, "context %d outside 1..max_seq-1 (%d)", context, c->max_seq - 1);
    as_ref_stack_reset(k);
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 7;
    AsRefShared *sh = &k->st.shared;
    for (int l = 0; l < c->n_layers; l++) {
        const AsLayerRole *r = &c->role[l];
        AsRefLayerState *ls = &k->st.layer[l];
        fill(ls->ring, (int64_t)c->window * c->head_dim, &s, as_fp8_quant, AS_FP8_BLOCK);
        if (!r->kv_source)
            continue;
        int rows = context / r->ratio;
        fill(ls->ccache, (int64_t)rows * c->head_dim, &s, as_fp4_quant_e4m3, AS_FP4_E4M3_BLOCK);
        ls->ccache_rows = rows;
        if (ls->part_kv && context % r->ratio) {
            for (int i = 0; i < c->head_dim; i++)
                ls->part_kv[i] = rnd(&s), ls->part_sc[i] = rnd(&s);
        }
        sh->prov.compress_kv_from = (AsProvenance){l, 0};
        if (ls->ikcache) {
            fill(ls->ikcache, (int64_t)rows * c->index_head_dim, &s, as_fp4_quant_e8m0, AS_FP4_E8M0_BLOCK);
            ls->ikcache_rows = rows;
            sh->prov.index_k_from = (AsProvenance){l, 0};
        }
    }
    k->started = true;
    k->step = 0;
    k->start_pos = 0;
    k->s = context;   /* the next decode is at position context */
    k->next_layer = c->n_layers;
    return 0;
}
