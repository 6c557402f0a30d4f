/* The TUI's layout for the terminal size, the ASCII fallback and the key line, without a
 * terminal. */
#include <stdlib.h>
#include <string.h>

#include "tests/lib/harness.h"
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
    ps[n++] = &s->help;
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
    setenv("ATTNSCOPE_CACHE", as_test_tmpdir(), 1);
    AsDriverOptions o;
    as_driver_options_default(&o);
    o.quiet = true;
    o.no_engine = true;
    o.inject = "fp4-scale";
    AsDriver *d = NULL;
    AsError err = {0};
    REQUIRE(as_driver_open(&o, &d, &err) == 0, "open: %s", err.msg);
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
        st.help = v == TV_LAYERS;
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
    setenv("ATTNSCOPE_CACHE", as_test_tmpdir(), 1);
    AsDriverOptions o;
    as_driver_options_default(&o);
    o.quiet = true;
    o.no_engine = true;
    o.inject = "sink-ignored";
    AsDriver *d = NULL;
    AsError err = {0};
    REQUIRE(as_driver_open(&o, &d, &err) == 0, "open: %s", err.msg);
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
