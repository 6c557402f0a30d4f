/* The dump schema as checks: tensor shapes from the geometry and the layer attributes, and the
 * bounds every attribute must meet before any size derived from it is trusted. */
#include "dumps/schema.h"

#include <stdio.h>
#include <string.h>

const char *const as_dump_layer_attr_name[AS_LA_COUNT] = {
    [AS_LA_RATIO] = "ratio", [AS_LA_ROWS_A_LEN] = "rows_a_len", [AS_LA_ROWS_B_LEN] = "rows_b_len",
    [AS_LA_COLS] = "cols",   [AS_LA_K] = "k",                   [AS_LA_TOPK] = "topk",
    [AS_LA_WIDTH] = "width", [AS_LA_COMPRESS_LEN] = "compress_len", [AS_LA_N_NEW] = "n_new",
    [AS_LA_INDEXER_RAN] = "indexer_ran",
};

int *as_dump_layer_attr(AsRun *r, AsLayerAttr a)
{
    switch (a) {
    case AS_LA_RATIO: return &r->ratio;
    case AS_LA_ROWS_A_LEN: return &r->rows_a_len;
    case AS_LA_ROWS_B_LEN: return &r->rows_b_len;
    case AS_LA_COLS: return &r->cols;
    case AS_LA_K: return &r->k;
    case AS_LA_TOPK: return &r->topk;
    case AS_LA_WIDTH: return &r->width;
    case AS_LA_COMPRESS_LEN: return &r->compress_len;
    case AS_LA_N_NEW: return &r->n_new;
    default: return NULL; /* indexer_ran is a bool: see as_dump_layer_attr_get */
    }
}

int as_dump_layer_attr_get(const AsRun *r, AsLayerAttr a)
{
    if (a == AS_LA_INDEXER_RAN)
        return r->indexer_ran ? 1 : 0;
    return *as_dump_layer_attr((AsRun *)r, a);
}

const char *const as_dump_prov_name[AS_DUMP_N_PROV] = {"rows_b_from", "keys_from", "sel_from", "cand_from"};

AsProvenance *as_dump_prov(AsRun *r, int i)
{
    AsProvenance *p[AS_DUMP_N_PROV] = {&r->rows_b_from, &r->keys_from, &r->sel_from, &r->cand_from};
    return p[i];
}

static int imax(int a, int b) { return a > b ? a : b; }
static int imin(int a, int b) { return a < b ? a : b; }

/* k of the selection index source p publishes in a step ending at end_pos (0: empty). */
static int published_k(const AsConfig *cfg, int p, int end_pos)
{
    int ratio = cfg->role[p].ratio;
    int cl = ratio > 0 ? end_pos / ratio : 0;
    return cl > 0 ? imin(cfg->index_topk, cl) : 0;
}

uint64_t as_dump_state_tensors(const AsConfig *cfg, int l)
{
    const AsLayerRole *role = &cfg->role[l];
    uint64_t m = (uint64_t)1 << AS_T_ST_RING;
    if (role->kv_source && role->ratio >= 2)
        m |= (uint64_t)1 << AS_T_ST_PART_KV | (uint64_t)1 << AS_T_ST_PART_SC;
    if (role->kv_source)
        m |= (uint64_t)1 << AS_T_ST_CCACHE;
    if (role->key_owner)
        m |= (uint64_t)1 << AS_T_ST_IKCACHE;
    return m;
}

void as_dump_rule_attrs(const AsConfig *cfg, int l, int start_pos, int s, AsRun *r)
{
    const AsLayerRole *role = &cfg->role[l];
    int end = start_pos + s, ratio = role->ratio;
    bool prefill = start_pos == 0;
    r->ratio = ratio;
    r->rows_a_len = prefill ? s : cfg->window;
    r->cols = prefill ? imin(s, cfg->window) : cfg->window;
    r->compress_len = ratio > 0 ? end / ratio : 0;
    r->rows_b_len = r->compress_len;
    r->indexer_ran = role->index_source && r->compress_len > 0;
    r->width = r->indexer_ran ? r->compress_len : 0;
    r->k = 0;
    if (ratio > 0 && role->index_source)
        r->k = published_k(cfg, l, end);
    else if (ratio > 0 && role->select_from >= 0)
        r->k = published_k(cfg, role->select_from, end);
    else if (ratio > 0 && cfg->n_index_sources > 0) /* before every index source: the last one's, a step ago */
        r->k = published_k(cfg, cfg->index_sources[cfg->n_index_sources - 1], start_pos);
    r->topk = r->cols + r->k;
    r->n_new = 0;
    if (role->kv_source && ratio > 0)
        r->n_new = prefill ? s / ratio : ((start_pos + 1) % ratio == 0 ? 1 : 0);
    r->rows_b_from = r->keys_from = r->sel_from = r->cand_from = (AsProvenance){-1, -1};
}

int as_dump_check_attrs(const AsConfig *cfg, int layer, int tokens, const AsRun *r, char *why, size_t n)
{
    if (layer < 0 || layer >= cfg->n_layers) {
        snprintf(why, n, "layer %d is outside the model's %d layers", layer, cfg->n_layers);
        return -1;
    }
    if (r->ratio != cfg->compress_ratios[layer]) {
        snprintf(why, n, "ratio %d, the config says %d for layer %d", r->ratio, cfg->compress_ratios[layer], layer);
        return -1;
    }
    const struct {
        AsLayerAttr a;
        int hi;
    } bound[] = {
        {AS_LA_ROWS_A_LEN, imax(tokens, cfg->window)}, {AS_LA_ROWS_B_LEN, AS_DUMP_MAX_ROWS},
        {AS_LA_COLS, cfg->window},                     {AS_LA_K, cfg->index_topk},
        {AS_LA_TOPK, cfg->window + cfg->index_topk},   {AS_LA_WIDTH, AS_DUMP_MAX_ROWS},
        {AS_LA_COMPRESS_LEN, AS_DUMP_MAX_ROWS},        {AS_LA_N_NEW, tokens},
        {AS_LA_INDEXER_RAN, 1},
    };
    for (size_t i = 0; i < sizeof bound / sizeof bound[0]; i++) {
        int v = as_dump_layer_attr_get(r, bound[i].a);
        if (v < 0 || v > bound[i].hi) {
            snprintf(why, n, "%s = %d is out of range [0, %d]", as_dump_layer_attr_name[bound[i].a], v, bound[i].hi);
            return -1;
        }
    }
    for (int i = 0; i < AS_DUMP_N_PROV; i++) {
        const AsProvenance *p = as_dump_prov((AsRun *)r, i);
        if (p->layer < -1 || p->layer >= cfg->n_layers || p->step < -1) {
            snprintf(why, n, "%s = [%d, %d] is not a layer of the model and a step (or -1)", as_dump_prov_name[i],
                     p->layer, p->step);
            return -1;
        }
    }
    return 0;
}

int as_dump_expected_shape(const AsConfig *c, int s, const AsRun *r, AsTensorId id, int64_t sh[3])
{
    int64_t d0 = 0, d1 = 0, d2 = 0;
    switch (id) {
    case AS_T_X: case AS_T_OUT: d0 = s, d1 = c->dim; break;
    case AS_T_QR: d0 = s, d1 = c->q_lora_rank; break;
    case AS_T_Q: case AS_T_O: case AS_T_O_BACK: d0 = s, d1 = c->n_heads, d2 = c->head_dim; break;
    case AS_T_KV_PRE: case AS_T_KV: d0 = s, d1 = c->head_dim; break;
    case AS_T_ROWS_A: d0 = r->rows_a_len, d1 = c->head_dim; break;
    case AS_T_WIDX: d0 = s, d1 = r->cols; break;
    case AS_T_LATENT: case AS_T_LATENT_PRE: case AS_T_LATENT_Q: d0 = r->n_new, d1 = c->head_dim; break;
    case AS_T_IK_PRE: case AS_T_IK: d0 = r->n_new, d1 = c->index_head_dim; break;
    case AS_T_IQ_PRE: case AS_T_IQ: d0 = s, d1 = c->index_n_heads, d2 = c->index_head_dim; break;
    case AS_T_W: d0 = s, d1 = c->index_n_heads; break;
    case AS_T_KEYS: d0 = r->width, d1 = c->index_head_dim; break;
    case AS_T_ISCORE: case AS_T_CAND: d0 = s, d1 = r->width; break;
    case AS_T_CSEL: d0 = s, d1 = r->k; break;
    case AS_T_ROWS_B: d0 = r->rows_b_len, d1 = c->head_dim; break;
    case AS_T_IDX: d0 = s, d1 = r->topk; break;
    case AS_T_OG: d0 = s, d1 = c->o_groups, d2 = c->o_lora_rank; break;
    case AS_T_ST_RING: d0 = c->window, d1 = c->head_dim; break;
    case AS_T_ST_PART_KV: case AS_T_ST_PART_SC: d0 = r->ratio, d1 = c->head_dim; break;
    case AS_T_ST_CCACHE: d0 = -1, d1 = c->head_dim; break;
    case AS_T_ST_IKCACHE: d0 = -1, d1 = c->index_head_dim; break;
    default: break;
    }
    sh[0] = d0, sh[1] = d1, sh[2] = d2;
    return as_tensor_desc[id].ndim;
}

static void fmt_shape(char *buf, size_t n, int ndim, const int64_t *sh)
{
    size_t used = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && used < n; i++) {
        if (sh[i] < 0)
            used += (size_t)snprintf(buf + used, n - used, "%srows", i ? ", " : "");
        else
            used += (size_t)snprintf(buf + used, n - used, "%s%lld", i ? ", " : "", (long long)sh[i]);
    }
    if (used < n)
        snprintf(buf + used, n - used, "]");
}

int as_dump_check_shape(const AsConfig *cfg, int tokens, const AsRun *r, AsTensorId id, int ndim,
                        const int64_t *shape, char *why, size_t n)
{
    int64_t want[3];
    int wnd = as_dump_expected_shape(cfg, tokens, r, id, want);
    char got_s[96], want_s[96];
    bool ok = ndim == wnd;
    int64_t numel = 1;
    for (int i = 0; ok && i < ndim; i++) {
        if (shape[i] < 0 || (want[i] >= 0 && shape[i] != want[i]) || (want[i] < 0 && shape[i] > AS_DUMP_MAX_ROWS))
            ok = false;
        else if (shape[i] > 0 && numel > AS_DUMP_MAX_ELEMS / shape[i])
            numel = AS_DUMP_MAX_ELEMS + 1;
        else
            numel *= shape[i];
    }
    if (!ok) {
        fmt_shape(got_s, sizeof got_s, ndim, shape);
        fmt_shape(want_s, sizeof want_s, wnd, want);
        snprintf(why, n, "shape %s, the schema says %s", got_s, want_s);
        return -1;
    }
    if (numel > AS_DUMP_MAX_ELEMS) {
        snprintf(why, n, "more than %lld elements", (long long)AS_DUMP_MAX_ELEMS);
        return -1;
    }
    return 0;
}

void as_dump_dims_string(AsTensorId id, char *buf, size_t n)
{
    const AsTensorDesc *d = &as_tensor_desc[id];
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < d->ndim && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? "," : "", d->dims[i]);
}

int as_dump_mode_ok(const char *mode)
{
    static const char *const modes[] = {"teacher", "free", "engine-only", "reference-only", "external"};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (mode && !strcmp(mode, modes[i]))
            return 1;
    return 0;
}

int as_dump_side_name_ok(const char *name)
{
    size_t len = strlen(name);
    if (len == 0 || len > 63 || !strcmp(name, "diff"))
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == '-'))
            return 0;
    }
    return 1;
}
