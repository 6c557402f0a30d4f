/* The TUI's keys without a terminal: prompts that check as they are typed, the heatmap's zoom
 * and go-to, the tensor view opening on the worst element however it is entered, the message
 * log, the overlays, and --inject naming the faults. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/lib/cli_util.h"
#include "tests/lib/harness.h"
#include "tests/lib/tiny_driver.h"
#include "tui/keys.h"
#include "tui/model.h"
#include "tui/prompt.h"

static AsDriver *open_tiny(const char *inject) { return as_test_tiny_driver(inject); }

static void type(TuiPrompt *p, const char *s)
{
    for (; *s; s++)
        tui_prompt_key(p, (unsigned char)*s);
}

TEST(tui_keys_number_prompt_takes_digits_in_range_only)
{
    TuiPrompt p;
    tui_prompt_number(&p, TUI_PK_PREFILL, "prefill tokens", 8, 1, 512);
    CHECK(p.ok && p.fresh && !strcmp(p.buf, "8"), "the default 8 is selected and acceptable");
    type(&p, "1x2");
    CHECK(!strcmp(p.buf, "12"), "a letter is refused, the digits are kept: '%s'", p.buf);
    tui_prompt_key(&p, 'x');
    CHECK(!p.ok && strstr(p.said, "digits only") && strstr(p.said, "1..512"), "and the refusal says why: %s", p.said);
    tui_prompt_key(&p, TUI_KEY_BACKSPACE);
    tui_prompt_key(&p, '2');
    CHECK(p.ok && !strcmp(p.buf, "12"), "editing on: '%s' is fine again (%s)", p.buf, p.said);
    type(&p, "000");
    CHECK(!p.ok && strstr(p.said, "1..512"), "12000 is out of range, said as typed: %s", p.said);
    CHECK(tui_prompt_key(&p, TUI_KEY_ENTER) == TUI_PROMPT_EDITING && p.kind == TUI_PK_PREFILL,
          "Enter does not accept what does not check: the prompt stays open");
    tui_prompt_key(&p, TUI_KEY_CTRL('u'));
    CHECK(!p.ok && !p.buf[0], "^U clears: empty is not a count");
    type(&p, "512");
    CHECK(tui_prompt_key(&p, TUI_KEY_ENTER) == TUI_PROMPT_ACCEPT && tui_prompt_value(&p) == 512, "512 accepted");
    CHECK(tui_prompt_key(&p, TUI_KEY_ESC) == TUI_PROMPT_CANCEL && p.kind == TUI_PK_NONE, "Esc closes");
    TuiLine l;
    tl_init(&l);
    tui_prompt_number(&p, TUI_PK_DECODE, "decode steps", 1, 1, 40);
    tui_prompt_line(&p, 80, &l);
    CHECK(l.nchars <= 80 && strstr(l.text, "decode steps: 1") && strstr(l.text, "1..40") && strstr(l.text, "Enter"),
          "the prompt line names the range and the keys within 80: %s", l.text);
    tui_prompt_line(&p, 30, &l);
    CHECK(l.nchars <= 30, "and fits 30 (%d): %s", l.nchars, l.text);
    tl_free(&l);
}

static bool is_hundred(void *ctx, const char *text, char *msg, size_t n)
{
    (void)ctx;
    bool ok = !strcmp(text, "hundred");
    snprintf(msg, n, ok ? "yes" : "not yet");
    return ok;
}

TEST(tui_keys_text_prompt_asks_its_check_as_typed)
{
    TuiPrompt p;
    tui_prompt_text(&p, TUI_PK_TENSOR, "word", "", is_hundred, NULL);
    CHECK(!p.ok && !strcmp(p.said, "not yet"), "checked when opened");
    type(&p, "hundre");
    CHECK(!p.ok && tui_prompt_key(&p, TUI_KEY_ENTER) == TUI_PROMPT_EDITING, "not acceptable yet");
    tui_prompt_key(&p, 'd');
    CHECK(p.ok && !strcmp(p.said, "yes") && tui_prompt_key(&p, TUI_KEY_ENTER) == TUI_PROMPT_ACCEPT,
          "acceptable once it checks");
}

/* A tiny run, q of layer 5 after a 20-token prefill, in the tensor view at w x h. */
static void tensor_view(AsDriver *d, TuiState *st, TuiScreen *s, TuiData *data, int w, int h)
{
    tui_data_from_driver(d, "tiny", data);
    tui_build(data, st, &tui_glyphs_utf8, w, h, s);
}

TEST(tui_keys_heatmap_zooms_to_one_element_a_cell_and_goes_to_one)
{
    AsDriver *d = open_tiny(NULL);
    AsError err = {0};
    REQUIRE(as_driver_prefill(d, 20, &err) == 0, "prefill: %s", err.msg);
    TuiData data;
    TuiScreen scr;
    tui_screen_init(&scr);
    TuiState st;
    tui_state_init(&st);
    st.layer = 5;
    st.tensor = AS_T_Q;
    tui_tensor_open(&st);
    tensor_view(d, &st, &scr, &data, 80, 24);
    const TuiHeatGeom *g = &scr.heat;
    REQUIRE(g->valid && g->rows == 80 && g->cols == 64, "q: 20 tokens x 4 heads by 64 channels");
    CHECK(g->zoom == 0 && g->rpc > 1 && g->n_r == tp_inner_h(&scr.panel[0]) - 1,
          "zoom 0: the whole tensor, several rows a cell, the cells fill the rows above the scale (%d rows, %d a "
          "cell)", g->n_r, g->rpc);
    int rows0 = g->rpc, max = g->max_zoom;
    CHECK(max > 0, "there is something to zoom into (max %d)", max);
    for (int z = 0; z < max + 2; z++) {
        REQUIRE(tui_view_key(&data, &st, &scr, '+'), "+ is the tensor view's");
        tensor_view(d, &st, &scr, &data, 80, 24);
    }
    CHECK(g->zoom == max && g->rpc == 1 && g->cpc == 1, "the deepest zoom: one element a cell (zoom %d, %dx%d)",
          g->zoom, g->rpc, g->cpc);
    CHECK(g->span_r == g->n_r && g->span_r < 80, "and the view shows a part of the rows (%d)", g->span_r);
    /* at the deepest level an arrow moves one element */
    int r0 = st.cur_r;
    tui_view_key(&data, &st, &scr, TUI_KEY_DOWN);
    CHECK(st.cur_r == r0 + 1 || r0 == 79, "down moves one row (%d -> %d)", r0, st.cur_r);
    tui_view_key(&data, &st, &scr, '-');
    tensor_view(d, &st, &scr, &data, 80, 24);
    CHECK(g->zoom == max - 1, "- zooms out one level (%d)", g->zoom);
    /* go to an element by its coordinates */
    int64_t c[3];
    char msg[160];
    CHECK(tui_heat_goto_parse(&data, &st, "token 12 head 3 channel 50", c, msg, sizeof msg) && c[0] == 12 &&
              c[1] == 3 && c[2] == 50,
          "token 12 head 3 channel 50: %s", msg);
    CHECK(tui_heat_goto_parse(&data, &st, "t 7 c 9", c, msg, sizeof msg) && c[0] == 7 && c[2] == 9,
          "first letters, the head left as it is: %s", msg);
    CHECK(tui_heat_goto_parse(&data, &st, "19 0 63", c, msg, sizeof msg) && c[0] == 19 && c[1] == 0 && c[2] == 63,
          "bare numbers fill the dimensions in order: %s", msg);
    CHECK(!tui_heat_goto_parse(&data, &st, "token 20", c, msg, sizeof msg) && strstr(msg, "0..19"),
          "beyond the tensor: %s", msg);
    CHECK(!tui_heat_goto_parse(&data, &st, "row 3", c, msg, sizeof msg) && strstr(msg, "token, head, channel"),
          "a dimension q does not have: %s", msg);
    CHECK(!tui_heat_goto_parse(&data, &st, "1 2 3 4", c, msg, sizeof msg) && strstr(msg, "too many"), "%s", msg);
    CHECK(!tui_heat_goto_parse(&data, &st, "head", c, msg, sizeof msg) && strstr(msg, "number"), "%s", msg);
    REQUIRE(tui_heat_goto_parse(&data, &st, "token 12 head 3 channel 50", c, msg, sizeof msg), "parse");
    tui_heat_goto(&data, &st, c);
    tensor_view(d, &st, &scr, &data, 80, 24);
    CHECK(st.cur_r == 12 * 4 + 3 && st.cur_c == 50 && g->rpc == 1 && g->cpc == 1,
          "the cursor at [12][3][50], one element a cell (%d, %d)", st.cur_r, st.cur_c);
    CHECK(tls_find(&scr.panel[1].lines, "cursor     token 12, head 3, channel 50") >= 0, "the inspector says where");
    const float *q = d->ref_run[5].t[AS_T_Q].data;
    char want[64];
    snprintf(want, sizeof want, "reference  %.8g", q[(12 * 4 + 3) * 64 + 50]);
    CHECK(tls_find(&scr.panel[1].lines, want) >= 0, "and the value there: %s", want);
    /* the cursor cell is drawn as the cursor */
    bool cursor_seen = false;
    for (int i = 0; i < scr.panel[0].lines.n; i++)
        for (int k = 0; k < scr.panel[0].lines.v[i].nchars; k++)
            cursor_seen |= scr.panel[0].lines.v[i].color[k] == TC_CURSOR;
    CHECK(cursor_seen, "the cursor is in view after the jump");
    CHECK(rows0 > 1, "zoom 0 had %d rows a cell", rows0);
    tui_screen_free(&scr);
    as_driver_close(d);
}

TEST(tui_keys_tensor_view_opens_on_the_worst_however_entered)
{
    AsDriver *d = open_tiny("ring-slot");
    AsError err = {0};
    REQUIRE(as_driver_prefill(d, 5, &err) == 0 && as_driver_decode(d, 1, &err) == 0, "run: %s", err.msg);
    const AsTensorDiff *df = &d->diff[0].t[AS_T_ST_RING];
    REQUIRE(df->worst >= 0, "the ring-slot fault leaves a worst element in layer 0's ring");
    TuiData data;
    TuiScreen scr;
    tui_screen_init(&scr);
    TuiState st;
    tui_state_init(&st);
    st.tensor = AS_T_ST_RING;
    tensor_view(d, &st, &scr, &data, 80, 24);
    /* 2 from the layers view */
    tui_state_set_view(&st, TV_TENSOR);
    tensor_view(d, &st, &scr, &data, 80, 24);
    CHECK(st.cur_r == df->worst_coord[0] && st.cur_c == df->worst_coord[1], "2 opens on the worst [%lld,%lld] (%d, %d)",
          (long long)df->worst_coord[0], (long long)df->worst_coord[1], st.cur_r, st.cur_c);
    /* moved away, back to the layers, Tab round to it again */
    st.cur_r = st.cur_c = 0;
    tui_view_key(&data, &st, &scr, TUI_KEY_ESC);
    CHECK(st.view == TV_LAYERS, "Esc goes back to the layers");
    tui_state_set_view(&st, TV_TENSOR);
    tensor_view(d, &st, &scr, &data, 80, 24);
    CHECK(st.cur_r == df->worst_coord[0] && st.cur_c == df->worst_coord[1], "entered again: on the worst again");
    /* moving inside the view keeps the cursor where it was put */
    tui_view_key(&data, &st, &scr, TUI_KEY_LEFT);
    tensor_view(d, &st, &scr, &data, 80, 24);
    CHECK(st.cur_c == df->worst_coord[1] - 1 || df->worst_coord[1] == 0, "an arrow moves from there");
    /* w goes back to the worst */
    tui_view_key(&data, &st, &scr, 'w');
    tensor_view(d, &st, &scr, &data, 80, 24);
    CHECK(st.cur_c == df->worst_coord[1], "w: the worst again");
    /* without an engine: the largest |ref| */
    AsDriver *r = open_tiny(NULL);
    REQUIRE(as_driver_prefill(r, 5, &err) == 0, "prefill: %s", err.msg);
    TuiState s2;
    tui_state_init(&s2);
    s2.layer = 5;
    s2.tensor = AS_T_Q;
    tui_tensor_open(&s2);
    tensor_view(r, &s2, &scr, &data, 80, 24);
    const float *q = r->ref_run[5].t[AS_T_Q].data;
    int64_t n = as_ht_numel(&r->ref_run[5].t[AS_T_Q]), at = 0;
    for (int64_t i = 1; i < n; i++)
        if (fabsf(q[i]) > fabsf(q[at]))
            at = i;
    CHECK(s2.cur_r == at / 64 && s2.cur_c == at % 64, "no engine: the largest |ref| at row %lld col %lld (%d, %d)",
          (long long)(at / 64), (long long)(at % 64), s2.cur_r, s2.cur_c);
    tui_screen_free(&scr);
    as_driver_close(r);
    as_driver_close(d);
}

TEST(tui_keys_message_log_keeps_the_last_100_with_times)
{
    TuiMsgLog log;
    tui_log_init(&log);
    time_t t0 = 1700000000;
    for (int i = 0; i < 130; i++) {
        char m[64];
        snprintf(m, sizeof m, "message %d", i);
        tui_log_add(&log, t0 + i, i == 129 ? TC_BAD : TC_NORMAL, m);
    }
    CHECK(log.n == TUI_LOG_N, "%d kept", log.n);
    CHECK(!strcmp(tui_log_at(&log, 0)->text, "message 30") && !strcmp(tui_log_at(&log, 99)->text, "message 129"),
          "the oldest kept is 30, the newest 129");
    TuiPanel p;
    tp_init(&p);
    p.r = (TuiRect){0, 0, 80, 21};
    tui_model_log(&log, &p);
    struct tm tm;
    char hms[16];
    time_t last = t0 + 129;
    localtime_r(&last, &tm);
    strftime(hms, sizeof hms, "%H:%M:%S", &tm);
    int i = tls_find(&p.lines, "message 129");
    CHECK(i == p.lines.n - 1 && strstr(p.lines.v[i].text, hms), "the newest last, with its time %s: %s", hms,
          i >= 0 ? p.lines.v[i].text : "");
    CHECK(tls_find(&p.lines, "message 29") < 0 && tls_find(&p.lines, "message 30") == 0, "100 of them");
    tp_free(&p);
    /* a long message wraps under its text */
    tui_log_add(&log, t0, TC_NORMAL, "first divergence: step 3, layer 5: q MISMATCH max_abs 0.5 > tol 0.01 at token 0, "
                "head 1, channel 56: got 1.5 want 2 (3 ulp); 12 bad, 0 flips");
    tp_init(&p);
    p.r = (TuiRect){0, 0, 80, 21};
    tui_model_log(&log, &p);
    int a = tls_find(&p.lines, "first divergence");
    CHECK(a >= 0 && tls_find(&p.lines, "0 flips") > a && !strncmp(p.lines.v[a + 1].text, "           ", 11),
          "wrapped under its text, nothing lost");
    if (as_test_failed())
        for (int k = a; k >= 0 && k < p.lines.n; k++)
            as_test_note("%s", p.lines.v[k].text);
    for (int k = 0; k < p.lines.n; k++)
        CHECK(p.lines.v[k].nchars <= tp_inner_w(&p), "line %d fits", k);
    tp_free(&p);
}

TEST(tui_keys_overlays_help_log_and_full_text)
{
    AsDriver *d = open_tiny(NULL);
    AsError err = {0};
    REQUIRE(as_driver_prefill(d, 20, &err) == 0, "prefill: %s", err.msg);
    TuiData data;
    tui_data_from_driver(d, "tiny", &data);
    TuiMsgLog log;
    tui_log_init(&log);
    tui_log_add(&log, 0, TC_GOOD, "prefill of 20 tokens: 10 layers run (0.20 s)");
    data.log = &log;
    TuiScreen scr;
    tui_screen_init(&scr);
    TuiState st;
    tui_state_init(&st);
    st.view = TV_CAND;
    st.layer = 0; /* shows layer 5's grid: "(source; layer 0 has none)" makes the title long */
    st.query = 19;
    tui_build(&data, &st, &tui_glyphs_utf8, 80, 24, &scr);
    bool cut = false;
    for (int i = 0; i < scr.n_panels; i++)
        cut |= scr.panel[i].full.n > 0;
    REQUIRE(cut, "at 80 columns the candidates view cuts something (its title)");
    st.overlay = TUI_OV_FULL;
    tui_build_overlay(&scr, &st, &log, &tui_glyphs_utf8);
    CHECK(scr.overlay.used && tls_find(&scr.overlay.lines, "query 19 (position 19)") >= 0,
          "v shows the title whole: %s", scr.overlay.lines.n ? scr.overlay.lines.v[0].text : "");
    st.overlay = TUI_OV_LOG;
    tui_build_overlay(&scr, &st, &log, &tui_glyphs_utf8);
    CHECK(tls_find(&scr.overlay.lines, "prefill of 20 tokens") >= 0, "L shows the log");
    st.overlay = TUI_OV_HELP;
    tui_build_overlay(&scr, &st, &log, &tui_glyphs_utf8);
    CHECK(tls_find(&scr.overlay.lines, "the last 100 messages") >= 0 && tls_find(&scr.overlay.lines, "zoom in") >= 0 &&
              tls_find(&scr.overlay.lines, "go to an element") >= 0,
          "the help names L, + - and G");
    st.overlay = TUI_OV_NONE;
    tui_build_overlay(&scr, &st, &log, &tui_glyphs_utf8);
    CHECK(!scr.overlay.used, "none: nothing covers the views");
    tui_screen_free(&scr);
    as_driver_close(d);
}

TEST(tui_keys_inject_with_a_wrong_name_lists_the_faults)
{
    AsCliResult r;
    as_cli_run(&r, AS_ARGS("tui", "--inject", "ring-slott"));
    CHECK(r.status == 2, "exit 2 (%d)", r.status);
    CHECK(strstr(r.err, "unknown fault") && strstr(r.err, "'ring-slott'") && strstr(r.err, "ring-slot, rope-backwards") &&
              strstr(r.err, "stale-keys"),
          "the faults listed: %s", r.err);
    const char *hint = strstr(r.err, "--help");
    CHECK(hint && !strstr(hint + 1, "--help") && !strstr(r.err, "help tui"), "one hint, not two: %s", r.err);
    CHECK(strchr(r.err, '\n') == strrchr(r.err, '\n'), "one line: %s", r.err);
}
