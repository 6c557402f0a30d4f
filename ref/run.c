#include "ref/run.h"

#include <stdlib.h>
#include <string.h>

#define N AS_T_COUNT
const AsTensorDesc as_tensor_desc[AS_T_COUNT] = {
    [AS_T_X] = {"x", AS_VT_BF16, 2, {"token", "channel"}, AS_QZ_NONE, N, false, "layer input, rmsnorm(h, attn_norm)"},
    [AS_T_QR] = {"qr", AS_VT_BF16, 2, {"token", "channel"}, AS_QZ_NONE, N, false, "rmsnorm(x wq_a, q_norm)"},
    [AS_T_Q] = {"q", AS_VT_BF16, 3, {"token", "head", "channel"}, AS_QZ_NONE, N, false, "queries after RoPE"},
    [AS_T_KV_PRE] = {"kv_pre", AS_VT_BF16, 2, {"token", "channel"}, AS_QZ_NONE, N, false, "rope(rmsnorm(x wkv)) before fp8"},
    [AS_T_KV] = {"kv", AS_VT_BF16, 2, {"token", "channel"}, AS_QZ_FP8, AS_T_KV_PRE, false, "window KV rows after fp8"},
    [AS_T_ROWS_A] = {"rows_a", AS_VT_BF16, 2, {"row", "channel"}, AS_QZ_FP8, N, false, "window rows attended"},
    [AS_T_WIDX] = {"widx", AS_VT_I32, 2, {"token", "col"}, AS_QZ_NONE, N, true, "window selection"},
    [AS_T_LATENT] = {"latent", AS_VT_BF16, 2, {"group", "channel"}, AS_QZ_NONE, N, false, "compressor latents, pre-RoPE"},
    [AS_T_LATENT_PRE] = {"latent_pre", AS_VT_BF16, 2, {"group", "channel"}, AS_QZ_NONE, N, false, "rotated latents before fp4-e4m3"},
    [AS_T_LATENT_Q] = {"latent_q", AS_VT_BF16, 2, {"group", "channel"}, AS_QZ_FP4_E4M3, AS_T_LATENT_PRE, false, "latents written to the compressed cache"},
    [AS_T_IK_PRE] = {"ik_pre", AS_VT_BF16, 2, {"group", "channel"}, AS_QZ_NONE, N, false, "index keys before fp4-e8m0"},
    [AS_T_IK] = {"ik", AS_VT_BF16, 2, {"group", "channel"}, AS_QZ_FP4_E8M0, AS_T_IK_PRE, false, "index keys written"},
    [AS_T_IQ_PRE] = {"iq_pre", AS_VT_BF16, 3, {"token", "head", "channel"}, AS_QZ_NONE, N, false, "index queries before fp4-e8m0"},
    [AS_T_IQ] = {"iq", AS_VT_BF16, 3, {"token", "head", "channel"}, AS_QZ_FP4_E8M0, AS_T_IQ_PRE, false, "index queries"},
    [AS_T_W] = {"w", AS_VT_BF16, 2, {"token", "head"}, AS_QZ_NONE, N, false, "indexer head weights"},
    [AS_T_KEYS] = {"keys", AS_VT_BF16, 2, {"pos", "channel"}, AS_QZ_FP4_E8M0, N, false, "index keys scored against"},
    [AS_T_ISCORE] = {"iscore", AS_VT_BF16, 2, {"token", "pos"}, AS_QZ_NONE, N, false, "index scores after the masks"},
    [AS_T_CAND] = {"cand", AS_VT_U8, 2, {"token", "pos"}, AS_QZ_NONE, N, true, "candidate mask"},
    [AS_T_CSEL] = {"csel", AS_VT_I32, 2, {"token", "col"}, AS_QZ_NONE, N, true, "compressed selection (offset added)"},
    [AS_T_ROWS_B] = {"rows_b", AS_VT_BF16, 2, {"row", "channel"}, AS_QZ_FP4_E4M3, N, false, "compressed rows attended"},
    [AS_T_IDX] = {"idx", AS_VT_I32, 2, {"token", "col"}, AS_QZ_NONE, N, true, "attended rows: window then compressed"},
    [AS_T_O] = {"o", AS_VT_BF16, 3, {"token", "head", "channel"}, AS_QZ_NONE, N, false, "attention output before the inverse rotation"},
    [AS_T_O_BACK] = {"o_back", AS_VT_BF16, 3, {"token", "head", "channel"}, AS_QZ_NONE, N, false, "attention output rotated back"},
    [AS_T_OG] = {"og", AS_VT_BF16, 3, {"token", "group", "channel"}, AS_QZ_NONE, N, false, "grouped wo_a output"},
    [AS_T_OUT] = {"out", AS_VT_BF16, 2, {"token", "channel"}, AS_QZ_NONE, N, false, "layer output (wo_b)"},
    [AS_T_ST_RING] = {"state.ring", AS_VT_BF16, 2, {"slot", "channel"}, AS_QZ_FP8, N, false, "window ring after the step"},
    [AS_T_ST_PART_KV] = {"state.part_kv", AS_VT_F32, 2, {"row", "channel"}, AS_QZ_NONE, N, false, "partial group kv (ratio 2)"},
    [AS_T_ST_PART_SC] = {"state.part_score", AS_VT_F32, 2, {"row", "channel"}, AS_QZ_NONE, N, false, "partial group score (ratio 2)"},
    [AS_T_ST_CCACHE] = {"state.ccache", AS_VT_BF16, 2, {"row", "channel"}, AS_QZ_FP4_E4M3, N, false, "compressed cache (rows filled)"},
    [AS_T_ST_IKCACHE] = {"state.ikcache", AS_VT_BF16, 2, {"row", "channel"}, AS_QZ_FP4_E8M0, N, false, "index-key cache (rows filled)"},
};
#undef N

AsTensorId as_tensor_by_name(const char *name)
{
    for (int i = 0; i < AS_T_COUNT; i++)
        if (strcmp(as_tensor_desc[i].name, name) == 0)
            return (AsTensorId)i;
    return AS_T_COUNT;
}

void as_run_init(AsRun *r)
{
    memset(r, 0, sizeof *r);
    r->rows_b_from = r->keys_from = r->sel_from = r->cand_from = (AsProvenance){-1, -1};
    for (int i = 0; i < AS_T_COUNT; i++)
        r->t[i].type = as_tensor_desc[i].type;
}

void as_run_free(AsRun *r)
{
    for (int i = 0; i < AS_T_COUNT; i++)
        free(r->t[i].data);
    as_run_init(r);
}

static size_t elem_size(AsValType t) { return t == AS_VT_U8 ? 1 : 4; }

void *as_run_shape(AsRun *r, AsTensorId id, int ndim, int64_t d0, int64_t d1, int64_t d2)
{
    AsHostTensor *t = &r->t[id];
    int64_t dims[3] = {d0, d1, d2};
    size_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= (size_t)(dims[i] > 0 ? dims[i] : 0);
    size_t bytes = n * elem_size(as_tensor_desc[id].type);
    if (bytes == 0)
        bytes = 1; /* an empty tensor is present with zero elements */
    void *keep = t->data;
    size_t cap = t->cap;
    if (cap < bytes || !keep) {
        free(keep);
        keep = malloc(bytes);
        if (!keep) {
            t->data = NULL;
            t->cap = 0;
            return NULL;
        }
        cap = bytes;
    }
    t->type = as_tensor_desc[id].type;
    t->ndim = ndim;
    for (int i = 0; i < 3; i++)
        t->shape[i] = i < ndim ? dims[i] : 0;
    t->data = keep;
    t->cap = cap;
    return keep;
}

void as_run_clear(AsRun *r, AsTensorId id)
{
    AsHostTensor *t = &r->t[id];
    free(t->data);
    t->data = NULL;
    t->cap = 0;
    t->ndim = 0;
}

int as_run_copy(AsRun *dst, const AsRun *src)
{
    as_run_free(dst);
    AsHostTensor keep[AS_T_COUNT];
    memcpy(keep, dst->t, sizeof keep);
    *dst = *src;
    memcpy(dst->t, keep, sizeof keep);
    for (int i = 0; i < AS_T_COUNT; i++) {
        const AsHostTensor *s = &src->t[i];
        if (!s->data)
            continue;
        void *d = as_run_shape(dst, (AsTensorId)i, s->ndim, s->shape[0], s->shape[1], s->shape[2]);
        if (!d)
            return -1;
        memcpy(d, s->data, (size_t)as_ht_numel(s) * elem_size(s->type));
    }
    return 0;
}
