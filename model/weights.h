/* Weight tensors as they lie in a file (mmap), whatever their container (safetensors, GGUF),
 * and the per-layer set a layer's role needs. The reference and the engine read weights only
 * through AsWTensor, so every storage type takes one path. */
#ifndef AS_WEIGHTS_H
#define AS_WEIGHTS_H

#include <stdbool.h>
#include <stdint.h>

#include "model/config.h"
#include "model/errors.h"

typedef enum {
    AS_DT_F32,
    AS_DT_F16,
    AS_DT_BF16,
    AS_DT_F8_E4M3,  /* with a block scale tensor (one per 32x32 or 128x128 block) */
    AS_DT_F8_E8M0,  /* only as a scale tensor: value 2^(e-127) */
    AS_DT_Q8_0,     /* ggml: 32 weights per block, fp16 d, int8 q */
    AS_DT_Q2_K,     /* ggml: 256 weights per block, see model/ggml_blocks.h */
    AS_DT_COUNT
} AsDType;

const char *as_dtype_name(AsDType t);      /* "BF16", "F32", "F8_E4M3", "Q2_K"... */
/* Bytes for n elements of t (for block types n must be a multiple of the block). */
int64_t as_dtype_bytes(AsDType t, int64_t n);

typedef struct AsWTensor {
    char name[192];
    AsDType dtype;
    int ndim;
    int64_t shape[4];           /* [out, in] for a projection, as nn.Linear stores it */
    const void *data;           /* into the mapping; never written */
    int64_t nbytes;
    const struct AsWTensor *scale; /* F8_E4M3 block scales [ceil(out/B)][ceil(in/B)], else NULL */
    int block;                  /* F8_E4M3 with a scale: B, the scale's block edge (32 or 128, from its shape) */
} AsWTensor;

static inline int64_t as_wt_rows(const AsWTensor *t) { return t->ndim == 1 ? 1 : t->shape[0]; }
static inline int64_t as_wt_cols(const AsWTensor *t) { return t->shape[t->ndim - 1]; }

/* Decodes rows [r0, r0 + n) into dst (n x cols f32), exactly: bf16/f16/f32 widened, fp8 times its
 * block scale rounded to bf16 (SPEC section 1), quantised blocks dequantised as ggml does. */
void as_wt_rows_f32(const AsWTensor *t, int64_t r0, int64_t n, float *dst);
/* The same into bf16 bit patterns (f32 tensors are rounded: only for tensors that are bf16 values). */
void as_wt_rows_bf16(const AsWTensor *t, int64_t r0, int64_t n, uint16_t *dst);
/* A 1-D tensor (norm weight, sink) as a new f32 array; caller frees. NULL on allocation failure. */
float *as_wt_vec_f32(const AsWTensor *t);

/* The attention weights of one layer (NULL where the role has none). */
typedef struct {
    const AsWTensor *attn_norm;     /* layers.{l}.attn_norm.weight [dim] */
    const AsWTensor *wq_a, *q_norm, *wq_b, *wkv, *kv_norm, *wo_a, *wo_b, *attn_sink;
    const AsWTensor *c_wkv, *c_wgate, *c_norm;            /* compressor (kv sources) */
    const AsWTensor *i_wq_b, *i_weights_proj, *i_wk, *i_k_norm; /* indexer (index sources) */
} AsLayerWeights;

typedef struct AsWeightFile AsWeightFile;   /* one mapped container file */

typedef struct AsModel {
    AsConfig cfg;
    char dir[1024];             /* directory (or file) it was loaded from */
    char weights_name[256];     /* file name as shown in reports and dumps */
    char digest[65];            /* hex SHA-256 of headers, sizes and sampled data (model/model_load.c) */
    int n_files;
    AsWeightFile **files;
    int n_tensors;
    AsWTensor *tensors;         /* every tensor of every file */
    AsLayerWeights layer[AS_MAX_LAYERS];
    bool quantised;             /* some projection is Q2_K / Q8_0 (looser tolerance) */
    AsPrecision precision;      /* what the model runs in: AS_PREC_BF16 or AS_PREC_FP8 (model/precision.h) */
} AsModel;

/* Loads DIR (config.json + model.safetensors or model.safetensors.index.json + shards), a single
 * .safetensors file with a config.json beside it, or a .gguf file. max_seq sets cfg.max_seq
 * (0 = default). Checks presence, shape and dtype of every tensor each layer's role needs. */
int as_model_load(const char *path, int max_seq, AsModel *m, AsError *err);
void as_model_free(AsModel *m);
const AsWTensor *as_model_find(const AsModel *m, const char *name);

#endif
