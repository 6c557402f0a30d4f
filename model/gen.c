/* Synthetic models: the config and deterministic weights for every tensor the roles need,
 * streamed into one safetensors file chunk by chunk (the flash preset is ~10 GB). */
#include "model/gen.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model/model_load.h"
#include "model/safetensors.h"
#include "ref/numerics.h"

#define SQRT3 1.7320508075688772
_Static_assert(sizeof ((AsStTensorSpec *)0)->name == sizeof ((AsLayerTensor *)0)->name, "tensor name sizes");
#define GOLDEN 0x9e3779b97f4a7c15ull
#define PROGRESS_MIN ((int64_t)64 << 20) /* smaller models are written before a line could be read */

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

typedef struct {
    AsWeightKind kind;
    uint64_t key;
    double scale;       /* projections: 1/sqrt(in), x4 for the gate */
} GenTensor;

typedef struct {
    const GenTensor *g;
    bool progress;
    int last_pct;
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

static int fill(void *ctx, int i, int64_t off, void *buf, size_t n, AsError *err)
{
    (void)err;
    const GenTensor *g = &((const GenCtx *)ctx)->g[i];
    if (g->kind == AS_WK_PROJ) {    /* bf16 values */
        uint16_t *dst = buf;
        int64_t e0 = off / 2, count = (int64_t)n / 2;
#pragma omp parallel for schedule(static) if (count > 65536)
        for (int64_t k = 0; k < count; k++)
            dst[k] = as_bf16_bits(value(g, (uint64_t)(e0 + k)));
    } else {                        /* f32 */
        float *dst = buf;
        int64_t e0 = off / 4, count = (int64_t)n / 4;
#pragma omp parallel for schedule(static) if (count > 65536)
        for (int64_t k = 0; k < count; k++)
            dst[k] = value(g, (uint64_t)(e0 + k));
    }
    return AS_OK;
}

static void progress(void *ctx, int64_t done, int64_t total)
{
    GenCtx *c = ctx;
    int pct = total ? (int)(done * 100 / total) : 100;
    if (!c->progress || total < PROGRESS_MIN || pct == c->last_pct)
        return;
    c->last_pct = pct;
    fprintf(stderr, "\rgen: %.2f / %.2f GiB (%d%%)", (double)done / (1 << 30), (double)total / (1 << 30), pct);
    if (done == total)
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
            if (mkdir(p, 0755) && errno != EEXIST)
                return as_err(err, AS_EBADINPUT, "%s: cannot create directory (%s)", p, strerror(errno));
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

static int write_config(const AsConfig *cfg, const char *path, AsError *err)
{
    char *json = as_config_to_json(cfg), tmp[AS_ATOMIC_TMP_MAX];
    FILE *f = NULL;
    if (!json)
        return as_err(err, AS_ERUNTIME, "%s: out of memory", path);
    int rc = as_atomic_create(path, tmp, sizeof tmp, &f, err);
    if (!rc && fprintf(f, "%s\n", json) < 0) {
        as_atomic_abort(f, tmp);
        rc = as_err(err, AS_ERUNTIME, "%s: write failed", path);
    } else if (!rc) {
        rc = as_atomic_commit(f, tmp, path, err);
    }
    free(json);
    return rc;
}

int as_gen_model(const AsConfig *cfg, uint64_t seed, const char *label, const char *dir, bool show_progress,
                 AsError *err)
{
    int rc = mkdir_p(dir, err);
    if (rc)
        return rc;
    int cap = cfg->n_layers * AS_LAYER_MAX_TENSORS, n = 0;
    AsStTensorSpec *specs = calloc((size_t)cap, sizeof *specs);
    GenTensor *g = calloc((size_t)cap, sizeof *g);
    if (!specs || !g) {
        rc = as_err(err, AS_ERUNTIME, "out of memory");
        goto out;
    }
    for (int l = 0; l < cfg->n_layers; l++) {
        AsLayerTensor lt[AS_LAYER_MAX_TENSORS];
        int k = as_layer_tensors(cfg, l, lt);
        for (int j = 0; j < k; j++, n++) {
            AsStTensorSpec *s = &specs[n];
            memcpy(s->name, lt[j].name, sizeof s->name); /* both 192 bytes, NUL-terminated */
            s->dtype = lt[j].kind == AS_WK_PROJ ? AS_DT_BF16 : AS_DT_F32;
            s->ndim = lt[j].ndim;
            memcpy(s->shape, lt[j].shape, sizeof lt[j].shape);
            g[n].kind = lt[j].kind;
            g[n].key = as_gen_key(seed, as_gen_fnv1a(lt[j].name));
            /* N(0, 1/in): unit-variance outputs for unit-variance inputs. */
            g[n].scale = lt[j].ndim == 2 ? 1.0 / sqrt((double)lt[j].shape[1]) : 1.0;
            if (lt[j].kind == AS_WK_GATE)
                g[n].scale *= 4.0; /* so that the group softmax is not flat */
        }
    }
    /* The config first: a directory whose model.safetensors exists is complete. */
    char path[1100], seed_s[24];
    if (snprintf(path, sizeof path, "%s/config.json", dir) >= (int)sizeof path) {
        rc = as_err(err, AS_EBADINPUT, "%s: path too long", dir);
        goto out;
    }
    if ((rc = write_config(cfg, path, err)))
        goto out;
    snprintf(seed_s, sizeof seed_s, "%llu", (unsigned long long)seed);
    const char *meta[] = {"format", "pt", "generator", "attnscope gen", "source", label ? label : "config",
                          "seed", seed_s, NULL};
    GenCtx ctx = {g, show_progress, -1};
    AsStWriteOptions opt = {fill, progress, &ctx, meta};
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    rc = as_st_write(path, specs, n, &opt, err);
out:
    free(specs);
    free(g);
    return rc;
}
