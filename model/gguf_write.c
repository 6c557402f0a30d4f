/* GGUF writing: the header built in memory (metadata, tensor infos), then each tensor streamed
 * row chunk by row chunk from the caller's fill, every tensor at a 32-byte aligned offset, into
 * a temporary file renamed over the target at the end (model/safetensors.h's atomic writer);
 * and the converter behind `attnscope convert`. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "model/model_load.h"
#include "model/quants.h"
#include "model/safetensors.h"
#include "ref/numerics.h"

#define ALIGN AS_GGUF_DEFAULT_ALIGNMENT
#define CHUNK_BYTES ((int64_t)4 << 20)

typedef struct {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} Buf;

static void put(Buf *b, const void *src, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->n + n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put_u32(Buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(Buf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(Buf *b, const char *s)
{
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}

static int put_meta(Buf *b, const AsGgufMeta *m, AsError *err)
{
    if (!m->key[0])
        return as_err(err, AS_EBADINPUT, "writing GGUF: a metadata key is empty");
    put_str(b, m->key);
    put_u32(b, (uint32_t)m->type);
    switch (m->type) {
    case AS_GGUF_STRING: put_str(b, m->str); break;
    case AS_GGUF_U32: put_u32(b, m->u32); break;
    case AS_GGUF_I32: put(b, &m->i32, 4); break;
    case AS_GGUF_F32: put(b, &m->f32, 4); break;
    case AS_GGUF_F64: put(b, &m->f64, 8); break;
    case AS_GGUF_BOOL: {
        uint8_t v = m->b;
        put(b, &v, 1);
        break;
    }
    case AS_GGUF_ARRAY:
        if (m->n < 0 || (m->n && !m->arr))
            return as_err(err, AS_EBADINPUT, "writing GGUF: %s: bad array", m->key);
        put_u32(b, AS_GGUF_I32);
        put_u64(b, (uint64_t)m->n);
        put(b, m->arr, (size_t)m->n * 4);
        break;
    default:
        return as_err(err, AS_EBADINPUT, "writing GGUF: %s: metadata type %d is not written", m->key, (int)m->type);
    }
    return AS_OK;
}

/* Bytes of one tensor, its rows and row size, checked. */
static int spec_size(const AsGgufTensorSpec *t, int64_t *rows, int64_t *row_bytes, AsError *err)
{
    if (!t->name[0])
        return as_err(err, AS_EBADINPUT, "writing GGUF: a tensor has no name");
    if (as_ggml_type_of(t->dtype) < 0)
        return as_err(err, AS_EBADINPUT, "writing GGUF: %s: dtype %s is not written", t->name, as_dtype_name(t->dtype));
    if (t->ndim < 1 || t->ndim > 4)
        return as_err(err, AS_EBADINPUT, "writing GGUF: %s: %d dimensions", t->name, t->ndim);
    int64_t cols = t->shape[t->ndim - 1], r = 1;
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] < 0 || t->shape[d] > ((int64_t)1 << 40))
            return as_err(err, AS_EBADINPUT, "writing GGUF: %s: bad shape", t->name);
    for (int d = 0; d + 1 < t->ndim; d++) {
        if (t->shape[d] && r > ((int64_t)1 << 48) / t->shape[d])
            return as_err(err, AS_EBADINPUT, "writing GGUF: %s: more than 2^48 rows", t->name);
        r *= t->shape[d];
    }
    int64_t blk = t->dtype == AS_DT_Q2_K ? 256 : t->dtype == AS_DT_Q8_0 ? 32 : 1;
    if (cols % blk)
        return as_err(err, AS_EBADINPUT, "writing GGUF: %s: rows of %lld values are not whole %s blocks of %lld",
                      t->name, (long long)cols, as_dtype_name(t->dtype), (long long)blk);
    *rows = r;
    *row_bytes = as_dtype_bytes(t->dtype, cols);
    if (*row_bytes && r > ((int64_t)1 << 56) / *row_bytes)
        return as_err(err, AS_EBADINPUT, "writing GGUF: %s: more than 2^56 bytes", t->name);
    return AS_OK;
}

static const uint8_t zeros[ALIGN];

static int pad_file(FILE *f, uint64_t *pos, const char *path, AsError *err)
{
    uint64_t pad = (ALIGN - *pos % ALIGN) % ALIGN;
    if (pad && fwrite(zeros, 1, (size_t)pad, f) != pad)
        return as_err(err, AS_ERUNTIME, "%s: write failed (%s)", path, strerror(errno));
    *pos += pad;
    return AS_OK;
}

int as_gguf_write(const char *path, const AsGgufMeta *meta, int n_meta, const AsGgufTensorSpec *t, int n,
                  const AsGgufWriteOptions *opt, AsError *err)
{
    static const AsGgufWriteOptions none = {0};
    if (!opt)
        opt = &none;
    if (n < 0 || n_meta < 0)
        return as_err(err, AS_EBADINPUT, "writing GGUF: negative counts");
    if (n > 0 && !opt->fill)
        return as_err(err, AS_EBADINPUT, "writing GGUF: no fill function for the tensor data");
    int64_t *rows = calloc((size_t)n + 1, sizeof *rows), *rbytes = calloc((size_t)n + 1, sizeof *rbytes);
    Buf h = {0};
    void *buf = NULL;
    FILE *f = NULL;
    char tmp[AS_ATOMIC_TMP_MAX];
    int rc = AS_OK;
    if (!rows || !rbytes) {
        rc = as_err(err, AS_ERUNTIME, "%s: out of memory", path);
        goto out;
    }
    /* header: magic, version, counts, metadata (alignment first), tensor infos */
    put(&h, AS_GGUF_MAGIC, 4);
    put_u32(&h, AS_GGUF_VERSION);
    put_u64(&h, (uint64_t)n);
    put_u64(&h, (uint64_t)n_meta + 1);
    AsGgufMeta al = {.key = "general.alignment", .type = AS_GGUF_U32, .u32 = ALIGN};
    rc = put_meta(&h, &al, err);
    for (int i = 0; i < n_meta && !rc; i++) {
        if (!strcmp(meta[i].key, "general.alignment"))
            rc = as_err(err, AS_EBADINPUT, "writing GGUF: general.alignment is written by the writer");
        else
            rc = put_meta(&h, &meta[i], err);
    }
    uint64_t off = 0, total = 0;
    int64_t max_chunk = 1;
    for (int i = 0; i < n && !rc; i++) {
        if ((rc = spec_size(&t[i], &rows[i], &rbytes[i], err)))
            break;
        for (int j = 0; j < i && !rc; j++)
            if (!strcmp(t[i].name, t[j].name))
                rc = as_err(err, AS_EBADINPUT, "writing GGUF: tensor %s given twice", t[i].name);
        put_str(&h, t[i].name);
        put_u32(&h, (uint32_t)t[i].ndim);
        for (int d = t[i].ndim - 1; d >= 0; d--) /* ne[0] is the innermost dim */
            put_u64(&h, (uint64_t)t[i].shape[d]);
        put_u32(&h, (uint32_t)as_ggml_type_of(t[i].dtype));
        put_u64(&h, off);
        uint64_t bytes = (uint64_t)(rows[i] * rbytes[i]);
        off += (bytes + ALIGN - 1) / ALIGN * ALIGN;
        total += bytes;
        if (rbytes[i] > max_chunk)
            max_chunk = rbytes[i];
    }
    if (!rc && h.oom)
        rc = as_err(err, AS_ERUNTIME, "%s: out of memory building the header", path);
    if (rc)
        goto out;
    int64_t chunk = max_chunk > CHUNK_BYTES ? max_chunk : CHUNK_BYTES;
    if (!(buf = malloc((size_t)chunk))) {
        rc = as_err(err, AS_ERUNTIME, "%s: out of memory", path);
        goto out;
    }
    if ((rc = as_atomic_create(path, tmp, sizeof tmp, &f, err)))
        goto out;
    uint64_t pos = h.n, done = 0;
    if (fwrite(h.p, 1, h.n, f) != h.n) {
        rc = as_err(err, AS_ERUNTIME, "%s: write failed (%s)", path, strerror(errno));
        goto out;
    }
    for (int i = 0; i < n && !rc; i++) {
        if ((rc = pad_file(f, &pos, path, err)))
            break;
        int64_t per = rbytes[i] > 0 ? chunk / rbytes[i] : rows[i];
        per = per < 1 ? 1 : per;
        for (int64_t r = 0; r < rows[i] && !rc; r += per) {
            int64_t nr = rows[i] - r < per ? rows[i] - r : per;
            size_t bytes = (size_t)(nr * rbytes[i]);
            if ((rc = opt->fill(opt->ctx, i, r, nr, buf, err)))
                break;
            if (fwrite(buf, 1, bytes, f) != bytes) {
                rc = as_err(err, AS_ERUNTIME, "%s: write failed (%s)", path, strerror(errno));
                break;
            }
            pos += bytes;
            done += bytes;
            if (opt->progress)
                opt->progress(opt->ctx, (int64_t)done, (int64_t)total);
        }
    }
    if (!rc && n > 0)
        rc = pad_file(f, &pos, path, err);
    if (!rc) {
        rc = as_atomic_commit(f, tmp, path, err);
        f = NULL;
    }
out:
    if (f)
        as_atomic_abort(f, tmp);
    free(rows);
    free(rbytes);
    free(h.p);
    free(buf);
    return rc;
}

/* ---- converting a loaded model ---- */

#define PROGRESS_MIN ((int64_t)64 << 20)
#define MAX_META 64

/* llama.cpp's general.file_type (llama_ftype) of a whole file */
static uint32_t file_type(AsDType q)
{
    return q == AS_DT_Q2_K ? 10 : q == AS_DT_Q8_0 ? 7 : 32; /* MOSTLY_Q2_K, MOSTLY_Q8_0, MOSTLY_BF16 */
}

typedef struct {
    const AsWTensor **src;
    const AsGgufTensorSpec *spec;
    bool progress;
    int last_pct;
} Conv;

/* Rows [r0, r0 + nr) of tensor i in its output dtype, from the source's exact f32 values; each
 * row is independent (ggml quantises row by row), so threads take rows. */
static int conv_fill(void *ctx, int i, int64_t r0, int64_t nr, void *buf, AsError *err)
{
    const Conv *c = ctx;
    const AsWTensor *src = c->src[i];
    const AsGgufTensorSpec *t = &c->spec[i];
    const int64_t cols = t->shape[t->ndim - 1], rb = as_dtype_bytes(t->dtype, cols);
    if (src->dtype == t->dtype && (t->dtype == AS_DT_Q8_0 || t->dtype == AS_DT_Q2_K)) {
        /* already in the format: the blocks as they are (re-quantising would change them) */
        memcpy(buf, (const uint8_t *)src->data + r0 * rb, (size_t)(nr * rb));
        return AS_OK;
    }
    int64_t bad = -1; /* first row holding a non-finite value (quantised formats only) */
    int oom = 0;
#pragma omp parallel if (nr * cols > 65536)
    {
        float *row = malloc((size_t)cols * sizeof *row + 1);
        void *blk = malloc((size_t)rb + 1); /* aligned for the block structs */
        if (!row || !blk) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for schedule(static)
        for (int64_t r = 0; r < nr; r++) {
            if (!row || !blk)
                continue;
            uint8_t *dst = (uint8_t *)buf + r * rb;
            as_wt_rows_f32(src, r0 + r, 1, row);
            bool finite = true;
            for (int64_t k = 0; k < cols && finite; k++)
                finite = isfinite(row[k]);
            switch (t->dtype) {
            case AS_DT_F32: memcpy(dst, row, (size_t)rb); break;
            case AS_DT_BF16:
                for (int64_t k = 0; k < cols; k++) {
                    uint16_t b = as_bf16_bits(row[k]);
                    memcpy(dst + 2 * k, &b, 2);
                }
                break;
            case AS_DT_Q8_0:
            case AS_DT_Q2_K:
                if (!finite) {
#pragma omp critical(as_conv_bad)
                    if (bad < 0 || r0 + r < bad)
                        bad = r0 + r;
                    break;
                }
                if (t->dtype == AS_DT_Q8_0)
                    as_quantize_row_q8_0(row, blk, cols);
                else
                    as_quantize_row_q2_K(row, blk, cols);
                memcpy(dst, blk, (size_t)rb);
                break;
            default: break;
            }
        }
        free(row);
        free(blk);
    }
    if (oom)
        return as_err(err, AS_ERUNTIME, "converting %s: out of memory", t->name);
    if (bad >= 0)
        return as_err(err, AS_EBADINPUT, "%s: row %lld holds a non-finite value: it cannot be quantised to %s",
                      src->name, (long long)bad, as_dtype_name(t->dtype));
    return AS_OK;
}

static void conv_progress(void *ctx, int64_t done, int64_t total)
{
    Conv *c = ctx;
    int pct = total ? (int)(done * 100 / total) : 100;
    if (!c->progress || total < PROGRESS_MIN || pct == c->last_pct)
        return;
    c->last_pct = pct;
    fprintf(stderr, "\rconvert: %.2f / %.2f GiB (%d%%)", (double)done / (1 << 30), (double)total / (1 << 30), pct);
    if (done == total)
        fputc('\n', stderr);
    fflush(stderr);
}

static int64_t block_of(AsDType t) { return t == AS_DT_Q2_K ? AS_QK_K : t == AS_DT_Q8_0 ? AS_QK8_0 : 1; }

int as_gguf_convert(const AsModel *m, const AsGgufConvertOptions *o, const char *path, AsError *err)
{
    const AsConfig *cfg = &m->cfg;
    if (o->quant != AS_DT_Q2_K && o->quant != AS_DT_Q8_0 && o->quant != AS_DT_BF16)
        return as_err(err, AS_EBADINPUT, "convert: projections are written as Q2_K, Q8_0 or BF16, not %s",
                      as_dtype_name(o->quant));
    int cap = cfg->n_layers * AS_LAYER_MAX_TENSORS + 1, n = 0, rc = AS_OK;
    AsGgufTensorSpec *spec = calloc((size_t)cap, sizeof *spec);
    const AsWTensor **src = calloc((size_t)cap, sizeof *src);
    AsGgufMeta *meta = calloc(MAX_META, sizeof *meta);
    if (!spec || !src || !meta) {
        rc = as_err(err, AS_ERUNTIME, "out of memory");
        goto out;
    }
    for (int l = 0; l < cfg->n_layers && !rc; l++) {
        AsLayerTensor lt[AS_LAYER_MAX_TENSORS];
        int k = as_layer_tensors(cfg, l, lt);
        for (int j = 0; j < k && !rc; j++) {
            const AsWTensor *t = as_model_find(m, lt[j].name);
            if (!t) {
                rc = as_err(err, AS_EBADINPUT, "%s: missing from the source model", lt[j].name);
                break;
            }
            AsGgufTensorSpec *s = &spec[n];
            src[n++] = t;
            if (o->names == AS_GGUF_NAMES_DEEPSEEK || !as_gguf_name_to_llama(t->name, s->name, sizeof s->name))
                snprintf(s->name, sizeof s->name, "%s", t->name);
            s->ndim = t->ndim;
            memcpy(s->shape, t->shape, sizeof s->shape);
            s->dtype = lt[j].kind == AS_WK_PROJ ? o->quant : AS_DT_F32;
            int64_t cols = as_wt_cols(t), b = block_of(s->dtype);
            if (cols % b)
                rc = as_err(err, AS_EBADINPUT,
                            "%s: rows of %lld values cannot be %s (blocks of %lld values): convert with --quant %s, "
                            "or use a geometry whose projection inputs are multiples of %lld (gen --preset tiny-q)",
                            t->name, (long long)cols, as_dtype_name(s->dtype), (long long)b,
                            s->dtype == AS_DT_Q2_K ? "q8_0 or bf16" : "bf16", (long long)b);
        }
    }
    if (rc)
        goto out;
    int nm = 0;
    AsGgufMeta *mm = &meta[nm++];
    snprintf(mm->key, sizeof mm->key, "general.architecture");
    mm->type = AS_GGUF_STRING;
    snprintf(mm->str, sizeof mm->str, "%s", AS_GGUF_ARCH);
    mm = &meta[nm++];
    snprintf(mm->key, sizeof mm->key, "general.name");
    mm->type = AS_GGUF_STRING;
    snprintf(mm->str, sizeof mm->str, "attnscope convert of %.200s", o->source ? o->source : m->weights_name);
    mm = &meta[nm++];
    snprintf(mm->key, sizeof mm->key, "general.file_type");
    mm->type = AS_GGUF_U32;
    mm->u32 = file_type(o->quant);
    mm = &meta[nm++];
    snprintf(mm->key, sizeof mm->key, "general.quantization_version");
    mm->type = AS_GGUF_U32;
    mm->u32 = 2; /* GGML_QNT_VERSION */
    mm = &meta[nm++];
    snprintf(mm->key, sizeof mm->key, "attnscope.tensor_names");
    mm->type = AS_GGUF_STRING;
    snprintf(mm->str, sizeof mm->str, "%s", o->names == AS_GGUF_NAMES_DEEPSEEK ? "deepseek" : "llama");
    mm = &meta[nm++];
    snprintf(mm->key, sizeof mm->key, "attnscope.source_digest");
    mm->type = AS_GGUF_STRING;
    snprintf(mm->str, sizeof mm->str, "%s", m->digest);
    mm = &meta[nm++];
    snprintf(mm->key, sizeof mm->key, "%s.rope.scaling.type", AS_GGUF_ARCH);
    mm->type = AS_GGUF_STRING;
    snprintf(mm->str, sizeof mm->str, "yarn");
    int k = as_gguf_config_meta(cfg, AS_GGUF_ARCH, meta + nm, MAX_META - nm);
    if (k < 0) {
        rc = as_err(err, AS_ERUNTIME, "out of memory");
        goto out;
    }
    nm += k;
    Conv c = {src, spec, o->progress, -1};
    AsGgufWriteOptions wo = {conv_fill, conv_progress, &c};
    rc = as_gguf_write(path, meta, nm, spec, n, &wo, err);
out:
    free(spec);
    free(src);
    free(meta);
    return rc;
}
