/* Config parsing (both spellings), every validation rule's error, the presets' derived roles. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/config.h"
#include "tests/lib/harness.h"

/* The released DeepSeek-V4.1-Flash config.json, attention fields plus a few of the others, with
 * 43 compress ratios (the last 3 for the MTP layers). */
static const char *released_hf =
    "{\"architectures\": [\"DeepseekV4ForCausalLM\"], \"vocab_size\": 129280, \"n_routed_experts\": 256,"
    " \"hidden_size\": 5120, \"num_hidden_layers\": 40, \"num_attention_heads\": 64, \"head_dim\": 512,"
    " \"qk_rope_head_dim\": 64, \"q_lora_rank\": 1280, \"o_lora_rank\": 1024, \"o_groups\": 8,"
    " \"sliding_window\": 128, \"rms_norm_eps\": 1e-20,"
    " \"compress_ratios\": [0,0,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"
    " \"kv_source_layer_ids\": [2, 8, 14, 20], \"index_source_layer_ids\": [2, 8, 14, 20, 24, 28, 32, 36],"
    " \"candidate_source_layer_id\": 20, \"candidate_topk_blocks\": 2048, \"candidate_block_size\": 8,"
    " \"index_n_heads\": 32, \"index_head_dim\": 128, \"index_topk\": 512, \"rope_theta\": 10000,"
    " \"compress_rope_theta\": 160000, \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 16,"
    " \"original_max_position_embeddings\": 65536, \"beta_fast\": 32, \"beta_slow\": 1, \"mscale\": 1.0}}";

static const char *released_ds =
    "{\"vocab_size\": 129280, \"dim\": 5120, \"n_layers\": 40, \"n_heads\": 64, \"head_dim\": 512,"
    " \"rope_head_dim\": 64, \"q_lora_rank\": 1280, \"o_lora_rank\": 1024, \"o_groups\": 8,"
    " \"window_size\": 128, \"norm_eps\": 1e-20,"
    " \"compress_ratios\": [0,0,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"
    " \"kv_source_layers\": [2, 8, 14, 20], \"index_source_layers\": [2, 8, 14, 20, 24, 28, 32, 36],"
    " \"candidate_source_layer\": 20, \"candidate_topk_blocks\": 2048, \"candidate_block_size\": 8,"
    " \"index_n_heads\": 32, \"index_head_dim\": 128, \"index_topk\": 512, \"rope_theta\": 10000,"
    " \"compress_rope_theta\": 160000, \"rope_factor\": 16, \"original_seq_len\": 65536,"
    " \"beta_fast\": 32, \"beta_slow\": 1, \"max_seq_len\": 8192}";

static int parse_validate(const char *json, AsConfig *c, AsError *err)
{
    int rc = as_config_parse_json(json, strlen(json), c, err);
    return rc ? rc : as_config_validate(c, err);
}

static void require_preset(const char *name, AsConfig *c)
{
    AsError err = {0};
    REQUIRE(as_config_preset(name, c, &err) == AS_OK, "preset %s: %s", name, err.msg);
}

TEST(config_released_hf_spelling_is_the_flash_preset)
{
    AsConfig got, want;
    AsError err = {0};
    REQUIRE(parse_validate(released_hf, &got, &err) == AS_OK, "released HF config: %s", err.msg);
    require_preset("flash", &want);
    CHECK(got.n_layers == 40, "43 ratios cut to n_layers: n_layers %d", got.n_layers);
    CHECK(got.compress_ratios[40] == 0 && got.compress_ratios[42] == 0, "MTP ratios beyond layer 39 not kept");
    CHECK(got.max_seq == AS_DEFAULT_MAX_SEQ, "no max_seq_len gives the default: %d", got.max_seq);
    CHECK(!memcmp(&got, &want, sizeof got), "released HF config equals the flash preset field for field");
    CHECK(got.gw == 4096, "flash group width gw = 64*512/8 = 4096, got %d", got.gw);
}

TEST(config_released_ds_spelling_is_the_flash_preset)
{
    AsConfig got, want;
    AsError err = {0};
    REQUIRE(parse_validate(released_ds, &got, &err) == AS_OK, "DeepSeek-spelling config: %s", err.msg);
    require_preset("flash", &want);
    CHECK(!memcmp(&got, &want, sizeof got), "DeepSeek-spelling config equals the flash preset field for field");
}

TEST(config_to_json_round_trips_both_presets)
{
    const char *const *names = as_config_preset_names();
    for (int i = 0; names[i]; i++) {
        AsConfig c, back;
        AsError err = {0};
        require_preset(names[i], &c);
        char *json = as_config_to_json(&c);
        REQUIRE(json, "to_json %s", names[i]);
        int rc = parse_validate(json, &back, &err);
        CHECK(rc == AS_OK, "preset %s: written config parses back: %s", names[i], err.msg);
        CHECK(!rc && !memcmp(&c, &back, sizeof c), "preset %s: written then parsed config is identical", names[i]);
        CHECK(strstr(json, "\"hidden_size\"") && strstr(json, "\"max_seq_len\"") && !strstr(json, "\"dim\""),
              "preset %s: written in the Hugging Face spelling with max_seq_len", names[i]);
        free(json);
    }
}

TEST(config_max_seq_len_and_missing_candidate_source)
{
    AsConfig c;
    AsError err = {0};
    char *json = strdup(released_ds);
    REQUIRE(json, "strdup");
    /* drop the candidate source: it becomes -1 */
    char *p = strstr(json, "\"candidate_source_layer\": 20,");
    REQUIRE(p, "fixture has the candidate source");
    memset(p, ' ', strlen("\"candidate_source_layer\": 20,"));
    REQUIRE(parse_validate(json, &c, &err) == AS_OK, "config without candidate source: %s", err.msg);
    CHECK(c.candidate_source == -1, "missing candidate source is -1, got %d", c.candidate_source);
    CHECK(c.max_seq == 8192, "max_seq_len 8192 read, got %d", c.max_seq);
    for (int l = 0; l < c.n_layers; l++)
        CHECK(!c.role[l].candidate_source && !c.role[l].uses_candidates, "layer %d: no candidate roles", l);
    free(json);
}

/* Parses released_hf with one substring replaced; returns the code, message in err. */
static int parse_edited(const char *from, const char *to, AsError *err)
{
    const char *p = strstr(released_hf, from);
    if (!p) {
        snprintf(err->msg, sizeof err->msg, "fixture lacks '%s'", from);
        return -1;
    }
    size_t n = strlen(released_hf) + strlen(to) + 1;
    char *s = malloc(n);
    if (!s)
        return -1;
    snprintf(s, n, "%.*s%s%s", (int)(p - released_hf), released_hf, to, p + strlen(from));
    AsConfig c;
    int rc = parse_validate(s, &c, err);
    free(s);
    return rc;
}

TEST(config_parse_errors_name_the_field)
{
    static const struct {
        const char *from, *to, *names;
    } cases[] = {
        {"\"hidden_size\": 5120", "\"hidden_size\": \"5120\"", "hidden_size"},          /* wrong type */
        {"\"hidden_size\": 5120", "\"hidden_size\": 51.5", "hidden_size"},             /* not an integer */
        {"\"hidden_size\": 5120", "\"hidden_size\": 1e30", "hidden_size"},             /* does not fit */
        {"\"hidden_size\": 5120", "\"hidden_size\": 0", "hidden_size"},                /* out of range */
        {"\"hidden_size\": 5120,", "", "hidden_size"},                                 /* missing */
        {"\"hidden_size\": 5120", "\"hidden_size\": 5120, \"dim\": 4096", "dim"},      /* spellings disagree */
        {"\"num_hidden_layers\": 40", "\"num_hidden_layers\": 300", "num_hidden_layers"},
        {"\"num_hidden_layers\": 40", "\"num_hidden_layers\": 50", "compress_ratios"}, /* 43 < 50 */
        {"[0,0,2,2,", "[0,\"x\",2,2,", "compress_ratios[1]"},
        {"\"kv_source_layer_ids\": [2, 8, 14, 20]", "\"kv_source_layer_ids\": 2", "kv_source_layer_ids"},
        {"\"rope_scaling\": {", "\"rope_scaling\": 5, \"x\": {", "rope_scaling"},
        {"\"beta_fast\": 32", "\"beta_fast\": true", "beta_fast"},
        {"\"rms_norm_eps\": 1e-20", "\"rms_norm_eps\": -1", "rms_norm_eps"},
        {"\"rms_norm_eps\": 1e-20", "\"rms_norm_eps\": 1e300", "rms_norm_eps"},        /* beyond a float */
        {"\"rope_theta\": 10000", "\"rope_theta\": null", "rope_theta"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        AsError err = {0};
        int rc = parse_edited(cases[i].from, cases[i].to, &err);
        CHECK(rc == AS_EBADINPUT && strstr(err.msg, cases[i].names),
              "'%s' -> '%s': refused naming %s (rc %d: %s)", cases[i].from, cases[i].to, cases[i].names, rc,
              err.msg);
    }
    AsConfig c;
    AsError err = {0};
    CHECK(as_config_parse_json("{\"hidden_size\": ", 16, &c, &err) == AS_EBADINPUT && strstr(err.msg, "JSON"),
          "truncated JSON refused: %s", err.msg);
    CHECK(as_config_parse_json("[1, 2]", 6, &c, &err) == AS_EBADINPUT && strstr(err.msg, "object"),
          "a JSON array refused: %s", err.msg);
}

typedef void (*Edit)(AsConfig *);
static void e_dim0(AsConfig *c) { c->dim = 0; }
static void e_heads(AsConfig *c) { c->n_heads = AS_LIMIT_HEADS + 1; }
static void e_rope_odd(AsConfig *c) { c->rope_head_dim = 15; }
static void e_rope_hd(AsConfig *c) { c->rope_head_dim = 96; }
static void e_rope_ihd(AsConfig *c) { c->rope_head_dim = 48; }
static void e_hd32(AsConfig *c) { c->head_dim = 48; }
static void e_ihd32(AsConfig *c) { c->index_head_dim = 40; }
static void e_groups(AsConfig *c) { c->o_groups = 3; }
static void e_ratio3(AsConfig *c) { c->compress_ratios[2] = 3; }
static void e_kv_range(AsConfig *c) { c->kv_sources[2] = 10; }
static void e_kv_order(AsConfig *c) { c->kv_sources[0] = 4, c->kv_sources[1] = 1; }
static void e_kv_dup(AsConfig *c) { c->kv_sources[1] = 1; }
static void e_kv_r0(AsConfig *c) { c->kv_sources[0] = 0; }
static void e_idx_r0(AsConfig *c) { c->index_sources[0] = 0; }
static void e_before_kv(AsConfig *c)
{
    c->kv_sources[0] = 4, c->kv_sources[1] = 5, c->n_kv_sources = 2;
}
static void e_kv_ratio(AsConfig *c) { c->compress_ratios[6] = 2; }
static void e_no_owner(AsConfig *c)
{
    static const int idx[] = {3, 4, 5, 7, 9};
    memcpy(c->index_sources, idx, sizeof idx), c->n_index_sources = 5;
}
static void e_owner_ratio(AsConfig *c)
{
    static const int idx[] = {1, 3, 4, 7, 9};
    memcpy(c->index_sources, idx, sizeof idx), c->n_index_sources = 5, c->candidate_source = -1;
}
static void e_cand_not_idx(AsConfig *c) { c->candidate_source = 6; }
static void e_cand_range(AsConfig *c) { c->candidate_source = 10; }
static void e_cand_users(AsConfig *c) { c->candidate_source = 1; }
static void e_cbs(AsConfig *c) { c->candidate_block_size = 0; }
static void e_ctb(AsConfig *c) { c->candidate_topk_blocks = 0; }
static void e_topk(AsConfig *c) { c->index_topk = 0; }
static void e_inh(AsConfig *c) { c->index_n_heads = 0; }
static void e_win(AsConfig *c) { c->window = 0; }
static void e_seq0(AsConfig *c) { c->max_seq = 0; }
static void e_seq_odd(AsConfig *c) { c->max_seq = 513; }
static void e_seq_big(AsConfig *c) { c->max_seq = AS_LIMIT_MAX_SEQ + 2; }
static void e_layers(AsConfig *c) { c->n_layers = AS_MAX_LAYERS + 1; }

TEST(config_validation_rules_each_refused_with_a_precise_error)
{
    static const struct {
        const char *rule;
        Edit edit;
        const char *a, *b; /* both must appear in the message */
    } cases[] = {
        {"dims positive", e_dim0, "hidden_size", "out of range"},
        {"dims within limits", e_heads, "num_attention_heads", "1024"},
        {"rope_head_dim even", e_rope_odd, "qk_rope_head_dim", "multiple of 2"},
        {"rope_head_dim <= head_dim", e_rope_hd, "qk_rope_head_dim", "exceeds head_dim"},
        {"rope_head_dim <= index_head_dim", e_rope_ihd, "qk_rope_head_dim", "exceeds index_head_dim"},
        {"head_dim % 32", e_hd32, "head_dim = 48", "multiple of 32"},
        {"index_head_dim % 32", e_ihd32, "index_head_dim = 40", "multiple of 32"},
        {"heads*head_dim % o_groups", e_groups, "o_groups = 3", "not a multiple"},
        {"ratio 0, 1 or 2", e_ratio3, "compress_ratios[2] = 3", "0, 1 or 2"},
        {"kv source in range", e_kv_range, "kv_source_layer_ids", "= 10: no such layer"},
        {"kv sources increasing", e_kv_order, "kv_source_layer_ids", "increasing"},
        {"kv sources no duplicates", e_kv_dup, "kv_source_layer_ids", "layer 1 twice"},
        {"kv source ratio 0", e_kv_r0, "kv_source_layer_ids", "layer 0 has compress ratio 0"},
        {"index source ratio 0", e_idx_r0, "index_source_layer_ids", "layer 0 has compress ratio 0"},
        {"ratio > 0 before every kv source", e_before_kv, "layer 1", "before every kv source"},
        {"kv source ratio must match", e_kv_ratio, "layer 6 (compress ratio 2)", "kv source 5 (ratio 1)"},
        {"non-owner index source after a key owner", e_no_owner, "layer 3", "no key owner"},
        {"non-owner index source same ratio as its keys", e_owner_ratio, "layer 7 (ratio 1)", "layer 4 (ratio 2)"},
        {"candidate source an index source", e_cand_not_idx, "candidate_source_layer_id", "= 6 is not an index"},
        {"candidate source in range", e_cand_range, "candidate_source_layer_id", "no such layer"},
        {"candidate users same ratio", e_cand_users, "layer 5 (ratio 1)", "candidate mask of layer 1 (ratio 2)"},
        {"candidate_block_size > 0", e_cbs, "candidate_block_size", "out of range"},
        {"candidate_topk_blocks > 0", e_ctb, "candidate_topk_blocks", "out of range"},
        {"index_topk > 0", e_topk, "index_topk", "out of range"},
        {"index_n_heads > 0", e_inh, "index_n_heads", "out of range"},
        {"window > 0", e_win, "sliding_window", "out of range"},
        {"max_seq >= 1", e_seq0, "max_seq_len", "out of range"},
        {"max_seq even", e_seq_odd, "max_seq_len = 513", "multiple of 2"},
        {"max_seq within the limit", e_seq_big, "max_seq_len", "out of range"},
        {"n_layers within the limit", e_layers, "num_hidden_layers", "out of range"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        AsConfig c;
        AsError err = {0};
        require_preset("tiny", &c);
        cases[i].edit(&c);
        int rc = as_config_validate(&c, &err);
        CHECK(rc == AS_EBADINPUT && strstr(err.msg, cases[i].a) && strstr(err.msg, cases[i].b),
              "rule '%s': refused with '%s' ... '%s' (rc %d: %s)", cases[i].rule, cases[i].a, cases[i].b, rc,
              err.msg);
    }
}

/* Tokens a prefill needs before the candidate selection can narrow: nblocks > topk_blocks. */
static int tokens_until_narrowing(const AsConfig *c)
{
    int r = c->role[c->candidate_source].ratio;
    for (int t = 1; t <= 1 << 22; t++) {
        int width = t / r, nblocks = (width + c->candidate_block_size - 1) / c->candidate_block_size;
        if (nblocks > c->candidate_topk_blocks)
            return t;
    }
    return -1;
}

TEST(config_tiny_preset_has_every_role_at_a_steppable_size)
{
    AsConfig c;
    require_preset("tiny", &c);
    bool r0 = false, r1 = false, r2 = false, kv = false, owner = false, non_owner = false, reuse = false,
         cand_src = false, cand_use = false, alias = false;
    for (int l = 0; l < c.n_layers; l++) {
        const AsLayerRole *r = &c.role[l];
        r0 |= r->ratio == 0, r1 |= r->ratio == 1, r2 |= r->ratio == 2;
        kv |= r->kv_source;
        owner |= r->key_owner;
        non_owner |= r->index_source && !r->key_owner;
        reuse |= r->ratio > 0 && !r->index_source;
        cand_src |= r->candidate_source;
        cand_use |= r->index_source && r->uses_candidates;
        /* a ratio-2 key owner followed by a ratio-1 one: the index-key aliasing quirk can occur */
        alias |= r->key_owner && r->ratio == 1 && l > 0 && c.role[l - 1].keys_from >= 0 &&
                 c.role[c.role[l - 1].keys_from].ratio == 2;
    }
    CHECK(r0 && r1 && r2, "ratios 0, 1 and 2 all occur");
    CHECK(kv && owner && non_owner, "kv sources, key owners and non-owner index sources occur");
    CHECK(reuse, "a ratio > 0 layer reuses a selection");
    CHECK(cand_src && cand_use, "a candidate source and a candidate user occur");
    CHECK(alias, "a ratio-2 key owner precedes a ratio-1 key owner (index-key aliasing)");
    CHECK(c.window < 20, "the window (%d) wraps within 20 tokens", c.window);
    int t = tokens_until_narrowing(&c);
    CHECK(t > 0 && t < 40, "candidate selection narrows after %d tokens (< 40)", t);
    as_test_note("tiny: candidate selection narrows from %d tokens", t);
    CHECK(c.head_dim % 32 == 0 && c.head_dim % 16 == 0, "head_dim %d divides into fp8 (32) and fp4-e4m3 (16) blocks",
          c.head_dim);
    CHECK(c.index_head_dim % 32 == 0, "index_head_dim %d divides into fp4-e8m0 blocks of 32", c.index_head_dim);
    CHECK(c.rope_head_dim % 2 == 0 && c.rope_head_dim <= c.index_head_dim, "rope_head_dim %d fits as pairs",
          c.rope_head_dim);
    CHECK(c.gw * c.o_groups == c.n_heads * c.head_dim, "output groups split the heads evenly (gw %d)", c.gw);
    CHECK(c.max_seq % 2 == 0 && c.max_seq >= 40, "max_seq %d holds a 40-token run", c.max_seq);
}

TEST(config_flash_preset_roles_follow_the_spec_rules)
{
    AsConfig c;
    require_preset("flash", &c);
    for (int l = 0; l < c.n_layers; l++) {
        const AsLayerRole *r = &c.role[l];
        if (r->ratio > 0) {
            CHECK(r->kv_from >= 0 && c.role[r->kv_from].ratio == r->ratio, "layer %d reads rows_b of a same-ratio kv source",
                  l);
            CHECK(r->select_from >= 0, "layer %d has a selection to use", l);
        }
        CHECK(r->key_owner == (r->kv_source && r->index_source), "layer %d key owner iff kv and index source", l);
        CHECK(r->uses_candidates == (l > c.candidate_source), "layer %d uses candidates iff after layer %d", l,
              c.candidate_source);
    }
    CHECK(tokens_until_narrowing(&c) == 2048 * 8 + 1, "flash candidates narrow beyond 2048 blocks of 8");
}

TEST(config_role_lines_describe_each_role)
{
    AsConfig c;
    require_preset("tiny", &c);
    char line[160];
    as_config_role_line(&c, 5, line, sizeof line);
    CHECK(strstr(line, "r1") && strstr(line, "kv idx cand-src") && strstr(line, "rows_b<-5") &&
              strstr(line, "keys<-5") && strstr(line, "sel<-5"),
          "layer 5 (kv, index, candidate source): '%s'", line);
    as_config_role_line(&c, 6, line, sizeof line);
    CHECK(strstr(line, "rows_b<-5") && strstr(line, "sel<-5 (reuse)") && !strstr(line, "idx"),
          "layer 6 reuses layer 5's selection: '%s'", line);
    as_config_role_line(&c, 7, line, sizeof line);
    CHECK(strstr(line, "idx cand-use") && strstr(line, "keys<-5") && strstr(line, "cand<-5"),
          "layer 7 scores layer 5's keys under its candidates: '%s'", line);
    as_config_role_line(&c, 0, line, sizeof line);
    CHECK(strstr(line, "r0") && strstr(line, "window only"), "layer 0 attends its window only: '%s'", line);
    as_config_role_line(&c, 3, line, sizeof line);
    CHECK(strstr(line, "keys<-1"), "layer 3 (not a kv source) scores layer 1's keys: '%s'", line);
    char small[8];
    as_config_role_line(&c, 5, small, sizeof small);
    CHECK(strlen(small) == 7, "a short buffer gets a cut, terminated line");
    const char *h = as_config_role_header();
    as_config_role_line(&c, 5, line, sizeof line);
    CHECK(strstr(h, "reads") - h == strstr(line, "rows_b") - line, "the header's 'reads' column lines up:\n%s\n%s", h,
          line);
}

TEST(config_unknown_preset_refused)
{
    AsConfig c;
    AsError err = {0};
    CHECK(as_config_preset("huge", &c, &err) == AS_EBADINPUT && strstr(err.msg, "huge"),
          "unknown preset refused naming it: %s", err.msg);
}

TEST(config_load_missing_file_names_the_path)
{
    AsConfig c;
    AsError err = {0};
    char path[512];
    snprintf(path, sizeof path, "%s/nope/config.json", as_test_tmpdir());
    CHECK(as_config_load(path, &c, &err) == AS_EBADINPUT && strstr(err.msg, path), "missing config: %s", err.msg);
}

/* DeepSeek's inference/config.json of DeepSeek-V4.1-Flash as released (revision dba1be0a, a
 * byte-for-byte copy: nulls, floats, lists, 43 compress ratios, "dtype": "fp8"). */
static const char *inference_config_json =
    "{\n    \"vocab_size\": 129280,\n    \"dim\": 5120,\n    \"moe_inter_dim\": 2304,\n    \"n_layers\": 40,\n"
    "    \"n_mtp_layers\": 3,\n    \"dspark_block_size\": 5,\n    \"dspark_noise_token_id\": 128799,\n"
    "    \"dspark_target_layer_ids\": [37, 38, 39],\n    \"dspark_markov_rank\": 256,\n"
    "    \"dspark_n_routed_experts\": 128,\n    \"dspark_n_activated_experts\": 3,\n    \"n_heads\": 64,\n"
    "    \"n_routed_experts\": 384,\n    \"n_shared_experts\": 1,\n    \"n_activated_experts\": 6,\n"
    "    \"score_func\": \"sqrtsoftplus\",\n    \"route_scale\": 1.5,\n    \"swiglu_limit\": 10.0,\n"
    "    \"q_lora_rank\": 1280,\n    \"head_dim\": 512,\n    \"rope_head_dim\": 64,\n    \"norm_eps\": 1e-20,\n"
    "    \"o_groups\": 8,\n    \"o_lora_rank\": 1024,\n    \"window_size\": 128,\n"
    "    \"kv_source_layers\": [2, 8, 14, 20],\n    \"index_source_layers\": [2, 8, 14, 20, 24, 28, 32, 36],\n"
    "    \"original_seq_len\": 65536,\n    \"rope_theta\": 10000,\n    \"rope_factor\": 16,\n    \"beta_fast\": 32,\n"
    "    \"beta_slow\": 1,\n    \"index_n_heads\": 32,\n    \"index_head_dim\": 128,\n    \"index_topk\": 512,\n"
    "    \"candidate_source_layer\": 20,\n    \"candidate_topk_blocks\": 2048,\n    \"candidate_block_size\": 8,\n"
    "    \"hc_mult\": 4,\n    \"hc_sinkhorn_iters\": 20,\n    \"hc_eps\": 1e-06,\n    \"engram_layer_ids\": [1, 14],\n"
    "    \"engram_vocab_size\": 16000000,\n    \"engram_num_embeddings\": [384006168, 384016682],\n"
    "    \"engram_max_ngram_size\": 4,\n    \"engram_pad_id\": 2,\n    \"engram_compressed_vocab_size\": 99092,\n"
    "    \"dtype\": \"fp8\",\n    \"expert_dtype\": \"fp4\",\n    \"compress_rope_theta\": 160000,\n"
    "    \"compress_ratios\": [0, 0, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, "
    "1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0],\n"
    "    \"vision_n_layers\": 32,\n    \"vision_dim\": 1024,\n    \"vision_n_heads\": 16,\n"
    "    \"vision_inter_dim\": 2816,\n    \"vision_patch_size\": 14,\n    \"vision_downsample_ratio\": 3,\n"
    "    \"vision_max_n_token\": 1024,\n    \"vision_min_pixels\": 295936,\n    \"vision_max_wh_ratio\": null,\n"
    "    \"image_token_id\": 129264,\n    \"engram_n_heads\": 8,\n    \"engram_head_dim\": 256,\n"
    "    \"vision_rope_theta\": 10000\n}\n";

TEST(config_released_inference_config_json_parses_with_dtype_fp8)
{
    AsConfig got, want;
    AsError err = {0};
    REQUIRE(parse_validate(inference_config_json, &got, &err) == AS_OK, "released inference/config.json: %s",
            err.msg);
    require_preset("flash", &want);
    CHECK(got.dtype == AS_PREC_FP8, "\"dtype\": \"fp8\" read as AS_PREC_FP8 (got %d)", (int)got.dtype);
    CHECK(got.n_layers == 40 && got.compress_ratios[39] == 1 && got.compress_ratios[40] == 0,
          "43 compress ratios (3 MTP layers) cut to the 40 backbone layers");
    CHECK(got.max_seq == AS_DEFAULT_MAX_SEQ, "no max_seq_len: the default %d (got %d)", AS_DEFAULT_MAX_SEQ,
          got.max_seq);
    got.dtype = AS_PREC_AUTO; /* the presets carry no dtype: gen's precision is its own option */
    CHECK(!memcmp(&got, &want, sizeof got), "apart from dtype, the released inference/config.json is the flash "
                                             "preset field for field");
}

/* released_hf's geometry nested in text_config, under top-level members attnscope does not read:
 * one of them spelled like a geometry field, a vision config, and torch's dtype in both places. */
static char *nested(const char *inner)
{
    const char *pre = "{\"architectures\": [\"X\"], \"hidden_size\": 7, \"dtype\": \"bfloat16\","
                      " \"vision_config\": {\"hidden_size\": 1024, \"num_hidden_layers\": 32}, \"text_config\": ";
    const char *post = ", \"tie_word_embeddings\": false, \"vision_max_wh_ratio\": null}";
    size_t n = strlen(pre) + strlen(inner) + strlen(post) + 1;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s%s%s", pre, inner, post);
    return s;
}

TEST(config_text_config_nested_is_the_geometry)
{
    AsConfig got, want;
    AsError err = {0};
    require_preset("flash", &want);
    /* text_config's own dtype is torch's parameter dtype: not read, not refused */
    char *inner = strdup(released_hf);
    REQUIRE(inner, "strdup");
    inner[strlen(inner) - 1] = '\0';
    size_t n = strlen(inner) + 64;
    char *with_dtype = malloc(n);
    REQUIRE(with_dtype, "alloc");
    snprintf(with_dtype, n, "%s, \"dtype\": \"bfloat16\"}", inner);
    char *json = nested(with_dtype);
    REQUIRE(json, "alloc");
    REQUIRE(parse_validate(json, &got, &err) == AS_OK, "nested config: %s", err.msg);
    CHECK(!memcmp(&got, &want, sizeof got), "the geometry in text_config is the flash preset field for field "
                                             "(top-level hidden_size 7 and vision_config ignored)");
    CHECK(got.dtype == AS_PREC_AUTO, "no dtype read from a Hugging Face config (torch's 'bfloat16' ignored)");
    free(json);
    free(with_dtype);
    free(inner);

    /* a field missing inside text_config is named there; one at the top level does not stand in */
    json = nested("{\"num_hidden_layers\": 40}");
    REQUIRE(json, "alloc");
    CHECK(parse_validate(json, &got, &err) == AS_EBADINPUT && strstr(err.msg, "text_config: missing field hidden_size"),
          "missing field named inside text_config: %s", err.msg);
    free(json);
}

TEST(config_text_config_that_is_not_an_object_is_refused)
{
    static const char *const bad[] = {"5", "\"x\"", "[1, 2]", "null", "true"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *json = nested(bad[i]);
        REQUIRE(json, "alloc");
        AsConfig c;
        AsError err = {0};
        int rc = as_config_parse_json(json, strlen(json), &c, &err);
        CHECK(rc == AS_EBADINPUT && strstr(err.msg, "'text_config' must be an object") && !strchr(err.msg, '\n'),
              "text_config = %s: one line naming text_config (rc %d: %s)", bad[i], rc, err.msg);
        free(json);
    }
}

TEST(config_dtype_of_a_flat_config)
{
    static const struct {
        const char *to;
        AsPrecision want;
    } ok[] = {{"\"dtype\": \"fp8\", \"dim\": 5120", AS_PREC_FP8}, {"\"dtype\": \"bf16\", \"dim\": 5120", AS_PREC_BF16},
              {"\"dim\": 5120", AS_PREC_AUTO}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char *json = strdup(released_ds);
        REQUIRE(json, "strdup");
        const char *from = "\"dim\": 5120";
        char *p = strstr(json, from);
        REQUIRE(p, "fixture has dim");
        size_t n = strlen(json) + strlen(ok[i].to) + 1;
        char *s = malloc(n);
        REQUIRE(s, "alloc");
        snprintf(s, n, "%.*s%s%s", (int)(p - json), json, ok[i].to, p + strlen(from));
        AsConfig c;
        AsError err = {0};
        CHECK(parse_validate(s, &c, &err) == AS_OK && c.dtype == ok[i].want, "%s: dtype %d (want %d): %s", ok[i].to,
              (int)c.dtype, (int)ok[i].want, err.msg);
        free(s);
        free(json);
    }
    /* the Hugging Face spelling, flat, takes dtype too (gen's config.json of a model from --config) */
    static const char *const bad[] = {"\"bfloat16\"", "\"FP8\"", "8", "null", "true", "[\"fp8\"]", "{}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char to[96];
        snprintf(to, sizeof to, "\"hidden_size\": 5120, \"dtype\": %s", bad[i]);
        AsError err = {0};
        int rc = parse_edited("\"hidden_size\": 5120", to, &err);
        CHECK(rc == AS_EBADINPUT && strstr(err.msg, "'dtype'") && strstr(err.msg, "\"fp8\" or \"bf16\"") &&
                  !strchr(err.msg, '\n'),
              "dtype %s: one line naming dtype (rc %d: %s)", bad[i], rc, err.msg);
    }
}

TEST(config_written_in_each_spelling_reads_back)
{
    const char *const *names = as_config_preset_names();
    for (int i = 0; names[i]; i++) {
        AsConfig c;
        require_preset(names[i], &c);
        c.dtype = AS_PREC_FP8;
        static const struct {
            AsConfigSpelling sp;
            const char *has, *lacks;
            bool keeps_dtype;
        } sps[] = {{AS_CONFIG_HF, "\"hidden_size\"", "\"text_config\"", true},
                   {AS_CONFIG_HF_NESTED, "\"text_config\"", "\"dtype\"", false},
                   {AS_CONFIG_DS, "\"window_size\"", "\"hidden_size\"", true}};
        for (size_t k = 0; k < sizeof sps / sizeof sps[0]; k++) {
            char *json = as_config_to_json_as(&c, sps[k].sp);
            REQUIRE(json, "to_json %s", names[i]);
            AsConfig back;
            AsError err = {0};
            int rc = parse_validate(json, &back, &err);
            AsConfig want = c;
            if (!sps[k].keeps_dtype)
                want.dtype = AS_PREC_AUTO;
            CHECK(rc == AS_OK && !memcmp(&want, &back, sizeof want), "preset %s, spelling %d: read back identical "
                  "(dtype %s): %s", names[i], (int)sps[k].sp, sps[k].keeps_dtype ? "kept" : "not written", err.msg);
            CHECK(strstr(json, sps[k].has) && !strstr(json, sps[k].lacks), "preset %s, spelling %d: has %s, not %s",
                  names[i], (int)sps[k].sp, sps[k].has, sps[k].lacks);
            free(json);
        }
    }
}
