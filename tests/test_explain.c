/* Mismatches inherited from upstream flips (driver/explain.h): one fp8 grid step in the row that
 * carries a query's attention moves o beyond the bf16 rule; recomputed from the checked side's
 * own rows the stage matches, so the mismatch is explained. A genuine error in o is not. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "driver/explain.h"
#include "ref/candidates.h"
#include "ref/indexer.h"
#include "ref/linear.h"
#include "ref/stage.h"
#include "model/inputs.h"
#include "ref/numerics.h"
#include "ref/quant.h"
#include "ref/stack.h"
#include "tests/lib/harness.h"
#include "tests/lib/model_fixture.h"

/* Moves kv[0][c] (and the rows and ring that hold it) one e4m3 step up, as a GPU whose
 * pre-quantisation value sat one bf16 ulp away might have, then recomputes the tail from it. */
static void plant_flip(const AsRefModel *rm, AsRun *got, int c)
{
    float *kv = got->t[AS_T_KV].data, *pre = got->t[AS_T_KV_PRE].data;
    float scale = as_fp8_block_scale(pre + (c / AS_FP8_BLOCK) * AS_FP8_BLOCK, AS_FP8_BLOCK);
    uint8_t code = as_e4m3_bits(kv[c] / scale);
    float moved = as_bf16(as_e4m3_from_bits((uint8_t)(code + 1)) * scale);
    kv[c] = moved;
    ((float *)got->t[AS_T_ROWS_A].data)[c] = moved;
    ((float *)got->t[AS_T_ST_RING].data)[c] = moved;
    int s = got->s;
    as_ref_attend(rm, got->layer, got->t[AS_T_Q].data, got->t[AS_T_ROWS_A].data, got->rows_a_len, NULL, 0,
                  got->t[AS_T_IDX].data, got->topk, s, got->t[AS_T_O].data);
    as_ref_rotate_back(rm, got->layer, got->t[AS_T_O].data, s, got->start_pos, got->t[AS_T_O_BACK].data);
    as_ref_project_out(rm, got->layer, got->t[AS_T_O_BACK].data, s, got->t[AS_T_OG].data, got->t[AS_T_OUT].data);
}

TEST(explain_inherited_flip_vs_real_error)
{
    AsModel *m = as_test_model("tiny", NULL, 7);
    AsRefStack k;
    AsError err = {0};
    REQUIRE(as_ref_stack_init(&k, m, &err) == 0, "%s", err.msg);
    int s = 3, dim = m->cfg.dim;
    float *h0 = malloc(sizeof(float) * (size_t)s * dim);
    as_inputs_synthetic(1, 0, s, dim, h0);
    AsRun ref, got;
    as_run_init(&ref);
    as_run_init(&got);
    REQUIRE(as_ref_begin_step(&k, h0, 0, s, &err) == 0 && as_ref_next_layer(&k, NULL, &ref, &err) == 0, "%s", err.msg);
    AsCompareOptions opt;
    as_compare_options_default(&opt);
    /* token 0 attends row 0 alone: the channel with the largest |q . e_c| effect flips */
    int best = -1;
    AsLayerDiff d;
    for (int c = 0; c < m->cfg.head_dim && best < 0; c++) {
        REQUIRE(as_run_copy(&got, &ref) == 0, "copy");
        plant_flip(&k.rm, &got, c);
        as_compare_layer(&got, &ref, &opt, &d);
        if (d.t[AS_T_O].verdict == AS_V_MISMATCH && d.t[AS_T_KV].verdict == AS_V_FLIPS)
            best = c;
    }
    REQUIRE(best >= 0, "no single fp8 flip of row 0 moved o beyond the bf16 rule");
    as_test_note("kv[0][%d] one grid step up: kv %s (%ld flips), o MISMATCH (max |diff| %.4g > tol %.4g)", best,
                 as_verdict_name(d.t[AS_T_KV].verdict), (long)d.t[AS_T_KV].n_flips, d.t[AS_T_O].max_abs,
                 d.t[AS_T_O].tol);
    as_explain_downstream(&k.rm, &got, &ref, NULL, &opt, &d);
    CHECK(d.t[AS_T_O].explained && d.t[AS_T_O].verdict == AS_V_FLIPS, "o explained by the flip: verdict %s",
          as_verdict_name(d.t[AS_T_O].verdict));
    CHECK(d.verdict != AS_V_MISMATCH, "the layer is no longer a mismatch (worst %s in %s)", as_verdict_name(d.verdict),
          d.worst_tensor == AS_T_COUNT ? "-" : as_tensor_desc[d.worst_tensor].name);
    CHECK(d.t[AS_T_O].explained_max_abs <= d.t[AS_T_O].tol, "against its own recomputation o is within tolerance");

    /* a genuine error in o on top of the flip: not explained */
    ((float *)got.t[AS_T_O].data)[5] += 0.75f;
    as_compare_layer(&got, &ref, &opt, &d);
    as_explain_downstream(&k.rm, &got, &ref, NULL, &opt, &d);
    CHECK(d.t[AS_T_O].verdict == AS_V_MISMATCH && !d.t[AS_T_O].explained, "a real error in o stays a mismatch");

    /* an upstream mismatch (q) is never explained away downstream */
    REQUIRE(as_run_copy(&got, &ref) == 0, "copy");
    ((float *)got.t[AS_T_Q].data)[0] += 1.0f;
    ((float *)got.t[AS_T_O].data)[0] += 1.0f;
    as_compare_layer(&got, &ref, &opt, &d);
    as_explain_downstream(&k.rm, &got, &ref, NULL, &opt, &d);
    CHECK(d.t[AS_T_Q].verdict == AS_V_MISMATCH && d.t[AS_T_O].verdict == AS_V_MISMATCH && !d.t[AS_T_O].explained,
          "with q out of tolerance, o is not re-judged");
    as_run_free(&ref), as_run_free(&got);
    free(h0);
    as_ref_stack_free(&k);
    as_test_model_free(m);
}

/* The index path: one fp4 grid step in an index query (its input unchanged: a benign flip) moves
 * the scores by many ulps, hence the candidate mask, the selection, idx and o. Rebuilt from that
 * query with the reference's own functions, every one of those is explained as inherited; a
 * selection the checked side did not derive from its scores is not. */
static void rebuild_index_tail(const AsRefModel *rm, AsRun *got)
{
    const AsConfig *c = &rm->m->cfg;
    int s = got->s, w = got->width, r = c->role[got->layer].ratio;
    int *cl = malloc(sizeof(int) * (size_t)s);
    for (int t = 0; t < s; t++)
        cl[t] = (t + 1) / r;
    float *sc = got->t[AS_T_ISCORE].data;
    as_index_scores(got->t[AS_T_IQ].data, got->t[AS_T_KEYS].data, got->t[AS_T_W].data, s, c->index_n_heads,
                    c->index_head_dim, w, sc);
    as_index_visibility(sc, s, w, cl);
    as_select_candidate_blocks(sc, s, w, cl, c->candidate_block_size, c->candidate_topk_blocks, got->t[AS_T_CAND].data);
    as_index_topk(sc, s, w, got->k, cl, got->rows_a_len, got->t[AS_T_CSEL].data);
    for (int t = 0; t < s; t++)
        memcpy((int32_t *)got->t[AS_T_IDX].data + (size_t)t * got->topk + got->cols,
               (int32_t *)got->t[AS_T_CSEL].data + (size_t)t * got->k, sizeof(int32_t) * (size_t)got->k);
    as_ref_attend(rm, got->layer, got->t[AS_T_Q].data, got->t[AS_T_ROWS_A].data, got->rows_a_len,
                  got->t[AS_T_ROWS_B].data, got->rows_b_len, got->t[AS_T_IDX].data, got->topk, s, got->t[AS_T_O].data);
    as_ref_rotate_back(rm, got->layer, got->t[AS_T_O].data, s, got->start_pos, got->t[AS_T_O_BACK].data);
    as_ref_project_out(rm, got->layer, got->t[AS_T_O_BACK].data, s, got->t[AS_T_OG].data, got->t[AS_T_OUT].data);
    free(cl);
}

TEST(explain_index_path_inherited_from_a_query_flip)
{
    AsModel *m = as_test_model("tiny", NULL, 7);
    AsRefStack k;
    AsError err = {0};
    REQUIRE(as_ref_stack_init(&k, m, &err) == 0, "%s", err.msg);
    int s = 24, dim = m->cfg.dim;
    float *h0 = malloc(sizeof(float) * (size_t)s * dim);
    as_inputs_synthetic(1, 0, s, dim, h0);
    AsRun ref, got;
    as_run_init(&ref);
    as_run_init(&got);
    REQUIRE(as_ref_begin_step(&k, h0, 0, s, &err) == 0, "%s", err.msg);
    for (int l = 0; l <= 5; l++) /* layer 5: ratio-1 key owner, index and candidate source */
        REQUIRE(as_ref_next_layer(&k, NULL, &ref, &err) == 0, "%s", err.msg);
    AsCompareOptions opt;
    as_compare_options_default(&opt);
    AsLayerDiff d;
    int found = -1;
    int64_t n = as_ht_numel(&ref.t[AS_T_IQ]);
    for (int64_t i = 0; i < n && found < 0; i += 7) {
        REQUIRE(as_run_copy(&got, &ref) == 0, "copy");
        float *iq = got.t[AS_T_IQ].data;
        if (iq[i] == 0.0f)
            continue;
        /* one e2m1 step at the element's block scale: 6 -> 4, 1.5 -> 1 ... (inputs unchanged) */
        float scale = as_fp4_e8m0_block_scale((float *)got.t[AS_T_IQ_PRE].data + i / 32 * 32, 32);
        float v = iq[i] / scale, a = fabsf(v), down = a > 4 ? 4 : a > 2 ? a - 1 : a - 0.5f;
        iq[i] = copysignf(down, v) * scale;
        rebuild_index_tail(&k.rm, &got);
        as_compare_layer(&got, &ref, &opt, &d);
        if (d.t[AS_T_IQ].verdict == AS_V_FLIPS && d.t[AS_T_CSEL].verdict == AS_V_MISMATCH)
            found = (int)i;
    }
    REQUIRE(found >= 0, "no single fp4 flip of the index queries changed the selection");
    as_test_note("iq element %d one fp4 step down: iq flips, iscore %s, csel %s (%ld queries differ, %ld real)", found,
                 as_verdict_name(d.t[AS_T_ISCORE].verdict), as_verdict_name(d.t[AS_T_CSEL].verdict),
                 (long)d.t[AS_T_CSEL].n_rows_differ, (long)d.t[AS_T_CSEL].n_real);
    as_explain_downstream(&k.rm, &got, &ref, NULL, &opt, &d);
    CHECK(d.verdict != AS_V_MISMATCH, "the layer is explained (worst %s in %s)", as_verdict_name(d.verdict),
          d.worst_tensor == AS_T_COUNT ? "-" : as_tensor_desc[d.worst_tensor].name);
    CHECK(d.t[AS_T_CSEL].explained, "csel explained by the scores it came from");
    /* a selection that does not follow from the checked side's scores stays a mismatch */
    int32_t *csel = got.t[AS_T_CSEL].data;
    csel[0] = csel[0] == -1 ? got.rows_a_len : -1;
    as_compare_layer(&got, &ref, &opt, &d);
    as_explain_downstream(&k.rm, &got, &ref, NULL, &opt, &d);
    CHECK(d.t[AS_T_CSEL].verdict == AS_V_MISMATCH && !d.t[AS_T_CSEL].explained, "a selection not from the scores: %s",
          as_verdict_name(d.t[AS_T_CSEL].verdict));
    as_run_free(&ref), as_run_free(&got);
    free(h0);
    as_ref_stack_free(&k);
    as_test_model_free(m);
}

/* A candidate user's tail rebuilt with the mask it is given (its scores masked where the mask is 0). */
static void rebuild_user_tail(const AsRefModel *rm, AsRun *got, const uint8_t *mask)
{
    const AsConfig *c = &rm->m->cfg;
    int s = got->s, w = got->width, r = c->role[got->layer].ratio;
    int *cl = malloc(sizeof(int) * (size_t)s);
    for (int t = 0; t < s; t++)
        cl[t] = (t + 1) / r;
    float *sc = got->t[AS_T_ISCORE].data;
    as_index_scores(got->t[AS_T_IQ].data, got->t[AS_T_KEYS].data, got->t[AS_T_W].data, s, c->index_n_heads,
                    c->index_head_dim, w, sc);
    as_index_visibility(sc, s, w, cl);
    memcpy(got->t[AS_T_CAND].data, mask, (size_t)s * w);
    for (int64_t i = 0; i < (int64_t)s * w; i++)
        if (!mask[i])
            sc[i] = -INFINITY;
    as_index_topk(sc, s, w, got->k, cl, got->rows_a_len, got->t[AS_T_CSEL].data);
    for (int t = 0; t < s; t++)
        memcpy((int32_t *)got->t[AS_T_IDX].data + (size_t)t * got->topk + got->cols,
               (int32_t *)got->t[AS_T_CSEL].data + (size_t)t * got->k, sizeof(int32_t) * (size_t)got->k);
    as_ref_attend(rm, got->layer, got->t[AS_T_Q].data, got->t[AS_T_ROWS_A].data, got->rows_a_len,
                  got->t[AS_T_ROWS_B].data, got->rows_b_len, got->t[AS_T_IDX].data, got->topk, s, got->t[AS_T_O].data);
    as_ref_rotate_back(rm, got->layer, got->t[AS_T_O].data, s, got->start_pos, got->t[AS_T_O_BACK].data);
    as_ref_project_out(rm, got->layer, got->t[AS_T_O_BACK].data, s, got->t[AS_T_OG].data, got->t[AS_T_OUT].data);
    free(cl);
}

/* Across layers: the candidate source's mask differs on the checked side where its own difference
 * was explained (a near-tie there); the user that applies it scores, selects and attends
 * accordingly: inherited from that layer and step, not a mismatch. When the source's difference is
 * a mismatch, the user's stays one. */
TEST(explain_mask_inherited_from_the_candidate_source)
{
    AsModel *m = as_test_model("tiny", NULL, 7);
    const AsConfig *c = &m->cfg;
    AsRefStack k;
    AsError err = {0};
    REQUIRE(as_ref_stack_init(&k, m, &err) == 0, "%s", err.msg);
    int s = 24, dim = c->dim;
    float *h0 = malloc(sizeof(float) * (size_t)s * dim);
    as_inputs_synthetic(1, 0, s, dim, h0);
    AsRun ref[8], got;
    as_run_init(&got);
    REQUIRE(as_ref_begin_step(&k, h0, 0, s, &err) == 0, "%s", err.msg);
    for (int l = 0; l <= 7; l++) {
        as_run_init(&ref[l]);
        REQUIRE(as_ref_next_layer(&k, NULL, &ref[l], &err) == 0, "%s", err.msg);
    }
    int src = c->candidate_source, user = 7;
    REQUIRE(src == 5 && c->role[user].uses_candidates && c->role[user].index_source, "tiny's roles");
    /* the source's mask with, in the last query, a kept block swapped for a dropped one */
    int w = ref[src].width, bs = c->candidate_block_size, t = s - 1;
    uint8_t *mask = malloc((size_t)s * w);
    memcpy(mask, ref[src].t[AS_T_CAND].data, (size_t)s * w);
    uint8_t *row = mask + (size_t)t * w;
    int kept = -1, dropped = -1, pinned = ((t + 1) - 1) / bs;
    for (int b = 0; b * bs < w; b++) {
        if (b == pinned)
            continue;
        if (row[b * bs] && kept < 0)
            kept = b;
        if (!row[b * bs] && dropped < 0)
            dropped = b;
    }
    REQUIRE(kept >= 0 && dropped >= 0, "query %d keeps some blocks and drops others", t);
    for (int p = 0; p < bs; p++)
        row[kept * bs + p] = 0, row[dropped * bs + p] = 1;
    REQUIRE(as_run_copy(&got, &ref[user]) == 0, "copy");
    rebuild_user_tail(&k.rm, &got, mask);
    AsLayerDiff *diffs = calloc((size_t)c->n_layers, sizeof *diffs);
    AsExplainContext ctx;
    memset(&ctx, 0, sizeof ctx);
    for (int l = 0; l < AS_MAX_LAYERS; l++)
        ctx.pub_sel_n[l] = ctx.pub_cand_n[l] = -1;
    ctx.pub_cand[src] = mask;
    ctx.pub_cand_n[src] = (int64_t)s * w;
    ctx.diff = diffs;
    diffs[src].t[AS_T_CAND].verdict = AS_V_NEAR_TIE; /* the source's own difference, explained there */
    AsCompareOptions opt;
    as_compare_options_default(&opt);
    opt.cand_block = bs;
    AsLayerDiff d;
    as_compare_layer(&got, &ref[user], &opt, &d);
    CHECK(d.t[AS_T_CAND].verdict == AS_V_MISMATCH && d.t[AS_T_ISCORE].verdict == AS_V_MISMATCH,
          "compared alone, the applied mask and the scores differ: cand %s, iscore %s",
          as_verdict_name(d.t[AS_T_CAND].verdict), as_verdict_name(d.t[AS_T_ISCORE].verdict));
    as_explain_downstream(&k.rm, &got, &ref[user], &ctx, &opt, &d);
    char why[200];
    AsTensorId first = as_layer_cause(&d, why, sizeof why);
    as_test_note("layer %d: %s, first out of rule %s: %s", user, as_verdict_name(d.verdict),
                 first < AS_T_COUNT ? as_tensor_desc[first].name : "-", why);
    CHECK(d.verdict == AS_V_INHERITED && d.t[AS_T_ISCORE].verdict == AS_V_INHERITED &&
              d.t[AS_T_CAND].verdict == AS_V_INHERITED && d.t[AS_T_ISCORE].from.layer == src &&
              d.t[AS_T_ISCORE].from.step == 0 && strstr(why, "inherited from layer 5 step 0"),
          "inherited from the source: layer %s, iscore %s, cand %s (%s)", as_verdict_name(d.verdict),
          as_verdict_name(d.t[AS_T_ISCORE].verdict), as_verdict_name(d.t[AS_T_CAND].verdict), why);
    for (int id = AS_T_CSEL; id <= AS_T_OUT; id++)
        CHECK(d.t[id].verdict <= AS_V_INHERITED, "%s: %s", as_tensor_desc[id].name, as_verdict_name(d.t[id].verdict));
    /* the source's difference was a mismatch: the user's is not explained away */
    diffs[src].t[AS_T_CAND].verdict = AS_V_MISMATCH;
    as_compare_layer(&got, &ref[user], &opt, &d);
    as_explain_downstream(&k.rm, &got, &ref[user], &ctx, &opt, &d);
    CHECK(d.verdict == AS_V_MISMATCH, "the source mismatched: layer %s", as_verdict_name(d.verdict));
    for (int l = 0; l <= 7; l++)
        as_run_free(&ref[l]);
    as_run_free(&got);
    free(diffs), free(mask), free(h0);
    as_ref_stack_free(&k);
    as_test_model_free(m);
}

/* Token rows of got's qr (a copy of ref's) moved by 0.9 of qr's tolerance, each channel towards q[t][0]'s
 * growth (wq_b's column signs), as a GPU's summation order moves them and with them act_quant's codes;
 * then got's q from that qr by the reference's stage, as a faithful engine makes it. */
static void move_qr_rows(AsRefStack *k, const AsModel *m, const AsRun *ref, AsRun *got, const int *tokens, int n,
                         double tol_qr)
{
    const int rank = m->cfg.q_lora_rank, nq = m->cfg.n_heads * m->cfg.head_dim;
    float *e = calloc((size_t)rank, sizeof(float)), *col = malloc(sizeof(float) * (size_t)nq);
    REQUIRE(e && col, "out of memory");
    const AsWTensor *wq_b = m->layer[0].wq_b;
    for (int c = 0; c < rank; c++) {
        e[c] = 1.0f;
        as_linear(e, 1, wq_b, col, false);
        e[c] = 0.0f;
        for (int i = 0; i < n; i++) {
            float *qr = (float *)got->t[AS_T_QR].data + (size_t)tokens[i] * rank;
            const float *want = (const float *)ref->t[AS_T_QR].data + (size_t)tokens[i] * rank;
            qr[c] = as_bf16(qr[c] + (float)(col[0] >= 0 ? 0.9 : -0.9) * (float)tol_qr);
            if (fabsf(qr[c] - want[c]) > tol_qr)
                qr[c] = want[c];
        }
    }
    AsLayerPlan p;
    memset(&p, 0, sizeof p);
    p.layer = 0, p.s = got->s, p.start_pos = 0, p.prefill = true, p.ratio = m->cfg.role[0].ratio;
    const AsStageCtx ctx = {.rm = &k->rm, .p = &p, .conv = AS_CONV_NONE};
    REQUIRE(as_stage_q(&ctx, got) == 0, "as_stage_q");
    free(e), free(col);
}

/* An fp8 projection's output from its own input: qr moved within its tolerance (as a GPU's summation
 * order moves it, and with it act_quant's codes) moves q, the wq_b projection of it, past q's rule;
 * recomputed from the checked side's qr, q matches and is explained; a q not derived from that qr is not. */
TEST(explain_query_inherited_from_its_projection_input)
{
    AsModel *m = as_test_model("tiny", NULL, 7);
    AsRefStack k;
    AsError err = {0};
    REQUIRE(as_ref_stack_init(&k, m, &err) == 0, "%s", err.msg);
    const int s = 3, dim = m->cfg.dim, rank = m->cfg.q_lora_rank;
    float *h0 = malloc(sizeof(float) * (size_t)s * dim);
    REQUIRE(h0, "out of memory");
    as_inputs_synthetic(1, 0, s, dim, h0);
    AsRun ref, got;
    as_run_init(&ref);
    as_run_init(&got);
    REQUIRE(as_ref_begin_step(&k, h0, 0, s, &err) == 0 && as_ref_next_layer(&k, NULL, &ref, &err) == 0, "%s", err.msg);
    AsCompareOptions opt;
    as_compare_options_default(&opt);
    AsLayerDiff d;
    as_compare_layer(&ref, &ref, &opt, &d);
    const double tol_qr = d.t[AS_T_QR].tol;
    REQUIRE(as_run_copy(&got, &ref) == 0, "copy");
    const int token0 = 0;
    move_qr_rows(&k, m, &ref, &got, &token0, 1, tol_qr);
    as_compare_layer(&got, &ref, &opt, &d);
    REQUIRE(d.t[AS_T_QR].verdict != AS_V_MISMATCH && d.t[AS_T_Q].verdict == AS_V_MISMATCH,
            "qr within its rule (%s) and q beyond it (%s, max |diff| %.4g, tol %.4g)",
            as_verdict_name(d.t[AS_T_QR].verdict), as_verdict_name(d.t[AS_T_Q].verdict), d.t[AS_T_Q].max_abs,
            d.t[AS_T_Q].tol);
    as_test_note("qr moved within its rule: q max |diff| %.4g > tol %.4g", d.t[AS_T_Q].max_abs, d.t[AS_T_Q].tol);
    as_explain_downstream(&k.rm, &got, &ref, NULL, &opt, &d);
    CHECK(d.t[AS_T_Q].explained && d.t[AS_T_Q].verdict != AS_V_MISMATCH, "q explained by its qr: verdict %s",
          as_verdict_name(d.t[AS_T_Q].verdict));
    CHECK(d.t[AS_T_Q].explained_max_abs <= d.t[AS_T_Q].tol, "against its own recomputation q is within tolerance");

    /* the same q with qr put back: nothing explains it */
    memcpy(got.t[AS_T_QR].data, ref.t[AS_T_QR].data, sizeof(float) * (size_t)s * rank);
    as_compare_layer(&got, &ref, &opt, &d);
    as_explain_downstream(&k.rm, &got, &ref, NULL, &opt, &d);
    CHECK(d.t[AS_T_Q].verdict == AS_V_MISMATCH && !d.t[AS_T_Q].explained, "a q its qr does not give stays a mismatch");
    as_run_free(&ref), as_run_free(&got);
    free(h0);
    as_ref_stack_free(&k);
    as_test_model_free(m);
}

/* The rows a projection's explanation recomputes: tokens 5 and 60 of 80 moved as above (two runs of
 * rows, each recomputed as a step of its own at its positions: RoPE at the wrong position would not
 * match), the other rows taken from the reference; a q error in a row whose qr is the reference's
 * stays a mismatch. */
TEST(explain_recomputes_the_rows_whose_inputs_differ)
{
    AsModel *m = as_test_model("tiny", NULL, 7);
    AsRefStack k;
    AsError err = {0};
    REQUIRE(as_ref_stack_init(&k, m, &err) == 0, "%s", err.msg);
    const int s = 80, dim = m->cfg.dim, nq = m->cfg.n_heads * m->cfg.head_dim;
    float *h0 = malloc(sizeof(float) * (size_t)s * dim);
    REQUIRE(h0, "out of memory");
    as_inputs_synthetic(1, 0, s, dim, h0);
    AsRun ref, got;
    as_run_init(&ref);
    as_run_init(&got);
    REQUIRE(as_ref_begin_step(&k, h0, 0, s, &err) == 0 && as_ref_next_layer(&k, NULL, &ref, &err) == 0, "%s", err.msg);
    AsCompareOptions opt;
    as_compare_options_default(&opt);
    AsLayerDiff d;
    as_compare_layer(&ref, &ref, &opt, &d);
    const double tol_qr = d.t[AS_T_QR].tol;
    REQUIRE(as_run_copy(&got, &ref) == 0, "copy");
    const int moved[2] = {5, 60};
    move_qr_rows(&k, m, &ref, &got, moved, 2, tol_qr);
    as_compare_layer(&got, &ref, &opt, &d);
    REQUIRE(d.t[AS_T_QR].verdict != AS_V_MISMATCH && d.t[AS_T_Q].verdict == AS_V_MISMATCH, "q beyond its rule (%s)",
            as_verdict_name(d.t[AS_T_Q].verdict));
    const int64_t worst_token = d.t[AS_T_Q].worst_coord[0];
    as_explain_downstream(&k.rm, &got, &ref, NULL, &opt, &d);
    CHECK(d.t[AS_T_Q].explained && d.t[AS_T_Q].verdict != AS_V_MISMATCH,
          "q explained from rows 5 and 60 (worst at token %ld): verdict %s", (long)worst_token,
          as_verdict_name(d.t[AS_T_Q].verdict));
    /* row 30's qr is the reference's: an error in its q is the engine's own */
    ((float *)got.t[AS_T_Q].data)[(size_t)30 * nq + 7] += 1.0f;
    as_compare_layer(&got, &ref, &opt, &d);
    as_explain_downstream(&k.rm, &got, &ref, NULL, &opt, &d);
    CHECK(d.t[AS_T_Q].verdict == AS_V_MISMATCH && !d.t[AS_T_Q].explained, "a q error at an unmoved row stays: %s",
          as_verdict_name(d.t[AS_T_Q].verdict));
    as_run_free(&ref), as_run_free(&got);
    free(h0);
    as_ref_stack_free(&k);
    as_test_model_free(m);
}
