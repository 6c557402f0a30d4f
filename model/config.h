/* The attention geometry of a DeepSeek-V4.1 model and each layer's role (SPEC section 1). */
#ifndef AS_CONFIG_H
#define AS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/errors.h"

#define AS_MAX_LAYERS 256

/* The precision a model runs in (model.py's ModelArgs.dtype): fp8 runs the fp8 projections as
 * act_quant + fp8 GEMM (SPEC 2), bf16 runs every projection as the bf16 linear. AUTO: follow the
 * config's "dtype", else the weights (model/precision.h). */
typedef enum { AS_PREC_AUTO = 0, AS_PREC_BF16, AS_PREC_FP8 } AsPrecision;

/* What one layer is and which shared state it reads (derived by as_config_derive). */
typedef struct {
    int ratio;              /* compress_ratios[l]: 0, 1 or 2 */
    bool kv_source;         /* owns a Compressor, publishes the compressed cache */
    bool index_source;      /* owns an Indexer, publishes a selection */
    bool key_owner;         /* index source that is also a kv source: owns index keys */
    bool candidate_source;  /* publishes the block candidate mask */
    bool uses_candidates;   /* 0 <= candidate_source_layer < l (only acts on index sources) */
    int kv_from;            /* latest kv source at or before l (-1 none): rows_b comes from it */
    int keys_from;          /* latest key owner at or before l (-1 none): index keys normally read */
    int select_from;        /* latest index source at or before l (-1 none): selection reused */
} AsLayerRole;

typedef struct {
    /* geometry */
    int dim;                /* hidden_size */
    int n_layers;           /* backbone layers (ratio list cut to this) */
    int n_heads;
    int head_dim;           /* hd: one latent is both K and V */
    int rope_head_dim;      /* rd: RoPE on the LAST rd channels */
    int q_lora_rank;
    int o_groups;
    int o_lora_rank;
    int window;             /* sliding window of raw KV rows */
    float norm_eps;
    int compress_ratios[AS_MAX_LAYERS];
    /* roles, as listed in the config */
    int n_kv_sources, kv_sources[AS_MAX_LAYERS];
    int n_index_sources, index_sources[AS_MAX_LAYERS];
    int candidate_source;   /* -1 = none */
    int candidate_topk_blocks;
    int candidate_block_size;
    /* indexer */
    int index_n_heads;
    int index_head_dim;
    int index_topk;
    /* rope */
    double rope_theta;          /* ratio-0 layers, plain */
    double compress_rope_theta; /* ratio > 0 layers, YaRN */
    double rope_factor;
    int original_seq_len;
    double beta_fast, beta_slow;
    /* run capacity: caches hold max_seq / ratio rows, RoPE tables max_seq positions */
    int max_seq;
    /* "dtype" of inference/config.json ("fp8" or "bf16"); AS_PREC_AUTO when the config has none */
    AsPrecision dtype;

    /* derived (as_config_derive) */
    AsLayerRole role[AS_MAX_LAYERS];
    int gw;                 /* n_heads * head_dim / o_groups */
} AsConfig;

/* Documented limits on what a config may ask for (absurd geometries are refused). */
#define AS_LIMIT_DIM        65536
#define AS_LIMIT_HEADS      1024
#define AS_LIMIT_HEAD_DIM   4096
#define AS_LIMIT_RANK       65536
#define AS_LIMIT_WINDOW     65536
#define AS_LIMIT_MAX_SEQ    (1 << 20)
#define AS_LIMIT_TOPK       65536
#define AS_DEFAULT_MAX_SEQ  8192    /* when the config has no max_seq_len */
/* The run state a geometry asks for, as the reference holds it (f32): each layer's window ring,
 * compressed and index-key caches (max_seq / ratio rows), the compressor's partial groups, and
 * the two RoPE tables. The released geometry needs 6.8 GiB at the largest max_seq; a config
 * asking for more than this is refused (a tiny weight file must not make attnscope try to
 * allocate terabytes). */
#define AS_LIMIT_STATE_BYTES ((int64_t)64 << 30)

/* Parses config.json text in either spelling (Hugging Face or DeepSeek's inference one).
 * Returns 0, or AS_EBADINPUT with a one-line message naming the field in err. Checks each field's
 * type and range; the rules between fields (and cfg->role) come from as_config_validate, to be
 * called after any max_seq override. */
int as_config_parse_json(const char *text, size_t len, AsConfig *cfg, AsError *err);
int as_config_load(const char *path, AsConfig *cfg, AsError *err);
/* Parsing: a config whose "text_config" is an object (the Hugging Face config.json of the released
 * repo) has its geometry read from there and everything outside it ignored; "text_config" of any
 * other type is refused. A flat config (either spelling) may carry "dtype": "fp8" or "bf16"
 * (DeepSeek's inference/config.json) -> cfg->dtype; absent: AS_PREC_AUTO; text_config's own dtype
 * is torch's parameter dtype and is not read. */

/* The spellings the config is written in. */
typedef enum {
    AS_CONFIG_HF,        /* flat, Hugging Face names (gen's config.json); dtype when set */
    AS_CONFIG_HF_NESTED, /* the released repo's config.json: the geometry in "text_config", no dtype */
    AS_CONFIG_DS,        /* DeepSeek's inference/config.json: flat, SPEC's names; dtype when set */
} AsConfigSpelling;

/* Writes the config in the Hugging Face spelling (AS_CONFIG_HF). Caller frees. */
char *as_config_to_json(const AsConfig *cfg);
/* Writes it in the given spelling; NULL when out of memory. Caller frees. */
char *as_config_to_json_as(const AsConfig *cfg, AsConfigSpelling sp);

/* Checks every rule of SPEC section 1 and fills cfg->role / cfg->gw; refuses a geometry whose
 * run state exceeds AS_LIMIT_STATE_BYTES. */
int as_config_validate(AsConfig *cfg, AsError *err);
/* The run state bytes of a validated config (see AS_LIMIT_STATE_BYTES). */
int64_t as_config_state_bytes(const AsConfig *cfg);

/* Built-in presets: "flash" (the released geometry) and "tiny". */
int as_config_preset(const char *name, AsConfig *cfg, AsError *err);
const char *const *as_config_preset_names(void);
/* The precision gen writes a preset in: AS_PREC_FP8 for flash and tiny (as released), AS_PREC_BF16
 * for tiny-q; AS_PREC_AUTO for a name that is no preset. */
AsPrecision as_config_preset_precision(const char *name);

/* One line describing layer l's role, e.g. "20  r1  kv idx cand-src  rows_b<-20  keys<-20  sel<-20"
 * (a reusing layer: "21  r1  -  rows_b<-20  sel<-20 (reuse)"); the header names its columns. */
void as_config_role_line(const AsConfig *cfg, int l, char *buf, size_t n);
const char *as_config_role_header(void);

#endif
