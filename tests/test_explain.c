/* Mismatches inherited from upstream flips (driver/explain.h): one fp8 grid step in the row that
 * carries a query's attention moves o beyond the bf16 rule; recomputed from the checked side's
 * own rows the stage matches, so the mismatch is explained. A genuine error in o is not. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "driver/explain.h"
#include "model/inputs.h"
#include "ref/numerics.h"
#include "ref/quant.h"
#include "ref/stack.h"
#include "tests/harness.h"
#include "tests/model_fixture.h"

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
    as_explain_downstream(&k.rm, &got, &opt, &d);
    CHECK(d.t[AS_T_O].explained && d.t[AS_T_O].verdict == AS_V_FLIPS, "o explained by the flip: verdict %s",
          as_verdict_name(d.t[AS_T_O].verdict));
    CHECK(d.verdict != AS_V_MISMATCH, "the layer is no longer a mismatch (worst %s in %s)", as_verdict_name(d.verdict),
          d.worst_tensor == AS_T_COUNT ? "-" : as_tensor_desc[d.worst_tensor].name);
    CHECK(d.t[AS_T_O].explained_max_abs <= d.t[AS_T_O].tol, "against its own recomputation o is within tolerance");

    /* a genuine error in o on top of the flip: not explained */
    ((float *)got.t[AS_T_O].data)[5] += 0.75f;
    as_compare_layer(&got, &ref, &opt, &d);
    as_explain_downstream(&k.rm, &got, &opt, &d);
    CHECK(d.t[AS_T_O].verdict == AS_V_MISMATCH && !d.t[AS_T_O].explained, "a real error in o stays a mismatch");

    /* an upstream mismatch (q) is never explained away downstream */
    REQUIRE(as_run_copy(&got, &ref) == 0, "copy");
    ((float *)got.t[AS_T_Q].data)[0] += 1.0f;
    ((float *)got.t[AS_T_O].data)[0] += 1.0f;
    as_compare_layer(&got, &ref, &opt, &d);
    as_explain_downstream(&k.rm, &got, &opt, &d);
    CHECK(d.t[AS_T_Q].verdict == AS_V_MISMATCH && d.t[AS_T_O].verdict == AS_V_MISMATCH && !d.t[AS_T_O].explained,
          "with q out of tolerance, o is not re-judged");
    as_run_free(&ref), as_run_free(&got);
    free(h0);
    as_ref_stack_free(&k);
    as_test_model_free(m);
}
