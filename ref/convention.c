#include "ref/convention.h"

#include <string.h>

#define B AS_STG_BIT
/* every stage that rotates: q, kv, the latents, index keys and queries, and o back */
#define ROPE_ALL (B(AS_STG_Q) | B(AS_STG_KV) | B(AS_STG_LATENT) | B(AS_STG_IK) | B(AS_STG_IQ) | B(AS_STG_O_BACK))
/* every stage with an fp8 projection: wq_a, wq_b, wkv, indexer.wq_b, wo_b */
#define FP8_PROJ (B(AS_STG_QR) | B(AS_STG_Q) | B(AS_STG_KV) | B(AS_STG_IQ) | B(AS_STG_OUT))

const AsConvDesc as_conv_desc[AS_CONV_COUNT] = {
    [AS_CONV_NONE] = {"none", "the reference's own conventions", "the reference reproduces it from your own inputs",
                      0, AS_FAULT_NONE, AS_T_COUNT, "-", NULL},
    [AS_CONV_BF16_NO_ACT_QUANT] = {"bf16-no-act-quant",
                                   "bf16 linears for the fp8 projections (no act_quant, no fp8 GEMM)",
                                   "your engine runs bf16 mode against fp8 weights: quantise each input row "
                                   "(blocks of 32, ue8m0 scales) and run the fp8 GEMM",
                                   FP8_PROJ, AS_FAULT_NONE, AS_T_QR, "every layer's wq_a (fp8 precision)", NULL},
    [AS_CONV_FP8_SCALE_32_AS_128] = {"fp8-scale-32-as-128", "the 32x32-block weight scales indexed as 128x128 blocks",
                                     "your fp8 GEMM assumes 128x128 scale blocks; these weights have 32x32",
                                     FP8_PROJ, AS_FAULT_NONE, AS_T_QR,
                                     "every layer's wq_a, on weights whose 32x32 scales differ within a 128x128 block "
                                     "(tiny's rewritten so)", NULL},
    [AS_CONV_FP8_SCALE_128_AS_32] = {"fp8-scale-128-as-32", "the 128x128-block weight scales indexed as 32x32 blocks",
                                     "your fp8 GEMM assumes 32x32 scale blocks; these weights have 128x128",
                                     FP8_PROJ, AS_FAULT_NONE, AS_T_Q,
                                     "every layer's wq_b (its only weight of more than 128 rows), on tiny's weights "
                                     "rewritten with 128x128 scales", NULL},
    [AS_CONV_E8M0_AS_F32] = {"e8m0-as-f32", "each e8m0 weight scale's exponent byte taken as its value",
                             "your loader copies the F8_E8M0 scale bytes into float scales as numbers (byte e "
                             "means 2^(e-127), not e)",
                             FP8_PROJ, AS_FAULT_NONE, AS_T_Q,
                             "every layer's wq_b (tiny's wq_a has one scale exponent: the rmsnorm after it takes a "
                             "common factor out)", NULL},
    [AS_CONV_ROPE_HALVES_Q] = {"rope-halves-q", "RoPE on halves (NeoX) instead of interleaved pairs in the queries",
                               "your queries rotate the wrong layout", B(AS_STG_Q), AS_FAULT_NONE, AS_T_Q,
                               "every layer, from the prefill's second token", NULL},
    [AS_CONV_ROPE_FIRST_CHANNELS] = {"rope-first-channels", "RoPE on the first rope_head_dim channels instead of the "
                                     "last", "your RoPE rotates the wrong channels (DeepSeek rotates the last "
                                     "rope_head_dim of every head and latent)",
                                     ROPE_ALL, AS_FAULT_NONE, AS_T_Q, "every layer, from the prefill's second token",
                                     NULL},
    [AS_CONV_ROPE_BACKWARDS] = {"rope-backwards", "the queries rotated by -angle (the inverse rotation)",
                                "your query RoPE has the sine's sign flipped", B(AS_STG_Q), AS_FAULT_ROPE_BACKWARDS,
                                AS_T_Q, "every layer, from the prefill's second token", NULL},
    [AS_CONV_NO_YARN] = {"no-yarn", "no YaRN on the ratio > 0 layers (plain frequencies of compress_rope_theta)",
                         "your compressed layers skip YaRN: they must rotate with YaRN on compress_rope_theta",
                         ROPE_ALL, AS_FAULT_NONE, AS_T_Q, "the first ratio > 0 layer, prefill", NULL},
    [AS_CONV_YARN_RATIO0] = {"yarn-ratio0", "YaRN on the ratio-0 layers too",
                             "your ratio-0 layers apply YaRN: they must rotate with plain rope_theta frequencies",
                             B(AS_STG_Q) | B(AS_STG_KV) | B(AS_STG_O_BACK), AS_FAULT_NONE, AS_T_Q,
                             "the first ratio-0 layer, prefill", NULL},
    [AS_CONV_OTHER_THETA] = {"other-theta", "each layer kind rotated with the other kind's theta",
                             "your rope_theta and compress_rope_theta are swapped", ROPE_ALL, AS_FAULT_NONE, AS_T_Q,
                             "the first layer, prefill", NULL},
    [AS_CONV_ROPE_HALVES_KV] = {"rope-halves-kv", "RoPE on halves (NeoX) instead of interleaved pairs in the window "
                                "KV rows", "your KV rows rotate the wrong layout", B(AS_STG_KV), AS_FAULT_NONE,
                                AS_T_KV_PRE, "every layer, from the prefill's second token", NULL},
    [AS_CONV_RING_SLOT] = {"ring-slot", "the decode's KV row written into ring slot (start_pos + 1) % window",
                           "your window ring is written one slot off", B(AS_STG_WINDOW), AS_FAULT_RING_SLOT,
                           AS_T_ROWS_A, "every layer, the first decode step", NULL},
    [AS_CONV_MINUS1_ATTENDED] = {"minus1-attended", "the window selection's -1 slots attended (a prefill's later "
                                 "tokens, a decode's unfilled ring slots)",
                                 "your window attends slots it must skip: mark them -1 and skip -1 entries",
                                 B(AS_STG_WINDOW), AS_FAULT_NONE, AS_T_WIDX, "every layer, prefill", NULL},
    [AS_CONV_ROPE_HALVES_LATENT] = {"rope-halves-latent", "RoPE on halves (NeoX) instead of interleaved pairs in the "
                                    "compressed latents", "your compressor's latents rotate the wrong layout",
                                    B(AS_STG_LATENT), AS_FAULT_NONE, AS_T_LATENT_PRE,
                                    "the first kv source, prefill", NULL},
    [AS_CONV_FP4_TIES_AWAY] = {"fp4-ties-away", "e2m1 ties rounded away from zero instead of to even",
                               "your fp4 quantiser rounds ties away from even (0.25 -> 0.5, 2.5 -> 3, 5 -> 6)",
                               B(AS_STG_LATENT) | B(AS_STG_IK) | B(AS_STG_IQ), AS_FAULT_NONE, AS_T_LATENT_Q,
                               "the first kv source, prefill", NULL},
    [AS_CONV_ROPE_HALVES_IK] = {"rope-halves-ik", "RoPE on halves (NeoX) instead of interleaved pairs in the index "
                                "keys", "your indexer's keys rotate the wrong layout", B(AS_STG_IK), AS_FAULT_NONE,
                                AS_T_IK_PRE, "the first key owner, prefill", NULL},
    [AS_CONV_ROPE_HALVES_IQ] = {"rope-halves-iq", "RoPE on halves (NeoX) instead of interleaved pairs in the index "
                                "queries", "your indexer rotates the wrong layout", B(AS_STG_IQ), AS_FAULT_NONE,
                                AS_T_IQ_PRE, "the first index source, prefill", NULL},
    [AS_CONV_NO_INDEX_SCALE] = {"no-index-scale", "the indexer's head weights not scaled by index_head_dim^-0.5 * "
                                "index_n_heads^-0.5", "your indexer leaves out its softmax scale", B(AS_STG_W),
                                AS_FAULT_NONE, AS_T_W, "the first index source, prefill", NULL},
    [AS_CONV_STALE_KEYS] = {"stale-keys", "the decode's new index keys not written (the keys not republished)",
                            "your key owners do not republish their index keys in decode steps", B(AS_STG_KEYS),
                            AS_FAULT_STALE_KEYS, AS_T_KEYS, "the first key owner with a new key in a decode step",
                            NULL},
    [AS_CONV_CAND_MASK_OFF] = {"cand-mask-off", "the candidate mask not applied by the layers after its source",
                               "your candidate users score without the candidate mask", B(AS_STG_SCORES),
                               AS_FAULT_CAND_MASK_OFF, AS_T_ISCORE,
                               "the first candidate user, once the candidate selection narrows", NULL},
    [AS_CONV_CAND_AT_SOURCE] = {"cand-at-source", "the candidate mask applied at its source too",
                                "your candidate source masks its own scores: only the layers after it apply the mask",
                                B(AS_STG_SCORES), AS_FAULT_NONE, AS_T_ISCORE,
                                "the candidate source, once the candidate selection narrows", NULL},
    [AS_CONV_TOPK_UNMASKED] = {"topk-unmasked", "the index top-k taken over the scores before their visibility and "
                               "candidate masks", "your top-k reads the scores before the masks", B(AS_STG_CSEL),
                               AS_FAULT_NONE, AS_T_CSEL, "the first index source whose top-k keeps fewer positions "
                               "than it scores, prefill", NULL},
    [AS_CONV_NO_OFFSET] = {"no-offset", "the compressed picks not offset by the number of window rows",
                           "your compressed selection misses the offset of the window rows", B(AS_STG_CSEL),
                           AS_FAULT_NO_OFFSET, AS_T_CSEL, "the first index source, prefill", NULL},
    [AS_CONV_NO_SOFTMAX_SCALE] = {"no-softmax-scale", "the attention logits not scaled by head_dim^-0.5",
                                  "your attention leaves out its softmax scale", B(AS_STG_O), AS_FAULT_NONE, AS_T_O,
                                  "every layer, prefill", NULL},
    [AS_CONV_SINK_IGNORED] = {"sink-ignored", "the attention sink left out of the softmax denominator",
                              "your softmax drops the attention sink", B(AS_STG_O), AS_FAULT_SINK_IGNORED, AS_T_O,
                              "every layer, prefill", NULL},
    [AS_CONV_SINK_UNSHIFTED] = {"sink-unshifted", "the sink added as exp(sink), outside the running max (not "
                                "exp(sink - m))", "your softmax adds the sink without subtracting the running max",
                                B(AS_STG_O), AS_FAULT_NONE, AS_T_O, "every layer, prefill", NULL},
    [AS_CONV_SINK_IN_MAX] = {"sink-in-max", "the sink taken into the running max from the first block",
                             "your softmax folds the sink into the running max", B(AS_STG_O), AS_FAULT_NONE,
                             AS_T_COUNT, "-",
                             "the same softmax up to the bf16 rounding of each probability (relative 2^-9): "
                             "within the bf16 rule"},
    [AS_CONV_PROBS_F32] = {"probs-f32", "the probabilities not rounded to bf16 before they weight the rows",
                           "your attention weights the rows with f32 probabilities", B(AS_STG_O), AS_FAULT_NONE,
                           AS_T_COUNT, "-",
                           "each probability moves by at most 2^-9 of itself, so o by at most 2^-9 of the rows "
                           "it averages: within the bf16 rule (2^-7)"},
    [AS_CONV_NO_INVERSE_ROPE] = {"no-inverse-rope", "o not rotated back by the inverse RoPE",
                                 "your attention output skips the inverse rotation", B(AS_STG_O_BACK), AS_FAULT_NONE,
                                 AS_T_O_BACK, "every layer, from the prefill's second token", NULL},
};
#undef B

AsConvention as_conv_by_name(const char *name)
{
    for (int i = 0; i < AS_CONV_COUNT; i++)
        if (strcmp(as_conv_desc[i].name, name) == 0)
            return (AsConvention)i;
    return AS_CONV_COUNT;
}

AsConvention as_conv_of_fault(AsFault f)
{
    for (int i = 1; f != AS_FAULT_NONE && i < AS_CONV_COUNT; i++)
        if (as_conv_desc[i].fault == f)
            return (AsConvention)i;
    return AS_CONV_NONE;
}

int as_inject_parse(const char *name, AsFault *fault, AsConvention *conv)
{
    *fault = as_fault_by_name(name);
    *conv = AS_CONV_NONE;
    if (*fault != AS_FAULT_COUNT)
        return 0;
    *fault = AS_FAULT_NONE;
    *conv = as_conv_by_name(name);
    return *conv == AS_CONV_COUNT ? -1 : 0;
}

void as_inject_names(char *buf, size_t n)
{
    size_t k = 0;
    if (n)
        buf[0] = '\0';
    for (int i = AS_FAULT_NONE + 1; i < AS_FAULT_COUNT && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%s", i > 1 ? ", " : "", as_fault_desc[i].name);
    if (k < n)
        snprintf(buf + k, n - k, "; or a convention of docs/DIAGNOSE.md, in a reference twin, e.g. %s",
                 as_conv_desc[AS_CONV_ROPE_HALVES_IQ].name);
}

AsStageId as_stage_of(AsTensorId id)
{
    switch (id) {
    case AS_T_QR: return AS_STG_QR;
    case AS_T_Q: return AS_STG_Q;
    case AS_T_KV_PRE:
    case AS_T_KV: return AS_STG_KV;
    case AS_T_ROWS_A:
    case AS_T_WIDX: return AS_STG_WINDOW;
    case AS_T_LATENT_PRE:
    case AS_T_LATENT_Q: return AS_STG_LATENT;
    case AS_T_IK_PRE:
    case AS_T_IK: return AS_STG_IK;
    case AS_T_KEYS: return AS_STG_KEYS;
    case AS_T_IQ_PRE:
    case AS_T_IQ: return AS_STG_IQ;
    case AS_T_W: return AS_STG_W;
    case AS_T_ISCORE:
    case AS_T_CAND: return AS_STG_SCORES;
    case AS_T_CSEL: return AS_STG_CSEL;
    case AS_T_ROWS_B: return AS_STG_ROWS_B;
    case AS_T_IDX: return AS_STG_IDX;
    case AS_T_O: return AS_STG_O;
    case AS_T_O_BACK: return AS_STG_O_BACK;
    case AS_T_OG: return AS_STG_OG;
    case AS_T_OUT: return AS_STG_OUT;
    default: return AS_STG_COUNT;
    }
}

const char *as_stage_name(AsStageId s)
{
    static const char *const names[AS_STG_COUNT] = {
        [AS_STG_QR] = "qr",         [AS_STG_Q] = "q",        [AS_STG_KV] = "kv",         [AS_STG_WINDOW] = "window",
        [AS_STG_LATENT] = "latent", [AS_STG_IK] = "ik",      [AS_STG_KEYS] = "keys",     [AS_STG_IQ] = "iq",
        [AS_STG_W] = "w",           [AS_STG_SCORES] = "scores", [AS_STG_CSEL] = "csel", [AS_STG_ROWS_B] = "rows_b",
        [AS_STG_IDX] = "idx",       [AS_STG_O] = "o",        [AS_STG_O_BACK] = "o_back", [AS_STG_OG] = "og",
        [AS_STG_OUT] = "out",
    };
    return (unsigned)s < AS_STG_COUNT ? names[s] : "input";
}

uint32_t as_stage_deps(AsStageId s)
{
#define B AS_STG_BIT
    switch (s) {
    case AS_STG_Q: return B(AS_STG_QR);
    case AS_STG_WINDOW: return B(AS_STG_KV);
    case AS_STG_KEYS: return B(AS_STG_IK);
    case AS_STG_IQ: return B(AS_STG_QR);
    case AS_STG_SCORES: return B(AS_STG_IQ) | B(AS_STG_KEYS) | B(AS_STG_W);
    case AS_STG_CSEL: return B(AS_STG_SCORES) | B(AS_STG_IQ) | B(AS_STG_KEYS) | B(AS_STG_W);
    case AS_STG_ROWS_B: return B(AS_STG_LATENT);
    case AS_STG_IDX: return B(AS_STG_WINDOW) | B(AS_STG_CSEL);
    case AS_STG_O: return B(AS_STG_Q) | B(AS_STG_WINDOW) | B(AS_STG_ROWS_B) | B(AS_STG_IDX);
    case AS_STG_O_BACK: return B(AS_STG_O);
    case AS_STG_OG: return B(AS_STG_O_BACK);
    case AS_STG_OUT: return B(AS_STG_OG);
    default: return 0; /* qr, kv, w: x; latent, ik: the compressor's latents */
    }
#undef B
}

void as_conv_markdown_table(FILE *f)
{
    fprintf(f, "| convention | first shows (tiny) | the diagnosis says |\n");
    fprintf(f, "| --- | --- | --- |\n");
    for (int i = 1; i < AS_CONV_COUNT; i++) {
        const AsConvDesc *c = &as_conv_desc[i];
        const char *fault = c->fault ? as_fault_desc[c->fault].name : NULL;
        fprintf(f, "| `%s`%s%s%s | ", c->name, fault ? " (also the fault `" : "", fault ? fault : "", fault ? "`)" : "");
        if (c->rule)
            fprintf(f, "never: %s | - (%s) |\n", c->rule, c->with);
        else
            fprintf(f, "`%s`: %s | matches the reference with %s: %s |\n", as_tensor_desc[c->first].name, c->where,
                    c->with, c->means);
    }
}
