/* The attention geometry: config.json in either spelling, the rules of SPEC section 1, the derived
 * layer roles, and the config written back (Hugging Face spelling). */
#include "model/config.h"

#include <cJSON.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/textfile.h"
#include "model/json_strict.h"

/* A config.json is a few KiB; anything near this is not one. */
#define CONFIG_MAX_BYTES (16 << 20)

typedef enum { F_INT, F_FLOAT, F_DOUBLE } FieldKind;

/* One scalar field: its two spellings, where it lives, what it may be. hf may name a member of
 * a nested object ("rope_scaling.factor"). */
typedef struct {
    const char *hf, *ds;
    FieldKind kind;
    size_t off;
    double min, max;
    int multiple;       /* ints: must be a multiple of this (0: any) */
    const char *why;    /* why the multiple */
    bool optional;
    double dflt;
} Field;

#define OFF(f) offsetof(AsConfig, f)
static const Field fields[] = {
    {"hidden_size", "dim", F_INT, OFF(dim), 1, AS_LIMIT_DIM, 0, NULL, false, 0},
    {"num_hidden_layers", "n_layers", F_INT, OFF(n_layers), 1, AS_MAX_LAYERS, 0, NULL, false, 0},
    {"num_attention_heads", "n_heads", F_INT, OFF(n_heads), 1, AS_LIMIT_HEADS, 0, NULL, false, 0},
    {"head_dim", "head_dim", F_INT, OFF(head_dim), 1, AS_LIMIT_HEAD_DIM, 32,
     "fp8 blocks of 32 and fp4-e4m3 blocks of 16", false, 0},
    {"qk_rope_head_dim", "rope_head_dim", F_INT, OFF(rope_head_dim), 1, AS_LIMIT_HEAD_DIM, 2,
     "RoPE rotates channel pairs", false, 0},
    {"q_lora_rank", "q_lora_rank", F_INT, OFF(q_lora_rank), 1, AS_LIMIT_RANK, 0, NULL, false, 0},
    {"o_lora_rank", "o_lora_rank", F_INT, OFF(o_lora_rank), 1, AS_LIMIT_RANK, 0, NULL, false, 0},
    {"o_groups", "o_groups", F_INT, OFF(o_groups), 1, AS_LIMIT_HEADS, 0, NULL, false, 0},
    {"sliding_window", "window_size", F_INT, OFF(window), 1, AS_LIMIT_WINDOW, 0, NULL, false, 0},
    {"rms_norm_eps", "norm_eps", F_FLOAT, OFF(norm_eps), FLT_MIN, 1, 0, NULL, false, 0},
    {"candidate_source_layer_id", "candidate_source_layer", F_INT, OFF(candidate_source), -1,
     AS_MAX_LAYERS - 1, 0, NULL, true, -1},
    {"candidate_topk_blocks", "candidate_topk_blocks", F_INT, OFF(candidate_topk_blocks), 1, AS_LIMIT_TOPK, 0,
     NULL, false, 0},
    {"candidate_block_size", "candidate_block_size", F_INT, OFF(candidate_block_size), 1, AS_LIMIT_MAX_SEQ, 0,
     NULL, false, 0},
    {"index_n_heads", "index_n_heads", F_INT, OFF(index_n_heads), 1, AS_LIMIT_HEADS, 0, NULL, false, 0},
    {"index_head_dim", "index_head_dim", F_INT, OFF(index_head_dim), 1, AS_LIMIT_HEAD_DIM, 32,
     "fp4-e8m0 blocks of 32", false, 0},
    {"index_topk", "index_topk", F_INT, OFF(index_topk), 1, AS_LIMIT_TOPK, 0, NULL, false, 0},
    {"rope_theta", "rope_theta", F_DOUBLE, OFF(rope_theta), 2, 1e12, 0, NULL, false, 0},
    {"compress_rope_theta", "compress_rope_theta", F_DOUBLE, OFF(compress_rope_theta), 2, 1e12, 0, NULL, false, 0},
    {"rope_scaling.factor", "rope_factor", F_DOUBLE, OFF(rope_factor), 1, 1e6, 0, NULL, false, 0},
    {"rope_scaling.original_max_position_embeddings", "original_seq_len", F_INT, OFF(original_seq_len), 1,
     1 << 30, 0, NULL, false, 0},
    {"rope_scaling.beta_fast", "beta_fast", F_DOUBLE, OFF(beta_fast), 1e-6, 1e6, 0, NULL, false, 0},
    {"rope_scaling.beta_slow", "beta_slow", F_DOUBLE, OFF(beta_slow), 1e-6, 1e6, 0, NULL, false, 0},
    {"max_seq_len", "max_seq_len", F_INT, OFF(max_seq), 1, AS_LIMIT_MAX_SEQ, 2,
     "ratio-2 caches hold max_seq / 2 rows", true, AS_DEFAULT_MAX_SEQ},
};
#define N_FIELDS (int)(sizeof fields / sizeof fields[0])

/* The three layer lists: compress ratios, kv sources, index sources. */
typedef struct {
    const char *hf, *ds;
} ListName;
static const ListName L_RATIOS = {"compress_ratios", "compress_ratios"};
static const ListName L_KV = {"kv_source_layer_ids", "kv_source_layers"};
static const ListName L_INDEX = {"index_source_layer_ids", "index_source_layers"};

/* "hidden_size (dim)", or one name where both spellings agree. */
static const char *spell(const char *hf, const char *ds, char *buf, size_t n)
{
    if (!strcmp(hf, ds))
        return hf;
    snprintf(buf, n, "%s (%s)", hf, ds);
    return buf;
}

static double field_get(const AsConfig *cfg, const Field *f)
{
    const char *p = (const char *)cfg + f->off;
    switch (f->kind) {
    case F_INT: return *(const int *)p;
    case F_FLOAT: return *(const float *)p;
    default: return *(const double *)p;
    }
}

static void field_set(AsConfig *cfg, const Field *f, double v)
{
    char *p = (char *)cfg + f->off;
    switch (f->kind) {
    case F_INT: *(int *)p = (int)v; break;
    case F_FLOAT: *(float *)p = (float)v; break;
    default: *(double *)p = v; break;
    }
}

/* The range (and multiple) a field's value must have; checked before a double is narrowed. */
static int check_value(const Field *f, double v, AsError *err)
{
    char nb[128];
    const char *name = spell(f->hf, f->ds, nb, sizeof nb);
    if (!(v >= f->min && v <= f->max)) /* also catches NaN */
        return as_err(err, AS_EBADINPUT, "%s = %.9g is out of range [%.9g, %.9g]", name, v, f->min, f->max);
    if (f->kind == F_INT && f->multiple && (int)v % f->multiple)
        return as_err(err, AS_EBADINPUT, "%s = %d must be a multiple of %d (%s)", name, (int)v, f->multiple,
                      f->why);
    return AS_OK;
}

static const char *json_type(const cJSON *it)
{
    if (cJSON_IsNumber(it)) return "a number";
    if (cJSON_IsString(it)) return "a string";
    if (cJSON_IsBool(it)) return "a boolean";
    if (cJSON_IsNull(it)) return "null";
    if (cJSON_IsArray(it)) return "an array";
    return "an object";
}

/* The member at key, where key may be "outer.inner"; NULL when absent (or the outer is null). */
static const cJSON *lookup(const cJSON *root, const char *key, AsError *err, int *rc)
{
    *rc = AS_OK;
    const char *dot = strchr(key, '.');
    if (!dot)
        return cJSON_GetObjectItemCaseSensitive(root, key);
    char outer[64];
    size_t n = (size_t)(dot - key);
    if (n >= sizeof outer)
        return NULL;
    memcpy(outer, key, n);
    outer[n] = '\0';
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, outer);
    if (!o || cJSON_IsNull(o))
        return NULL;
    if (!cJSON_IsObject(o)) {
        *rc = as_err(err, AS_EBADINPUT, "'%s' must be an object, got %s", outer, json_type(o));
        return NULL;
    }
    return cJSON_GetObjectItemCaseSensitive(o, dot + 1);
}

/* The value given under either spelling; both given must agree. *found = 0 when neither is. */
static int find_either(const cJSON *root, const char *hf, const char *ds, const cJSON **out, const char **key,
                       AsError *err)
{
    int rc;
    const cJSON *a = lookup(root, hf, err, &rc);
    if (rc)
        return rc;
    const cJSON *b = strcmp(hf, ds) ? lookup(root, ds, err, &rc) : NULL;
    if (rc)
        return rc;
    if (a && b && !cJSON_Compare(a, b, true))
        return as_err(err, AS_EBADINPUT, "'%s' and '%s' are both given and disagree", hf, ds);
    *out = a ? a : b;
    *key = a ? hf : ds;
    return AS_OK;
}

/* A JSON number that is an integer representable as int. */
static int json_int(const cJSON *it, const char *key, int *out, AsError *err)
{
    if (!cJSON_IsNumber(it))
        return as_err(err, AS_EBADINPUT, "'%s' must be an integer, got %s", key, json_type(it));
    double v = it->valuedouble;
    if (!(v >= INT_MIN && v <= INT_MAX) || (double)(int)v != v)
        return as_err(err, AS_EBADINPUT, "'%s' = %.17g is not an integer that fits an int", key, v);
    *out = (int)v;
    return AS_OK;
}

static int parse_field(const cJSON *root, const Field *f, AsConfig *cfg, AsError *err)
{
    const cJSON *it = NULL;
    const char *key = NULL;
    int rc = find_either(root, f->hf, f->ds, &it, &key, err);
    if (rc)
        return rc;
    if (!it || (f->optional && cJSON_IsNull(it))) {
        char nb[128];
        if (!f->optional)
            return as_err(err, AS_EBADINPUT, "missing field %s", spell(f->hf, f->ds, nb, sizeof nb));
        field_set(cfg, f, f->dflt);
        return AS_OK;
    }
    double v;
    if (f->kind == F_INT) {
        int i;
        if ((rc = json_int(it, key, &i, err)))
            return rc;
        v = i;
    } else {
        if (!cJSON_IsNumber(it))
            return as_err(err, AS_EBADINPUT, "'%s' must be a number, got %s", key, json_type(it));
        v = it->valuedouble;
    }
    if ((rc = check_value(f, v, err)))
        return rc;
    field_set(cfg, f, v);
    return AS_OK;
}

/* An array of integers into out, the count kept in *n: at most cap. A longer list is an error,
 * except compress_ratios, which is cut (the released config lists the MTP layers too). */
static int parse_list(const cJSON *root, const ListName *ln, int *out, int cap, int *n, AsError *err)
{
    const cJSON *it = NULL;
    const char *key = NULL;
    int rc = find_either(root, ln->hf, ln->ds, &it, &key, err);
    if (rc)
        return rc;
    char nb[128];
    if (!it)
        return as_err(err, AS_EBADINPUT, "missing field %s", spell(ln->hf, ln->ds, nb, sizeof nb));
    if (!cJSON_IsArray(it))
        return as_err(err, AS_EBADINPUT, "'%s' must be an array of integers, got %s", key, json_type(it));
    int count = cJSON_GetArraySize(it), i = 0;
    if (count > cap && ln != &L_RATIOS)
        return as_err(err, AS_EBADINPUT, "'%s' has %d entries, more than the %d layers", key, count, cap);
    const cJSON *e;
    cJSON_ArrayForEach(e, it) {
        char ek[96];
        snprintf(ek, sizeof ek, "%s[%d]", key, i);
        int v;
        if ((rc = json_int(e, ek, &v, err)))
            return rc;
        if (i < cap)
            out[i] = v;
        i++;
    }
    *n = count < cap ? count : cap;
    return AS_OK;
}

/* "dtype" of DeepSeek's inference/config.json: "fp8" or "bf16" (model.py's ModelArgs.dtype). */
static int parse_dtype(const cJSON *root, AsConfig *cfg, AsError *err)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, "dtype");
    cfg->dtype = AS_PREC_AUTO;
    if (!it)
        return AS_OK;
    const char *s = cJSON_IsString(it) ? it->valuestring : NULL;
    if (s && !strcmp(s, "fp8"))
        cfg->dtype = AS_PREC_FP8;
    else if (s && !strcmp(s, "bf16"))
        cfg->dtype = AS_PREC_BF16;
    else if (s)
        return as_err(err, AS_EBADINPUT, "'dtype' = \"%.32s\": must be \"fp8\" or \"bf16\"", s);
    else
        return as_err(err, AS_EBADINPUT, "'dtype' must be the string \"fp8\" or \"bf16\", got %s", json_type(it));
    return AS_OK;
}

int as_config_parse_json(const char *text, size_t len, AsConfig *cfg, AsError *err)
{
    memset(cfg, 0, sizeof *cfg);
    cJSON *root;
    int rc0 = as_json_parse_strict(text, len, &root, err);
    if (rc0)
        return rc0;
    int rc = AS_OK;
    const cJSON *geo = root;
    if (!cJSON_IsObject(root)) {
        rc = as_err(err, AS_EBADINPUT, "must be a JSON object, got %s", json_type(root));
        goto out;
    }
    /* The Hugging Face config.json nests the geometry in text_config (beside the vision model's);
     * its dtype there is torch's parameter dtype, not model.py's precision, so only a flat config's
     * dtype is read. */
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    if (tc && !cJSON_IsObject(tc)) {
        rc = as_err(err, AS_EBADINPUT, "'text_config' must be an object, got %s", json_type(tc));
        goto out;
    }
    if (tc)
        geo = tc;
    else if ((rc = parse_dtype(root, cfg, err)))
        goto out;
    for (int i = 0; i < N_FIELDS && !rc; i++)
        rc = parse_field(geo, &fields[i], cfg, err);
    if (rc)
        goto out;
    /* The released config lists ratios for the MTP layers after the backbone: cut to n_layers. */
    int n_ratios = 0;
    if ((rc = parse_list(geo, &L_RATIOS, cfg->compress_ratios, cfg->n_layers, &n_ratios, err)))
        goto out;
    if (n_ratios < cfg->n_layers) {
        rc = as_err(err, AS_EBADINPUT, "compress_ratios has %d entries but num_hidden_layers (n_layers) is %d",
                    n_ratios, cfg->n_layers);
        goto out;
    }
    if ((rc = parse_list(geo, &L_KV, cfg->kv_sources, AS_MAX_LAYERS, &cfg->n_kv_sources, err)))
        goto out;
    rc = parse_list(geo, &L_INDEX, cfg->index_sources, AS_MAX_LAYERS, &cfg->n_index_sources, err);
out:
    if (rc && geo != root)
        as_err_wrap(err, "text_config");
    cJSON_Delete(root);
    return rc;
}

int as_config_load(const char *path, AsConfig *cfg, AsError *err)
{
    char *buf;
    size_t n;
    int rc = as_read_text_file(path, CONFIG_MAX_BYTES, "config", &buf, &n, err);
    if (rc)
        return rc;
    if ((rc = as_config_parse_json(buf, n, cfg, err)))
        as_err_wrap(err, "%s", path);
    free(buf);
    return rc;
}

/* Checks a layer list: in range, strictly increasing, each layer compressing. */
static int check_list(const AsConfig *cfg, const ListName *ln, const int *v, int n, const char *what,
                      AsError *err)
{
    char nb[128];
    const char *name = spell(ln->hf, ln->ds, nb, sizeof nb);
    for (int i = 0; i < n; i++) {
        if (v[i] < 0 || v[i] >= cfg->n_layers)
            return as_err(err, AS_EBADINPUT, "%s[%d] = %d: no such layer (n_layers %d)", name, i, v[i],
                          cfg->n_layers);
        if (i > 0 && v[i] == v[i - 1])
            return as_err(err, AS_EBADINPUT, "%s lists layer %d twice", name, v[i]);
        if (i > 0 && v[i] < v[i - 1])
            return as_err(err, AS_EBADINPUT, "%s must be increasing: %d after %d", name, v[i], v[i - 1]);
        if (cfg->compress_ratios[v[i]] == 0)
            return as_err(err, AS_EBADINPUT, "%s: layer %d has compress ratio 0 (%s)", name, v[i], what);
    }
    return AS_OK;
}

static void derive_roles(AsConfig *cfg)
{
    memset(cfg->role, 0, sizeof cfg->role);
    for (int i = 0; i < cfg->n_kv_sources; i++)
        cfg->role[cfg->kv_sources[i]].kv_source = true;
    for (int i = 0; i < cfg->n_index_sources; i++)
        cfg->role[cfg->index_sources[i]].index_source = true;
    int kv = -1, keys = -1, sel = -1;
    for (int l = 0; l < cfg->n_layers; l++) {
        AsLayerRole *r = &cfg->role[l];
        r->ratio = cfg->compress_ratios[l];
        r->key_owner = r->kv_source && r->index_source;
        r->candidate_source = l == cfg->candidate_source;
        r->uses_candidates = cfg->candidate_source >= 0 && cfg->candidate_source < l;
        if (r->kv_source) kv = l;
        if (r->key_owner) keys = l;
        if (r->index_source) sel = l;
        r->kv_from = kv;
        r->keys_from = keys;
        r->select_from = sel;
    }
    cfg->gw = cfg->n_heads * cfg->head_dim / cfg->o_groups;
}

int64_t as_config_state_bytes(const AsConfig *c)
{
    int64_t b = 0, hd = c->head_dim, ihd = c->index_head_dim;
    for (int l = 0; l < c->n_layers; l++) {
        const AsLayerRole *r = &c->role[l];
        b += (int64_t)c->window * hd;
        if (!r->kv_source)
            continue;
        int64_t cap = c->max_seq / r->ratio;
        b += cap * hd + (r->ratio >= 2 ? 2 * (int64_t)r->ratio * hd : 0) + (r->key_owner ? cap * ihd : 0);
    }
    b += 2 * 2 * (int64_t)c->max_seq * (c->rope_head_dim / 2); /* cos and sin, plain and YaRN */
    return b * (int64_t)sizeof(float);
}

int as_config_validate(AsConfig *cfg, AsError *err)
{
    int rc;
    for (int i = 0; i < N_FIELDS; i++)
        if ((rc = check_value(&fields[i], field_get(cfg, &fields[i]), err)))
            return rc;
    if (cfg->rope_head_dim > cfg->head_dim)
        return as_err(err, AS_EBADINPUT, "qk_rope_head_dim (rope_head_dim) = %d exceeds head_dim = %d",
                      cfg->rope_head_dim, cfg->head_dim);
    if (cfg->rope_head_dim > cfg->index_head_dim)
        return as_err(err, AS_EBADINPUT, "qk_rope_head_dim (rope_head_dim) = %d exceeds index_head_dim = %d",
                      cfg->rope_head_dim, cfg->index_head_dim);
    if ((cfg->n_heads * cfg->head_dim) % cfg->o_groups)
        return as_err(err, AS_EBADINPUT,
                      "num_attention_heads * head_dim = %d is not a multiple of o_groups = %d (group width)",
                      cfg->n_heads * cfg->head_dim, cfg->o_groups);
    for (int l = 0; l < cfg->n_layers; l++)
        if (cfg->compress_ratios[l] < 0 || cfg->compress_ratios[l] > 2)
            return as_err(err, AS_EBADINPUT, "compress_ratios[%d] = %d: a layer's ratio is 0, 1 or 2", l,
                          cfg->compress_ratios[l]);
    if (cfg->n_kv_sources < 0 || cfg->n_kv_sources > cfg->n_layers || cfg->n_index_sources < 0 ||
        cfg->n_index_sources > cfg->n_layers)
        return as_err(err, AS_EBADINPUT, "kv or index source list longer than the %d layers", cfg->n_layers);
    if ((rc = check_list(cfg, &L_KV, cfg->kv_sources, cfg->n_kv_sources, "a kv source compresses", err)) ||
        (rc = check_list(cfg, &L_INDEX, cfg->index_sources, cfg->n_index_sources,
                         "an index source scores compressed positions", err)))
        return rc;
    if (cfg->candidate_source >= cfg->n_layers)
        return as_err(err, AS_EBADINPUT, "candidate_source_layer_id (candidate_source_layer) = %d: no such layer",
                      cfg->candidate_source);
    derive_roles(cfg);
    /* at most 256 layers of 2^20 rows of 2 x 4096 floats: int64 does not overflow */
    int64_t state = as_config_state_bytes(cfg);
    if (state > AS_LIMIT_STATE_BYTES)
        return as_err(err, AS_EBADINPUT,
                      "the run state of this geometry needs %.1f GiB at max_seq %d (caches of %d layers, head_dim %d, "
                      "index_head_dim %d): more than the %lld GiB attnscope allows; lower max_seq_len",
                      (double)state / (1 << 30), cfg->max_seq, cfg->n_layers, cfg->head_dim, cfg->index_head_dim,
                      (long long)(AS_LIMIT_STATE_BYTES >> 30));

    const AsLayerRole *role = cfg->role;
    for (int l = 0; l < cfg->n_layers; l++) {
        const AsLayerRole *r = &role[l];
        if (r->ratio == 0)
            continue;
        if (r->kv_from < 0)
            return as_err(err, AS_EBADINPUT,
                          "layer %d has compress ratio %d but comes before every kv source "
                          "(kv_source_layer_ids): it would have no compressed cache",
                          l, r->ratio);
        if (role[r->kv_from].ratio != r->ratio)
            return as_err(err, AS_EBADINPUT,
                          "layer %d (compress ratio %d) reads the compressed cache of kv source %d "
                          "(ratio %d): ratios must match (kv_source_layer_ids)",
                          l, r->ratio, r->kv_from, role[r->kv_from].ratio);
        if (r->index_source && !r->key_owner) {
            if (r->keys_from < 0)
                return as_err(err, AS_EBADINPUT,
                              "index_source_layer_ids: layer %d is not a kv source and no key owner "
                              "(index source that is a kv source) comes before it",
                              l);
            if (role[r->keys_from].ratio != r->ratio)
                return as_err(err, AS_EBADINPUT,
                              "index_source_layer_ids: layer %d (ratio %d) scores the index keys of layer %d "
                              "(ratio %d): ratios must match",
                              l, r->ratio, r->keys_from, role[r->keys_from].ratio);
        }
    }
    int cs = cfg->candidate_source;
    if (cs >= 0) {
        if (!role[cs].index_source)
            return as_err(err, AS_EBADINPUT,
                          "candidate_source_layer_id (candidate_source_layer) = %d is not an index source", cs);
        for (int l = cs + 1; l < cfg->n_layers; l++)
            if (role[l].index_source && role[l].ratio != role[cs].ratio)
                return as_err(err, AS_EBADINPUT,
                              "layer %d (ratio %d) uses the candidate mask of layer %d (ratio %d): ratios must "
                              "match (candidate_source_layer_id), the mask width would differ",
                              l, role[l].ratio, cs, role[cs].ratio);
    }
    return AS_OK;
}

const char *as_config_role_header(void) { return "  l  r   role            reads"; }

void as_config_role_line(const AsConfig *cfg, int l, char *buf, size_t n)
{
    if (!n)
        return;
    buf[0] = '\0';
    if (l < 0 || l >= cfg->n_layers)
        return;
    const AsLayerRole *r = &cfg->role[l];
    char tags[48];
    snprintf(tags, sizeof tags, "%s%s%s%s", r->kv_source ? "kv " : "", r->index_source ? "idx " : "",
             r->candidate_source ? "cand-src " : "", r->index_source && r->uses_candidates ? "cand-use " : "");
    size_t tl = strlen(tags);
    if (tl)
        tags[tl - 1] = '\0';
    else
        snprintf(tags, sizeof tags, "-");
    int k = snprintf(buf, n, "%3d  r%d  %-16s", l, r->ratio, tags);
    if (k < 0 || (size_t)k >= n)
        return;
    char *p = buf + k;
    size_t left = n - (size_t)k;
    if (r->ratio == 0) {
        snprintf(p, left, "window only");
        return;
    }
    char sel[24];
    if (r->select_from >= 0)
        snprintf(sel, sizeof sel, "%d", r->select_from);
    else
        snprintf(sel, sizeof sel, "none");
    if (r->index_source) {
        int c = snprintf(p, left, "rows_b<-%d  keys<-%d  sel<-%s", r->kv_from, r->keys_from, sel);
        if (r->uses_candidates && c > 0 && (size_t)c < left)
            snprintf(p + c, left - (size_t)c, "  cand<-%d", cfg->candidate_source);
    } else {
        snprintf(p, left, "rows_b<-%d  sel<-%s (reuse)", r->kv_from, sel);
    }
}

/* The shortest decimal that reads back as the same value (float or double). */
static cJSON *number(double v, bool is_float)
{
    char s[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(s, sizeof s, "%.*g", prec, v);
        if (is_float ? strtof(s, NULL) == (float)v : strtod(s, NULL) == v)
            break;
    }
    return cJSON_CreateRaw(s);
}

static cJSON *int_list(const int *v, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
    return a;
}

static const char *dtype_string(AsPrecision p) { return p == AS_PREC_FP8 ? "fp8" : "bf16"; }

/* The fields in one spelling into obj; the Hugging Face one nests the YaRN fields in rope_scaling. */
static bool add_item(cJSON *obj, const char *key, cJSON *item)
{
    if (item && cJSON_AddItemToObject(obj, key, item))
        return true;
    cJSON_Delete(item);
    return false;
}

static bool add_fields(cJSON *obj, const AsConfig *cfg, bool hf)
{
    cJSON *rs = hf ? cJSON_CreateObject() : NULL;
    bool ok = !hf || (rs && cJSON_AddStringToObject(rs, "type", "yarn"));
    for (int i = 0; i < N_FIELDS && ok; i++) {
        const Field *f = &fields[i];
        double v = field_get(cfg, f);
        cJSON *item = f->kind == F_INT ? cJSON_CreateNumber(v) : number(v, f->kind == F_FLOAT);
        const char *dot = hf ? strchr(f->hf, '.') : NULL;
        ok = add_item(dot ? rs : obj, dot ? dot + 1 : hf ? f->hf : f->ds, item);
    }
    /* rope_scaling after the scalar fields, where gen has always written it */
    if (!ok) {
        cJSON_Delete(rs);
        return false;
    }
    if (rs && !add_item(obj, "rope_scaling", rs))
        return false;
    const ListName *lists[3] = {&L_RATIOS, &L_KV, &L_INDEX};
    const int *vals[3] = {cfg->compress_ratios, cfg->kv_sources, cfg->index_sources};
    const int counts[3] = {cfg->n_layers, cfg->n_kv_sources, cfg->n_index_sources};
    for (int k = 0; k < 3 && ok; k++)
        ok = add_item(obj, hf ? lists[k]->hf : lists[k]->ds, int_list(vals[k], counts[k]));
    return ok;
}

char *as_config_to_json_as(const AsConfig *cfg, AsConfigSpelling sp)
{
    cJSON *root = cJSON_CreateObject(), *geo = root;
    bool ok = root != NULL;
    if (ok && sp == AS_CONFIG_HF_NESTED) {
        /* a top-level member attnscope does not read, as the released file has many */
        ok = cJSON_AddStringToObject(root, "generator", "attnscope gen") != NULL;
        geo = ok ? cJSON_AddObjectToObject(root, "text_config") : NULL;
        ok = geo != NULL;
    }
    ok = ok && add_fields(geo, cfg, sp != AS_CONFIG_DS);
    /* dtype is model.py's precision in a flat config; text_config's would be torch's */
    if (ok && sp != AS_CONFIG_HF_NESTED && cfg->dtype != AS_PREC_AUTO)
        ok = cJSON_AddStringToObject(root, "dtype", dtype_string(cfg->dtype)) != NULL;
    char *s = ok ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    return s;
}

char *as_config_to_json(const AsConfig *cfg) { return as_config_to_json_as(cfg, AS_CONFIG_HF); }
