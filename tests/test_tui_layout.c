/* The TUI's layout for the terminal size, the ASCII fallback and the key line, without a
 * terminal. */
#include <stdlib.h>
#include <string.h>

#include "tests/lib/harness.h"
#include "tests/lib/tiny_driver.h"
#include "tui/keys.h"
#include "tui/model.h"

TEST(tui_layout_80x24_and_250x70)
{
    for (int v = 0; v < TV_COUNT; v++) {
        TuiLayout a, b;
        tui_layout((TuiView)v, 80, 24, 10, &a);
        tui_layout((TuiView)v, 250, 70, 40, &b);
        CHECK(!a.too_small && tui_layout_valid(&a), "%s at 80x24: panels inside the body, no overlap",
              tui_view_name((TuiView)v));
        CHECK(!b.too_small && tui_layout_valid(&b), "%s at 250x70: valid", tui_view_name((TuiView)v));
        CHECK(a.keys.y == 23 && b.keys.y == 69, "%s: the key line is the last line", tui_view_name((TuiView)v));
        CHECK(a.body.h == 21 && b.body.h == 67, "%s: status, message, body, keys", tui_view_name((TuiView)v));
        /* the panels cover the body */
        int area_a = 0, area_b = 0;
        for (int i = 0; i < a.n_panels; i++)
            area_a += a.panel[i].w * a.panel[i].h;
        for (int i = 0; i < b.n_panels; i++)
            area_b += b.panel[i].w * b.panel[i].h;
        CHECK(area_a == 80 * 21 && area_b == 250 * 67, "%s: the panels fill the body (%d, %d)",
              tui_view_name((TuiView)v), area_a, area_b);
    }
    TuiLayout l;
    tui_layout(TV_LAYERS, 80, 24, 10, &l);
    CHECK(!l.wide && l.panel[0].h == 13 && l.panel[1].h == 8, "layers at 80x24: 10 layers stacked over the tensors "
          "(%d, %d)", l.panel[0].h, l.panel[1].h);
    tui_layout(TV_LAYERS, 80, 24, 40, &l);
    CHECK(l.panel[1].h >= 8, "40 layers at 80x24 still leave the tensor table 8 rows");
    tui_layout(TV_LAYERS, 250, 70, 40, &l);
    CHECK(l.wide && l.panel[0].w >= 80 && l.panel[0].h == 67, "layers at 250x70: side by side, the list %dx%d",
          l.panel[0].w, l.panel[0].h);
    tui_layout(TV_TENSOR, 250, 70, 40, &l);
    CHECK(l.wide && l.panel[0].w > 150, "tensor at 250x70: a %d-column heatmap", l.panel[0].w);
    tui_layout(TV_LAYERS, 120, 40, 10, &l);
    CHECK(!l.too_small && l.panel[1].h == 24, "120x40: the tensor table grows to %d rows", l.panel[1].h);
    tui_layout(TV_LAYERS, 79, 24, 10, &l);
    CHECK(l.too_small && l.n_panels == 0 && tui_layout_valid(&l), "79x24 is below the minimum");
    tui_layout(TV_RING, 80, 23, 10, &l);
    CHECK(l.too_small, "80x23 is below the minimum");
    tui_layout(TV_RING, 0, 0, 10, &l);
    CHECK(l.too_small, "0x0 does not crash");
}

static bool ascii_only(const char *s) {
    for (; s && *s; s++)
        if ((unsigned char)*s >= 0x80)
            return false;
    return true;
}

static bool glyphs_ascii(const TuiGlyphs *g)
{
    const char *all[] = {g->h, g->v, g->tl, g->tr, g->bl, g->br, g->shade[0], g->shade[1], g->shade[2], g->shade[3],
                         g->shade[4], g->block_kept, g->block_dropped, g->block_pinned, g->block_hidden, g->bar_full,
                         g->bar_empty, g->marker, g->next, g->dot, g->ellipsis, g->minus_inf};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (!ascii_only(all[i]) || tui_utf8_len(all[i]) != (int)strlen(all[i]))
            return false;
    for (int i = 0; i < g->n_spin; i++)
        if (!ascii_only(g->spin[i]))
            return false;
    for (int i = 0; i < 8; i++)
        if (!ascii_only(g->spark[i]))
            return false;
    return true;
}

static bool screen_ascii(const TuiScreen *s, const char **where)
{
    if (!ascii_only(s->status.text)) {
        *where = "status";
        return false;
    }
    const TuiPanel *ps[TUI_MAX_PANELS + 1];
    int n = 0;
    for (int i = 0; i < s->n_panels; i++)
        ps[n++] = &s->panel[i];
    ps[n++] = &s->overlay;
    for (int k = 0; k < n; k++) {
        const TuiPanel *p = ps[k];
        if (!ascii_only(p->title) || !ascii_only(p->header.text)) {
            *where = p->title;
            return false;
        }
        for (int i = 0; i < p->lines.n; i++)
            if (!ascii_only(p->lines.v[i].text)) {
                *where = p->lines.v[i].text;
                return false;
            }
    }
    return true;
}

TEST(tui_layout_ascii_fallback_glyphs)
{
    CHECK(glyphs_ascii(&tui_glyphs_ascii), "every ASCII glyph is one ASCII byte");
    CHECK(!glyphs_ascii(&tui_glyphs_utf8), "the UTF-8 set is not (sanity)");
    CHECK(tui_utf8_len(tui_glyphs_utf8.block_pinned) == 1 && tui_utf8_len(tui_glyphs_utf8.h) == 1,
          "UTF-8 glyphs are one character each");
    /* every view of a real run, drawn with the ASCII set, is pure ASCII */
    AsDriver *d = as_test_tiny_driver("fp4-scale");
    AsError err = {0};
    REQUIRE(as_driver_prefill(d, 20, &err) == 0 && as_driver_decode(d, 2, &err) == 0, "run: %s", err.msg);
    TuiData data;
    tui_data_from_driver(d, "tiny", &data);
    TuiScreen scr;
    tui_screen_init(&scr);
    for (int v = 0; v < TV_COUNT; v++) {
        TuiState st;
        tui_state_init(&st);
        st.view = (TuiView)v;
        st.layer = 5;
        st.overlay = v == TV_LAYERS ? TUI_OV_HELP : TUI_OV_NONE;
        tui_build(&data, &st, &tui_glyphs_ascii, 80, 24, &scr);
        const char *where = "";
        CHECK(screen_ascii(&scr, &where), "%s view in ASCII: '%s'", tui_view_name((TuiView)v), where);
        TuiLine k;
        tl_init(&k);
        tui_key_line(&k, 80, (TuiView)v, TUI_KL_IDLE, &tui_glyphs_ascii);
        CHECK(ascii_only(k.text), "%s key line in ASCII: %s", tui_view_name((TuiView)v), k.text);
        tl_free(&k);
    }
    tui_screen_free(&scr);
    as_driver_close(d);
}

TEST(tui_layout_whole_screens_at_80x24_and_250x70)
{
    AsDriver *d = as_test_tiny_driver("sink-ignored");
    AsError err = {0};
    REQUIRE(as_driver_prefill(d, 9, &err) == 0 && as_driver_decode(d, 3, &err) == 0, "run: %s", err.msg);
    TuiData data;
    tui_data_from_driver(d, "tiny", &data);
    TuiScreen scr;
    tui_screen_init(&scr);
    static const int sizes[][2] = {{80, 24}, {250, 70}, {120, 40}};
    for (int z = 0; z < 3; z++)
        for (int v = 0; v < TV_COUNT; v++)
            for (int l = 0; l < 10; l++) {
                TuiState st;
                tui_state_init(&st);
                st.view = (TuiView)v;
                st.layer = l;
                st.tensor = l % 2 ? AS_T_IDX : AS_T_O;
                tui_build(&data, &st, &tui_glyphs_utf8, sizes[z][0], sizes[z][1], &scr);
                CHECK(tui_layout_valid(&scr.lay), "%s, layer %d at %dx%d: valid layout", tui_view_name((TuiView)v), l,
                      sizes[z][0], sizes[z][1]);
                for (int i = 0; i < scr.n_panels; i++) {
                    CHECK(scr.panel[i].lines.n > 0, "%s, layer %d at %dx%d: panel %d has content",
                          tui_view_name((TuiView)v), l, sizes[z][0], sizes[z][1], i);
                    CHECK(scr.panel[i].sel < scr.panel[i].lines.n, "selection within the lines");
                    int ih = tp_inner_h(&scr.panel[i]);
                    CHECK(scr.panel[i].sel < 0 || (scr.panel[i].sel >= scr.panel[i].top &&
                                                   scr.panel[i].sel < scr.panel[i].top + ih),
                          "%s: the selection is scrolled into view", tui_view_name((TuiView)v));
                }
            }
    /* the tensor view's heatmap fills the wider panel */
    TuiState st;
    tui_state_init(&st);
    st.view = TV_TENSOR;
    st.layer = 5;
    st.tensor = AS_T_Q;
    tui_build(&data, &st, &tui_glyphs_utf8, 250, 70, &scr);
    CHECK(scr.heat.valid && scr.heat.cpc == 1 && scr.heat.rpc == 1 && scr.heat.rows == 4,
          "decode q at 250x70: 1 token x 4 heads, 1 channel per cell");
    CHECK(strstr(scr.panel[0].title, "|diff| q"), "a twin gives |diff|: %s", scr.panel[0].title);
    /* too small: no panels, no crash */
    tui_build(&data, &st, &tui_glyphs_utf8, 60, 15, &scr);
    CHECK(scr.lay.too_small && scr.n_panels == 0, "60x15: too small");
    tui_screen_free(&scr);
    as_driver_close(d);
}

TEST(tui_layout_key_line_fits_and_names_quit_and_help)
{
    static const int widths[] = {80, 120, 250};
    for (int w = 0; w < 3; w++)
        for (int v = 0; v < TV_COUNT; v++)
            for (int m = 0; m < 4; m++) {
                TuiLine k;
                tl_init(&k);
                tui_key_line(&k, widths[w], (TuiView)v, (TuiKeyLineMode)m, &tui_glyphs_utf8);
                CHECK(k.nchars <= widths[w], "%s, mode %d, width %d: %d characters", tui_view_name((TuiView)v), m,
                      widths[w], k.nchars);
                CHECK(strstr(k.text, "q Quit") != NULL, "%s, mode %d: q Quit (%s)", tui_view_name((TuiView)v), m,
                      k.text);
                if (m == TUI_KL_IDLE)
                    CHECK(strstr(k.text, "? Help") && strstr(k.text, "n Layer") && strstr(k.text, "1-6 View"),
                          "%s at %d: help, next layer, views (%s)", tui_view_name((TuiView)v), widths[w], k.text);
                if (m == TUI_KL_BUSY)
                    CHECK(strstr(k.text, "Esc Cancel") != NULL, "busy: Esc Cancel");
                tl_free(&k);
            }
    TuiLine k;
    tl_init(&k);
    tui_key_line(&k, 250, TV_LAYERS, TUI_KL_IDLE, &tui_glyphs_utf8);
    CHECK(strstr(k.text, "s/S Save") && strstr(k.text, "m Mode") && strstr(k.text, "r Diverge"),
          "at 250 columns every key of the view: %s", k.text);
    tl_free(&k);
}

/* ---- every view at the four sizes: nothing clipped, nothing cut inside a word, no two columns
 * touching ------------------------------------------------------------------------------------ */

/* Whether tok is a whole space-separated word of some line of ls. */
static bool whole_word_of(const TuiLines *ls, const char *tok)
{
    size_t n = strlen(tok);
    for (int i = 0; i < ls->n; i++)
        for (const char *p = ls->v[i].text; p && (p = strstr(p, tok)); p++) {
            bool start = p == ls->v[i].text || p[-1] == ' ';
            bool end = p[n] == ' ' || p[n] == '\0';
            if (start && end)
                return true;
        }
    return false;
}

/* The last word of a line cut with the ellipsis (NULL when the line was not cut). */
static const char *cut_word(const char *text, const char *ell, char *buf, size_t n)
{
    size_t len = text ? strlen(text) : 0, e = strlen(ell);
    if (len < e || strcmp(text + len - e, ell))
        return NULL;
    len -= e;
    while (len && text[len - 1] == ' ')
        len--;
    size_t start = len;
    while (start && text[start - 1] != ' ')
        start--;
    snprintf(buf, n, "%.*s", (int)(len - start), text + start);
    return buf;
}

static bool apart(const TuiLine *l, const TuiColumns *cols)
{
    for (int c = 1; c < cols->n_cols; c++)
        if (cols->x[c] < l->nchars && l->text[tl_offset(l, cols->x[c] - 1)] != ' ')
            return false;
    return true;
}

/* One panel: every line within the inner width, a cut only after a whole word (its whole text
 * kept for the v overlay), the columns of its tables apart. Returns the number of problems. */
static int check_panel(const TuiPanel *p, const TuiGlyphs *g, const char *where)
{
    int bad = 0, w = tp_inner_w(p);
    char buf[256];
    const char *tok;
    if (tui_utf8_len(p->title) > p->r.w - 6) {
        as_test_note("%s: title wider than its border: %s", where, p->title);
        bad++;
    }
    if ((tok = cut_word(p->title, g->ellipsis, buf, sizeof buf)) && !whole_word_of(&p->full, tok)) {
        as_test_note("%s: title cut inside '%s': %s", where, tok, p->title);
        bad++;
    }
    if (p->header.nchars > w) {
        as_test_note("%s: header wider than %d: %s", where, w, p->header.text);
        bad++;
    }
    for (int i = 0; i < p->lines.n; i++) {
        const TuiLine *l = &p->lines.v[i];
        if (l->nchars > w) {
            as_test_note("%s: line %d wider than %d (%d): %s", where, i, w, l->nchars, l->text);
            bad++;
        }
        if ((tok = cut_word(l->text, g->ellipsis, buf, sizeof buf)) && !whole_word_of(&p->full, tok)) {
            as_test_note("%s: line %d cut inside the word '%s': %s", where, i, tok, l->text);
            bad++;
        }
    }
    for (int t = 0; t < p->n_tables; t++) {
        const TuiColumns *c = &p->table[t];
        if (c->header && !apart(&p->header, c)) {
            as_test_note("%s: header columns touch: %s", where, p->header.text);
            bad++;
        }
        for (int i = c->first; i < c->first + c->n_lines && i < p->lines.n; i++)
            if (!apart(&p->lines.v[i], c)) {
                as_test_note("%s: line %d: columns touch: %s", where, i, p->lines.v[i].text);
                bad++;
            }
    }
    return bad;
}

static AsDriver *open_run(const char *inject)
{
    AsDriver *d = as_test_tiny_driver(inject);
    AsError err = {0};
    /* a long prefill, decode steps, and a step half run: stale layers, stale selections */
    REQUIRE(as_driver_prefill(d, 20, &err) == 0 && as_driver_decode(d, 3, &err) == 0, "run: %s", err.msg);
    REQUIRE(as_driver_begin_decode(d, &err) == 0, "begin: %s", err.msg);
    for (int l = 0; l < 6; l++)
        REQUIRE(as_driver_step_layer(d, &err) == 0, "layer %d: %s", l, err.msg);
    return d;
}

TEST(tui_layout_every_view_at_four_sizes_fits_without_cutting_words)
{
    static const int sizes[][2] = {{80, 24}, {100, 30}, {132, 43}, {200, 60}};
    static const char *const injects[] = {"stale-keys", NULL};
    static const int layers[] = {0, 1, 5, 7, 9};
    static const AsTensorId tensors[] = {AS_T_Q, AS_T_ST_PART_SC, AS_T_CSEL, AS_T_ISCORE};
    TuiMsgLog log;
    tui_log_init(&log);
    tui_log_add(&log, 0, TC_MISMATCH, "first divergence: step 3, layer 5: q MISMATCH max_abs 0.5 > tol 0.01 at token 0, "
                "head 1, channel 56: got 1.5 want 2 (3 ulp); 12 bad, 0 flips");
    tui_log_add(&log, 60, TC_NORMAL, "prefill of 20 tokens: 10 layers run (0.31 s)");
    int problems = 0, screens = 0;
    for (int k = 0; k < 2; k++) {
        AsDriver *d = open_run(injects[k]);
        TuiData data;
        tui_data_from_driver(d, "tiny", &data);
        data.log = &log;
        TuiScreen scr;
        tui_screen_init(&scr);
        for (int z = 0; z < 4; z++)
            for (int v = 0; v < TV_COUNT; v++)
                for (int li = 0; li < 5; li++)
                    for (int ov = 0; ov <= TUI_OV_FULL; ov++) {
                        if (ov && li) /* the overlays once a view */
                            continue;
                        TuiState st;
                        tui_state_init(&st);
                        st.view = (TuiView)v;
                        st.layer = layers[li];
                        st.tensor = tensors[li % 4];
                        st.query = 19;
                        st.focus = li % 2;
                        st.overlay = (TuiOverlay)ov;
                        st.heat_open = true;
                        tui_build(&data, &st, &tui_glyphs_utf8, sizes[z][0], sizes[z][1], &scr);
                        char where[128];
                        snprintf(where, sizeof where, "%s, %s view, layer %d, overlay %d at %dx%d",
                                 injects[k] ? injects[k] : "reference only", tui_view_name((TuiView)v), st.layer, ov,
                                 sizes[z][0], sizes[z][1]);
                        screens++;
                        if (scr.status.nchars > sizes[z][0]) {
                            as_test_note("%s: status wider than the terminal: %s", where, scr.status.text);
                            problems++;
                        }
                        if (ov) {
                            problems += check_panel(&scr.overlay, &tui_glyphs_utf8, where);
                            continue;
                        }
                        for (int i = 0; i < scr.n_panels; i++)
                            problems += check_panel(&scr.panel[i], &tui_glyphs_utf8, where);
                        /* the full-text overlay holds what was cut */
                        st.overlay = TUI_OV_FULL;
                        tui_build_overlay(&scr, &st, &log, &tui_glyphs_utf8);
                        for (int i = 0; i < scr.n_panels; i++)
                            for (int f = 0; f < scr.panel[i].full.n; f++) {
                                char head[24];
                                snprintf(head, sizeof head, "%.20s", scr.panel[i].full.v[f].text);
                                if (tls_find(&scr.overlay.lines, head) < 0) {
                                    as_test_note("%s: v does not show the whole '%s'", where, head);
                                    problems++;
                                }
                            }
                    }
        tui_screen_free(&scr);
        as_driver_close(d);
    }
    CHECK(problems == 0, "%d screens: %d lines clipped, cut inside a word or with touching columns (notes above)",
          screens, problems);
}
