/* The precision rule of model/precision.h. */
#include "model/precision.h"

#include <stdlib.h>
#include <string.h>

#include "ref/numerics.h"

const char *as_precision_name(AsPrecision p)
{
    switch (p) {
    case AS_PREC_BF16: return "bf16";
    case AS_PREC_FP8: return "fp8";
    default: return "auto";
    }
}

int as_precision_parse(const char *s, bool allow_auto, AsPrecision *p)
{
    if (!s)
        return -1;
    if (!strcmp(s, "bf16"))
        *p = AS_PREC_BF16;
    else if (!strcmp(s, "fp8"))
        *p = AS_PREC_FP8;
    else if (allow_auto && !strcmp(s, "auto"))
        *p = AS_PREC_AUTO;
    else
        return -1;
    return 0;
}

bool as_wt_is_fp8(const AsWTensor *t) { return t && t->dtype == AS_DT_F8_E4M3 && t->scale; }

int as_fp8_projections(const AsModel *m, int l, const AsWTensor *out[5], const char *names[5])
{
    const AsLayerWeights *w = &m->layer[l];
    const AsWTensor *all[5] = {w->wq_a, w->wq_b, w->wkv, w->wo_b, w->i_wq_b};
    static const char *const all_names[5] = {"wq_a", "wq_b", "wkv", "wo_b", "indexer.wq_b"};
    int n = 0;
    for (int i = 0; i < 5; i++)
        if (all[i]) {
            out[n] = all[i];
            names[n++] = all_names[i];
        }
    return n;
}

/* The first fp8 projection that cannot run in fp8 (NULL: all can); *why says what is missing. */
static const AsWTensor *not_fp8(const AsModel *m, const char **why)
{
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const AsWTensor *p[5];
        const char *names[5];
        int n = as_fp8_projections(m, l, p, names);
        for (int i = 0; i < n; i++) {
            if (!as_wt_is_fp8(p[i])) {
                *why = "is not stored as F8_E4M3 with a block scale";
                return p[i];
            }
            if (as_wt_cols(p[i]) % 32) {
                *why = "has an input width that is not a multiple of 32 (act_quant's blocks)";
                return p[i];
            }
        }
    }
    return NULL;
}

int as_model_set_precision(AsModel *m, AsPrecision want, AsError *err)
{
    const char *why = NULL;
    const AsWTensor *bad = not_fp8(m, &why);
    if (want == AS_PREC_AUTO && m->cfg.dtype != AS_PREC_AUTO) {
        want = m->cfg.dtype;
        if (want == AS_PREC_FP8 && bad)
            return as_err(err, AS_EBADINPUT,
                          "the config's dtype is fp8 but %s %s: run it with --precision bf16", bad->name, why);
    }
    if (want == AS_PREC_AUTO)
        want = bad ? AS_PREC_BF16 : AS_PREC_FP8;
    if (want == AS_PREC_FP8 && bad)
        return as_err(err, AS_EBADINPUT, "--precision fp8: %s %s", bad->name, why);
    m->precision = want;
    return 0;
}

float *as_wt_norm_f32(const AsWTensor *t)
{
    float *v = as_wt_vec_f32(t);
    if (v)
        for (int64_t i = 0; i < as_wt_cols(t); i++)
            v[i] = as_bf16(v[i]);
    return v;
}

bool as_wt_norm_rounds(const AsWTensor *t)
{
    float *v = as_wt_vec_f32(t);
    bool rounds = false;
    if (v)
        for (int64_t i = 0; i < as_wt_cols(t) && !rounds; i++)
            rounds = as_bf16(v[i]) != v[i];
    free(v);
    return rounds;
}
