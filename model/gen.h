/* Synthetic models with deterministic weights (`attnscope gen`), and the counter-based generator
 * behind them and behind the synthetic token inputs (model/inputs.h).
 *
 * Element i of a tensor named T under seed S is a function of hash(key(S, fnv1a(T)), i) alone: any
 * chunk is computed independently (in parallel), and the bytes are the same on every machine
 * (integer hashing, IEEE arithmetic only: no libm transcendentals, no FMA contraction). The
 * distributions are documented in docs/MODEL_FILES.md. */
#ifndef AS_GEN_H
#define AS_GEN_H

#include <stdbool.h>
#include <stdint.h>

#include "model/config.h"
#include "model/errors.h"

uint64_t as_gen_fnv1a(const char *s);
/* The per-tensor key of a seed and a stream (a tensor name's fnv1a). */
uint64_t as_gen_key(uint64_t seed, uint64_t stream);
/* The 64-bit hash of element i under key. */
uint64_t as_gen_hash(uint64_t key, uint64_t i);
/* Irwin-Hall of the hash's four 16-bit fields, centred and scaled to unit variance: a normal-ish
 * value bounded at +-2*sqrt(3). */
double as_gen_normal(uint64_t h);
/* The hash's top 53 bits as a uniform value in [-1, 1). */
double as_gen_uniform(uint64_t h);

/* The version of what gen writes: raised whenever the same seed and config give other bytes, so
 * that a model cached by an older generator is not taken for a current one (driver/model_spec.c). */
#define AS_GEN_FORMAT 2

typedef enum {
    AS_GEN_LAYOUT_SINGLE = 0, /* dir/config.json (flat, Hugging Face names) + dir/model.safetensors */
    AS_GEN_LAYOUT_RELEASED,   /* the released repo's layout: docs/MODEL_FILES.md */
} AsGenLayout;

typedef struct {
    AsPrecision precision;  /* AS_PREC_AUTO: the config's dtype, else fp8 (as_gen_precision) */
    AsGenLayout layout;
    int shards;             /* released layout: shard files, >= 2 (0: 4); the last holds no attention tensor */
    uint64_t seed;
    const char *label;      /* the source in the files' metadata ("tiny", "config"); NULL: "config" */
    bool progress;          /* a progress line on stderr */
} AsGenOptions;

/* The precision gen writes for want: want itself, else the config's dtype, else fp8 (model.py's
 * default, and the released checkpoint's). */
AsPrecision as_gen_precision(const AsConfig *cfg, AsPrecision want);

/* Writes a synthetic model of a validated config into dir, creating dir (and its parents) when
 * missing; every file is written atomically, the weights last (the index last of all), so a
 * directory whose weights exist is complete.
 *   fp8: the five fp8 projections (wq_a, wq_b, wkv, wo_b, indexer.wq_b) as F8_E4M3 X.weight with
 *        F8_E8M0 X.scale, one per 32 x 32 block; bf16: them as BF16. Every other tensor as SPEC 1's
 *        table stores it (norm weights BF16, sinks and the ratio-2 compressor's wkv / wgate F32).
 *   Released layout: dir/config.json with the geometry in text_config, dir/inference/config.json
 *        (flat, SPEC's names, with dtype), o->shards model-0000k-of-0000N.safetensors shards holding
 *        the layers in order and small stand-ins for the tensors of the full model the attention
 *        does not use (the last shard only those), and model.safetensors.index.json. */
int as_gen_model_opts(const AsConfig *cfg, const AsGenOptions *o, const char *dir, AsError *err);
/* The single layout in the given precision. */
int as_gen_model(const AsConfig *cfg, AsPrecision precision, uint64_t seed, const char *label, const char *dir,
                 bool progress, AsError *err);

#endif
