/* Loading a model: the config, the weight files (one safetensors file or an index and its shards),
 * every tensor a layer's role needs checked for presence, shape and dtype, and the digest.
 *
 * Only the tensors the attention binds are read: a full checkpoint's other tensors (experts,
 * hyper-connections, embeddings, MTP layers...) are skipped in the header (model/safetensors.h,
 * as_st_open_filtered), and a shard the index maps none of the bound names to is not opened.
 *
 * The digest is the SHA-256 of, per bound tensor and fp8 block scale (in name order): its name,
 * dtype name, shape and size, then its data: all of it up to 64 KiB, else 4 KiB at every 64 MiB and
 * the last 4 KiB. It reads a few MiB of a 10 GB model, does not depend on how the tensors are laid
 * out in files (one file or shards, other tensors beside them), and differs between models that
 * differ in any bound tensor's name, shape or dtype, or in the sampled bytes (all of a tiny model,
 * and every tensor's first bytes in a synthetic model of another seed). It does not prove two
 * models are equal byte for byte. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model/digest.h"
#include "model/gguf.h"
#include "model/model_load.h"
#include "model/precision.h"
#include "model/safetensors.h"
#include "model/weights.h"

#define DIGEST_SAMPLE 4096
#define DIGEST_WHOLE ((int64_t)64 << 10)    /* tensors up to this size are hashed whole */
#define DIGEST_STRIDE ((int64_t)64 << 20)

/* ---- which tensors a layer needs ---- */

typedef enum { N_ALL, N_KV, N_KV1, N_KV2, N_INDEX, N_OWNER } Need;
typedef enum { D_NONE, D_DIM, D_QLR, D_NHHD, D_HD, D_OGOLR, D_GW, D_NH, D_IQ, D_NHI, D_IHD } Dim;

typedef struct {
    const char *suffix;     /* after "layers.{l}." */
    size_t slot;            /* offsetof(AsLayerWeights, ...) */
    AsWeightKind kind;
    Need need;
    Dim d0, d1;             /* d1 = D_NONE: 1-D */
} Want;

#define SLOT(f) offsetof(AsLayerWeights, f)
static const Want wants[] = {
    {"attn_norm.weight", SLOT(attn_norm), AS_WK_NORM, N_ALL, D_DIM, D_NONE},
    {"attn.wq_a.weight", SLOT(wq_a), AS_WK_PROJ, N_ALL, D_QLR, D_DIM},
    {"attn.q_norm.weight", SLOT(q_norm), AS_WK_NORM, N_ALL, D_QLR, D_NONE},
    {"attn.wq_b.weight", SLOT(wq_b), AS_WK_PROJ, N_ALL, D_NHHD, D_QLR},
    {"attn.wkv.weight", SLOT(wkv), AS_WK_PROJ, N_ALL, D_HD, D_DIM},
    {"attn.kv_norm.weight", SLOT(kv_norm), AS_WK_NORM, N_ALL, D_HD, D_NONE},
    {"attn.wo_a.weight", SLOT(wo_a), AS_WK_PROJ, N_ALL, D_OGOLR, D_GW},
    {"attn.wo_b.weight", SLOT(wo_b), AS_WK_PROJ, N_ALL, D_DIM, D_OGOLR},
    {"attn.attn_sink", SLOT(attn_sink), AS_WK_SINK, N_ALL, D_NH, D_NONE},
    {"attn.compressor.wkv.weight", SLOT(c_wkv), AS_WK_F32, N_KV2, D_HD, D_DIM},
    {"attn.compressor.wkv.weight", SLOT(c_wkv), AS_WK_PROJ, N_KV1, D_HD, D_DIM},
    {"attn.compressor.wgate.weight", SLOT(c_wgate), AS_WK_GATE, N_KV2, D_HD, D_DIM},
    {"attn.compressor.norm.weight", SLOT(c_norm), AS_WK_NORM, N_KV, D_HD, D_NONE},
    {"attn.indexer.wq_b.weight", SLOT(i_wq_b), AS_WK_PROJ, N_INDEX, D_IQ, D_QLR},
    {"attn.indexer.weights_proj.weight", SLOT(i_weights_proj), AS_WK_PROJ, N_INDEX, D_NHI, D_DIM},
    {"attn.indexer.wk.weight", SLOT(i_wk), AS_WK_PROJ, N_OWNER, D_IHD, D_HD},
    {"attn.indexer.k_norm.weight", SLOT(i_k_norm), AS_WK_NORM, N_OWNER, D_IHD, D_NONE},
};
#define N_WANTS (int)(sizeof wants / sizeof wants[0])
_Static_assert(N_WANTS <= AS_LAYER_MAX_TENSORS, "AS_LAYER_MAX_TENSORS too small");

static int64_t dim_of(const AsConfig *c, Dim d)
{
    switch (d) {
    case D_DIM: return c->dim;
    case D_QLR: return c->q_lora_rank;
    case D_NHHD: return (int64_t)c->n_heads * c->head_dim;
    case D_HD: return c->head_dim;
    case D_OGOLR: return (int64_t)c->o_groups * c->o_lora_rank;
    case D_GW: return c->gw;
    case D_NH: return c->n_heads;
    case D_IQ: return (int64_t)c->index_n_heads * c->index_head_dim;
    case D_NHI: return c->index_n_heads;
    case D_IHD: return c->index_head_dim;
    case D_NONE: break;
    }
    return 0;
}

/* Whether layer l's role needs the tensor: the reason, or NULL. */
static const char *needed(const AsLayerRole *r, Need n)
{
    switch (n) {
    case N_ALL: return "every layer has it";
    case N_KV: return r->kv_source ? "it is a kv source" : NULL;
    case N_KV1: return r->kv_source && r->ratio == 1 ? "it is a ratio-1 kv source" : NULL;
    case N_KV2: return r->kv_source && r->ratio == 2 ? "it is a ratio-2 kv source" : NULL;
    case N_INDEX: return r->index_source ? "it is an index source" : NULL;
    case N_OWNER: return r->key_owner ? "it is a key owner (index and kv source)" : NULL;
    }
    return NULL;
}

int as_layer_tensors(const AsConfig *cfg, int l, AsLayerTensor *out)
{
    int n = 0;
    for (int i = 0; i < N_WANTS; i++) {
        const Want *w = &wants[i];
        const char *why = needed(&cfg->role[l], w->need);
        if (!why)
            continue;
        AsLayerTensor *t = &out[n++];
        snprintf(t->name, sizeof t->name, "layers.%d.%s", l, w->suffix);
        t->kind = w->kind;
        t->ndim = w->d1 == D_NONE ? 1 : 2;
        t->shape[0] = dim_of(cfg, w->d0);
        t->shape[1] = dim_of(cfg, w->d1);
        t->why = why;
        t->slot = w->slot;
    }
    return n;
}

/* The scale shape [ceil(out/b)][ceil(in/b)] of an fp8 weight under block edge b. */
static void scale_shape(const AsWTensor *t, int64_t b, int64_t out[2])
{
    out[0] = (t->shape[0] + b - 1) / b;
    out[1] = (t->shape[1] + b - 1) / b;
}

/* The block edge an fp8 weight's scale shape says: 32 (model.py's fp8_block_size) or 128 (older
 * DeepSeek checkpoints); 0 when it is neither. Both fit only a weight of at most 32 x 32, one block
 * either way. */
static int scale_block(const AsWTensor *t, const AsWTensor *s)
{
    static const int blocks[2] = {32, 128};
    if (t->ndim != 2 || s->ndim != 2)
        return 0;
    for (int i = 0; i < 2; i++) {
        int64_t want[2];
        scale_shape(t, blocks[i], want);
        if (s->shape[0] == want[0] && s->shape[1] == want[1])
            return blocks[i];
    }
    return 0;
}

static int check_scale(const AsWTensor *t, AsError *err)
{
    const AsWTensor *s = t->scale;
    if (!s)
        return as_err(err, AS_EBADINPUT, "%s: F8_E4M3 without its block scale (%.*s.scale or %s_scale_inv)",
                      t->name, (int)strlen(t->name) - 7, t->name, t->name);
    if (s->dtype != AS_DT_F32 && s->dtype != AS_DT_BF16 && s->dtype != AS_DT_F8_E8M0)
        return as_err(err, AS_EBADINPUT, "%s: dtype %s but a block scale must be F32, BF16 or F8_E8M0", s->name,
                      as_dtype_name(s->dtype));
    if (!t->block) {
        int64_t w32[2], w128[2];
        scale_shape(t, 32, w32);
        scale_shape(t, 128, w128);
        char got[64], a[64], b[64];
        as_shape_str(s->shape, s->ndim, got, sizeof got);
        as_shape_str(w32, 2, a, sizeof a);
        as_shape_str(w128, 2, b, sizeof b);
        return as_err(err, AS_EBADINPUT,
                      "%s: shape %s but the F8_E4M3 weight %s needs %s (one scale per 32x32 block) or %s "
                      "(per 128x128 block)", s->name, got, t->name, a, b);
    }
    return AS_OK;
}

static int check_tensor(const AsWTensor *t, const AsLayerTensor *w, AsError *err)
{
    if (t->ndim != w->ndim || t->shape[0] != w->shape[0] || (w->ndim == 2 && t->shape[1] != w->shape[1])) {
        char got[64], need[64];
        as_shape_str(t->shape, t->ndim, got, sizeof got);
        as_shape_str(w->shape, w->ndim, need, sizeof need);
        return as_err(err, AS_EBADINPUT, "%s: shape %s but the config needs %s", t->name, got, need);
    }
    AsDType d = t->dtype;
    switch (w->kind) {
    case AS_WK_PROJ:
        if (d == AS_DT_F8_E4M3)
            return check_scale(t, err);
        if (d != AS_DT_BF16 && d != AS_DT_F16 && d != AS_DT_F32 && d != AS_DT_Q8_0 && d != AS_DT_Q2_K)
            return as_err(err, AS_EBADINPUT,
                          "%s: dtype %s but a projection must be BF16, F16, F32, F8_E4M3 (with a scale), or Q8_0 "
                          "or Q2_K (GGUF)", t->name, as_dtype_name(d));
        break;
    case AS_WK_NORM:
    case AS_WK_SINK:
        if (d != AS_DT_F32 && d != AS_DT_BF16 && d != AS_DT_F16)
            return as_err(err, AS_EBADINPUT, "%s: dtype %s but a norm weight or sink must be F32, BF16 or F16",
                          t->name, as_dtype_name(d));
        break;
    case AS_WK_F32:
    case AS_WK_GATE:
        if (d != AS_DT_F32)
            return as_err(err, AS_EBADINPUT, "%s: dtype %s but the ratio-2 compressor needs F32", t->name,
                          as_dtype_name(d));
        break;
    }
    return AS_OK;
}

static int bind_layers(AsModel *m, bool gguf, AsError *err)
{
    for (int l = 0; l < m->cfg.n_layers; l++) {
        AsLayerTensor want[AS_LAYER_MAX_TENSORS];
        int n = as_layer_tensors(&m->cfg, l, want);
        for (int i = 0; i < n; i++) {
            const AsWTensor *t = as_model_find(m, want[i].name);
            char llama[192];
            if (!t && gguf && as_gguf_name_to_llama(want[i].name, llama, sizeof llama))
                return as_err(err, AS_EBADINPUT, "%s (llama.cpp name %s): missing (layer %d needs it: %s)",
                              want[i].name, llama, l, want[i].why);
            if (!t)
                return as_err(err, AS_EBADINPUT, "%s: missing (layer %d needs it: %s)", want[i].name, l,
                              want[i].why);
            int rc = check_tensor(t, &want[i], err);
            if (rc)
                return rc;
            if (want[i].kind == AS_WK_PROJ && (t->dtype == AS_DT_Q8_0 || t->dtype == AS_DT_Q2_K))
                m->quantised = true;
            *(const AsWTensor **)((char *)&m->layer[l] + want[i].slot) = t;
        }
    }
    return AS_OK;
}

/* ---- the tensor list ---- */

/* Names in natural order (layers.9 before layers.10); plain strcmp breaks the remaining ties. */
static int name_cmp(const char *a, const char *b)
{
    const char *a0 = a, *b0 = b;
    while (*a && *b) {
        if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
            while (*a == '0' && isdigit((unsigned char)a[1]))
                a++;
            while (*b == '0' && isdigit((unsigned char)b[1]))
                b++;
            size_t la = 0, lb = 0;
            while (isdigit((unsigned char)a[la]))
                la++;
            while (isdigit((unsigned char)b[lb]))
                lb++;
            if (la != lb)
                return la < lb ? -1 : 1;
            int c = memcmp(a, b, la);
            if (c)
                return c;
            a += la;
            b += lb;
            continue;
        }
        if (*a != *b)
            return (unsigned char)*a - (unsigned char)*b;
        a++;
        b++;
    }
    if (*a || *b)
        return *a ? 1 : -1;
    return strcmp(a0, b0);
}

static int tensor_cmp(const void *x, const void *y)
{
    return name_cmp(((const AsWTensor *)x)->name, ((const AsWTensor *)y)->name);
}

const AsWTensor *as_model_find(const AsModel *m, const char *name)
{
    if (!m->tensors || strlen(name) >= sizeof m->tensors[0].name)
        return NULL;
    AsWTensor key;
    snprintf(key.name, sizeof key.name, "%s", name);
    return bsearch(&key, m->tensors, (size_t)m->n_tensors, sizeof *m->tensors, tensor_cmp);
}

/* Points every F8_E4M3 "X.weight" at its block scale "X.scale" (or "X.weight_scale_inv") and sets
 * its block edge from the scale's shape (0 when the shape fits no block size: bind_layers refuses). */
static void wire_scales(AsModel *m)
{
    for (int i = 0; i < m->n_tensors; i++) {
        AsWTensor *t = &m->tensors[i];
        size_t n = strlen(t->name);
        if (t->dtype != AS_DT_F8_E4M3 || n < 7 || strcmp(t->name + n - 7, ".weight"))
            continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s.scale", (int)(n - 7), t->name);
        t->scale = as_model_find(m, name);
        if (!t->scale) {
            snprintf(name, sizeof name, "%s_scale_inv", t->name);
            t->scale = as_model_find(m, name);
        }
        t->block = t->scale ? scale_block(t, t->scale) : 0;
    }
}

/* ---- the tensors the attention reads ---- */

/* Every name bind_layers may look up: each layer's role tensors and, for a "X.weight", the two
 * names of its fp8 block scale. Sorted for bsearch. */
typedef struct {
    char (*name)[192];
    int n;
} NameSet;

static int cmp_name(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

static int wanted_names(const AsConfig *cfg, NameSet *ns, AsError *err)
{
    ns->n = 0;
    ns->name = malloc((size_t)(cfg->n_layers > 0 ? cfg->n_layers : 1) * AS_LAYER_MAX_TENSORS * 3 * sizeof *ns->name);
    if (!ns->name)
        return as_err(err, AS_ERUNTIME, "out of memory");
    for (int l = 0; l < cfg->n_layers; l++) {
        AsLayerTensor lt[AS_LAYER_MAX_TENSORS];
        int k = as_layer_tensors(cfg, l, lt);
        for (int j = 0; j < k; j++) {
            size_t len = strlen(lt[j].name);
            snprintf(ns->name[ns->n++], sizeof *ns->name, "%s", lt[j].name);
            if (len > 7 && !strcmp(lt[j].name + len - 7, ".weight")) {
                snprintf(ns->name[ns->n++], sizeof *ns->name, "%.*s.scale", (int)(len - 7), lt[j].name);
                snprintf(ns->name[ns->n++], sizeof *ns->name, "%.180s_scale_inv", lt[j].name);
            }
        }
    }
    qsort(ns->name, (size_t)ns->n, sizeof *ns->name, cmp_name);
    return AS_OK;
}

static bool is_wanted(void *ctx, const char *name)
{
    const NameSet *ns = ctx;
    return strlen(name) < sizeof *ns->name && bsearch(name, ns->name, (size_t)ns->n, sizeof *ns->name, cmp_name);
}

/* ---- files ---- */

static int add_file(AsModel *m, const char *path, const NameSet *want, int *cap, AsError *err)
{
    AsWeightFile **nf = realloc(m->files, (size_t)(m->n_files + 1) * sizeof *nf);
    if (!nf)
        return as_err(err, AS_ERUNTIME, "out of memory");
    m->files = nf;
    int rc = as_st_open_filtered(path, is_wanted, (void *)want, &m->files[m->n_files], &m->tensors, &m->n_tensors,
                                 cap, err);
    if (!rc)
        m->n_files++;
    return rc;
}

/* need[k]: whether the index maps any name the attention reads to shard k. */
static void shards_needed(const AsStIndex *ix, const NameSet *want, bool *need)
{
    for (int i = 0; i < ix->n_entries; i++)
        if (is_wanted((void *)want, ix->names[i]))
            need[ix->shard_of[i]] = true;
}

/* Whether the resolved path p lies below the resolved directory d. */
static bool below(const char *p, const char *d)
{
    size_t n = strlen(d);
    return !strncmp(p, d, n) && (p[n] == '/' || (n == 1 && d[0] == '/'));
}

/* A Hugging Face cache snapshot (REPO/snapshots/REV) keeps its files as links into REPO/blobs:
 * *blobs gets that folder when rd is such a snapshot. */
static bool hf_snapshot_blobs(const char *rd, char *blobs, size_t n)
{
    const char *rev = strrchr(rd, '/');
    if (!rev || rev == rd)
        return false;
    const char *snap = rev - 1;
    while (snap > rd && *snap != '/')
        snap--;
    if (*snap != '/' || rev - snap - 1 != 9 || strncmp(snap + 1, "snapshots", 9))
        return false;
    return snprintf(blobs, n, "%.*s/blobs", (int)(snap - rd), rd) < (int)n;
}

/* A weights file the model's directory names (a shard, or its model.safetensors) is read only where
 * it resolves inside that directory, or, for a Hugging Face cache snapshot, inside its repository's
 * blobs: any other symlink leaving it is refused (a missing file is left to the open, which names it).
 * A file named on the command line is the user's choice and is not checked. */
static int shard_inside(const char *dir, const char *path, AsError *err)
{
    char rd[PATH_MAX], rp[PATH_MAX], blobs[PATH_MAX];
    if (!realpath(path, rp))
        return AS_OK;
    if (!realpath(dir, rd))
        return as_err(err, AS_EBADINPUT, "%s: %s", dir, strerror(errno));
    bool inside = below(rp, rd) || (hf_snapshot_blobs(rd, blobs, sizeof blobs) && below(rp, blobs));
    if (!inside)
        return as_err(err, AS_EBADINPUT, "%s: resolves to %s, outside the model directory %s", path, rp, rd);
    return AS_OK;
}

static int open_weights(AsModel *m, const char *dir, const char *weights, bool is_index, AsError *err)
{
    int cap = 0, rc;
    NameSet want = {0};
    if ((rc = wanted_names(&m->cfg, &want, err)))
        return rc;
    if (!is_index) {
        /* m->dir is the path as given: a directory's model.safetensors is checked, a file named itself is not */
        if (!strcmp(weights, m->dir) || !(rc = shard_inside(dir, weights, err)))
            rc = add_file(m, weights, &want, &cap, err);
        free(want.name);
        return rc;
    }
    AsStIndex ix;
    if ((rc = as_st_read_index(weights, &ix, err))) {
        free(want.name);
        return rc;
    }
    bool *need = calloc((size_t)ix.n_shards, sizeof *need);
    if (!need)
        rc = as_err(err, AS_ERUNTIME, "out of memory");
    else
        shards_needed(&ix, &want, need);
    for (int i = 0; i < ix.n_shards && !rc; i++) {
        char path[2048];
        if (!need[i])
            continue; /* experts, embeddings, MTP layers...: never opened */
        if (snprintf(path, sizeof path, "%s/%s", dir, ix.shards[i]) >= (int)sizeof path)
            rc = as_err(err, AS_EBADINPUT, "%s: shard path too long", weights);
        else if (!(rc = shard_inside(dir, path, err)))
            rc = add_file(m, path, &want, &cap, err);
    }
    free(need);
    as_st_index_free(&ix);
    free(want.name);
    return rc;
}

static void hash_i64(AsSha256 *s, int64_t v) { as_sha256_update(s, &v, 8); /* little-endian host */ }

static void digest_tensor(AsSha256 *s, const AsWTensor *t)
{
    const uint8_t *p = t->data;
    const char *dt = as_dtype_name(t->dtype);
    as_sha256_update(s, t->name, strlen(t->name) + 1);
    as_sha256_update(s, dt, strlen(dt) + 1);
    hash_i64(s, t->ndim);
    for (int d = 0; d < t->ndim; d++)
        hash_i64(s, t->shape[d]);
    hash_i64(s, t->nbytes);
    if (t->nbytes <= DIGEST_WHOLE) {
        as_sha256_update(s, p, (size_t)t->nbytes);
        return;
    }
    for (int64_t off = 0; off < t->nbytes; off += DIGEST_STRIDE)
        as_sha256_update(s, p + off, (size_t)(t->nbytes - off < DIGEST_SAMPLE ? t->nbytes - off : DIGEST_SAMPLE));
    as_sha256_update(s, p + t->nbytes - DIGEST_SAMPLE, DIGEST_SAMPLE);
}

static int cmp_tensor_ptr(const void *a, const void *b)
{
    return strcmp((*(const AsWTensor *const *)a)->name, (*(const AsWTensor *const *)b)->name);
}

/* The tensors bind_layers bound and their block scales, hashed in name order (a GGUF's other
 * tensors are listed in m->tensors but not read). */
static int digest(AsModel *m, AsError *err)
{
    int cap = m->cfg.n_layers * AS_LAYER_MAX_TENSORS * 2, n = 0;
    const AsWTensor **list = malloc((size_t)(cap > 0 ? cap : 1) * sizeof *list);
    if (!list)
        return as_err(err, AS_ERUNTIME, "out of memory");
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const AsWTensor *const *w = (const AsWTensor *const *)&m->layer[l];
        for (size_t k = 0; k < sizeof m->layer[l] / sizeof *w; k++) {
            if (!w[k])
                continue;
            list[n++] = w[k];
            if (w[k]->dtype == AS_DT_F8_E4M3 && w[k]->scale)
                list[n++] = w[k]->scale;
        }
    }
    qsort(list, (size_t)n, sizeof *list, cmp_tensor_ptr);
    AsSha256 s;
    as_sha256_init(&s);
    for (int i = 0; i < n; i++)
        digest_tensor(&s, list[i]);
    free(list);
    uint8_t d[32];
    as_sha256_final(&s, d);
    as_sha256_hex(d, m->digest);
    return AS_OK;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

static bool is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* A GGUF file (model/gguf.h): the geometry from its metadata (completed by config.json beside
 * it), its tensors under DeepSeek's names; the rest of the loader takes them as they come. */
static int open_gguf(AsModel *m, const char *path, const char *config, int max_seq, AsError *err)
{
    AsGguf *g = NULL;
    int cap = 0, rc = as_gguf_open(path, &g, err);
    if (rc)
        return rc;
    AsWeightFile **nf = malloc(sizeof *nf);
    if (!nf) {
        rc = as_err(err, AS_ERUNTIME, "out of memory");
        goto out;
    }
    m->files = nf;
    /* the tensors first: a type attnscope cannot read says more than a missing geometry key */
    if ((rc = as_gguf_tensors(g, &m->tensors, &m->n_tensors, &cap, err)) ||
        (rc = as_gguf_config(g, config, &m->cfg, err)))
        goto out;
    if (max_seq > 0)
        m->cfg.max_seq = max_seq;
    if ((rc = as_config_validate(&m->cfg, err))) {
        if (max_seq > 0)
            as_err_wrap(err, "%s (GGUF metadata) with max_seq %d", path, max_seq);
        else
            as_err_wrap(err, "%s (GGUF metadata)", path);
        goto out;
    }
    m->files[m->n_files++] = as_gguf_take_file(g);
out:
    as_gguf_close(g);
    return rc;
}

/* Finds the config and the weights for a directory or a weight file. */
static int resolve(const char *path, char *dir, char *config, char *weights, size_t n, bool *is_index,
                   AsError *err)
{
    struct stat st;
    if (stat(path, &st))
        return as_err(err, AS_EBADINPUT, "%s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) {
        snprintf(dir, n, "%s", path);
        snprintf(weights, n, "%s/model.safetensors.index.json", path);
        *is_index = is_file(weights);
        if (!*is_index) {
            snprintf(weights, n, "%s/model.safetensors", path);
            if (!is_file(weights))
                return as_err(err, AS_EBADINPUT,
                              "%s: no model.safetensors or model.safetensors.index.json in this directory", path);
        }
    } else {
        *is_index = ends_with(path, ".safetensors.index.json");
        if (!*is_index && !ends_with(path, ".safetensors") && !ends_with(path, ".gguf"))
            return as_err(err, AS_EBADINPUT,
                          "%s: not a model directory, a .safetensors file, an index.json or a .gguf file", path);
        snprintf(weights, n, "%s", path);
        const char *slash = strrchr(path, '/');
        snprintf(dir, n, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
        if (slash == path)
            snprintf(dir, n, "/");
    }
    if (snprintf(config, n, "%s/config.json", dir) >= (int)n)
        return as_err(err, AS_EBADINPUT, "%s: path too long", path);
    return AS_OK;
}

/* "tiny/model.safetensors": the weight file and the directory it sits in. */
static void weights_name(AsModel *m, const char *dir, const char *weights)
{
    char real[PATH_MAX];
    const char *d = realpath(dir, real) ? real : dir;
    const char *base = strrchr(d, '/');
    const char *file = strrchr(weights, '/');
    snprintf(m->weights_name, sizeof m->weights_name, "%.120s/%.120s", base && base[1] ? base + 1 : d,
             file ? file + 1 : weights);
}

int as_model_load(const char *path, int max_seq, AsModel *m, AsError *err)
{
    memset(m, 0, sizeof *m);
    if (strlen(path) >= sizeof m->dir)
        return as_err(err, AS_EBADINPUT, "%.64s...: path too long", path);
    snprintf(m->dir, sizeof m->dir, "%s", path);
    char dir[1024], config[1100], weights[1100];
    bool is_index = false, gguf = ends_with(path, ".gguf");
    int rc = resolve(path, dir, config, weights, sizeof dir, &is_index, err);
    if (rc)
        return rc;
    if (gguf) {
        if ((rc = open_gguf(m, weights, config, max_seq, err)))
            goto fail;
    } else {
        if ((rc = as_config_load(config, &m->cfg, err)))
            return rc;
        if (max_seq > 0)
            m->cfg.max_seq = max_seq;
        if ((rc = as_config_validate(&m->cfg, err)))
            return max_seq > 0 ? as_err_wrap(err, "%s with max_seq %d", config, max_seq)
                               : as_err_wrap(err, "%s", config);
        if ((rc = open_weights(m, dir, weights, is_index, err)))
            goto fail;
    }
    if (m->n_tensors > 1) /* an empty header leaves tensors NULL: qsort must not see it */
        qsort(m->tensors, (size_t)m->n_tensors, sizeof *m->tensors, tensor_cmp);
    for (int i = 1; i < m->n_tensors; i++)
        if (!strcmp(m->tensors[i].name, m->tensors[i - 1].name)) {
            rc = as_err(err, AS_EBADINPUT, "%s: tensor %s appears twice (in two shards or in one header)", weights, m->tensors[i].name);
            goto fail;
        }
    wire_scales(m);
    if ((rc = bind_layers(m, gguf, err))) {
        as_err_wrap(err, "%s", weights);
        goto fail;
    }
    weights_name(m, dir, weights);
    if ((rc = digest(m, err)) || (rc = as_model_set_precision(m, AS_PREC_AUTO, err)))
        goto fail;
    return AS_OK;
fail:
    as_model_free(m);
    return rc;
}

void as_model_free(AsModel *m)
{
    for (int i = 0; i < m->n_files; i++)
        as_st_close(m->files[i]);
    free(m->files);
    free(m->tensors);
    memset(m, 0, sizeof *m);
}
