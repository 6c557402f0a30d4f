/* The reference layer and stack (SPEC section 3) at the tiny preset and hand-made geometries:
 * window regimes, ratio-2 groups, decode wraps, the indexer and candidates, the quirks of the
 * shared state, refusals, and the whole tiny stack against plain loops written apart. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/inputs.h"
#include "model/precision.h"
#include "ref/linear.h"
#include "ref/numerics.h"
#include "ref/quant.h"
#include "ref/stack.h"
#include "tests/lib/harness.h"
#include "tests/lib/plain_linear.h"
#include "tests/lib/model_fixture.h"

typedef struct {
    AsModel *m;
    AsRefStack k;
    AsRun *runs;   /* one per layer, the latest step */
    int pos;       /* next position */
} Stack;

static void stack_open(Stack *st, const char *preset, AsConfigTweak tweak)
{
    memset(st, 0, sizeof *st);
    st->m = as_test_model(preset, tweak, 7);
    AsError err = {0};
    REQUIRE(as_ref_stack_init(&st->k, st->m, &err) == 0, "stack init: %s", err.msg);
    st->runs = calloc((size_t)st->m->cfg.n_layers, sizeof(AsRun));
    for (int l = 0; l < st->m->cfg.n_layers; l++)
        as_run_init(&st->runs[l]);
}

static void stack_close(Stack *st)
{
    for (int l = 0; l < st->m->cfg.n_layers; l++)
        as_run_free(&st->runs[l]);
    free(st->runs);
    as_ref_stack_free(&st->k);
    as_test_model_free(st->m);
}

/* One step (prefill when pos == 0 and s given), keeping every layer's run. */
static void stack_step(Stack *st, int s)
{
    const AsConfig *c = &st->m->cfg;
    float *h0 = malloc(sizeof(float) * (size_t)s * c->dim);
    as_inputs_synthetic(3, st->pos, s, c->dim, h0);
    AsError err = {0};
    REQUIRE(as_ref_begin_step(&st->k, h0, st->pos, s, &err) == 0, "begin step at %d: %s", st->pos, err.msg);
    for (int l = 0; l < c->n_layers; l++)
        REQUIRE(as_ref_next_layer(&st->k, NULL, &st->runs[l], &err) == 0, "pos %d layer %d: %s", st->pos, l, err.msg);
    st->pos += s;
    free(h0);
}

static const float *T(const AsRun *r, AsTensorId id) { return r->t[id].data; }
static const int32_t *I(const AsRun *r, AsTensorId id) { return r->t[id].data; }

static bool rows_equal(const float *a, const float *b, int n) { return memcmp(a, b, sizeof(float) * (size_t)n) == 0; }

/* Prefill s = 1, s < window, s = window, s > window: shapes, the window selection, rows_a and the ring. */
TEST(ref_layer_prefill_window_regimes)
{
    int sizes[] = {1, 5, 8, 13};
    for (int si = 0; si < 4; si++) {
        Stack st;
        stack_open(&st, "tiny", NULL);
        const AsConfig *c = &st.m->cfg;
        int s = sizes[si], win = c->window, hd = c->head_dim;
        stack_step(&st, s);
        for (int l = 0; l < c->n_layers; l++) {
            const AsRun *r = &st.runs[l];
            int cols = s < win ? s : win;
            CHECK(r->rows_a_len == s && r->cols == cols, "s %d layer %d: rows_a_len %d cols %d", s, l, r->rows_a_len,
                  r->cols);
            CHECK(rows_equal(T(r, AS_T_ROWS_A), T(r, AS_T_KV), s * hd), "s %d layer %d: rows_a is not the chunk's kv", s, l);
            const int32_t *w = I(r, AS_T_WIDX);
            for (int t = 0; t < s; t++)
                for (int cc = 0; cc < cols; cc++) {
                    int first = t - win + 1 > 0 ? t - win + 1 : 0, j = first + cc;
                    CHECK(w[t * cols + cc] == (j > t ? -1 : j), "s %d layer %d widx[%d][%d] = %d", s, l, t, cc,
                          w[t * cols + cc]);
                }
            const float *ring = T(r, AS_T_ST_RING);
            for (int p = s > win ? s - win : 0; p < s; p++)
                CHECK(rows_equal(ring + (p % win) * hd, T(r, AS_T_KV) + p * hd, hd),
                      "s %d layer %d: ring slot %d does not hold token %d", s, l, p % win, p);
            CHECK(r->t[AS_T_Q].shape[0] == s && r->t[AS_T_Q].shape[1] == c->n_heads, "q shape");
            CHECK(r->t[AS_T_OUT].shape[0] == s && r->t[AS_T_OUT].shape[1] == c->dim, "out shape");
            CHECK(r->topk == r->cols + r->k, "topk = cols + k");
        }
        as_test_note("prefill s=%d: window selection, rows_a and ring checked on %d layers", s, c->n_layers);
        stack_close(&st);
    }
}

/* Ratio-2 prefill, odd and even s: groups, latent positions, the partial group state. */
TEST(ref_layer_ratio2_prefill_groups)
{
    for (int s = 6; s <= 7; s++) {
        Stack st;
        stack_open(&st, "tiny", NULL);
        const AsConfig *c = &st.m->cfg;
        int hd = c->head_dim;
        stack_step(&st, s);
        const AsRun *r = &st.runs[1]; /* ratio-2 kv source, key owner */
        CHECK(r->n_new == s / 2, "s %d: %d latents, want %d", s, r->n_new, s / 2);
        CHECK(r->compress_len == s / 2 && r->rows_b_len == s / 2, "s %d: compress_len %d rows_b %d", s, r->compress_len,
              r->rows_b_len);
        CHECK(r->t[AS_T_ST_CCACHE].shape[0] == s / 2, "s %d: %ld cache rows", s, (long)r->t[AS_T_ST_CCACHE].shape[0]);
        CHECK(rows_equal(T(r, AS_T_ROWS_B), T(r, AS_T_LATENT_Q), (s / 2) * hd), "s %d: rows_b are the new latents", s);
        /* the partial state: the trailing row (odd s) at row 0, score -inf where nothing was written */
        const float *pk = T(r, AS_T_ST_PART_KV), *ps = T(r, AS_T_ST_PART_SC);
        if (s % 2) {
            float *kvrow = malloc(sizeof(float) * hd);
            as_linear_rows(T(r, AS_T_X) + (size_t)(s - 1) * c->dim, 1, st.m->layer[1].c_wkv, 0, -1, kvrow, -1, false);
            /* f32, unrounded: the GEMV here and the GEMM there sum in different orders */
            double md = 0;
            for (int i = 0; i < hd; i++)
                md = fmax(md, fabs(pk[i] - kvrow[i]) / (fabs(kvrow[i]) + 1e-3));
            CHECK(md < 1e-4, "s %d: partial kv row 0 is not token %d's f32 projection (rel diff %.3g)", s, s - 1, md);
            free(kvrow);
            CHECK(isinf(ps[hd]) && ps[hd] < 0, "s %d: partial score row 1 should still be -inf", s);
        } else {
            CHECK(isinf(ps[0]) && ps[0] < 0 && pk[0] == 0.0f, "s %d: partial state should be untouched", s);
        }
        /* reusing ratio-2 layers attend the same compressed rows */
        CHECK(st.runs[2].rows_b_from.layer == 1 && st.runs[2].rows_b_len == s / 2, "layer 2 reads layer 1's cache");
        stack_close(&st);
    }
}

/* compress_len == 0: the indexer does nothing, the compressed selection is empty. */
TEST(ref_layer_compress_len_zero)
{
    Stack st;
    stack_open(&st, "tiny", NULL);
    stack_step(&st, 1);
    for (int l = 1; l <= 4; l++) {
        const AsRun *r = &st.runs[l];
        CHECK(r->compress_len == 0 && !r->indexer_ran && r->k == 0 && r->rows_b_len == 0,
              "layer %d (ratio 2, s=1): compress_len %d indexer_ran %d k %d rows_b %d", l, r->compress_len, r->indexer_ran,
              r->k, r->rows_b_len);
        CHECK(r->topk == 1 && I(r, AS_T_IDX)[0] == 0, "layer %d attends only its own row", l);
    }
    const AsRun *r5 = &st.runs[5];
    CHECK(r5->indexer_ran && r5->width == 1 && r5->k == 1, "layer 5 (ratio 1) scores its one key");
    stack_close(&st);
}

/* Decode: at least 3 window wraps and 20 ratio-2 group boundaries, checked at every step. */
TEST(ref_layer_decode_wraps_and_groups)
{
    Stack st;
    stack_open(&st, "tiny", NULL);
    const AsConfig *c = &st.m->cfg;
    int win = c->window, hd = c->head_dim, steps = 45, groups = 0;
    stack_step(&st, 3);
    for (int i = 0; i < steps; i++) {
        int pos = st.pos;
        stack_step(&st, 1);
        for (int l = 0; l < c->n_layers; l++) {
            const AsRun *r = &st.runs[l];
            const float *ring = T(r, AS_T_ST_RING);
            CHECK(rows_equal(ring + (pos % win) * hd, T(r, AS_T_KV), hd), "pos %d layer %d: ring slot %d", pos, l,
                  pos % win);
            CHECK(rows_equal(T(r, AS_T_ROWS_A), ring, win * hd), "pos %d layer %d: rows_a is the ring", pos, l);
            const int32_t *w = I(r, AS_T_WIDX);
            for (int cc = 0; cc < win; cc++) {
                int slot = (pos % win + 1 + cc) % win;
                CHECK(w[cc] == (slot > pos ? -1 : slot), "pos %d layer %d: widx[%d] = %d", pos, l, cc, w[cc]);
            }
        }
        const AsRun *r1 = &st.runs[1];
        bool completes = (pos + 1) % 2 == 0;
        CHECK(r1->n_new == (completes ? 1 : 0), "pos %d: layer 1 completes %d groups", pos, r1->n_new);
        CHECK(r1->t[AS_T_ST_CCACHE].shape[0] == (pos + 1) / 2, "pos %d: layer 1 cache has %ld rows", pos,
              (long)r1->t[AS_T_ST_CCACHE].shape[0]);
        if (completes) {
            groups++;
            const float *cache = T(r1, AS_T_ST_CCACHE);
            CHECK(rows_equal(cache + (size_t)((pos + 1) / 2 - 1) * hd, T(r1, AS_T_LATENT_Q), hd),
                  "pos %d: the new latent is the cache's last row", pos);
        }
        const AsRun *r5 = &st.runs[5];
        CHECK(r5->rows_b_len == pos + 1 && r5->width == pos + 1, "pos %d: layer 5 width %d", pos, r5->width);
        for (int l = 0; l < c->n_layers; l++) {
            const AsRun *r = &st.runs[l];
            int nrows = r->rows_a_len + r->rows_b_len;
            for (int j = 0; j < r->topk; j++)
                CHECK(I(r, AS_T_IDX)[j] < nrows, "pos %d layer %d: idx %d beyond %d rows", pos, l, I(r, AS_T_IDX)[j],
                      nrows);
        }
    }
    int wraps = (3 + steps) / win;
    as_test_note("decode: %d steps, %d window wraps, %d ratio-2 group boundaries checked", steps, wraps, groups);
    CHECK(wraps >= 3 && groups >= 20, "coverage: %d wraps, %d groups", wraps, groups);
    stack_close(&st);
}

/* The candidate selection narrows once width > topk_blocks * block_size; users mask their scores. */
TEST(ref_layer_candidate_narrowing)
{
    Stack st;
    stack_open(&st, "tiny", NULL);
    const AsConfig *c = &st.m->cfg;
    int s = 24, bs = c->candidate_block_size;
    stack_step(&st, s);
    const AsRun *src = &st.runs[5];
    REQUIRE(src->t[AS_T_CAND].data && src->cand_from.layer == 5, "layer 5 publishes the candidate mask");
    const uint8_t *mask = src->t[AS_T_CAND].data;
    int width = src->width, narrowed = 0;
    for (int t = 0; t < s; t++) {
        int clen = t + 1, kept = 0;
        for (int p = 0; p < width; p++)
            kept += mask[t * width + p];
        int pinned = (clen - 1) / bs;
        CHECK(mask[t * width + pinned * bs], "token %d: the newest visible block %d is pinned", t, pinned);
        int visible_blocks = (clen + bs - 1) / bs;
        if (visible_blocks > c->candidate_topk_blocks) {
            narrowed++;
            CHECK(kept <= c->candidate_topk_blocks * bs, "token %d: %d positions kept, at most %d", t, kept,
                  c->candidate_topk_blocks * bs);
        }
    }
    CHECK(narrowed > 0, "the selection never narrowed in %d tokens", s);
    for (int l = 7; l <= 9; l += 2) {
        const AsRun *u = &st.runs[l];
        CHECK(u->cand_from.layer == 5, "layer %d applies layer 5's mask", l);
        const float *sc = T(u, AS_T_ISCORE);
        int64_t masked_ok = 0, bad = 0;
        for (int i = 0; i < s * width; i++)
            if (!mask[i]) {
                if (isinf(sc[i]) && sc[i] < 0)
                    masked_ok++;
                else
                    bad++;
            }
        CHECK(bad == 0 && masked_ok > 0, "layer %d: %ld masked scores not -inf (%ld are)", l, (long)bad, (long)masked_ok);
    }
    as_test_note("candidate mask narrows on %d of %d queries; users 7 and 9 mask their scores", narrowed, s);
    stack_close(&st);
}

/* Quirk: in a decode step where a ratio-2 key owner completes no group, it scores against the
 * index keys published last: layer 5's ratio-1 keys from the step before. */
TEST(ref_layer_quirk_index_key_aliasing)
{
    Stack st;
    stack_open(&st, "tiny", NULL);
    stack_step(&st, 4);          /* step 0 */
    stack_step(&st, 1);          /* step 1, pos 4: (4+1) % 2 != 0: no group at ratio 2 */
    const AsRun *r1 = &st.runs[1], *r3 = &st.runs[3];
    CHECK(r1->n_new == 0 && r1->keys_from.layer == 5 && r1->keys_from.step == 0,
          "pos 4: layer 1 scored against keys of layer %d step %d (want layer 5, step 0)", r1->keys_from.layer,
          r1->keys_from.step);
    CHECK(r3->keys_from.layer == 5, "pos 4: layer 3 scored against layer %d's keys (want 5)", r3->keys_from.layer);
    CHECK(r1->width == 5 / 2, "width = end_pos / 2 = %d", r1->width);
    stack_step(&st, 1);          /* step 2, pos 5: completes */
    CHECK(st.runs[1].keys_from.layer == 1 && st.runs[1].keys_from.step == 2,
          "pos 5: layer 1 scores its own new keys (got layer %d step %d)", st.runs[1].keys_from.layer,
          st.runs[1].keys_from.step);
    CHECK(st.runs[3].keys_from.layer == 1, "pos 5: layer 3 reads layer 1's keys");
    as_test_note("aliasing observed: at pos 4 layers 1 and 3 scored against layer 5's ratio-1 keys");
    stack_close(&st);
}

/* An index source with compress_len == 0 publishes an EMPTY selection (model.py's
 * _compress_topk_idxs assigns the empty idxs): a later reusing layer attends no compressed
 * position and names that layer as the selection's source, not the one published before. */
static void stale_geometry(AsConfig *c)
{
    c->n_layers = 3;
    int ratios[] = {1, 2, 1};
    memcpy(c->compress_ratios, ratios, sizeof ratios);
    c->n_kv_sources = 3;
    c->kv_sources[0] = 0, c->kv_sources[1] = 1, c->kv_sources[2] = 2;
    c->n_index_sources = 2;
    c->index_sources[0] = 0, c->index_sources[1] = 1;
    c->candidate_source = -1;
}

TEST(ref_layer_empty_selection_published)
{
    Stack st;
    stack_open(&st, "tiny", stale_geometry);
    stack_step(&st, 1);
    const AsRun *r0 = &st.runs[0], *r1 = &st.runs[1], *r2 = &st.runs[2];
    CHECK(r0->indexer_ran && r0->k == 1, "layer 0 (ratio 1, s=1) selects 1 position (k %d)", r0->k);
    CHECK(!r1->indexer_ran && r1->k == 0 && r1->sel_from.layer == 1 && r1->sel_from.step == 0,
          "layer 1 (ratio 2, s=1) publishes an empty selection (k %d, from layer %d)", r1->k, r1->sel_from.layer);
    CHECK(st.m->cfg.role[2].select_from == 1, "layer 2's latest index source is layer 1");
    CHECK(r2->sel_from.layer == 1 && r2->sel_from.step == 0 && r2->k == 0 && r2->topk == r2->cols,
          "layer 2 reuses layer %d's selection (want 1), k %d (want 0): the window only", r2->sel_from.layer, r2->k);
    as_test_note("layer 2 reuses layer 1's empty selection: it attends its window only");
    stack_close(&st);
}

/* Quirk: with fewer finite scores than k, top-k picks candidate-masked positions, and those
 * below compress_lens are emitted as valid indices. */
static void masked_geometry(AsConfig *c)
{
    c->index_topk = 16;
    c->candidate_topk_blocks = 2;
}

TEST(ref_layer_quirk_masked_picks)
{
    Stack st;
    stack_open(&st, "tiny", masked_geometry);
    int s = 24;
    stack_step(&st, s);
    const AsRun *u = &st.runs[7];
    const uint8_t *mask = u->t[AS_T_CAND].data;
    const int32_t *csel = I(u, AS_T_CSEL);
    int width = u->width, k = u->k, picks = 0;
    for (int t = 0; t < s; t++)
        for (int j = 0; j < k; j++) {
            int v = csel[t * k + j];
            if (v >= 0 && !mask[t * width + (v - u->rows_a_len)])
                picks++;
        }
    CHECK(picks > 0, "no masked position was picked (k %d, width %d)", k, width);
    as_test_note("masked picks observed: %d candidate-masked positions attended at layer 7", picks);
    stack_close(&st);
}

/* SPEC 3.6: a ratio > 0 layer with no published compressed cache must not attend. */
TEST(ref_layer_refuses_without_published_cache)
{
    AsModel *m = as_test_model("tiny", NULL, 7);
    AsRefModel rm;
    AsRefState state;
    AsError err = {0};
    REQUIRE(as_ref_model_init(&rm, m, &err) == 0, "%s", err.msg);
    REQUIRE(as_ref_state_init(&state, &m->cfg, &err) == 0, "%s", err.msg);
    float *x = calloc((size_t)m->cfg.dim * 2, sizeof(float));
    as_inputs_synthetic(1, 0, 2, m->cfg.dim, x);
    AsRun run;
    as_run_init(&run);
    int rc = as_ref_layer_forward(&rm, &state, 2, 0, x, 0, 2, &run, &err); /* layer 1 never ran */
    CHECK(rc == AS_EREFUSED, "layer 2 with nothing published: rc %d", rc);
    CHECK(strstr(err.msg, "no compressed cache") != NULL, "message: %s", err.msg);
    as_test_note("refused: %s", err.msg);
    as_run_free(&run);
    free(x);
    as_ref_state_free(&state, &m->cfg);
    as_ref_model_free(&rm);
    as_test_model_free(m);
}

/* ---- the whole tiny stack against plain loops written apart (double precision, brute-force
 * e4m3 by enumerating the grid), for the ratio-0 layer and the ratio-1 source's latents and scores ---- */

static void plain_rmsnorm(float *x, const AsWTensor *w, int rows, int n, double eps)
{
    float *wv = as_wt_vec_f32(w);
    for (int i = 0; i < n; i++)
        wv[i] = as_bf16(wv[i]); /* a bf16 parameter in model.py */
    for (int r = 0; r < rows; r++) {
        double ms = 0;
        for (int i = 0; i < n; i++)
            ms += (double)x[r * n + i] * x[r * n + i];
        double inv = 1.0 / sqrt(ms / n + eps);
        for (int i = 0; i < n; i++)
            x[r * n + i] = as_bf16((float)(wv[i] * (x[r * n + i] * inv)));
    }
    free(wv);
}

static void plain_rope(float *x, int width, int rd, int pos, double base, bool inverse)
{
    for (int k = 0; k < rd / 2; k++) {
        double f = 1.0 / pow(base, 2.0 * k / rd), a = pos * f;
        double c = cos(a), s = inverse ? -sin(a) : sin(a);
        double x0 = x[width - rd + 2 * k], x1 = x[width - rd + 2 * k + 1];
        x[width - rd + 2 * k] = as_bf16((float)(x0 * c - x1 * s));
        x[width - rd + 2 * k + 1] = as_bf16((float)(x0 * s + x1 * c));
    }
}

static void plain_fp8(float *x, int n)
{
    for (int b = 0; b < n; b += 32) {
        double amax = 1e-4;
        for (int i = b; i < b + 32; i++)
            amax = fmax(amax, fabs(x[i]));
        double s = as_plain_pow2_ceil((float)(amax / 448.0));
        for (int i = b; i < b + 32; i++) {
            double q = fmin(fmax(x[i] / s, -448), 448);
            x[i] = as_bf16((float)(as_plain_e4m3((float)q) * s));
        }
    }
}

TEST(ref_layer_tiny_layer0_against_plain_loops)
{
    Stack st;
    stack_open(&st, "tiny", NULL);
    const AsConfig *c = &st.m->cfg;
    int s = 5, nh = c->n_heads, hd = c->head_dim, rd = c->rope_head_dim;
    stack_step(&st, s);
    const AsRun *r = &st.runs[0];
    const AsLayerWeights *w = &st.m->layer[0];
    const float *x = T(r, AS_T_X);
    float *qr = malloc(sizeof(float) * s * c->q_lora_rank), *q = malloc(sizeof(float) * s * nh * hd);
    float *kv = malloc(sizeof(float) * s * hd), *o = calloc((size_t)s * nh * hd, sizeof(float));
    float *og = malloc(sizeof(float) * s * c->o_groups * c->o_lora_rank), *out = malloc(sizeof(float) * s * c->dim);
    as_plain_proj(st.m, x, s, w->wq_a, qr);
    plain_rmsnorm(qr, w->q_norm, s, c->q_lora_rank, c->norm_eps);
    as_plain_proj(st.m, qr, s, w->wq_b, q);
    as_plain_proj(st.m, x, s, w->wkv, kv);
    plain_rmsnorm(kv, w->kv_norm, s, hd, c->norm_eps);
    for (int t = 0; t < s; t++) {
        for (int h = 0; h < nh; h++)
            plain_rope(q + (t * nh + h) * hd, hd, rd, t, c->rope_theta, false);
        plain_rope(kv + t * hd, hd, rd, t, c->rope_theta, false);
        plain_fp8(kv + t * hd, hd);
    }
    float *sink = as_wt_vec_f32(w->attn_sink);
    /* s <= 64 entries: one block of kernel.py's online softmax, from m = -1e30: p_j = exp(z_j - m)
     * in the denominator, bf16(p_j) weighting the rows, the sink added at the end */
    for (int t = 0; t < s; t++)
        for (int h = 0; h < nh; h++) {
            double z[16], m = -1e30, den = 0;
            for (int j = 0; j <= t; j++) {
                double d = 0;
                for (int i = 0; i < hd; i++)
                    d += (double)q[(t * nh + h) * hd + i] * kv[j * hd + i];
                z[j] = d / sqrt(hd);
                m = fmax(m, z[j]);
            }
            for (int j = 0; j <= t; j++)
                den += exp(z[j] - m);
            den += exp(sink[h] - m);
            for (int i = 0; i < hd; i++) {
                double acc = 0;
                for (int j = 0; j <= t; j++)
                    acc += as_bf16((float)exp(z[j] - m)) * (double)kv[j * hd + i];
                o[(t * nh + h) * hd + i] = as_bf16((float)(acc / den));
            }
            plain_rope(o + (t * nh + h) * hd, hd, rd, t, c->rope_theta, true);
        }
    int G = c->o_groups, olr = c->o_lora_rank;
    for (int t = 0; t < s; t++)
        for (int g = 0; g < G; g++)
            for (int cc = 0; cc < olr; cc++)
                og[(t * G + g) * olr + cc] = as_bf16((float)as_plain_dot_w(o + t * nh * hd + g * c->gw, w->wo_a, g * olr + cc));
    as_plain_proj(st.m, og, s, w->wo_b, out);
    struct {
        const char *name;
        const float *got, *want;
        int n;
    } cmp[] = {{"qr", T(r, AS_T_QR), qr, s * c->q_lora_rank}, {"q", T(r, AS_T_Q), q, s * nh * hd},
               {"kv", T(r, AS_T_KV), kv, s * hd},            {"o_back", T(r, AS_T_O_BACK), o, s * nh * hd},
               {"og", T(r, AS_T_OG), og, s * G * olr},        {"out", T(r, AS_T_OUT), out, s * c->dim}};
    for (size_t i = 0; i < sizeof cmp / sizeof cmp[0]; i++) {
        double mx = 0, md = 0;
        for (int j = 0; j < cmp[i].n; j++) {
            mx = fmax(mx, fabs(cmp[i].want[j]));
            md = fmax(md, fabs(cmp[i].got[j] - cmp[i].want[j]));
        }
        double tol = mx * 0x1p-7 + 1e-4;
        /* kv leaves fp8: a 1-ulp difference upstream may move a value one grid step */
        if (!strcmp(cmp[i].name, "kv"))
            tol = mx * 0x1p-3;
        CHECK(md <= tol, "layer 0 %s: max |ref - plain| = %.3g > %.3g", cmp[i].name, md, tol);
        as_test_note("layer 0 %-6s: max |ref - plain loops| = %.3g (tolerance %.3g)", cmp[i].name, md, tol);
    }
    free(qr), free(q), free(kv), free(o), free(og), free(out), free(sink);
    stack_close(&st);
}

/* The same inputs and weights give the same bits, run after run. */
TEST(ref_layer_stack_deterministic)
{
    float *outs[2];
    for (int rep = 0; rep < 2; rep++) {
        Stack st;
        stack_open(&st, "tiny", NULL);
        stack_step(&st, 9);
        stack_step(&st, 1);
        stack_step(&st, 1);
        const AsConfig *c = &st.m->cfg;
        outs[rep] = malloc(sizeof(float) * c->dim);
        memcpy(outs[rep], T(&st.runs[c->n_layers - 1], AS_T_OUT), sizeof(float) * c->dim);
        stack_close(&st);
    }
    CHECK(memcmp(outs[0], outs[1], sizeof(float) * 64) == 0, "two identical runs differ");
    free(outs[0]), free(outs[1]);
}
