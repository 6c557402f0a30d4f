/* The whole reference in both precisions (SPEC 1-2): tiny and a geometry of this test's own with
 * every role, prefill and 40 decode steps. At every step and layer the projections the run exposes
 * whole are recomputed from that run's own inputs by their definitions (tests/lib/plain_linear.c): out
 * from og through wo_b, the indexer's queries before RoPE from qr; fp8 precision runs them as the
 * fp8 linear, bf16 precision as the bf16 one, and the two precisions give different numbers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/inputs.h"
#include "model/precision.h"
#include "ref/numerics.h"
#include "ref/rope.h"
#include "ref/stack.h"
#include "tests/lib/harness.h"
#include "tests/lib/model_fixture.h"
#include "tests/lib/plain_linear.h"

/* Every role, at widths unlike tiny's: 6 heads of 64, a window of 12 that wraps, ratio-2 layers
 * whose groups complete on alternate steps, two kv sources, a key owner and an index source that
 * reads its keys, a candidate source with users, reuse layers of both ratios. */
static void every_role(AsConfig *c)
{
    c->n_layers = 9;
    const int ratios[9] = {0, 2, 2, 2, 1, 1, 1, 1, 0};
    memcpy(c->compress_ratios, ratios, sizeof ratios);
    c->n_heads = 6;
    c->o_groups = 2;
    c->window = 12;
    c->n_kv_sources = 2, c->kv_sources[0] = 1, c->kv_sources[1] = 4;
    c->n_index_sources = 4;
    c->index_sources[0] = 1, c->index_sources[1] = 3, c->index_sources[2] = 4, c->index_sources[3] = 6;
    c->candidate_source = 4;
    c->candidate_topk_blocks = 2;
    c->candidate_block_size = 4;
}

/* Elements of got more than one bf16 step from want (the double forms round once, the reference's
 * f32 sums may land on the other side of a rounding boundary). */
static int64_t off_by_more_than_a_step(const float *got, const float *want, int64_t n, int64_t *exact)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        *exact += got[i] == want[i];
        float step = fabsf(as_bf16_to_f32((uint16_t)(as_bf16_bits(fabsf(want[i])) + 1)) - fabsf(want[i]));
        bad += fabsf(got[i] - want[i]) > step;
    }
    return bad;
}

typedef struct {
    int64_t checked, exact, bad;
    double out_sum; /* sum of every out element: the two precisions must differ */
} Tally;

static void check_layer(const AsModel *m, const AsRun *r, Tally *t)
{
    const AsConfig *c = &m->cfg;
    const AsLayerWeights *w = &m->layer[r->layer];
    int s = r->s;
    float *y = malloc(sizeof(float) * (size_t)s * (c->dim > c->index_n_heads * c->index_head_dim
                                                      ? c->dim : c->index_n_heads * c->index_head_dim));
    REQUIRE(y, "out of memory");
    as_plain_proj(m, r->t[AS_T_OG].data, s, w->wo_b, y);
    int64_t n = (int64_t)s * c->dim, bad = off_by_more_than_a_step(r->t[AS_T_OUT].data, y, n, &t->exact);
    CHECK(bad == 0, "step %d layer %d: out: %lld elements beyond one bf16 step of og W_ob^T", r->step, r->layer,
          (long long)bad);
    t->bad += bad, t->checked += n;
    for (int64_t i = 0; i < n; i++)
        t->out_sum += ((const float *)r->t[AS_T_OUT].data)[i];
    if (r->indexer_ran) {
        as_plain_proj(m, r->t[AS_T_QR].data, s, w->i_wq_b, y);
        /* iq_pre is after RoPE: compare the channels RoPE leaves alone (all but the last rd of a head) */
        int nhi = c->index_n_heads, ihd = c->index_head_dim, rd = c->rope_head_dim;
        const float *iq = r->t[AS_T_IQ_PRE].data;
        int64_t ibad = 0;
        for (int64_t tk = 0; tk < s; tk++)
            for (int h = 0; h < nhi; h++)
                for (int d = 0; d < ihd - rd; d++) {
                    int64_t i = (tk * nhi + h) * ihd + d;
                    ibad += off_by_more_than_a_step(iq + i, y + i, 1, &t->exact);
                    t->checked++;
                }
        CHECK(ibad == 0, "step %d layer %d: iq_pre: %lld elements beyond one bf16 step of qr W_iqb^T", r->step, r->layer,
              (long long)ibad);
        t->bad += ibad;
    }
    free(y);
}

static double run_precision(const char *label, const char *preset, AsConfigTweak tweak, AsPrecision prec, int prefill,
                            int decode)
{
    AsModel *m = as_test_model(preset, tweak, 11);
    AsError err = {0};
    REQUIRE(as_model_set_precision(m, prec, &err) == 0, "%s: %s", preset, err.msg);
    AsRefStack k;
    REQUIRE(as_ref_stack_init(&k, m, &err) == 0, "stack: %s", err.msg);
    const AsConfig *c = &m->cfg;
    float *h0 = malloc(sizeof(float) * (size_t)prefill * c->dim);
    AsRun run;
    as_run_init(&run);
    Tally t = {0};
    int pos = 0;
    for (int step = 0; step <= decode; step++) {
        int s = step == 0 ? prefill : 1;
        as_inputs_synthetic(5, pos, s, c->dim, h0);
        REQUIRE(as_ref_begin_step(&k, h0, pos, s, &err) == 0, "%s %s step %d: %s", preset, as_precision_name(prec), step,
                err.msg);
        for (int l = 0; l < c->n_layers; l++) {
            REQUIRE(as_ref_next_layer(&k, NULL, &run, &err) == 0, "%s %s step %d layer %d: %s", preset,
                    as_precision_name(prec), step, l, err.msg);
            check_layer(m, &run, &t);
        }
        pos += s;
    }
    as_test_note("%s, %s precision: prefill %d + %d decode steps, %lld projected elements recomputed, %lld bit-exact, "
                 "%lld beyond one bf16 step", label, as_precision_name(prec), prefill, decode, (long long)t.checked,
                 (long long)t.exact, (long long)t.bad);
    as_run_free(&run);
    free(h0);
    as_ref_stack_free(&k);
    as_test_model_free(m);
    return t.out_sum;
}

TEST(ref_precision_tiny_both)
{
    double fp8 = run_precision("tiny", "tiny", NULL, AS_PREC_FP8, 24, 40);
    double bf16 = run_precision("tiny", "tiny", NULL, AS_PREC_BF16, 24, 40);
    CHECK(fp8 != bf16, "tiny: fp8 and bf16 precision give the same outputs (sum %.9g)", fp8);
}

TEST(ref_precision_every_role_both)
{
    double fp8 = run_precision("every role", "tiny", every_role, AS_PREC_FP8, 30, 40);
    double bf16 = run_precision("every role", "tiny", every_role, AS_PREC_BF16, 30, 40);
    CHECK(fp8 != bf16, "every role: fp8 and bf16 precision give the same outputs (sum %.9g)", fp8);
}

/* act_quant takes blocks of 32: an fp8 projection whose input width is not a multiple of 32 cannot
 * run in fp8 (model.py asserts), so fp8 precision is refused with one line naming it, and the
 * model's own precision falls back to bf16. */
static void odd_groups(AsConfig *c)
{
    c->n_heads = 6;
    c->o_groups = 3; /* wo_b's input: 3 x 16 = 48 */
}

TEST(ref_precision_fp8_needs_widths_of_32)
{
    AsModel *m = as_test_model("tiny", odd_groups, 3);
    AsError err = {0};
    CHECK(m->precision == AS_PREC_BF16, "the model's own precision is %s, want bf16", as_precision_name(m->precision));
    CHECK(as_model_set_precision(m, AS_PREC_FP8, &err) == AS_EBADINPUT && strstr(err.msg, "wo_b.weight") &&
              strstr(err.msg, "multiple of 32"),
          "fp8 refused naming wo_b: %s", err.msg);
    CHECK(as_model_set_precision(m, AS_PREC_BF16, &err) == 0, "bf16 runs: %s", err.msg);
    as_test_model_free(m);
}
