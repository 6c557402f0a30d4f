/* Synthetic models: the config and deterministic weights for every tensor the roles need, in bf16
 * or fp8 (e4m3 weights with e8m0 scales per 32 x 32 block), streamed into one safetensors file or
 * the released layout's shards chunk by chunk (the flash preset is ~10 GB). */
#include "model/gen.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>

#include "model/model_load.h"
#include "model/precision.h"
#include "model/safetensors.h"
#include "model/weights.h"
#include "ref/numerics.h"

#define SQRT3 1.7320508075688772
_Static_assert(sizeof ((AsStTensorSpec *)0)->name == sizeof ((AsLayerTensor *)0)->name, "tensor name sizes");
#define GOLDEN 0x9e3779b97f4a7c15ull
#define PROGRESS_MIN ((int64_t)64 << 20) /* smaller models are written before a line could be read */
#define FP8_GEN_BLOCK 32                  /* model.py's fp8_block_size */
#define DEFAULT_SHARDS 4

/* ---- the generator ---- */

uint64_t as_gen_fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

/* splitmix64's finaliser: a bijection that mixes every input bit into every output bit. */
static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t as_gen_key(uint64_t seed, uint64_t stream) { return mix64(mix64(seed + GOLDEN) ^ stream); }

uint64_t as_gen_hash(uint64_t key, uint64_t i) { return mix64(key + (i + 1) * GOLDEN); }

double as_gen_normal(uint64_t h)
{
    /* Four uniforms (u + 0.5) / 65536 sum to mean 2, variance 1/3; exact in a double. */
    int64_t s = (int64_t)((h & 0xffff) + ((h >> 16) & 0xffff) + ((h >> 32) & 0xffff) + (h >> 48));
    return (double)(2 * s + 4 - 262144) / 131072.0 * SQRT3;
}

double as_gen_uniform(uint64_t h) { return (double)(h >> 11) * 0x1p-52 - 1.0; }

/* ---- the tensors ---- */

typedef enum {
    ST_BF16,        /* the value rounded to bf16 */
    ST_F32,         /* the value */
    ST_FP8,         /* e4m3(value / scale) of its 32 x 32 block */
    ST_FP8_SCALE,   /* the e8m0 exponent of each block's scale */
} Store;

typedef struct {
    AsWeightKind kind;  /* the distribution */
    Store store;
    uint64_t key;       /* of the weight's name (a scale tensor uses its weight's) */
    double scale;       /* projections: 1/sqrt(in), x4 for the gate */
    int64_t rows, cols; /* the weight's shape (fp8 weights and their scales) */
} GenTensor;

typedef struct {
    const GenTensor *g;
    bool progress;
    int last_pct;
    int64_t done_before, total; /* bytes of the files written before this one, of all of them */
    /* the fp8 weight computed with its scales (fp8_cache_build) */
    bool cached;
    uint64_t cache_key;
    int64_t cache_rows, cache_cols;
    uint8_t *codes, *scales;
} GenCtx;

static float value(const GenTensor *g, uint64_t i)
{
    uint64_t h = as_gen_hash(g->key, i);
    switch (g->kind) {
    case AS_WK_NORM: return (float)(1.0 + 0.1 * as_gen_uniform(h));
    case AS_WK_SINK: return (float)(2.0 * as_gen_uniform(h));
    default: return (float)(as_gen_normal(h) * g->scale);
    }
}

/* The e8m0 code of the scale of a block whose largest magnitude is amax: the smallest power of two
 * 2^k with amax / 2^k <= 448 (e4m3's largest value), found exactly in double; 127 (scale 1) for an
 * all-zero block. */
static uint8_t e8m0_code(float amax)
{
    if (!(amax > 0))
        return 127;
    int k;
    frexp((double)amax, &k);
    k -= 9; /* 448 = 0.875 * 2^9 */
    while (ldexp(448.0, k) < (double)amax)
        k++;
    while (ldexp(448.0, k - 1) >= (double)amax)
        k--;
    k = k < -127 ? -127 : k > 127 ? 127 : k;
    return (uint8_t)(k + 127);
}

/* The largest |value| of block (br, bc) of an fp8 weight (short edge blocks included). */
static float block_amax(const GenTensor *g, int64_t br, int64_t bc)
{
    const int64_t r1 = (br + 1) * FP8_GEN_BLOCK < g->rows ? (br + 1) * FP8_GEN_BLOCK : g->rows;
    const int64_t c1 = (bc + 1) * FP8_GEN_BLOCK < g->cols ? (bc + 1) * FP8_GEN_BLOCK : g->cols;
    float amax = 0;
    for (int64_t r = br * FP8_GEN_BLOCK; r < r1; r++)
        for (int64_t c = bc * FP8_GEN_BLOCK; c < c1; c++) {
            float a = fabsf(value(g, (uint64_t)(r * g->cols + c)));
            amax = a > amax ? a : amax;
        }
    return amax;
}

/* e4m3 of v / 2^(code - 127), saturating at +-448, round to nearest even. */
static uint8_t e4m3_code(float v, uint8_t code)
{
    float q = ldexpf(v, 127 - (int)code); /* exact: a power-of-two scale */
    q = q > 448.0f ? 448.0f : q < -448.0f ? -448.0f : q;
    return as_e4m3_bits(q);
}

/* Block row br of an fp8 weight: its values into v ([rows of the block row][cols]) and the e8m0
 * code of each of its blocks into code. Returns the rows it has (the last may be short). */
static int64_t fp8_block_row(const GenTensor *g, int64_t br, float *v, uint8_t *code)
{
    const int64_t cols = g->cols, ncb = (cols + FP8_GEN_BLOCK - 1) / FP8_GEN_BLOCK;
    const int64_t r0 = br * FP8_GEN_BLOCK, r1 = r0 + FP8_GEN_BLOCK < g->rows ? r0 + FP8_GEN_BLOCK : g->rows;
    const int64_t n = (r1 - r0) * cols;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t k = 0; k < n; k++)
        v[k] = value(g, (uint64_t)(r0 * cols + k));
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t bc = 0; bc < ncb; bc++) {
        float amax = 0;
        for (int64_t r = 0; r < r1 - r0; r++)
            for (int64_t c = bc * FP8_GEN_BLOCK; c < (bc + 1) * FP8_GEN_BLOCK && c < cols; c++)
                amax = fabsf(v[r * cols + c]) > amax ? fabsf(v[r * cols + c]) : amax;
        code[bc] = e8m0_code(amax);
    }
    return r1 - r0;
}

/* Elements [e0, e0 + count) of an fp8 weight, block row by block row (a chunk that starts or ends
 * inside a block row computes that one again). */
static int fill_fp8(const GenTensor *g, int64_t e0, int64_t count, uint8_t *dst, AsError *err)
{
    const int64_t cols = g->cols, ncb = (cols + FP8_GEN_BLOCK - 1) / FP8_GEN_BLOCK;
    float *v = malloc((size_t)(FP8_GEN_BLOCK * cols) * sizeof *v);
    uint8_t *code = malloc((size_t)ncb);
    if (!v || !code) {
        free(v);
        free(code);
        return as_err(err, AS_ERUNTIME, "gen: out of memory for a block row of %lld columns", (long long)cols);
    }
    for (int64_t br = e0 / cols / FP8_GEN_BLOCK; br <= (e0 + count - 1) / cols / FP8_GEN_BLOCK; br++) {
        const int64_t r0 = br * FP8_GEN_BLOCK, r1 = r0 + fp8_block_row(g, br, v, code);
        const int64_t a = r0 * cols > e0 ? r0 * cols : e0, b = r1 * cols < e0 + count ? r1 * cols : e0 + count;
#pragma omp parallel for schedule(static) if (b - a > 65536)
        for (int64_t e = a; e < b; e++)
            dst[e - e0] = e4m3_code(v[e - r0 * cols], code[(e % cols) / FP8_GEN_BLOCK]);
    }
    free(v);
    free(code);
    return AS_OK;
}

/* A file lists "X.scale" before "X.weight" (name order), and the scales need every value of the
 * weight: so the first chunk of a scale tensor computes its weight whole, codes and scales, and
 * keeps both for the chunks that follow. A weight above this size is computed twice instead. */
#define FP8_CACHE_MAX ((int64_t)256 << 20)

static int fp8_cache_build(GenCtx *c, const GenTensor *g, AsError *err)
{
    const int64_t cols = g->cols, ncb = (cols + FP8_GEN_BLOCK - 1) / FP8_GEN_BLOCK;
    const int64_t nbr = (g->rows + FP8_GEN_BLOCK - 1) / FP8_GEN_BLOCK;
    free(c->codes);
    free(c->scales);
    c->cached = false;
    c->codes = malloc((size_t)(g->rows * cols > 0 ? g->rows * cols : 1));
    c->scales = malloc((size_t)(nbr * ncb > 0 ? nbr * ncb : 1));
    float *v = malloc((size_t)(FP8_GEN_BLOCK * cols > 0 ? FP8_GEN_BLOCK * cols : 1) * sizeof *v);
    if (!c->codes || !c->scales || !v) {
        free(v);
        return as_err(err, AS_ERUNTIME, "gen: out of memory for an fp8 weight of %lld x %lld", (long long)g->rows,
                      (long long)cols);
    }
    for (int64_t br = 0; br < nbr; br++) {
        uint8_t *code = c->scales + br * ncb, *dst = c->codes + br * FP8_GEN_BLOCK * cols;
        const int64_t n = fp8_block_row(g, br, v, code) * cols;
#pragma omp parallel for schedule(static) if (n > 65536)
        for (int64_t e = 0; e < n; e++)
            dst[e] = e4m3_code(v[e], code[(e % cols) / FP8_GEN_BLOCK]);
    }
    free(v);
    c->cache_key = g->key;
    c->cache_rows = g->rows;
    c->cache_cols = cols;
    c->cached = true;
    return AS_OK;
}

static bool fp8_cache_has(const GenCtx *c, const GenTensor *g)
{
    return c->cached && c->cache_key == g->key && c->cache_rows == g->rows && c->cache_cols == g->cols;
}

static int fill(void *ctx, int i, int64_t off, void *buf, size_t n, AsError *err)
{
    GenCtx *c = ctx;
    const GenTensor *g = &c->g[i];
    switch (g->store) {
    case ST_BF16: {
        uint16_t *dst = buf;
        int64_t e0 = off / 2, count = (int64_t)n / 2;
#pragma omp parallel for schedule(static) if (count > 65536)
        for (int64_t k = 0; k < count; k++)
            dst[k] = as_bf16_bits(value(g, (uint64_t)(e0 + k)));
        return AS_OK;
    }
    case ST_F32: {
        float *dst = buf;
        int64_t e0 = off / 4, count = (int64_t)n / 4;
#pragma omp parallel for schedule(static) if (count > 65536)
        for (int64_t k = 0; k < count; k++)
            dst[k] = value(g, (uint64_t)(e0 + k));
        return AS_OK;
    }
    case ST_FP8:
        if (fp8_cache_has(c, g)) {
            memcpy(buf, c->codes + off, n);
            return AS_OK;
        }
        return fill_fp8(g, off, (int64_t)n, buf, err);
    case ST_FP8_SCALE: {
        if (!fp8_cache_has(c, g) && g->rows * g->cols <= FP8_CACHE_MAX) {
            int rc = fp8_cache_build(c, g, err);
            if (rc)
                return rc;
        }
        if (fp8_cache_has(c, g)) {
            memcpy(buf, c->scales + off, n);
            return AS_OK;
        }
        uint8_t *dst = buf;
        const int64_t ncb = (g->cols + FP8_GEN_BLOCK - 1) / FP8_GEN_BLOCK;
#pragma omp parallel for schedule(dynamic, 16) if (n > 64)
        for (int64_t k = 0; k < (int64_t)n; k++)
            dst[k] = e8m0_code(block_amax(g, (off + k) / ncb, (off + k) % ncb));
        return AS_OK;
    }
    }
    return as_err(err, AS_ERUNTIME, "gen: tensor %d has no storage", i);
}

static void progress(void *ctx, int64_t done, int64_t total)
{
    GenCtx *c = ctx;
    (void)total;
    done += c->done_before;
    int pct = c->total ? (int)(done * 100 / c->total) : 100;
    if (!c->progress || c->total < PROGRESS_MIN || pct == c->last_pct)
        return;
    c->last_pct = pct;
    fprintf(stderr, "\rgen: %.2f / %.2f GiB (%d%%)", (double)done / (1 << 30), (double)c->total / (1 << 30), pct);
    if (done == c->total)
        fputc('\n', stderr);
    fflush(stderr);
}

static int mkdir_p(const char *dir, AsError *err)
{
    char p[1024];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p)
        return as_err(err, AS_EBADINPUT, "%s: path too long", dir);
    for (char *s = p + 1;; s++) {
        if (*s == '/' || !*s) {
            char c = *s;
            *s = '\0';
            if (mkdir(p, 0755) && errno != EEXIST) /* a missing or non-directory parent is bad input; a refusal, I/O */
                return as_err(err, errno == ENOENT || errno == ENOTDIR || errno == ENAMETOOLONG ? AS_EBADINPUT
                                                                                                : AS_ERUNTIME,
                              "%s: cannot create directory (%s)", p, strerror(errno));
            *s = c;
            if (!c)
                break;
        }
    }
    struct stat st;
    if (stat(dir, &st) || !S_ISDIR(st.st_mode))
        return as_err(err, AS_EBADINPUT, "%s: not a directory", dir);
    return AS_OK;
}

/* text (NUL-terminated, a newline added) into path, atomically; text NULL means out of memory. */
static int write_text(const char *path, const char *text, AsError *err)
{
    char tmp[AS_ATOMIC_TMP_MAX];
    FILE *f = NULL;
    if (!text)
        return as_err(err, AS_ERUNTIME, "%s: out of memory", path);
    int rc = as_atomic_create(path, tmp, sizeof tmp, &f, err);
    if (rc)
        return rc;
    if (fprintf(f, "%s\n", text) < 0) {
        as_atomic_abort(f, tmp);
        return as_err(err, AS_ERUNTIME, "%s: write failed", path);
    }
    return as_atomic_commit(f, tmp, path, err);
}

static int write_config(const AsConfig *cfg, AsConfigSpelling sp, const char *path, AsError *err)
{
    char *json = as_config_to_json_as(cfg, sp);
    int rc = write_text(path, json, err);
    free(json);
    return rc;
}

/* ---- the tensor list ---- */

typedef struct {
    AsStTensorSpec *spec;
    GenTensor *g;
    int *shard;
    int n, cap;
} List;

static GenTensor *add(List *L, const char *name, AsDType dt, int ndim, int64_t d0, int64_t d1, int shard)
{
    if (L->n == L->cap)
        return NULL;
    AsStTensorSpec *s = &L->spec[L->n];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->dtype = dt;
    s->ndim = ndim;
    s->shape[0] = d0;
    s->shape[1] = ndim == 2 ? d1 : 0;
    L->shard[L->n] = shard;
    GenTensor *g = &L->g[L->n++];
    memset(g, 0, sizeof *g);
    return g;
}

/* A tensor "X.weight" of kind, generated as its distribution says; an fp8 one (fp8 true, 2-D) with
 * its scale "X.scale" after it. */
static int add_weight(List *L, const char *name, AsWeightKind kind, int ndim, const int64_t shape[2], bool fp8,
                      uint64_t seed, int shard, AsError *err)
{
    AsDType dt = fp8 ? AS_DT_F8_E4M3 : kind == AS_WK_F32 || kind == AS_WK_GATE || kind == AS_WK_SINK ? AS_DT_F32
                                                                                                   : AS_DT_BF16;
    GenTensor *g = add(L, name, dt, ndim, shape[0], shape[1], shard);
    if (!g)
        return as_err(err, AS_ERUNTIME, "gen: tensor list full at %s", name);
    g->kind = kind;
    g->store = fp8 ? ST_FP8 : dt == AS_DT_F32 ? ST_F32 : ST_BF16;
    g->key = as_gen_key(seed, as_gen_fnv1a(name));
    /* N(0, 1/in): unit-variance outputs for unit-variance inputs. */
    g->scale = ndim == 2 ? 1.0 / sqrt((double)shape[1]) : 1.0;
    if (kind == AS_WK_GATE)
        g->scale *= 4.0; /* so that the group softmax is not flat */
    g->rows = shape[0];
    g->cols = ndim == 2 ? shape[1] : shape[0];
    if (!fp8)
        return AS_OK;
    char sname[192];
    size_t len = strlen(name);
    snprintf(sname, sizeof sname, "%.*s.scale", (int)(len > 7 ? len - 7 : len), name);
    const GenTensor w = *g;
    GenTensor *gs = add(L, sname, AS_DT_F8_E8M0, 2, (shape[0] + FP8_GEN_BLOCK - 1) / FP8_GEN_BLOCK,
                        (shape[1] + FP8_GEN_BLOCK - 1) / FP8_GEN_BLOCK, shard);
    if (!gs)
        return as_err(err, AS_ERUNTIME, "gen: tensor list full at %s", sname);
    *gs = w;
    gs->store = ST_FP8_SCALE;
    return AS_OK;
}

/* Whether an AsLayerWeights slot is one of model.py's fp8 projections (Linear at the default dtype). */
static bool fp8_slot(size_t slot)
{
    return slot == offsetof(AsLayerWeights, wq_a) || slot == offsetof(AsLayerWeights, wq_b) ||
           slot == offsetof(AsLayerWeights, wkv) || slot == offsetof(AsLayerWeights, wo_b) ||
           slot == offsetof(AsLayerWeights, i_wq_b);
}

/* Small stand-ins for tensors a full checkpoint holds that the attention never reads: per layer a
 * norm, hyper-connection parameters, a router and an expert's projection (fp8 when the model is). */
static int add_layer_extras(List *L, const AsConfig *c, int l, bool fp8, uint64_t seed, int shard, AsError *err)
{
    char n[192];
    int rc;
    const int64_t norm[2] = {c->dim, 0}, hc[2] = {24, 0}, hcs[2] = {3, 0}, gate[2] = {8, c->dim}, w1[2] = {32, c->dim};
    snprintf(n, sizeof n, "layers.%d.ffn_norm.weight", l);
    if ((rc = add_weight(L, n, AS_WK_NORM, 1, norm, false, seed, shard, err)))
        return rc;
    snprintf(n, sizeof n, "layers.%d.hc_attn_base", l);
    if ((rc = add_weight(L, n, AS_WK_SINK, 1, hc, false, seed, shard, err)))
        return rc;
    snprintf(n, sizeof n, "layers.%d.hc_attn_scale", l);
    if ((rc = add_weight(L, n, AS_WK_SINK, 1, hcs, false, seed, shard, err)))
        return rc;
    snprintf(n, sizeof n, "layers.%d.ffn.gate.weight", l);
    if ((rc = add_weight(L, n, AS_WK_PROJ, 2, gate, false, seed, shard, err)))
        return rc;
    snprintf(n, sizeof n, "layers.%d.ffn.experts.0.w1.weight", l);
    return add_weight(L, n, AS_WK_PROJ, 2, w1, fp8, seed, shard, err);
}

/* The last shard's: embeddings, the head, the final norm, an MTP layer under both namings. */
static int add_model_extras(List *L, const AsConfig *c, bool fp8, uint64_t seed, int shard, AsError *err)
{
    char n[192];
    int rc;
    const int64_t vocab[2] = {64, c->dim}, norm[2] = {c->dim, 0}, wq_a[2] = {c->q_lora_rank, c->dim};
    if ((rc = add_weight(L, "embed.weight", AS_WK_PROJ, 2, vocab, false, seed, shard, err)) ||
        (rc = add_weight(L, "head.weight", AS_WK_PROJ, 2, vocab, false, seed, shard, err)) ||
        (rc = add_weight(L, "norm.weight", AS_WK_NORM, 1, norm, false, seed, shard, err)) ||
        (rc = add_weight(L, "mtp.0.attn_norm.weight", AS_WK_NORM, 1, norm, false, seed, shard, err)) ||
        (rc = add_weight(L, "mtp.0.attn.wq_a.weight", AS_WK_PROJ, 2, wq_a, fp8, seed, shard, err)))
        return rc;
    snprintf(n, sizeof n, "layers.%d.attn_norm.weight", c->n_layers);
    return add_weight(L, n, AS_WK_NORM, 1, norm, false, seed, shard, err);
}

static int build_list(const AsConfig *cfg, bool fp8, bool released, int n_shards, uint64_t seed, List *L,
                      AsError *err)
{
    L->cap = cfg->n_layers * (AS_LAYER_MAX_TENSORS + 5 + 8) + 16;
    L->spec = calloc((size_t)L->cap, sizeof *L->spec);
    L->g = calloc((size_t)L->cap, sizeof *L->g);
    L->shard = calloc((size_t)L->cap, sizeof *L->shard);
    if (!L->spec || !L->g || !L->shard)
        return as_err(err, AS_ERUNTIME, "out of memory");
    int rc = AS_OK;
    for (int l = 0; l < cfg->n_layers && !rc; l++) {
        /* the layers in order over the first n_shards - 1 shards */
        int shard = released ? (int)((int64_t)l * (n_shards - 1) / cfg->n_layers) : 0;
        AsLayerTensor lt[AS_LAYER_MAX_TENSORS];
        int k = as_layer_tensors(cfg, l, lt);
        for (int j = 0; j < k && !rc; j++)
            rc = add_weight(L, lt[j].name, lt[j].kind, lt[j].ndim, lt[j].shape, fp8 && fp8_slot(lt[j].slot), seed,
                            shard, err);
        if (!rc && released)
            rc = add_layer_extras(L, cfg, l, fp8, seed, shard, err);
    }
    if (!rc && released)
        rc = add_model_extras(L, cfg, fp8, seed, n_shards - 1, err);
    return rc;
}

static void list_free(List *L)
{
    free(L->spec);
    free(L->g);
    free(L->shard);
}

/* ---- the files ---- */

static int cmp_spec_name(const void *a, const void *b)
{
    return strcmp((*(const AsStTensorSpec *const *)a)->name, (*(const AsStTensorSpec *const *)b)->name);
}

/* model.safetensors.index.json: the weight map in name order, the total size. */
static int write_index(const List *L, char (*shard_name)[64], const char *path, AsError *err)
{
    const AsStTensorSpec **ord = malloc((size_t)(L->n > 0 ? L->n : 1) * sizeof *ord);
    cJSON *root = cJSON_CreateObject(), *meta = root ? cJSON_AddObjectToObject(root, "metadata") : NULL;
    cJSON *wm = meta ? cJSON_AddObjectToObject(root, "weight_map") : NULL;
    bool ok = ord && wm;
    int64_t total = 0;
    for (int i = 0; ok && i < L->n; i++) {
        ord[i] = &L->spec[i];
        total += as_dtype_bytes(L->spec[i].dtype, L->spec[i].ndim == 2 ? L->spec[i].shape[0] * L->spec[i].shape[1]
                                                                        : L->spec[i].shape[0]);
    }
    if (ok)
        qsort(ord, (size_t)L->n, sizeof *ord, cmp_spec_name);
    ok = ok && cJSON_AddNumberToObject(meta, "total_size", (double)total) &&
         cJSON_AddStringToObject(meta, "generator", "attnscope gen");
    for (int i = 0; ok && i < L->n; i++)
        ok = cJSON_AddStringToObject(wm, ord[i]->name, shard_name[L->shard[ord[i] - L->spec]]) != NULL;
    char *text = ok ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    free(ord);
    int rc = write_text(path, text, err);
    free(text);
    return rc;
}

static int64_t spec_bytes(const AsStTensorSpec *s)
{
    int64_t count = 1;
    for (int d = 0; d < s->ndim; d++)
        count *= s->shape[d];
    return as_dtype_bytes(s->dtype, count);
}

AsPrecision as_gen_precision(const AsConfig *cfg, AsPrecision want)
{
    if (want != AS_PREC_AUTO)
        return want;
    return cfg->dtype != AS_PREC_AUTO ? cfg->dtype : AS_PREC_FP8;
}

int as_gen_model_opts(const AsConfig *cfg, const AsGenOptions *o, const char *dir, AsError *err)
{
    const AsPrecision prec = as_gen_precision(cfg, o->precision);
    const bool released = o->layout == AS_GEN_LAYOUT_RELEASED, fp8 = prec == AS_PREC_FP8;
    const int n_shards = !released ? 1 : o->shards ? o->shards : DEFAULT_SHARDS;
    if (released && (n_shards < 2 || n_shards > cfg->n_layers + 1 || n_shards > 99999))
        return as_err(err, AS_EBADINPUT, "--shards %d: the released layout has 2 .. %d shards (the layers over all "
                      "but the last, %d layers)", n_shards, cfg->n_layers + 1, cfg->n_layers);
    int rc = mkdir_p(dir, err);
    if (rc)
        return rc;
    /* The directory is written as one unit: an exclusive lock on it for the whole write, so that two
     * gens into one directory run one after the other and the last leaves its configs and weights. */
    int lock = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (lock < 0)
        return as_err(err, AS_ERUNTIME, "%s: cannot open (%s)", dir, strerror(errno));
    if (flock(lock, LOCK_EX | LOCK_NB)) {
        if (errno == EWOULDBLOCK)
            fprintf(stderr, "gen: %s: another gen is writing it; waiting\n", dir);
        while (flock(lock, LOCK_EX) && errno == EINTR)
            ;
    }
    List L = {0};
    GenCtx ctx = {.progress = o->progress, .last_pct = -1};
    AsStTensorSpec *sub = NULL;
    GenTensor *subg = NULL;
    char (*shard_name)[64] = calloc((size_t)n_shards, sizeof *shard_name);
    if (!shard_name) {
        rc = as_err(err, AS_ERUNTIME, "out of memory");
        goto out;
    }
    if ((rc = build_list(cfg, fp8, released, n_shards, o->seed, &L, err)))
        goto out;
    sub = malloc((size_t)L.n * sizeof *sub);
    subg = malloc((size_t)L.n * sizeof *subg);
    if (!sub || !subg) {
        rc = as_err(err, AS_ERUNTIME, "out of memory");
        goto out;
    }
    for (int i = 0; i < L.n; i++)
        ctx.total += spec_bytes(&L.spec[i]);
    /* The configs first: a directory whose weights exist is complete. gen's config.json carries no
     * dtype: the weights say which precision they are. */
    AsConfig c = *cfg;
    c.dtype = AS_PREC_AUTO;
    char path[1100];
    if (snprintf(path, sizeof path, "%s/inference/config.json", dir) >= (int)sizeof path) {
        rc = as_err(err, AS_EBADINPUT, "%s: path too long", dir);
        goto out;
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    if ((rc = write_config(&c, released ? AS_CONFIG_HF_NESTED : AS_CONFIG_HF, path, err)))
        goto out;
    if (released) {
        c.dtype = prec;
        snprintf(path, sizeof path, "%s/inference", dir);
        if ((rc = mkdir_p(path, err)))
            goto out;
        snprintf(path, sizeof path, "%s/inference/config.json", dir);
        if ((rc = write_config(&c, AS_CONFIG_DS, path, err)))
            goto out;
    }
    char seed_s[24];
    snprintf(seed_s, sizeof seed_s, "%llu", (unsigned long long)o->seed);
    const char *meta[] = {"format", "pt", "generator", "attnscope gen", "source", o->label ? o->label : "config",
                          "seed", seed_s, "precision", as_precision_name(prec), NULL};
    AsStWriteOptions opt = {fill, progress, &ctx, meta};
    for (int k = 0; k < n_shards && !rc; k++) {
        int n = 0;
        int64_t bytes = 0;
        for (int i = 0; i < L.n; i++)
            if (L.shard[i] == k) {
                sub[n] = L.spec[i];
                subg[n++] = L.g[i];
                bytes += spec_bytes(&L.spec[i]);
            }
        if (released)
            snprintf(shard_name[k], sizeof shard_name[k], "model-%05d-of-%05d.safetensors", k + 1, n_shards);
        else
            snprintf(shard_name[k], sizeof shard_name[k], "model.safetensors");
        snprintf(path, sizeof path, "%s/%s", dir, shard_name[k]);
        ctx.g = subg;
        rc = as_st_write(path, sub, n, &opt, err);
        ctx.done_before += bytes;
    }
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (!rc && released)
        rc = write_index(&L, shard_name, path, err);
    else if (!rc && unlink(path) && errno != ENOENT) /* a stale index would be loaded instead */
        rc = as_err(err, AS_ERUNTIME, "%s: cannot remove the index of an earlier model (%s)", path, strerror(errno));
out:
    close(lock); /* releases the lock */
    list_free(&L);
    free(ctx.codes);
    free(ctx.scales);
    free(sub);
    free(subg);
    free(shard_name);
    return rc;
}

int as_gen_model(const AsConfig *cfg, AsPrecision precision, uint64_t seed, const char *label, const char *dir,
                 bool progress, AsError *err)
{
    const AsGenOptions o = {.precision = precision, .seed = seed, .label = label, .progress = progress};
    return as_gen_model_opts(cfg, &o, dir, err);
}
