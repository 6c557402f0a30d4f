#include "tui/keys.h"

#include <string.h>

#include "tui/model.h"

#define V_ALL ((1u << TV_COUNT) - 1)
#define V(x) (1u << (x))
#define V_QUERY (V(TV_RING) | V(TV_CAND) | V(TV_TOPK) | V(TV_TENSOR))

typedef struct {
    const char *key;        /* as shown */
    const char *label;      /* in the key line */
    const char *help;       /* on the help screen */
    unsigned views;         /* where the key line shows it */
    int prio;               /* 1 most important; 0 help screen only */
} KeyDef;

static const KeyDef keys[] = {
    {"n", "Layer", "run the next layer (after a finished step: starts a decode step)", V_ALL, 2},
    {"f", "Step", "finish the current step (every remaining layer)", V_ALL, 3},
    {"p", "Prefill", "prefill N tokens (asks N; resets every state)", V_ALL, 4},
    {"d", "Decode", "decode N steps (asks N; finishes the current step first)", V_ALL, 4},
    {"r", "Diverge", "run to the first divergence (asks the most decode steps)", V_ALL, 7},
    {"D", "Diagnose", "diagnose the layer's run: the catalogue's wrong conventions that reproduce its first "
     "mismatch (docs/DIAGNOSE.md)", V(TV_LAYERS) | V(TV_TENSOR), 8},
    {"Tab", "Focus", "layers view: switch between the layer list and the tensor table", V(TV_LAYERS), 5},
    {"Enter", "Open", "open the selected tensor: heatmap and value inspector", V(TV_LAYERS), 5},
    {"@arrows", "Cursor", "tensor view: move the heatmap cursor one cell", V(TV_TENSOR), 2},
    {"+-", "Zoom", "tensor view: zoom in / out (the deepest level: one element a cell)", V(TV_TENSOR), 2},
    {"G", "Go to", "tensor view: go to an element (asks: token 12 head 3 channel 500)", V(TV_TENSOR), 3},
    {"w", "Worst", "tensor view: cursor to the worst element", V(TV_TENSOR), 4},
    {"<>", "Head", "previous / next head (H asks)", V(TV_TENSOR), 5},
    {",.", "Query", "previous / next query token (Q asks)", V_QUERY, 3},
    {"[]", "Layer", "previous / next layer (g asks)", V(TV_RING) | V(TV_CAND) | V(TV_TOPK) | V(TV_TENSOR), 4},
    {"1-6", "View", "views: 1 layers, 2 tensor, 3 ring, 4 caches, 5 candidates, 6 top-k (Tab in others: next view)",
     V_ALL, 3},
    {"s/S", "Save", "save the current step (s) or the whole run (S) to HDF5 (asks the path)", V_ALL, 6},
    {"m", "Mode", "toggle the comparison mode: teacher / free (from the next layer)", V_ALL, 9},
    {"L", "Log", "the last 100 messages with their times", V_ALL, 8},
    {"v", "Full", "the whole text of the lines cut to fit (marked with an ellipsis)", V_ALL, 9},
    {"Esc", "Back", "back to the layers view; while busy: cancel", V(TV_TENSOR), 3},
    {"?", "Help", "this screen", V_ALL, 1},
    {"q", "Quit", "quit (while busy: cancels, then quits)", V_ALL, 1},
    /* help only */
    {"@updown", "", "move in the focused list (layer list / tensor table)", 0, 0},
    {"PgUp PgDn", "", "scroll the view; tensor view: a page of cells", 0, 0},
    {"g", "", "jump to a layer (asks its number)", 0, 0},
    {"Q", "", "choose the query token (asks)", 0, 0},
    {"H", "", "choose the head (asks)", 0, 0},
    {"T", "", "choose the tensor by name (asks), opens it", 0, 0},
    {"Esc c", "", "while busy: cancel the running work (it stops inside the running layer)", 0, 0},
};
#define N_KEYS ((int)(sizeof keys / sizeof keys[0]))

/* Keys named by glyph set: "@arrows", "@updown". */
static const char *key_text(const char *k, const TuiGlyphs *g)
{
    if (!strcmp(k, "@arrows"))
        return g->utf8 ? "\u2190\u2191\u2193\u2192" : "Arrows";
    if (!strcmp(k, "@updown"))
        return g->utf8 ? "\u2191\u2193 j k" : "Up Down j k";
    return k;
}

static void item(TuiLine *l, const char *k, const char *label)
{
    tl_put(l, TC_KEY, k);
    tl_add(l, TC_NORMAL, " %s ", label);
}

static int item_len(const char *k, const char *label) { return tui_utf8_len(k) + tui_utf8_len(label) + 2; }

void tui_key_line(TuiLine *l, int width, TuiView v, TuiKeyLineMode mode, const TuiGlyphs *g)
{
    tl_clear(l);
    if (mode == TUI_KL_BUSY) {
        item(l, "Esc", "Cancel");
        item(l, "?", "Help");
        item(l, "L", "Log");
        item(l, "q", "Quit");
        return;
    }
    if (mode == TUI_KL_HELP) {
        item(l, "any key", "Close");
        item(l, g->utf8 ? "\u2191\u2193 PgUp PgDn" : "Up Down PgUp PgDn", "Scroll");
        item(l, "q", "Quit");
        return;
    }
    if (mode == TUI_KL_SMALL) {
        item(l, "q", "Quit");
        return;
    }
    /* choose by priority, show in table order */
    bool take[N_KEYS] = {0};
    int used = 0;
    for (int prio = 1; prio <= 9; prio++)
        for (int i = 0; i < N_KEYS; i++) {
            if (keys[i].prio != prio || !(keys[i].views & (1u << v)))
                continue;
            int n = item_len(key_text(keys[i].key, g), keys[i].label);
            if (used + n <= width) {
                take[i] = true;
                used += n;
            }
        }
    for (int i = 0; i < N_KEYS; i++)
        if (take[i])
            item(l, key_text(keys[i].key, g), keys[i].label);
}

void tui_model_help_lines(TuiLines *ls, const TuiGlyphs *g, int width)
{
    tls_add_wrapped(ls, TC_TITLE,
                    "attnscope: steps the GPU engine and the CPU reference layer by layer and shows where they differ",
                    width, 2);
    tls_add(ls, TC_NORMAL, " ");
    for (int i = 0; i < N_KEYS; i++) {
        char text[512];
        const char *k = key_text(keys[i].key, g);
        snprintf(text, sizeof text, "  %s%*s  %s", k, 12 - tui_utf8_len(k), "", keys[i].help);
        int first = ls->n;
        tls_add_wrapped(ls, TC_NORMAL, text, width, 16);
        /* the key in its colour */
        if (first < ls->n) {
            TuiLine *l = &ls->v[first];
            for (int c = 2; c < 2 + tui_utf8_len(k) && c < l->nchars; c++)
                l->color[c] = TC_KEY;
        }
    }
    tls_add(ls, TC_NORMAL, " ");
    tls_add(ls, TC_TITLE, "views");
    tls_add_wrapped(ls, TC_NORMAL, "  1 layers     each layer's ratio, roles and verdict; the current layer's tensors", width, 15);
    tls_add_wrapped(ls, TC_NORMAL, "  2 tensor     |diff| heatmap (|ref| without an engine) and the values at the cursor", width, 15);
    tls_add_wrapped(ls, TC_NORMAL, "  3 ring       window slots oldest to newest, the slot written, the slots attended", width, 15);
    tls_add_wrapped(ls, TC_NORMAL, "  4 caches     compressed / index-key caches, whose keys each index source scored", width, 15);
    tls_add_wrapped(ls, TC_NORMAL, "  5 candidates the block grid of a query: kept, dropped, pinned newest block", width, 15);
    tls_add_wrapped(ls, TC_NORMAL, "  6 top-k      engine and reference selections side by side, scores with the cut", width, 15);
    tls_add(ls, TC_NORMAL, " ");
    tls_add(ls, TC_TITLE, "verdicts");
    TuiLine l;
    tl_init(&l);
    static const struct {
        TuiColor c;
        const char *word, *what;
    } verdicts[] = {{TC_PASS, "pass", " within tolerance  "},        {TC_FLIPS, "flips", " benign quantisation flips  "},
                    {TC_NEARTIE, "near-tie", " selection tie  "},    {TC_MISMATCH, "MISMATCH", "  "},
                    {TC_REFONLY, "ref only", " no checked side  "}, {TC_DIM, "not run", ""}};
    tl_put(&l, TC_NORMAL, "  ");
    for (size_t i = 0; i < sizeof verdicts / sizeof verdicts[0]; i++)
        tl_item(&l, verdicts[i].c, verdicts[i].word, TC_NORMAL, verdicts[i].what);
    tls_add_wrapped_line(ls, &l, width, 4);
    tl_free(&l);
    char gl[256];
    snprintf(gl, sizeof gl, "  glyphs: %s the selected line, %s the next layer to run, %s kept block, %s dropped, %s pinned "
             "newest block", g->marker, g->next, g->block_kept, g->block_dropped, g->block_pinned);
    tls_add_wrapped(ls, TC_NORMAL, gl, width, 10);
}

void tui_model_help(const TuiGlyphs *g, TuiPanel *p)
{
    snprintf(p->title, sizeof p->title, "help: keys and views (any key closes)");
    tls_clear(&p->lines);
    tui_model_help_lines(&p->lines, g, tp_inner_w(p));
}
