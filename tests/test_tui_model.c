/* The TUI's view models without a terminal: what each view says for known tiny runs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/harness.h"
#include "tests/lib/tiny_driver.h"
#include "tui/model.h"

static AsDriver *open_tiny(const char *inject) { return as_test_tiny_driver(inject); }

static void run(AsDriver *d, int prefill, int decode)
{
    AsError err = {0};
    REQUIRE(as_driver_prefill(d, prefill, &err) == 0, "prefill %d: %s", prefill, err.msg);
    REQUIRE(as_driver_decode(d, decode, &err) == 0, "decode %d: %s", decode, err.msg);
}

static void panel_at(TuiPanel *p, int w, int h)
{
    tp_init(p);
    p->r = (TuiRect){0, 0, w, h};
    p->used = true;
}

/* The colour of the first character of `needle` in line l (-1 when absent). */
static int color_at(const TuiLine *l, const char *needle)
{
    const char *at = l->text ? strstr(l->text, needle) : NULL;
    if (!at)
        return -1;
    int ch = 0;
    for (const char *p = l->text; p < at; p++)
        if (((unsigned char)*p & 0xc0) != 0x80)
            ch++;
    return l->color[ch];
}

static void dump_panel(const TuiPanel *p)
{
    as_test_note("[%s]", p->title);
    for (int i = 0; i < p->lines.n; i++)
        as_test_note("%s", p->lines.v[i].text ? p->lines.v[i].text : "");
}

TEST(tui_model_layer_list_reference_only)
{
    AsDriver *d = open_tiny(NULL);
    run(d, 5, 6);
    TuiData data;
    tui_data_from_driver(d, "tiny", &data);
    TuiState st;
    tui_state_init(&st);
    st.layer = 5;
    TuiPanel p;
    panel_at(&p, 80, 14);
    tui_model_layers(&data, &st, &tui_glyphs_utf8, &p);
    CHECK(p.lines.n == 10, "10 layer lines, got %d", p.lines.n);
    CHECK(strstr(p.title, "step 6 decode") != NULL, "title names the step: %s", p.title);
    REQUIRE(p.lines.n == 10, "lines");
    CHECK(strstr(p.lines.v[5].text, "5  r1  kv idx cand-src") != NULL, "layer 5's role line: %s", p.lines.v[5].text);
    CHECK(strstr(p.lines.v[0].text, "window only") != NULL, "layer 0 is window only: %s", p.lines.v[0].text);
    CHECK(strstr(p.lines.v[7].text, "cand<-5") != NULL, "layer 7 reads the candidates of 5: %s", p.lines.v[7].text);
    for (int l = 0; l < 10; l++)
        CHECK(color_at(&p.lines.v[l], "ref only") == TC_REFONLY, "layer %d: verdict 'ref only' in its colour", l);
    CHECK(p.sel == 5, "layer 5 selected (%d)", p.sel);
    CHECK(strncmp(p.lines.v[5].text, tui_glyphs_utf8.marker, strlen(tui_glyphs_utf8.marker)) == 0,
          "the selected layer carries the marker");
    /* the tensor table says "no engine" for each tensor */
    TuiPanel t;
    panel_at(&t, 80, 20);
    tui_model_tensors(&data, &st, &tui_glyphs_utf8, &t);
    CHECK(tls_find(&t.lines, "no engine") >= 0, "tensor table: no engine");
    int qi = tls_find(&t.lines, "q ");
    CHECK(qi >= 0 && strstr(t.lines.v[qi].text, "1x4x64"), "q is 1x4x64 at decode");
    CHECK(tls_find(&t.lines, "state.ikcache") >= 0, "layer 5 shows its index-key cache");
    CHECK(tls_find(&t.lines, "cand ") >= 0, "layer 5 shows its candidate mask");
    tp_free(&p);
    tp_free(&t);
    as_driver_close(d);
}

TEST(tui_model_layer_list_verdict_colours_with_a_fault)
{
    AsDriver *d = open_tiny("ring-slot");
    AsError err = {0};
    REQUIRE(as_driver_prefill(d, 5, &err) == 0, "prefill: %s", err.msg);
    TuiData data;
    tui_data_from_driver(d, "tiny", &data);
    TuiState st;
    tui_state_init(&st);
    TuiPanel p;
    panel_at(&p, 80, 14);
    tui_model_layers(&data, &st, &tui_glyphs_utf8, &p);
    for (int l = 0; l < 10; l++)
        CHECK(color_at(&p.lines.v[l], "pass") == TC_PASS, "prefill, layer %d: pass in green (%s)", l,
              p.lines.v[l].text);
    tp_free(&p);
    /* the ring-slot fault writes the decode row one slot too far: a mismatch from layer 0 */
    REQUIRE(as_driver_decode(d, 1, &err) == 0, "decode: %s", err.msg);
    tui_data_from_driver(d, "tiny", &data);
    panel_at(&p, 80, 14);
    tui_model_layers(&data, &st, &tui_glyphs_utf8, &p);
    CHECK(color_at(&p.lines.v[0], "MISMATCH") == TC_MISMATCH, "decode, layer 0: MISMATCH in red (%s)",
          p.lines.v[0].text);
    TuiLine status;
    tl_init(&status);
    tui_model_status(&data, 200, &status);
    CHECK(strstr(status.text, "step 1 decode") && strstr(status.text, "start_pos 5") &&
              strstr(status.text, "fault ring-slot (twin)") && strstr(status.text, "MISMATCH"),
          "status line: %s", status.text);
    tl_free(&status);
    /* not run yet: a layer stepped past shows its verdict, the rest 'not run' */
    REQUIRE(as_driver_begin_decode(d, &err) == 0 && as_driver_step_layer(d, &err) == 0, "one layer: %s", err.msg);
    tui_data_from_driver(d, "tiny", &data);
    tp_free(&p);
    panel_at(&p, 80, 14);
    tui_model_layers(&data, &st, &tui_glyphs_utf8, &p);
    CHECK(color_at(&p.lines.v[3], "not run") == TC_DIM, "layer 3 not run yet, dim: %s", p.lines.v[3].text);
    CHECK(strstr(p.lines.v[1].text, tui_glyphs_utf8.next) != NULL, "layer 1 marked as the next to run: %s",
          p.lines.v[1].text);
    tp_free(&p);
    as_driver_close(d);
}

TEST(tui_model_ring_positions_after_prefill_5_decode_6)
{
    AsDriver *d = open_tiny(NULL);
    run(d, 5, 6);
    /* window 8; positions 0..10 seen; decode at 10 wrote slot 10 % 8 = 2 */
    static const int want[8] = {8, 9, 10, 3, 4, 5, 6, 7};
    TuiRingSlot slots[8];
    int n = tui_ring_slots(&d->ref_run[0], NULL, 8, 0, slots);
    CHECK(n == 8, "8 slots filled (%d)", n);
    for (int j = 0; j < 8; j++) {
        CHECK(slots[j].pos == want[j], "slot %d holds position %d (got %d)", j, want[j], slots[j].pos);
        CHECK(slots[j].written == (j == 2), "slot %d written this step: %d", j, slots[j].written);
        CHECK(slots[j].attended, "slot %d attended by the decode query", j);
        CHECK(slots[j].age == want[j] - 3, "slot %d age %d (got %d)", j, want[j] - 3, slots[j].age);
    }
    TuiData data;
    tui_data_from_driver(d, "tiny", &data);
    TuiState st;
    tui_state_init(&st);
    TuiPanel p;
    panel_at(&p, 80, 21);
    tui_model_ring(&data, &st, &tui_glyphs_utf8, &p);
    CHECK(tls_find(&p.lines, "decode at position 10 wrote slot 2") >= 0, "ring view names the slot written");
    CHECK(tls_find(&p.lines, " pos       8    9   10    3    4    5    6    7") >= 0, "strip of positions by slot");
    int newest = tls_find(&p.lines, "attended  newest");
    CHECK(newest >= 0 && strstr(p.lines.v[newest].text, "8     2        10  written"),
          "the newest (age 8) is slot 2, position 10");
    if (as_test_failed())
        dump_panel(&p);
    tp_free(&p);
    as_driver_close(d);
}

TEST(tui_model_ring_positions_after_long_prefill)
{
    AsDriver *d = open_tiny(NULL);
    AsError err = {0};
    REQUIRE(as_driver_prefill(d, 12, &err) == 0, "prefill 12: %s", err.msg);
    TuiRingSlot slots[8];
    /* the last 8 of 12 tokens stay: slot j holds position j + 8 for j < 4, else j */
    tui_ring_slots(&d->ref_run[0], NULL, 8, 11, slots);
    for (int j = 0; j < 8; j++) {
        int want = j < 4 ? j + 8 : j;
        CHECK(slots[j].pos == want, "slot %d: position %d (got %d)", j, want, slots[j].pos);
        CHECK(slots[j].written, "slot %d written by the prefill", j);
        CHECK(slots[j].attended, "query 11 attends positions 4..11: slot %d", j);
    }
    /* query 5 attends positions 0..5: only 4 and 5 are still in the ring */
    tui_ring_slots(&d->ref_run[0], NULL, 8, 5, slots);
    for (int j = 0; j < 8; j++)
        CHECK(slots[j].attended == (j == 4 || j == 5), "query 5, slot %d attended: %d", j, slots[j].attended);
    /* a short prefill leaves slots empty */
    REQUIRE(as_driver_prefill(d, 5, &err) == 0, "prefill 5: %s", err.msg);
    int n = tui_ring_slots(&d->ref_run[0], NULL, 8, 0, slots);
    CHECK(n == 5, "5 slots filled (%d)", n);
    CHECK(slots[5].pos == -1 && slots[7].pos == -1, "slots 5..7 empty");
    CHECK(slots[0].attended && !slots[1].attended, "query 0 attends position 0 only");
    as_driver_close(d);
}

TEST(tui_model_ring_shows_the_ring_slot_fault)
{
    AsDriver *d = open_tiny("ring-slot");
    run(d, 5, 1);
    /* decode at position 5: the reference writes slot 5, the faulty twin slot 6 */
    TuiRingSlot slots[8];
    tui_ring_slots(&d->ref_run[0], &d->got_run[0], 8, 0, slots);
    for (int j = 0; j < 8; j++)
        CHECK((slots[j].got_diff > 0) == (j == 5 || j == 6), "slot %d: engine row differs %g", j, slots[j].got_diff);
    TuiData data;
    tui_data_from_driver(d, "tiny", &data);
    TuiState st;
    tui_state_init(&st);
    TuiPanel p;
    panel_at(&p, 80, 21);
    tui_model_ring(&data, &st, &tui_glyphs_utf8, &p);
    int i = tls_find(&p.lines, "engine differs");
    CHECK(i >= 0 && color_at(&p.lines.v[i], "engine differs") == TC_MISMATCH, "the ring view flags the slots");
    CHECK(tls_find(&p.lines, "slot 6 is empty here but not in the engine's ring") >= 0,
          "the slot the engine wrote by mistake is named");
    tp_free(&p);
    as_driver_close(d);
}

TEST(tui_model_candidate_grid_known_query)
{
    AsDriver *d = open_tiny(NULL);
    AsError err = {0};
    /* 20 tokens: layer 5 (ratio 1, candidate source) scores 20 positions = 5 blocks of 4, keeps 3 */
    REQUIRE(as_driver_prefill(d, 20, &err) == 0, "prefill 20: %s", err.msg);
    const AsRun *r = &d->ref_run[5];
    REQUIRE(r->t[AS_T_CAND].data && r->t[AS_T_CAND].shape[1] == 20, "layer 5 holds a [20][20] mask");
    TuiBlock b[8];
    int nb = tui_cand_blocks(r, r, NULL, 19, 4, b, 8);
    CHECK(nb == 5, "5 blocks (%d)", nb);
    int n[4] = {0};
    for (int i = 0; i < nb; i++)
        n[b[i].st]++;
    CHECK(b[4].st == TUI_BLK_PINNED, "query 19: block 4 (newest position 19) pinned");
    CHECK(n[TUI_BLK_KEPT] == 2 && n[TUI_BLK_DROPPED] == 2 && n[TUI_BLK_HIDDEN] == 0,
          "query 19: 2 kept besides the pinned one, 2 dropped (kept %d dropped %d hidden %d)", n[TUI_BLK_KEPT],
          n[TUI_BLK_DROPPED], n[TUI_BLK_HIDDEN]);
    /* the kept blocks are the best by block maximum, and the view agrees with the mask */
    const uint8_t *mask = (const uint8_t *)r->t[AS_T_CAND].data + 19 * 20;
    for (int i = 0; i < nb; i++) {
        CHECK((b[i].st == TUI_BLK_DROPPED) == (mask[i * 4] == 0), "block %d state agrees with the mask", i);
        for (int k = 0; k < nb; k++)
            if (b[i].st == TUI_BLK_KEPT && b[k].st == TUI_BLK_DROPPED)
                CHECK(b[i].score >= b[k].score, "kept block %d (%g) >= dropped block %d (%g)", i, b[i].score, k,
                      b[k].score);
    }
    /* query 3 sees 4 positions: block 0 pinned, the rest not visible yet */
    nb = tui_cand_blocks(r, r, NULL, 3, 4, b, 8);
    CHECK(b[0].st == TUI_BLK_PINNED && b[1].st == TUI_BLK_HIDDEN && b[4].st == TUI_BLK_HIDDEN,
          "query 3: block 0 pinned, blocks 1..4 not visible");
    /* the view */
    TuiData data;
    tui_data_from_driver(d, "tiny", &data);
    TuiState st;
    tui_state_init(&st);
    st.layer = 5;
    st.query = 19;
    TuiPanel g, t;
    panel_at(&g, 80, 10);
    panel_at(&t, 80, 11);
    tui_model_cand(&data, &st, &tui_glyphs_utf8, &g, &t);
    CHECK(strstr(g.title, "layer 5 (source), query 19"), "grid title: %s", g.title);
    CHECK(tls_find(&g.lines, "kept 2") >= 0 && tls_find(&g.lines, "dropped 2") >= 0 &&
              tls_find(&g.lines, "pinned 1") >= 0,
          "grid counts");
    int gl = tls_find(&g.lines, " b0 ");
    CHECK(gl >= 0, "a grid row");
    if (gl >= 0)
        CHECK(strstr(g.lines.v[gl].text, tui_glyphs_utf8.block_pinned) != NULL, "the pinned glyph in the grid: %s",
              g.lines.v[gl].text);
    CHECK(tls_find(&t.lines, "pinned (newest visible, kept)") >= 0, "block table names the pinned block");
    if (as_test_failed()) {
        dump_panel(&g);
        dump_panel(&t);
    }
    tp_free(&g);
    tp_free(&t);
    as_driver_close(d);
}

TEST(tui_model_topk_side_by_side_with_a_planted_difference)
{
    AsDriver *d = open_tiny(NULL);
    run(d, 5, 6);
    int nl = d->model.cfg.n_layers;
    const AsRun *ref = &d->ref_run[5];
    REQUIRE(ref->indexer_ran && ref->t[AS_T_CSEL].data, "layer 5 ran its indexer");
    int off = ref->rows_a_len, k = (int)ref->t[AS_T_CSEL].shape[1];
    const int32_t *sel = ref->t[AS_T_CSEL].data;
    const float *sc = ref->t[AS_T_ISCORE].data;
    int width = (int)ref->t[AS_T_ISCORE].shape[1];
    /* the weakest selected position and the strongest one left out */
    int weakest = -1, best_out = -1;
    for (int p = 0; p < width; p++) {
        bool in = false;
        for (int c = 0; c < k; c++)
            in |= sel[c] == p + off;
        if (in && (weakest < 0 || sc[p] < sc[weakest]))
            weakest = p;
        if (!in && (best_out < 0 || sc[p] > sc[best_out]))
            best_out = p;
    }
    REQUIRE(weakest >= 0 && best_out >= 0, "both sides of the cut exist");
    /* the engine picks best_out instead of weakest */
    AsRun *got = calloc((size_t)nl, sizeof *got);
    AsLayerDiff *diff = calloc((size_t)nl, sizeof *diff);
    bool *done = calloc((size_t)nl, sizeof *done);
    REQUIRE(got && diff && done, "memory");
    for (int l = 0; l < nl; l++) {
        as_run_init(&got[l]);
        REQUIRE(as_run_copy(&got[l], &d->ref_run[l]) == 0, "copy");
        done[l] = true;
    }
    int32_t *gs = got[5].t[AS_T_CSEL].data;
    for (int c = 0; c < k; c++)
        if (gs[c] == weakest + off)
            gs[c] = best_out + off;
    AsCompareOptions co;
    as_compare_options_default(&co);
    co.cand_block = d->model.cfg.candidate_block_size;
    for (int l = 0; l < nl; l++)
        as_compare_layer(&got[l], &d->ref_run[l], &co, &diff[l]);
    CHECK(diff[5].t[AS_T_CSEL].verdict == AS_V_MISMATCH, "the comparison calls it a mismatch");
    TuiData data;
    tui_data_from_driver(d, "tiny", &data);
    data.got = got;
    data.diff = diff;
    data.done = done;
    data.got_kind = AS_GOT_TWIN;
    TuiState st;
    tui_state_init(&st);
    st.layer = 5;
    TuiPanel sp, sets;
    panel_at(&sp, 80, 8);
    panel_at(&sets, 80, 13);
    tui_model_topk(&data, &st, &tui_glyphs_utf8, &sp, &sets);
    char want[32];
    snprintf(want, sizeof want, "%5d ", best_out);
    int gi = -1, wi = -1;
    for (int i = 0; i < sets.lines.n; i++) {
        const TuiLine *l = &sets.lines.v[i];
        if (color_at(l, want) == TC_ONLY_GOT)
            gi = i;
        snprintf(want, sizeof want, "%5d ", weakest);
        if (color_at(l, want) == TC_ONLY_WANT)
            wi = i;
        snprintf(want, sizeof want, "%5d ", best_out);
    }
    CHECK(gi >= 0, "position %d highlighted as engine only", best_out);
    CHECK(wi >= 0, "position %d highlighted as reference only", weakest);
    int fi = tls_find(&sets.lines, "real mismatch");
    CHECK(fi >= 0, "the query's seldiff: a real mismatch (identical scores cannot explain it)");
    CHECK(tls_find(&sp.lines, "cut (8th largest)") >= 0, "the sparkline states the cut");
    int mk = -1;
    for (int i = 0; i < sp.lines.n; i++)
        if (color_at(&sp.lines.v[i], "e") == TC_ONLY_GOT)
            mk = i;
    CHECK(mk >= 0, "the sparkline marks the engine-only pick");
    if (as_test_failed()) {
        dump_panel(&sp);
        dump_panel(&sets);
    }
    tp_free(&sp);
    tp_free(&sets);
    for (int l = 0; l < nl; l++)
        as_run_free(&got[l]);
    free(got);
    free(diff);
    free(done);
    as_driver_close(d);
}

TEST(tui_model_topk_reference_only_known_selection)
{
    AsDriver *d = open_tiny(NULL);
    run(d, 5, 6);
    TuiData data;
    tui_data_from_driver(d, "tiny", &data);
    TuiState st;
    tui_state_init(&st);
    st.layer = 5;
    TuiPanel sp, sets;
    panel_at(&sp, 80, 8);
    panel_at(&sets, 80, 13);
    tui_model_topk(&data, &st, &tui_glyphs_utf8, &sp, &sets);
    /* the compressed positions the reference's layer 5 picked at decode step 6: csel minus the
     * window rows before them, ascending */
    const AsRun *r = &d->ref_run[5];
    const int32_t *csel = r->t[AS_T_CSEL].data;
    int want[64], n_want = 0;
    for (int j = 0; j < r->k && n_want < 64; j++)
        if (csel[j] >= 0)
            want[n_want++] = csel[j] - r->rows_a_len;
    REQUIRE(n_want >= 4, "layer 5 picks %d compressed positions", n_want);
    /* the account of the query first, then one row per position */
    int base = tls_find(&sets.lines, "no engine: the reference set alone");
    CHECK(base == 0, "first line: the reference set alone (%d)", base);
    CHECK(sets.lines.n >= base + 1 + (n_want < 12 ? n_want : 12), "%d rows", n_want);
    for (int i = 0; i < n_want && i < 12 && base + 1 + i < sets.lines.n; i++) {
        char s[16];
        snprintf(s, sizeof s, "|%6d ", want[i]);
        CHECK(strstr(sets.lines.v[base + 1 + i].text, s) != NULL, "row %d: reference position %d: %s", i, want[i],
              sets.lines.v[base + 1 + i].text);
    }
    CHECK(strstr(sets.header.text, "engine") != NULL, "engine column header");
    tp_free(&sp);
    tp_free(&sets);
    as_driver_close(d);
}

TEST(tui_model_caches_show_the_aliasing)
{
    AsDriver *d = open_tiny(NULL);
    run(d, 5, 6);
    TuiData data;
    tui_data_from_driver(d, "tiny", &data);
    TuiState st;
    tui_state_init(&st);
    TuiPanel p;
    panel_at(&p, 80, 21);
    tui_model_caches(&data, &st, &tui_glyphs_utf8, &p);
    /* step 6 decodes position 10: the ratio-2 owners complete no group and read layer 5's keys of step 5 */
    int i = tls_find(&p.lines, "layer 1 scored against layer 5's keys (step 5)");
    CHECK(i >= 0, "layer 1's aliasing shown");
    if (i >= 0)
        CHECK(color_at(&p.lines.v[i], "layer 1 scored") == TC_WARN, "in the warning colour");
    CHECK(tls_find(&p.lines, "layer 5 scored against layer 5's keys (step 6)") >= 0, "layer 5 its own, this step");
    CHECK(tls_find(&p.lines, "1 of 2 waiting (pos 10)") >= 0, "ratio 2: position 10 waits for its group");
    int c5 = tls_find(&p.lines, "layers 5 6 7 8 9");
    CHECK(c5 >= 0 && strstr(p.lines.v[c5].text, "  5  r1") && strstr(p.lines.v[c5].text, "  11  512  "),
          "layer 5's cache: 11 rows of 512, read by 5..9: %s", c5 >= 0 ? p.lines.v[c5].text : "(none)");
    CHECK(tls_find(&p.lines, "engine") < 0, "without a checked side no engine column");
    if (as_test_failed())
        dump_panel(&p);
    tp_free(&p);
    as_driver_close(d);
}

TEST(tui_model_heatmap_reference_only_and_diff)
{
    AsDriver *d = open_tiny(NULL);
    run(d, 5, 0);
    TuiData data;
    tui_data_from_driver(d, "tiny", &data);
    TuiState st;
    tui_state_init(&st);
    st.layer = 5;
    st.tensor = AS_T_Q;
    st.head = 1;
    TuiPanel h, in;
    panel_at(&h, 80, 12);
    panel_at(&in, 80, 9);
    TuiHeatGeom geo;
    st.cur_r = 6; /* token 1, head 2 */
    st.cur_c = 7;
    tui_model_heatmap(&data, &st, &tui_glyphs_utf8, &h, &in, &geo, NULL);
    CHECK(strstr(h.title, "|ref| q") && strstr(h.title, "4 heads per token") && strstr(h.title, "no engine"),
          "title: %s", h.title);
    /* 5 tokens x 4 heads = 20 rows into the 8 rows left above the scale (2 or 3 a cell), 64 channels one a cell */
    CHECK(geo.valid && geo.rows == 20 && geo.cols == 64 && geo.rpc == 3 && geo.cpc == 1 && geo.heads == 4 &&
              geo.n_r == 8 && geo.zoom == 0,
          "20 rows x 64 channels (rows %d cols %d rpc %d cpc %d heads %d, %d cell rows)", geo.rows, geo.cols, geo.rpc,
          geo.cpc, geo.heads, geo.n_r);
    CHECK(h.lines.n == tp_inner_h(&h), "the cells and the scale fill the panel (%d lines of %d)", h.lines.n,
          tp_inner_h(&h));
    CHECK(h.lines.n > 2 && strncmp(h.lines.v[2].text, " 1.1 ", 5) == 0, "row labels are token.head (cell 2: row 5): '%s'",
          h.lines.n > 2 ? h.lines.v[2].text : "");
    CHECK(tls_find(&in.lines, "cursor     token 1, head 2, channel 7") >= 0, "inspector: the cursor's coordinates");
    CHECK(st.head == 2, "the cursor's head is the current head");
    CHECK(tls_find(&in.lines, "engine     no engine") >= 0 && tls_find(&in.lines, "diff       no engine") >= 0,
          "inspector: no engine");
    const float *q = d->ref_run[5].t[AS_T_Q].data;
    char want[64];
    snprintf(want, sizeof want, "reference  %.8g", q[6 * 64 + 7]);
    CHECK(tls_find(&in.lines, want) >= 0, "inspector: the reference value at [1][2][7] (%s)", want);
    /* a downsampled tensor in a narrow panel */
    tp_free(&h);
    tp_free(&in);
    panel_at(&h, 30, 6);
    panel_at(&in, 30, 9);
    tui_model_heatmap(&data, &st, &tui_glyphs_ascii, &h, &in, &geo, NULL);
    CHECK(geo.cpc == 3 && geo.n_c == 23 && geo.rpc == 20 && geo.n_r == 1,
          "64 channels into 23 cells: up to 3 a cell; 20 rows into the one row left by the scale (%d, %d, %d, %d)",
          geo.cpc, geo.n_c, geo.rpc, geo.n_r);
    tp_free(&h);
    tp_free(&in);
    as_driver_close(d);
}

TEST(tui_model_caches_show_both_sides_and_mark_differences)
{
    /* the stale-keys fault: in decode the key owners do not write their new index keys */
    AsDriver *d = open_tiny("stale-keys");
    run(d, 20, 1);
    TuiData data;
    tui_data_from_driver(d, "tiny", &data);
    TuiState st;
    tui_state_init(&st);
    TuiPanel p;
    panel_at(&p, 120, 40);
    tui_model_caches(&data, &st, &tui_glyphs_utf8, &p);
    CHECK(strstr(p.title, "reference and engine") != NULL, "the title says both sides: %s", p.title);
    int ki = tls_find(&p.lines, "index-key caches");
    REQUIRE(ki >= 0 && ki + 1 < p.lines.n, "the key caches' section");
    CHECK(strstr(p.lines.v[ki + 1].text, "engine") && strstr(p.lines.v[ki + 1].text, "engine this step"),
          "its header names the engine's columns: %s", p.lines.v[ki + 1].text);
    /* layer 5 (ratio 1) completes a key each step: the faulty side keeps 21 rows but never wrote row 20 */
    int k5 = -1;
    for (int i = ki + 2; i < p.lines.n && p.lines.v[i].nchars; i++)
        if (strstr(p.lines.v[i].text, "  5  r1"))
            k5 = i;
    REQUIRE(k5 >= 0, "layer 5's key cache line");
    const TuiLine *l = &p.lines.v[k5];
    CHECK(strstr(l->text, "MISMATCH at row 20"), "the engine's copy differs at its new row: %s", l->text);
    CHECK(color_at(l, "MISMATCH at row 20") == TC_MISMATCH, "in the mismatch colour");
    int k1 = -1;
    for (int i = ki + 2; i < p.lines.n && p.lines.v[i].nchars && k1 < 0; i++)
        if (strstr(p.lines.v[i].text, "  1  r2"))
            k1 = i;
    CHECK(k1 > ki && strstr(p.lines.v[k1].text, "pass"), "layer 1's keys agree: %s", k1 >= 0 ? p.lines.v[k1].text : "");
    int same = tls_find(&p.lines, "engine: the same");
    CHECK(same >= 0, "provenance that agrees is said to");
    /* rows filled or published differently: a planted difference */
    AsRun *g5 = (AsRun *)&d->got_run[5];
    int keep_new = g5->n_new;
    g5->n_new = 0;
    g5->t[AS_T_ST_IKCACHE].shape[0] = 20;
    tls_clear(&p.lines);
    p.n_tables = 0;
    tui_model_caches(&data, &st, &tui_glyphs_utf8, &p);
    int k5b = -1;
    for (int i = 0; i < p.lines.n; i++)
        if (strstr(p.lines.v[i].text, "  5  r1") && strstr(p.lines.v[i].text, "published"))
            k5b = i;
    REQUIRE(k5b >= 0, "layer 5's key line again");
    l = &p.lines.v[k5b];
    CHECK(strstr(l->text, "20 !") && color_at(l, "20 !") == TC_MISMATCH, "rows 21 against 20, marked: %s", l->text);
    CHECK(strstr(l->text, "not republished") && color_at(l, "no new keys") == TC_MISMATCH,
          "published on one side only, marked: %s", l->text);
    g5->n_new = keep_new;
    g5->t[AS_T_ST_IKCACHE].shape[0] = 21;
    if (as_test_failed())
        dump_panel(&p);
    tp_free(&p);
    as_driver_close(d);
}

TEST(tui_model_topk_scales_its_sparkline_with_a_legend_for_every_mark)
{
    AsDriver *d = open_tiny(NULL);
    AsError err = {0};
    REQUIRE(as_driver_prefill(d, 60, &err) == 0, "prefill 60: %s", err.msg);
    TuiData data;
    tui_data_from_driver(d, "tiny", &data);
    TuiState st;
    tui_state_init(&st);
    st.layer = 5;
    st.query = 59;
    const AsRun *r = &d->ref_run[5];
    int width = (int)r->t[AS_T_ISCORE].shape[1];
    TuiPanel sp, sets;
    /* narrower than the scores: several positions a column, the columns fill the panel */
    panel_at(&sp, 40, 10);
    panel_at(&sets, 40, 12);
    tui_model_topk(&data, &st, &tui_glyphs_utf8, &sp, &sets);
    REQUIRE(width > 38, "layer 5 scores %d positions", width);
    REQUIRE(sp.lines.n >= 4, "the sparkline's lines");
    CHECK(sp.lines.v[1].nchars == 38 && sp.lines.v[2].nchars == 38,
          "37 columns after the margin: the width of the panel (%d, %d)", sp.lines.v[1].nchars, sp.lines.v[2].nchars);
    CHECK(tls_find(&sp.lines, "several a column") >= 0, "says the columns hold several positions");
    CHECK(tls_find(&sp.lines, "all picked") >= 0 && tls_find(&sp.lines, "some picked") >= 0 &&
              tls_find(&sp.lines, "engine only") >= 0 && tls_find(&sp.lines, "reference only") >= 0,
          "a legend for every mark");
    /* query 59 sees 60 positions, picks k of them: columns all picked (^), some (') and none */
    const TuiLine *mk = &sp.lines.v[2];
    CHECK(strstr(mk->text, "'") != NULL, "columns where some positions are picked are told apart: '%s'", mk->text);
    char pk[64];
    snprintf(pk, sizeof pk, "%d of %d picked", r->k, width);
    CHECK(tls_find(&sp.lines, pk) >= 0, "the count: %s", pk);
    /* an early query sees few positions: the rest are masked, shown and named */
    st.query = 3;
    tp_free(&sp);
    tp_free(&sets);
    panel_at(&sp, 120, 10);
    panel_at(&sets, 120, 12);
    tui_model_topk(&data, &st, &tui_glyphs_utf8, &sp, &sets);
    CHECK(tls_find(&sp.lines, "masked (-inf") >= 0, "masked positions have a legend");
    CHECK(strstr(sp.lines.v[1].text, tui_glyphs_utf8.shade[0]) != NULL, "and a mark: %s", sp.lines.v[1].text);
    CHECK(tls_find(&sp.lines, "one a column") >= 0, "wide enough: one position a column");
    /* far wider than the scores: each position drawn wider, the line spanning the panel */
    tp_free(&sp);
    tp_free(&sets);
    panel_at(&sp, 200, 10);
    panel_at(&sets, 200, 12);
    tui_model_topk(&data, &st, &tui_glyphs_utf8, &sp, &sets);
    CHECK(tls_find(&sp.lines, "one a column, 3 wide") >= 0 && sp.lines.v[1].nchars == 1 + 3 * width &&
              sp.lines.v[2].nchars == 1 + 3 * width,
          "60 positions in 197 columns: 3 wide each (%d characters)", sp.lines.v[1].nchars);
    if (as_test_failed())
        dump_panel(&sp);
    tp_free(&sp);
    tp_free(&sets);
    as_driver_close(d);
}

TEST(tui_model_stale_panels_say_what_they_show)
{
    AsDriver *d = open_tiny("ring-slot");
    run(d, 20, 2);
    AsError err = {0};
    /* a new prefill that has run 3 of 10 layers: layers 3.. still hold decode step 2 */
    REQUIRE(as_driver_begin_prefill(d, 8, &err) == 0, "begin: %s", err.msg);
    for (int l = 0; l < 3; l++)
        REQUIRE(as_driver_step_layer(d, &err) == 0, "layer %d: %s", l, err.msg);
    TuiData data;
    tui_data_from_driver(d, "tiny", &data);
    TuiScreen scr;
    tui_screen_init(&scr);
    TuiState st;
    tui_state_init(&st);
    st.view = TV_TOPK;
    st.layer = 5;
    tui_build(&data, &st, &tui_glyphs_utf8, 200, 60, &scr);
    CHECK(strstr(scr.panel[0].title, "as of step 2") && strstr(scr.panel[0].title, "before this prefill"),
          "top-k of layer 5: a decode step's query, said so: %s", scr.panel[0].title);
    st.view = TV_RING;
    tui_build(&data, &st, &tui_glyphs_utf8, 200, 60, &scr);
    CHECK(strstr(scr.panel[0].title, "as of step 2"), "the ring too: %s", scr.panel[0].title);
    st.layer = 1;
    tui_build(&data, &st, &tui_glyphs_utf8, 200, 60, &scr);
    CHECK(!strstr(scr.panel[0].title, "as of"), "layer 1 ran in this prefill: no label: %s", scr.panel[0].title);
    /* while the worker computes, every panel says what it shows */
    st.view = TV_LAYERS;
    tui_build(&data, &st, &tui_glyphs_utf8, 200, 60, &scr);
    CHECK(!strcmp(scr.as_of, "as of step 0, layer 2"), "as of the last layer run: %s", scr.as_of);
    tui_screen_mark_stale(&scr, &tui_glyphs_utf8);
    for (int i = 0; i < scr.n_panels; i++)
        CHECK(!strncmp(scr.panel[i].title, "(as of step 0, layer 2) ", 24), "panel %d: %s", i, scr.panel[i].title);
    CHECK(strstr(scr.panel[0].title, "3 of 10 run"), "with what the layer list held: %s", scr.panel[0].title);
    tui_screen_mark_stale(&scr, &tui_glyphs_utf8);
    CHECK(!strncmp(scr.panel[0].title, "(as of step 0, layer 2) layers", 30), "marked once: %s", scr.panel[0].title);
    tui_build(&data, &st, &tui_glyphs_utf8, 200, 60, &scr);
    CHECK(!strstr(scr.panel[0].title, "(as of"), "a new build is fresh: %s", scr.panel[0].title);
    tui_screen_free(&scr);
    as_driver_close(d);
}

/* The heatmap's maxima pyramid against a planted element: at every zoom exactly the cell holding
 * it shows the top shade, and w finds it (the argmax down the pyramid), in a tensor tall enough
 * for every level (8192 rows: bands of 16, 256, 4096). */
TEST(tui_model_heatmap_pyramid_finds_a_planted_maximum_at_every_zoom)
{
    AsConfig cfg;
    AsError err;
    REQUIRE(as_config_preset("tiny", &cfg, &err) == 0, "tiny");
    int nl = cfg.n_layers;
    AsRun *ref = calloc((size_t)nl, sizeof *ref);
    AsLayerDiff *diff = calloc((size_t)nl, sizeof *diff);
    bool *done = calloc((size_t)nl, sizeof *done);
    REQUIRE(ref && diff && done, "memory");
    for (int l = 0; l < nl; l++)
        as_run_init(&ref[l]);
    const int S = 1024, H = 8, C = 64;
    float *q = as_run_shape(&ref[0], AS_T_Q, 3, S, H, C);
    REQUIRE(q, "q");
    ref[0].s = S;
    static const int64_t plant[][3] = {{0, 0, 0}, {511, 7, 63}, {512, 0, 31}, {1023, 7, 63}, {700, 3, 17}};
    for (int p = 0; p < 5; p++) {
        for (int64_t i = 0; i < (int64_t)S * H * C; i++)
            q[i] = (float)((i * 7919) % 97) / 1000.0f; /* at most 0.096 */
        int64_t row = plant[p][0] * H + plant[p][1], col = plant[p][2];
        q[row * C + col] = -5.0f;
        TuiData d = {.cfg = &cfg, .model_name = "t", .cur = {.step = 0, .prefill = true, .s = S, .next_layer = nl},
                     .got_kind = AS_GOT_NONE, .ref = ref, .diff = diff, .done = done, .gen = (unsigned)p};
        TuiScreen scr;
        tui_screen_init(&scr);
        TuiState st;
        tui_state_init(&st);
        st.tensor = AS_T_Q;
        tui_tensor_open(&st);
        tui_build(&d, &st, &tui_glyphs_utf8, 100, 30, &scr);
        CHECK(st.cur_r == row && st.cur_c == col, "plant %d: the view opens on it (%d, %d) = (%lld, %lld)", p,
              st.cur_r, st.cur_c, (long long)row, (long long)col);
        for (int z = 0; z <= scr.heat.max_zoom; z++) {
            st.zoom = z;
            st.org_r = st.org_c = -1;
            tui_build(&d, &st, &tui_glyphs_utf8, 100, 30, &scr);
            const TuiPanel *hp = &scr.panel[0];
            int tops = 0, cursor_tops = 0;
            for (int i = 0; i < scr.heat.n_r && i < hp->lines.n; i++) {
                const TuiLine *l = &hp->lines.v[i];
                for (int k = 0; k < l->nchars; k++) {
                    size_t a = tl_offset(l, k), b = tl_offset(l, k + 1);
                    bool top = b - a == strlen(tui_glyphs_utf8.shade[4]) &&
                               !memcmp(l->text + a, tui_glyphs_utf8.shade[4], b - a);
                    tops += top;
                    cursor_tops += top && l->color[k] == TC_CURSOR;
                }
            }
            /* (a cell may be drawn several characters wide: all of them the cursor's) */
            CHECK(tops >= 1 && cursor_tops == tops, "plant %d, zoom %d: only the cursor's cell is the top shade (%d, %d)",
                  p, z, tops, cursor_tops);
        }
        tui_screen_free(&scr);
    }
    for (int l = 0; l < nl; l++)
        as_run_free(&ref[l]);
    free(ref);
    free(diff);
    free(done);
}

TEST(tui_model_dropped_layers_say_so)
{
    setenv("ATTNSCOPE_RUN_BUDGET_MB", "16", 1);
    AsDriver *d = open_tiny(NULL);
    run(d, 300, 0);
    TuiData data;
    tui_data_from_driver(d, "tiny", &data);
    TuiScreen scr;
    tui_screen_init(&scr);
    TuiState st;
    tui_state_init(&st);
    st.view = TV_TENSOR;
    st.tensor = AS_T_Q;
    st.layer = 0; /* gave its tensors up to the budget */
    tui_build(&data, &st, &tui_glyphs_utf8, 200, 60, &scr);
    char all[4096] = "";
    for (int i = 0; i < scr.panel[0].lines.n && strlen(all) < 3000; i++)
        if (scr.panel[0].lines.v[i].text)
            strncat(all, scr.panel[0].lines.v[i].text, 900);
    CHECK(strstr(all, "dropped to bound memory") && strstr(all, "ATTNSCOPE_RUN_BUDGET_MB"), "layer 0: %s", all);
    st.layer = d->model.cfg.n_layers - 1;
    tui_build(&data, &st, &tui_glyphs_utf8, 200, 60, &scr);
    CHECK(strstr(scr.panel[0].title, "|ref| q, layer 9"), "the last layer keeps q: %s", scr.panel[0].title);
    /* the caches view: a dropped source's rows are unknown, not 0 */
    st.view = TV_CACHES;
    tui_build(&data, &st, &tui_glyphs_utf8, 200, 60, &scr);
    bool said = false, zero = false;
    for (int i = 0; i < scr.panel[0].lines.n; i++) {
        const char *t = scr.panel[0].lines.v[i].text;
        if (!t || strncmp(t, "   1  r2 ", 9)) /* layer 1, tiny's first kv source, gave its tensors up */
            continue;
        char rows[16] = "";
        sscanf(t + 9, "%15s", rows);
        said = said || !strcmp(rows, "dropped");
        zero = zero || !strcmp(rows, "0");
    }
    CHECK(said && !zero, "the caches view of a dropped kv source: said 'dropped' %d, showed 0 rows %d", said, zero);
    tui_screen_free(&scr);
    as_driver_close(d);
    unsetenv("ATTNSCOPE_RUN_BUDGET_MB");
}
