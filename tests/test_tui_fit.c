/* Fitting text to the panels without curses: a line is cut after its last whole word with an
 * ellipsis, a table drops columns by priority (the name and the verdict stay) and never lets two
 * columns touch, the status line is spelled shorter rather than losing the step's verdict. */
#include <stdlib.h>
#include <string.h>

#include "tests/lib/harness.h"
#include "tui/model.h"
#include "tui/table.h"

static const char *ELL = "\u2026";

/* The text of line l before its trailing " …" (static buffer). */
static const char *before_ellipsis(const TuiLine *l)
{
    static char buf[1024];
    snprintf(buf, sizeof buf, "%s", l->text ? l->text : "");
    size_t n = strlen(buf), e = strlen(ELL);
    if (n >= e && !strcmp(buf + n - e, ELL))
        buf[n - e] = '\0';
    n = strlen(buf);
    while (n && buf[n - 1] == ' ')
        buf[--n] = '\0';
    return buf;
}

TEST(tui_fit_cuts_after_a_whole_word)
{
    static const char text[] = " first divergence: step 3, layer 5: q MISMATCH max_abs 0.5 at token 0, head 1, channel 56: "
                               "got 1.5 want 2 (3 ulp)";
    for (int w = 20; w <= 100; w += 7) {
        TuiLine l;
        tl_init(&l);
        tl_put(&l, TC_MISMATCH, text);
        bool cut = tl_fit(&l, w, ELL);
        CHECK(l.nchars <= w, "width %d: %d characters", w, l.nchars);
        CHECK(cut == ((int)strlen(text) > w), "width %d: cut only when longer", w);
        if (cut) {
            const char *kept = before_ellipsis(&l);
            size_t k = strlen(kept);
            CHECK(!strncmp(text, kept, k) && (text[k] == ' ' || text[k] == '\0'),
                  "width %d: '%s' is the text up to a word's end", w, kept);
            CHECK(l.color[l.nchars - 1] == TC_MISMATCH, "width %d: the ellipsis in the colour it follows", w);
        }
        tl_free(&l);
    }
    /* one word wider than the room: cut inside it (nothing else fits) */
    TuiLine l;
    tl_init(&l);
    tl_put(&l, TC_NORMAL, "/a/very/long/path/without/any/space/in/it.h5");
    CHECK(tl_fit(&l, 12, ELL) && l.nchars == 12, "a single long word still fits: %s", l.text);
    tl_free(&l);
}

TEST(tui_fit_wraps_a_coloured_line_keeping_colours)
{
    TuiLine l;
    tl_init(&l);
    tl_put(&l, TC_NORMAL, "state.ring: ");
    tl_put(&l, TC_MISMATCH, "MISMATCH max_abs 4.125 > tol 0.02354 at slot 4, channel 8: got 2.25 want -1.875");
    TuiLines ls;
    tls_init(&ls);
    tls_add_wrapped_line(&ls, &l, 30, 4);
    CHECK(ls.n >= 3, "three or more lines at 30 (%d)", ls.n);
    int total = 0;
    for (int i = 0; i < ls.n; i++) {
        CHECK(ls.v[i].nchars <= 30, "line %d fits: '%s'", i, ls.v[i].text);
        total += ls.v[i].nchars;
        if (i > 0)
            CHECK(!strncmp(ls.v[i].text, "    ", 4), "continuation %d indented: '%s'", i, ls.v[i].text);
    }
    int m = tls_find(&ls, "MISMATCH");
    CHECK(m == 0 && ls.v[0].color[12] == TC_MISMATCH && ls.v[0].color[0] == TC_NORMAL, "colours kept per character");
    CHECK(tls_find(&ls, "-1.875") > 0, "nothing lost: the last word is there");
    tls_free(&ls);
    tl_free(&l);
}

static void cell(TuiLine *row, int c, TuiColor col, const char *text) { tl_put(&row[c], col, text); }

/* Column starts of region 0 that a line crosses: the character before each is a space. */
static bool columns_apart(const TuiLine *l, const TuiColumns *cols)
{
    for (int c = 1; c < cols->n_cols; c++) {
        int x = cols->x[c];
        if (x >= l->nchars)
            continue;
        size_t b = tl_offset(l, x - 1);
        if (l->text[b] != ' ')
            return false;
    }
    return true;
}

TEST(tui_fit_table_drops_by_priority_and_keeps_name_and_verdict)
{
    const TuiColumn cols[] = {{"tensor", 0, false, false}, {"shape", 3, false, false}, {"verdict", 0, false, false},
                              {"max|diff|", 2, false, false}, {"tol", 4, false, false}, {"worst at", 1, false, false},
                              {"", 0, false, false}};
    static const char *rows[][7] = {
        {"state.part_score", "2x64", "MISMATCH", "0.387", "0.0114", "[0,1,3]", "122 bad 4 flips inherited from layer 3"},
        {"rows_a", "8x64", "pass", "0", "0.0235", "", ""},
        {"q", "1x4x64", "flips", "0.0273", "0.0277", "[0,2,46]", "2 flips"},
    };
    for (int width = 30; width <= 120; width += 6) {
        TuiTable t;
        tt_init(&t, cols, 7, 1);
        for (int r = 0; r < 3; r++) {
            TuiLine *row = tt_row(&t);
            REQUIRE(row, "row");
            tl_put(tt_lead(&t), TC_NORMAL, r == 0 ? ">" : " ");
            for (int c = 0; c < 7; c++)
                cell(row, c, c == 2 ? TC_MISMATCH : TC_NORMAL, rows[r][c]);
        }
        TuiPanel p;
        tp_init(&p);
        tt_render(&t, width, ELL, &p);
        REQUIRE(p.lines.n == 3 && p.n_tables == 1, "width %d: 3 rows, one table", width);
        for (int r = 0; r < 3; r++) {
            const TuiLine *l = &p.lines.v[r];
            CHECK(l->nchars <= width, "width %d, row %d fits (%d)", width, r, l->nchars);
            CHECK(strstr(l->text, rows[r][0]) && strstr(l->text, rows[r][2]), "width %d, row %d keeps %s and %s: '%s'",
                  width, r, rows[r][0], rows[r][2], l->text);
            CHECK(columns_apart(l, &p.table[0]), "width %d, row %d: no two columns touch: '%s'", width, r, l->text);
        }
        CHECK(columns_apart(&p.header, &p.table[0]) && p.header.nchars <= width, "width %d: the header too: '%s'", width,
              p.header.text);
        /* the columns go in priority order: shape (3) before max (2) before worst (1); tol (4) first */
        bool has_tol = strstr(p.header.text, "tol") != NULL, has_shape = strstr(p.header.text, "shape") != NULL;
        bool has_max = strstr(p.header.text, "max|diff|") != NULL, has_at = strstr(p.header.text, "worst at") != NULL;
        CHECK((!has_tol || has_shape) && (!has_shape || has_max) && (!has_max || has_at),
              "width %d: dropped by priority: %s", width, p.header.text);
        if (!has_tol || strstr(p.lines.v[0].text, ELL))
            CHECK(p.full.n > 0 && strstr(p.full.v[0].text, "0.0114") && strstr(p.full.v[0].text, "inherited from layer 3"),
                  "width %d: what was dropped or cut is kept whole for the v overlay", width);
        else
            CHECK(p.full.n == 0, "width %d: nothing lost, nothing kept", width);
        tp_free(&p);
        tt_free(&t);
    }
}

TEST(tui_fit_status_keeps_the_verdict)
{
    AsConfig cfg;
    AsError err;
    REQUIRE(as_config_preset("tiny", &cfg, &err) == 0, "tiny");
    AsLayerDiff *diff = calloc((size_t)cfg.n_layers, sizeof *diff);
    bool *done = calloc((size_t)cfg.n_layers, sizeof *done);
    AsRun *runs = calloc((size_t)cfg.n_layers, sizeof *runs);
    REQUIRE(diff && done && runs, "memory");
    for (int l = 0; l < cfg.n_layers; l++)
        done[l] = true, diff[l].verdict = AS_V_PASS, diff[l].worst_tensor = AS_T_COUNT;
    diff[7].verdict = AS_V_MISMATCH;
    diff[7].worst_tensor = AS_T_ST_PART_SC;
    TuiData d = {.cfg = &cfg, .model_name = "DeepSeek-V4.1-Flash-synthetic-released-layout", .precision = "fp8",
                 .cur = {.step = 1234, .prefill = false, .start_pos = 40960, .s = 1, .next_layer = 10},
                 .mode = AS_MODE_TEACHER, .got_kind = AS_GOT_TWIN, .inject = "cand-mask-off",
                 .note = "no CUDA device: the fault runs in a reference twin", .ref = runs, .got = runs, .diff = diff,
                 .done = done};
    for (int w = 80; w <= 200; w += 40) {
        TuiLine l;
        tl_init(&l);
        tui_model_status(&d, w, &l);
        CHECK(l.nchars <= w, "width %d: %d characters", w, l.nchars);
        CHECK(strstr(l.text, "MISMATCH") && strstr(l.text, "state.part_score") && strstr(l.text, "7"),
              "width %d: the step's verdict, its layer and tensor: %s", w, l.text);
        CHECK(strstr(l.text, "1234") && strstr(l.text, "40960") && strstr(l.text, "cand-mask-off"),
              "width %d: step, position and fault: %s", w, l.text);
        if (w >= 200)
            CHECK(strstr(l.text, "start_pos 40960") && strstr(l.text, "at layer 7"), "width %d: spelled out: %s", w,
                  l.text);
        tl_free(&l);
    }
    free(diff);
    free(done);
    free(runs);
}
