/* The catalogue of wrong conventions (docs/DIAGNOSE.md): the ways engines for this model are known to
 * depart from DeepSeek's reference (RoPE layouts and frequencies, the window ring, the sink, fp8 and
 * fp4 scales and roundings, masks, offsets, stale keys, the precision). Each is one value of
 * AsConvention that the reference's steps honour (ref/stage.h passes it to the step it bends, as a flag
 * of that step), so a layer's stage can be re-run the way such an engine computes it and compared with
 * what the engine stored: `check --diagnose` names each convention that reproduces the checked side.
 * AS_CONV_NONE is the reference itself, and the path every normal run takes. The named faults of
 * ref/faults.h that are conventions share their names (and `--inject NAME` plants either). */
#ifndef AS_CONVENTION_H
#define AS_CONVENTION_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ref/faults.h"
#include "ref/run.h"

/* In forward order of the stage each first bends. */
typedef enum {
    AS_CONV_NONE = 0,
    AS_CONV_BF16_NO_ACT_QUANT,  /* the fp8 projections as bf16 linears (no act_quant, no fp8 GEMM) */
    AS_CONV_FP8_SCALE_32_AS_128, /* a 32x32-block weight scale indexed as 128x128 blocks */
    AS_CONV_FP8_SCALE_128_AS_32, /* a 128x128-block weight scale indexed as 32x32 blocks */
    AS_CONV_E8M0_AS_F32,        /* an e8m0 weight scale's exponent byte taken as its value */
    AS_CONV_ROPE_HALVES_Q,      /* RoPE on halves (NeoX) in the queries */
    AS_CONV_ROPE_FIRST_CHANNELS, /* RoPE on the first rd channels, everywhere */
    AS_CONV_ROPE_BACKWARDS,     /* the queries rotated by -angle (fault rope-backwards) */
    AS_CONV_NO_YARN,            /* ratio > 0 layers rotate without YaRN */
    AS_CONV_YARN_RATIO0,        /* ratio-0 layers rotate with YaRN */
    AS_CONV_OTHER_THETA,        /* rope_theta and compress_rope_theta swapped */
    AS_CONV_ROPE_HALVES_KV,     /* RoPE on halves in the window KV rows */
    AS_CONV_RING_SLOT,          /* decode writes the ring one slot on (fault ring-slot) */
    AS_CONV_MINUS1_ATTENDED,    /* the window selection's -1 slots attended */
    AS_CONV_ROPE_HALVES_LATENT, /* RoPE on halves in the compressed latents */
    AS_CONV_FP4_TIES_AWAY,      /* e2m1 ties rounded away from zero, every fp4 quantiser */
    AS_CONV_ROPE_HALVES_IK,     /* RoPE on halves in the index keys */
    AS_CONV_ROPE_HALVES_IQ,     /* RoPE on halves in the index queries */
    AS_CONV_NO_INDEX_SCALE,     /* the indexer's head weights not scaled by ihd^-0.5 nh_i^-0.5 */
    AS_CONV_STALE_KEYS,         /* decode keys not republished (fault stale-keys) */
    AS_CONV_CAND_MASK_OFF,      /* candidate users score without the mask (fault cand-mask-off) */
    AS_CONV_CAND_AT_SOURCE,     /* the candidate source masks its own scores */
    AS_CONV_TOPK_UNMASKED,      /* the index top-k over the scores before their masks */
    AS_CONV_NO_OFFSET,          /* compressed picks not offset by the window rows (fault no-offset) */
    AS_CONV_NO_SOFTMAX_SCALE,   /* the attention logits not scaled by hd^-0.5 */
    AS_CONV_SINK_IGNORED,       /* the sink left out of the denominator (fault sink-ignored) */
    AS_CONV_SINK_UNSHIFTED,     /* exp(sink) added without the running max subtracted */
    AS_CONV_SINK_IN_MAX,        /* the sink taken into the running max from the first block */
    AS_CONV_PROBS_F32,          /* the probabilities weight the rows unrounded (f32, not bf16) */
    AS_CONV_NO_INVERSE_ROPE,    /* o not rotated back */
    AS_CONV_COUNT
} AsConvention;

/* The stages of a layer a convention can bend, in forward order (ref/stage.h). The compressor's
 * pooling and the assembly of idx are bent by none: a diagnosis takes their results as recorded. */
typedef enum {
    AS_STG_QR,      /* x -> qr (wq_a, q_norm) */
    AS_STG_Q,       /* qr -> q (wq_b, RoPE) */
    AS_STG_KV,      /* x -> kv_pre, kv (wkv, kv_norm, RoPE, fp8) */
    AS_STG_WINDOW,  /* kv, the ring -> rows_a, widx */
    AS_STG_LATENT,  /* latent -> latent_pre, latent_q (RoPE, fp4-e4m3) */
    AS_STG_IK,      /* latent -> ik_pre, ik (wk, k_norm, RoPE, fp4-e8m0) */
    AS_STG_KEYS,    /* the index keys scored against (this layer's new keys written) */
    AS_STG_IQ,      /* qr -> iq_pre, iq (indexer.wq_b, RoPE, fp4-e8m0) */
    AS_STG_W,       /* x -> w (weights_proj, scale) */
    AS_STG_SCORES,  /* iq, keys, w -> iscore, cand (visibility and candidate masks) */
    AS_STG_CSEL,    /* iscore -> csel (top-k, offset) */
    AS_STG_ROWS_B,  /* the compressed rows attended (this layer's new latents written) */
    AS_STG_IDX,     /* widx, csel -> idx */
    AS_STG_O,       /* q, rows_a, rows_b, idx -> o (sparse attention with the sink) */
    AS_STG_O_BACK,  /* o -> o_back (inverse RoPE) */
    AS_STG_OG,      /* o_back -> og (wo_a) */
    AS_STG_OUT,     /* og -> out (wo_b) */
    AS_STG_COUNT
} AsStageId;

#define AS_STG_BIT(s) (1u << (s))

typedef struct {
    const char *name;   /* the catalogue's (and --inject's) name */
    const char *with;   /* what the reference is re-run with: "RoPE on halves (NeoX) instead of interleaved pairs" */
    const char *means;  /* what that tells the engine's author: "your indexer rotates the wrong layout" */
    uint32_t stages;    /* the stages it bends (AS_STG_BIT) */
    AsFault fault;      /* the named fault that is this convention (AS_FAULT_NONE: none) */
    AsTensorId first;   /* where a reference twin with it first shows at the tiny preset (prefill of 16
                         * tokens, then decode steps): the tensor the diagnosis looks at */
    const char *where;  /* the layers and step of that first showing */
    const char *rule;   /* non-NULL: within SPEC 6's rule (first == AS_T_COUNT): why it never mismatches */
} AsConvDesc;

extern const AsConvDesc as_conv_desc[AS_CONV_COUNT];

/* AS_CONV_COUNT when unknown. */
AsConvention as_conv_by_name(const char *name);
/* The convention a named fault is (AS_CONV_NONE for fp4-scale, which is no convention). */
AsConvention as_conv_of_fault(AsFault f);
/* The stage that produces tensor id (AS_STG_COUNT: an input of every stage: x, the latents, the
 * layer state). */
AsStageId as_stage_of(AsTensorId id);
const char *as_stage_name(AsStageId s);
/* The stages stage s reads the outputs of (AS_STG_BIT). */
uint32_t as_stage_deps(AsStageId s);

/* What `--inject NAME` plants: a named fault (ref/faults.h: the engine plants those, a twin too), else a
 * convention (a reference twin only). 0, or -1 for a name that is neither. */
int as_inject_parse(const char *name, AsFault *fault, AsConvention *conv);
/* The names --inject takes, for messages: "ring-slot, ..., stale-keys; or a convention of docs/DIAGNOSE.md...". */
void as_inject_names(char *buf, size_t n);

/* The catalogue as the Markdown table of docs/DIAGNOSE.md (tests/test_diagnose.c compares them). */
void as_conv_markdown_table(FILE *f);

#endif
