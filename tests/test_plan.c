/* ref/plan.c: one layer's plan at the tiny and flash geometries, every layer kind, prefill / decode /
 * a window that wraps / compress_len 0 (the empty selection), the aliasing quirk by parity, and each
 * refusal with its message. Pure functions of the config: no weights. */
#include <string.h>

#include "ref/plan.h"
#include "tests/lib/harness.h"

static AsConfig preset(const char *name)
{
    AsConfig c;
    AsError err = {0};
    REQUIRE(as_config_preset(name, &c, &err) == 0, "preset %s: %s", name, err.msg);
    return c;
}

static bool prov_is(AsProvenance p, int layer, int step) { return p.layer == layer && p.step == step; }

/* Every layer of one step, from the shared state *sh (advanced); plans into p[]. */
static void plan_step(const AsConfig *c, int step, int start_pos, int s, AsSharedProv *sh, AsLayerPlan *p)
{
    for (int l = 0; l < c->n_layers; l++) {
        AsError err = {0};
        REQUIRE(as_plan_layer(c, l, step, start_pos, s, sh, AS_FAULT_NONE, &p[l], sh, &err) == 0,
                "step %d (pos %d, s %d) layer %d: %s", step, start_pos, s, l, err.msg);
    }
}

/* A prefill of s tokens from nothing published: the shared state after it in *sh, the plans in p[]. */
static void plan_prefill(const AsConfig *c, int s, AsSharedProv *sh, AsLayerPlan *p)
{
    as_shared_prov_init(sh);
    plan_step(c, 0, 0, s, sh, p);
}

TEST(plan_tiny_prefill_every_layer_kind)
{
    const AsConfig c = preset("tiny");
    AsSharedProv sh;
    AsLayerPlan p[AS_MAX_LAYERS];
    plan_prefill(&c, 5, &sh, p);
    /* ratio 0: the chunk's rows and nothing else */
    CHECK(p[0].ratio == 0 && p[0].rows_a_len == 5 && p[0].cols == 5 && p[0].topk == 5 && p[0].compress_len == 0 &&
              !p[0].compresses && !p[0].indexes && !p[0].reuses && p[0].k == 0 && p[0].rows_b_len == 0 &&
              prov_is(p[0].rows_b_from, -1, -1) && prov_is(p[0].sel_from, -1, -1),
          "layer 0 (ratio 0): rows_a %d cols %d topk %d compress_len %d k %d", p[0].rows_a_len, p[0].cols, p[0].topk,
          p[0].compress_len, p[0].k);
    /* ratio 2, kv + index source (key owner): 2 groups of 5 tokens, keys its own */
    CHECK(p[1].compresses && p[1].n_new == 2 && p[1].latent_pos0 == 0 && p[1].latent_pos_step == 2 &&
              p[1].cache_row0 == 0 && p[1].stores_keys && p[1].indexes && p[1].stores_latents && p[1].width == 2 &&
              p[1].k == 2 && p[1].keys_cap == 256 && prov_is(p[1].keys_from, 1, 0) && p[1].sel_offset == 5 &&
              p[1].rows_b_len == 2 && p[1].rows_b_cap == 256 && prov_is(p[1].rows_b_from, 1, 0) && p[1].topk == 7 &&
              prov_is(p[1].sel_from, 1, 0),
          "layer 1 (r2 kv idx): n_new %d width %d k %d keys from %d cap %d, rows_b %d from %d, topk %d", p[1].n_new,
          p[1].width, p[1].k, p[1].keys_from.layer, p[1].keys_cap, p[1].rows_b_len, p[1].rows_b_from.layer, p[1].topk);
    /* ratio 2, nothing of its own: layer 1's selection and cache */
    CHECK(!p[2].compresses && p[2].n_new == 0 && p[2].reuses && !p[2].indexes && p[2].k == 2 &&
              prov_is(p[2].sel_from, 1, 0) && prov_is(p[2].rows_b_from, 1, 0) && p[2].width == 0 &&
              prov_is(p[2].keys_from, -1, -1) && p[2].topk == 7,
          "layer 2 (r2 reuse): k %d sel from %d rows_b from %d", p[2].k, p[2].sel_from.layer, p[2].rows_b_from.layer);
    /* ratio 2 index source, no kv source: layer 1's keys */
    CHECK(p[3].indexes && !p[3].stores_keys && prov_is(p[3].keys_from, 1, 0) && prov_is(p[3].sel_from, 3, 0) &&
              prov_is(p[3].rows_b_from, 1, 0),
          "layer 3 (r2 idx): keys from %d, sel from %d", p[3].keys_from.layer, p[3].sel_from.layer);
    CHECK(p[4].stores_keys && prov_is(p[4].keys_from, 4, 0) && prov_is(p[4].rows_b_from, 4, 0),
          "layer 4 (r2 kv idx): keys from %d rows_b from %d", p[4].keys_from.layer, p[4].rows_b_from.layer);
    /* ratio 1, the candidate source: a latent a token */
    CHECK(p[5].n_new == 5 && p[5].latent_pos0 == 0 && p[5].latent_pos_step == 1 && p[5].makes_cand &&
              !p[5].applies_cand && prov_is(p[5].cand_from, 5, 0) && p[5].width == 5 && p[5].k == 5 &&
              p[5].keys_cap == 512 && p[5].rows_b_cap == 512 && p[5].topk == 10,
          "layer 5 (r1 cand source): n_new %d width %d k %d cand from %d", p[5].n_new, p[5].width, p[5].k,
          p[5].cand_from.layer);
    /* a reuser after the candidate source reads no mask; an index source after it applies it */
    CHECK(p[6].reuses && p[6].k == 5 && prov_is(p[6].cand_from, -1, -1) && !p[6].applies_cand,
          "layer 6 (r1 reuse): k %d cand from %d", p[6].k, p[6].cand_from.layer);
    CHECK(p[7].indexes && p[7].applies_cand && prov_is(p[7].cand_from, 5, 0) && prov_is(p[7].keys_from, 5, 0) &&
              prov_is(p[7].rows_b_from, 5, 0),
          "layer 7 (r1 idx, candidate user): cand from %d keys from %d", p[7].cand_from.layer, p[7].keys_from.layer);
    CHECK(prov_is(sh.sel_from, 9, 0) && sh.sel_s == 5 && sh.sel_k == 5 && prov_is(sh.index_k_from, 5, 0) &&
              prov_is(sh.compress_kv_from, 5, 0) && prov_is(sh.cand_from, 5, 0) && sh.cand_s == 5 &&
              sh.cand_width == 5,
          "after the step: selection from %d (%dx%d), keys from %d, cache from %d, mask from %d (%dx%d)",
          sh.sel_from.layer, sh.sel_s, sh.sel_k, sh.index_k_from.layer, sh.compress_kv_from.layer, sh.cand_from.layer,
          sh.cand_s, sh.cand_width);
}

/* A prefill longer than the window keeps the chunk's rows but win columns; a decode the whole ring. */
TEST(plan_window_wraps)
{
    const AsConfig c = preset("tiny");
    AsSharedProv sh;
    AsLayerPlan p[AS_MAX_LAYERS];
    plan_prefill(&c, 12, &sh, p);
    CHECK(p[0].rows_a_len == 12 && p[0].cols == 8 && p[0].topk == 8, "prefill of 12, window 8: rows_a %d cols %d topk %d",
          p[0].rows_a_len, p[0].cols, p[0].topk);
    CHECK(p[5].k == 8 && p[5].width == 12 && p[5].topk == 16, "layer 5: k = index_topk 8 of width 12: k %d topk %d",
          p[5].k, p[5].topk);
    plan_step(&c, 1, 12, 1, &sh, p);
    CHECK(p[0].rows_a_len == 8 && p[0].cols == 8 && !p[0].prefill, "decode: rows_a %d cols %d", p[0].rows_a_len,
          p[0].cols);
    CHECK(p[5].sel_offset == 8 && p[5].cache_row0 == 12 && p[5].latent_pos0 == 12 && p[5].n_new == 1,
          "decode layer 5: offset %d row0 %d latent at %d n_new %d", p[5].sel_offset, p[5].cache_row0,
          p[5].latent_pos0, p[5].n_new);
}

/* compress_len 0: the index sources publish an empty selection and the reusers after them attend no
 * compressed position; the kv source's cache is published all the same. */
TEST(plan_compress_len_zero_empty_selection)
{
    const AsConfig c = preset("tiny");
    AsSharedProv sh;
    AsLayerPlan p[AS_MAX_LAYERS];
    plan_prefill(&c, 1, &sh, p);
    CHECK(p[1].compress_len == 0 && p[1].compresses && p[1].n_new == 0 && !p[1].stores_latents && !p[1].indexes &&
              !p[1].stores_keys && p[1].publishes_empty && p[1].k == 0 && prov_is(p[1].sel_from, 1, 0) &&
              p[1].rows_b_len == 0 && prov_is(p[1].rows_b_from, 1, 0) && p[1].topk == 1,
          "layer 1, s 1: compress_len %d n_new %d empty %d k %d rows_b %d from %d", p[1].compress_len, p[1].n_new,
          p[1].publishes_empty, p[1].k, p[1].rows_b_len, p[1].rows_b_from.layer);
    CHECK(p[2].reuses && p[2].k == 0 && prov_is(p[2].sel_from, 1, 0), "layer 2 reuses the empty selection: k %d from %d",
          p[2].k, p[2].sel_from.layer);
    CHECK(p[3].publishes_empty && prov_is(p[3].sel_from, 3, 0), "layer 3: empty %d", p[3].publishes_empty);
    CHECK(p[5].indexes && p[5].width == 1 && p[5].k == 1 && p[5].stores_keys, "layer 5 (ratio 1): width %d k %d",
          p[5].width, p[5].k);
    CHECK(p[6].reuses && p[6].k == 1 && prov_is(p[6].sel_from, 5, 0), "layer 6: k %d from %d", p[6].k,
          p[6].sel_from.layer);
    CHECK(prov_is(sh.index_k_from, 5, 0), "no ratio-2 keys published: keys from %d", sh.index_k_from.layer);
}

/* The released geometry's two decode shapes: a ratio-2 key owner completes a group on odd positions
 * only; on even ones it scores against layer 20's ratio-1 keys of the step before (the aliasing quirk). */
TEST(plan_flash_decode_key_aliasing_by_parity)
{
    const AsConfig c = preset("flash");
    AsSharedProv sh;
    static AsLayerPlan p[AS_MAX_LAYERS];
    plan_prefill(&c, 4096, &sh, p);
    CHECK(p[2].n_new == 2048 && p[2].k == 512 && p[20].n_new == 4096 && p[20].makes_cand && p[24].applies_cand,
          "prefill: layer 2 n_new %d k %d, layer 20 n_new %d", p[2].n_new, p[2].k, p[20].n_new);
    plan_step(&c, 1, 4096, 1, &sh, p);
    CHECK(p[2].n_new == 0 && !p[2].stores_keys && prov_is(p[2].keys_from, 20, 0) && p[2].keys_cap == 8192 &&
              p[2].width == 2048 && !p[2].stores_latents && prov_is(p[2].rows_b_from, 2, 1),
          "even position 4096, layer 2: n_new %d keys from layer %d step %d (cap %d), width %d", p[2].n_new,
          p[2].keys_from.layer, p[2].keys_from.step, p[2].keys_cap, p[2].width);
    CHECK(p[20].n_new == 1 && prov_is(p[20].keys_from, 20, 1) && p[20].cache_row0 == 4096,
          "layer 20: n_new %d keys from %d step %d", p[20].n_new, p[20].keys_from.layer, p[20].keys_from.step);
    CHECK(prov_is(p[21].sel_from, 20, 1) && p[21].reuses && p[21].k == 512, "layer 21 reuses 20's: from %d k %d",
          p[21].sel_from.layer, p[21].k);
    plan_step(&c, 2, 4097, 1, &sh, p);
    CHECK(p[2].n_new == 1 && p[2].stores_keys && prov_is(p[2].keys_from, 2, 2) && p[2].keys_cap == 4096 &&
              p[2].cache_row0 == 2048 && p[2].latent_pos0 == 4096 && p[2].width == 2049,
          "odd position 4097, layer 2: n_new %d keys from %d (cap %d), row0 %d, latent at %d, width %d", p[2].n_new,
          p[2].keys_from.layer, p[2].keys_cap, p[2].cache_row0, p[2].latent_pos0, p[2].width);
    CHECK(p[3].reuses && prov_is(p[3].sel_from, 2, 2) && prov_is(p[3].rows_b_from, 2, 2),
          "layer 3 reuses layer 2's: selection from %d, rows_b from %d", p[3].sel_from.layer, p[3].rows_b_from.layer);
    CHECK(prov_is(p[8].keys_from, 8, 2) && prov_is(p[24].keys_from, 20, 2) && p[24].keys_cap == 8192,
          "layer 8 scores its own keys (%d), layer 24 layer 20's (%d)", p[8].keys_from.layer, p[24].keys_from.layer);
}

/* The faults that change a plan: the mask off for its users (no refusal of a mask that does not fit),
 * no offset on the picks. */
TEST(plan_faults_that_change_the_plan)
{
    const AsConfig c = preset("tiny");
    AsSharedProv sh;
    AsLayerPlan p[AS_MAX_LAYERS];
    plan_prefill(&c, 6, &sh, p);
    for (int l = 0; l < 7; l++) { /* the decode's layers before 7 */
        AsError err = {0};
        REQUIRE(as_plan_layer(&c, l, 1, 6, 1, &sh, AS_FAULT_NONE, &p[l], &sh, &err) == 0, "layer %d: %s", l, err.msg);
    }
    AsLayerPlan q;
    AsSharedProv out, stale = sh;
    stale.cand_width = 1; /* a mask the faithful plan refuses */
    AsError err = {0};
    CHECK(as_plan_layer(&c, 7, 1, 6, 1, &stale, AS_FAULT_NONE, &q, &out, &err) == AS_EREFUSED,
          "the faithful plan refuses a 1x1 mask for 1x7 scores");
    CHECK(as_plan_layer(&c, 7, 1, 6, 1, &stale, AS_FAULT_CAND_MASK_OFF, &q, &out, &err) == 0 && !q.applies_cand &&
              prov_is(q.cand_from, -1, -1) && q.indexes,
          "mask off: '%s', applies %d", err.msg, q.applies_cand);
    CHECK(as_plan_layer(&c, 7, 1, 6, 1, &sh, AS_FAULT_NO_OFFSET, &q, &out, &err) == 0 && q.sel_offset == 0 &&
              q.applies_cand,
          "no offset: '%s', offset %d", err.msg, q.sel_offset);
    CHECK(as_plan_layer(&c, 7, 1, 6, 1, &sh, AS_FAULT_NONE, &q, &out, &err) == 0 && q.sel_offset == 8 &&
              prov_is(q.cand_from, 5, 1),
          "faithful decode: offset %d, mask from layer %d step %d", q.sel_offset, q.cand_from.layer, q.cand_from.step);
}

typedef struct {
    const char *what;
    int layer, start_pos, s, code;
    const char *msg;
} Refusal;

/* One refusal: its code and message, and neither the plan nor the state touched. */
static void check_refusal(const AsConfig *c, const Refusal *r, const AsSharedProv *in)
{
    AsLayerPlan p;
    memset(&p, 0x5a, sizeof p);
    AsSharedProv out;
    memset(&out, 0x5a, sizeof out);
    AsLayerPlan p0 = p;
    AsSharedProv out0 = out;
    AsError err = {0};
    int rc = as_plan_layer(c, r->layer, 1, r->start_pos, r->s, in, AS_FAULT_NONE, &p, &out, &err);
    CHECK(rc == r->code && !strcmp(err.msg, r->msg), "%s: rc %d (want %d), message '%s' (want '%s')", r->what, rc,
          r->code, err.msg, r->msg);
    CHECK(!memcmp(&p, &p0, sizeof p) && !memcmp(&out, &out0, sizeof out), "%s: the plan or the state was written",
          r->what);
}

TEST(plan_refusals_and_their_messages)
{
    const AsConfig c = preset("tiny");
    AsSharedProv none;
    as_shared_prov_init(&none);
    static const Refusal shape[] = {
        {"layer -1", -1, 0, 1, AS_EBADINPUT, "layer -1 out of range (0..9)"},
        {"layer 10", 10, 0, 1, AS_EBADINPUT, "layer 10 out of range (0..9)"},
        {"decode of 2", 0, 3, 2, AS_EBADINPUT,
         "layer 0: a step is a prefill (start_pos 0, s >= 1) or a decode of one token, not start_pos 3 with s 2"},
        {"s 0", 0, 0, 0, AS_EBADINPUT,
         "layer 0: a step is a prefill (start_pos 0, s >= 1) or a decode of one token, not start_pos 0 with s 0"},
        {"negative position", 0, -1, 1, AS_EBADINPUT,
         "layer 0: a step is a prefill (start_pos 0, s >= 1) or a decode of one token, not start_pos -1 with s 1"},
        {"past max_seq", 0, 512, 1, AS_EREFUSED, "layer 0: position 512 beyond max_seq 512"},
        {"prefill past max_seq", 0, 0, 513, AS_EREFUSED, "layer 0: position 512 beyond max_seq 512"},
        {"no cache published", 2, 0, 4, AS_EREFUSED,
         "layer 2 (ratio 2): no compressed cache has been published: it must not attend"},
    };
    for (size_t i = 0; i < sizeof shape / sizeof shape[0]; i++)
        check_refusal(&c, &shape[i], &none);

    /* layer 1's cache, no keys: the non-owner index source refuses */
    AsSharedProv cache_only = none;
    cache_only.compress_kv_from = (AsProvenance){1, 0};
    check_refusal(&c, &(Refusal){"no keys", 3, 0, 4, AS_EREFUSED,
                                 "layer 3: index source scores with no published index keys"},
                  &cache_only);

    /* a ratio-1 index source reading a ratio-2 layer's keys (256 rows) at position 300 */
    AsSharedProv short_keys = none;
    short_keys.compress_kv_from = short_keys.index_k_from = (AsProvenance){1, 0};
    check_refusal(&c, &(Refusal){"keys too short", 7, 300, 1, AS_EREFUSED,
                                 "layer 7: index width 301 exceeds the 256 rows of the index keys published by layer 1"},
                  &short_keys);

    /* a candidate user whose mask is of another width */
    AsSharedProv stale_mask = none;
    stale_mask.compress_kv_from = stale_mask.index_k_from = stale_mask.cand_from = (AsProvenance){5, 0};
    stale_mask.cand_s = 1;
    stale_mask.cand_width = 5;
    check_refusal(&c, &(Refusal){"stale mask", 7, 10, 1, AS_EREFUSED,
                                 "layer 7: candidate mask is 1x5 (layer 5, step 0) but the scores are 1x11"},
                  &stale_mask);
    AsSharedProv no_mask = stale_mask;
    no_mask.cand_from = (AsProvenance){-1, -1};
    no_mask.cand_s = no_mask.cand_width = 0;
    check_refusal(&c, &(Refusal){"no mask", 7, 10, 1, AS_EREFUSED,
                                 "layer 7: candidate mask is 0x0 (layer -1, step -1) but the scores are 1x11"},
                  &no_mask);

    /* a reuser whose shared selection is a prefill's */
    AsSharedProv prefill_sel = none;
    prefill_sel.compress_kv_from = prefill_sel.sel_from = (AsProvenance){1, 0};
    prefill_sel.sel_s = 5;
    prefill_sel.sel_k = 2;
    check_refusal(&c, &(Refusal){"selection rows", 2, 7, 1, AS_EREFUSED,
                                 "layer 2: the shared selection (layer 1, step 0) has 5 rows, the step 1"},
                  &prefill_sel);

    /* a ratio-1 layer attending a ratio-2 layer's cache (256 rows) at position 300 */
    AsSharedProv short_cache = none;
    short_cache.compress_kv_from = (AsProvenance){1, 0};
    check_refusal(&c, &(Refusal){"cache too short", 6, 300, 1, AS_EREFUSED,
                                 "layer 6: compress_len 301 exceeds the 256 rows of layer 1's cache"},
                  &short_cache);
}

TEST(plan_step_and_begin_step)
{
    const AsConfig c = preset("tiny");
    AsError err = {0};
    CHECK(as_plan_step(&c, 0, 512, &err) == 0 && as_plan_step(&c, 511, 1, &err) == 0, "the last positions fit");
    CHECK(as_plan_step(&c, 2147483647, 1, &err) == AS_EREFUSED &&
              !strcmp(err.msg, "position 2147483647 beyond max_seq 512"),
          "the largest position: '%s'", err.msg);
    CHECK(as_plan_begin_step(&c, 4, 1, false, &err) == AS_EBADINPUT && !strcmp(err.msg, "decode before any prefill"),
          "decode first: '%s'", err.msg);
    CHECK(as_plan_begin_step(&c, 4, 1, true, &err) == 0 && as_plan_begin_step(&c, 0, 3, false, &err) == 0,
          "a decode after a prefill, a prefill any time");
    CHECK(as_plan_begin_step(&c, 4, 2, true, &err) == AS_EBADINPUT, "a decode of 2 tokens");
    CHECK(as_plan_cache_rows(&c, 1) == 256 && as_plan_cache_rows(&c, 5) == 512 && as_plan_cache_rows(&c, 0) == 0,
          "cache rows: %d %d %d", as_plan_cache_rows(&c, 1), as_plan_cache_rows(&c, 5), as_plan_cache_rows(&c, 0));
}
