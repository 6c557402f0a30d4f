/* The built-in geometries: "flash" (SPEC section 1, the released config), "tiny" (every
 * layer role at a size the CPU reference runs in milliseconds) and "tiny-q" (tiny's roles with
 * every projection input a multiple of 256, so that each can be a ggml Q2_K tensor), and the
 * precision gen writes each in: flash and tiny fp8 as released, tiny-q bf16 (the source of the
 * Q2_K conversion, whose tests pin its bf16 values). */
#include <string.h>

#include "model/config.h"

static void set_list(int *dst, int *n, const int *src, int count)
{
    memcpy(dst, src, (size_t)count * sizeof *src);
    *n = count;
}

static void flash(AsConfig *c)
{
    c->dim = 5120;
    c->n_layers = 40;
    c->n_heads = 64;
    c->head_dim = 512;
    c->rope_head_dim = 64;
    c->q_lora_rank = 1280;
    c->o_groups = 8;
    c->o_lora_rank = 1024;
    c->window = 128;
    c->norm_eps = 1e-20f;
    for (int l = 0; l < 40; l++)
        c->compress_ratios[l] = l < 2 ? 0 : l < 20 ? 2 : 1;
    static const int kv[] = {2, 8, 14, 20}, idx[] = {2, 8, 14, 20, 24, 28, 32, 36};
    set_list(c->kv_sources, &c->n_kv_sources, kv, 4);
    set_list(c->index_sources, &c->n_index_sources, idx, 8);
    c->candidate_source = 20;
    c->candidate_topk_blocks = 2048;
    c->candidate_block_size = 8;
    c->index_n_heads = 32;
    c->index_head_dim = 128;
    c->index_topk = 512;
    c->rope_theta = 10000;
    c->compress_rope_theta = 160000;
    c->rope_factor = 16;
    c->original_seq_len = 65536;
    c->beta_fast = 32;
    c->beta_slow = 1;
    c->max_seq = 8192;
}

/* Small enough to step by hand: the window wraps within 20 tokens, ratio-2 groups complete on
 * alternate steps, the candidate selection narrows from 13 tokens on. */
static void tiny(AsConfig *c)
{
    c->dim = 64;
    c->n_layers = 10;
    c->n_heads = 4;
    c->head_dim = 64;
    c->rope_head_dim = 16;
    c->q_lora_rank = 32;
    c->o_groups = 2;
    c->o_lora_rank = 16;
    c->window = 8;
    c->norm_eps = 1e-6f;
    static const int ratios[] = {0, 2, 2, 2, 2, 1, 1, 1, 1, 1};
    memcpy(c->compress_ratios, ratios, sizeof ratios);
    static const int kv[] = {1, 4, 5}, idx[] = {1, 3, 4, 5, 7, 9};
    set_list(c->kv_sources, &c->n_kv_sources, kv, 3);
    set_list(c->index_sources, &c->n_index_sources, idx, 6);
    c->candidate_source = 5;
    c->candidate_topk_blocks = 3;
    c->candidate_block_size = 4;
    c->index_n_heads = 4;
    c->index_head_dim = 32;
    c->index_topk = 8;
    c->rope_theta = 10000;
    c->compress_rope_theta = 160000;
    c->rope_factor = 4;
    c->original_seq_len = 64;
    c->beta_fast = 32;
    c->beta_slow = 1;
    c->max_seq = 512;
}

/* tiny's layers and roles with dim, q_lora_rank, head_dim, gw and o_groups * o_lora_rank all
 * 256: every projection's rows are whole Q2_K super-blocks (attnscope convert --quant q2_k). */
static void tiny_q(AsConfig *c)
{
    tiny(c);
    c->dim = 256;
    c->n_heads = 2;
    c->head_dim = 256;
    c->q_lora_rank = 256;
    c->o_groups = 2;
    c->o_lora_rank = 128;
}

static const struct {
    const char *name;
    void (*fill)(AsConfig *);
    AsPrecision precision;
} presets[] = {{"flash", flash, AS_PREC_FP8}, {"tiny", tiny, AS_PREC_FP8}, {"tiny-q", tiny_q, AS_PREC_BF16}};

AsPrecision as_config_preset_precision(const char *name)
{
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (!strcmp(name, presets[i].name))
            return presets[i].precision;
    return AS_PREC_AUTO;
}

const char *const *as_config_preset_names(void)
{
    static const char *const names[] = {"flash", "tiny", "tiny-q", NULL};
    return names;
}

int as_config_preset(const char *name, AsConfig *cfg, AsError *err)
{
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        if (!strcmp(name, presets[i].name)) {
            memset(cfg, 0, sizeof *cfg);
            presets[i].fill(cfg);
            return as_config_validate(cfg, err);
        }
    }
    return as_err(err, AS_EBADINPUT, "unknown preset '%s' (presets: flash, tiny, tiny-q)", name);
}
