/* The view models: what each view shows, built from the driver's data into panels of lines
 * (tui/text.h). Nothing here calls curses, so every view is unit-tested (tests/test_tui_*.c).
 *
 * The data is read through TuiData, a set of pointers into the driver (tui_data_from_driver)
 * or into runs a test builds by hand. The UI builds only while the worker is idle. */
#ifndef AS_TUI_MODEL_H
#define AS_TUI_MODEL_H

#include "driver/driver.h"
#include "tui/layout.h"
#include "tui/msglog.h"
#include "tui/text.h"

typedef struct {
    const AsConfig *cfg;
    const char *model_name;     /* shown in the status line */
    const char *precision;      /* "fp8" / "bf16": what the model runs in, beside its name */
    AsStepInfo cur;             /* step -1: nothing run yet */
    int next_pos;
    AsMode mode;
    AsGotKind got_kind;
    const char *got_name;       /* "engine", "ref+fault:NAME", "none" */
    const char *note;           /* how the driver runs ("reference only: no CUDA device") */
    const char *inject;         /* the fault injected into the checked side, or NULL */
    const AsRun *ref;           /* [n_layers] latest run of each layer (this step when done[l]) */
    const AsRun *got;           /* [n_layers], NULL without a checked side */
    const AsLayerDiff *diff;    /* [n_layers] */
    const bool *done;           /* [n_layers] run in the current step */
    unsigned gen;               /* changes whenever the driver's data may have (the heatmap's cache key) */
    const TuiMsgLog *log;       /* the message log (the app's), or NULL */
} TuiData;

void tui_data_from_driver(const AsDriver *d, const char *model_name, TuiData *out);

/* What covers the views: the help (?), the message log (L), the whole text of the lines cut
 * to fit (v). */
typedef enum { TUI_OV_NONE, TUI_OV_HELP, TUI_OV_LOG, TUI_OV_FULL } TuiOverlay;

/* What the user chose; kept between builds. */
typedef struct {
    TuiView view;
    int focus;                  /* TV_LAYERS: 0 the layer list, 1 the tensor table */
    int layer, query, head;
    AsTensorId tensor;
    int cur_r, cur_c;           /* heatmap cursor, element coordinates of the shown slice */
    int zoom;                   /* heatmap: 0 the whole tensor; each level halves the elements a cell */
    int org_r, org_c;           /* heatmap: the first element shown (the view pans with the cursor) */
    bool heat_open;             /* heatmap: put the cursor on the worst element at the next build */
    int top[TV_COUNT][TUI_MAX_PANELS];  /* scroll position of each panel */
    int scroll;                 /* PgUp/PgDn offset of the views without a selection */
    TuiOverlay overlay;
    int overlay_top;
} TuiState;

void tui_state_init(TuiState *st);
/* Keeps layer, query, head and tensor within what the data holds. */
void tui_state_clamp(TuiState *st, const TuiData *d);

/* Heatmap geometry (for the cursor keys). */
typedef struct {
    bool valid;
    int rows, cols;             /* element extent of the slice */
    int rpc, cpc;               /* elements per cell (at the cursor) */
    int heads;                  /* size of the head axis (3-D tensors), else 0 */
    int zoom, max_zoom;         /* max_zoom: one element per cell */
    int span_r, span_c;         /* elements in view */
    int n_r, n_c;               /* cells in view */
} TuiHeatGeom;

/* The heatmap's maxima of one tensor's |diff| (or |value|), computed once for the data they were
 * made from, so that the keys that move and zoom do not rescan the tensor: for each column, the
 * maximum over bands of 16, 256, 4096... rows (a pyramid, each level from the one below); and the
 * cells of the last view drawn, reused while only the cursor moves. */
#define TUI_HEAT_BAND 16
#define TUI_HEAT_LEVELS 6
typedef struct {
    const void *got, *want;     /* the key: the data, its generation, the slice */
    unsigned gen;
    int layer;
    AsTensorId id;
    int R, C;
    bool diff;
    int n_levels;
    int bands[TUI_HEAT_LEVELS];     /* ceil(R / 16^(k+1)) */
    float *colmax[TUI_HEAT_LEVELS]; /* [bands][C]; +inf where a side is NaN or they differ by an infinity */
    double vmax;                /* the largest finite maximum */
    bool any_inf;
    /* the cells of the last view: its geometry, then [n_r][n_c] maxima */
    long long view_key[8];
    double *cells;
    int cells_cap;
} TuiHeatCache;

typedef struct {
    TuiLayout lay;
    TuiLine status;
    int n_panels;
    TuiPanel panel[TUI_MAX_PANELS];
    TuiPanel overlay;           /* the help, the log or the full text, when one is up */
    TuiHeatGeom heat;
    TuiHeatCache heat_cache;
    char as_of[96];             /* what the panels show: "as of step 15, layer 3" */
    bool stale;                 /* the panels' titles say as_of (the worker is computing) */
} TuiScreen;

void tui_screen_init(TuiScreen *s);
void tui_screen_free(TuiScreen *s);

/* Lays out view st->view for a cols x rows terminal and fills every panel, each fitted to its
 * width (tp_fit), the status line and the overlay st->overlay (the log: d->log). */
void tui_build(const TuiData *d, TuiState *st, const TuiGlyphs *g, int cols, int rows, TuiScreen *s);
/* The overlay alone, from what the screen already holds (callable while the worker is busy). */
void tui_build_overlay(TuiScreen *s, TuiState *st, const TuiMsgLog *log, const TuiGlyphs *g);
/* The screen while the model opens (no data yet): what opens, what is being done, which keys
 * work meanwhile. */
void tui_build_opening(TuiScreen *s, const char *name, const char *phase, int cols, int rows, const TuiGlyphs *g);
/* Marks the built panels as a snapshot: each title starts with s->as_of (once; the next build
 * clears it). */
void tui_screen_mark_stale(TuiScreen *s, const TuiGlyphs *g);
/* Re-lays out an already built screen for a new size without the data (used while the worker
 * is busy: the content is clipped to the new rects until the next build). */
void tui_relayout(TuiScreen *s, TuiView v, int n_layers, int cols, int rows);

/* ---- per view (called by tui_build; public for the tests) ---------------------------------- */

/* The verdict of layer l in the current step, as shown in the layer list. */
const char *tui_layer_verdict(const TuiData *d, int l, TuiColor *c);
TuiColor tui_verdict_color(AsVerdict v);
/* The tensors present on either side of layer l, in table order; returns the count. */
int tui_layer_tensors(const TuiData *d, int l, AsTensorId out[AS_T_COUNT]);
/* Layer l ran in the current step but gave its tensors up to the run budget (ATTNSCOPE_RUN_BUDGET_MB):
 * its verdicts stay, its values (caches' copies too) are gone. */
bool tui_layer_dropped(const TuiData *d, int l);

void tui_model_layers(const TuiData *d, TuiState *st, const TuiGlyphs *g, TuiPanel *p);
void tui_model_tensors(const TuiData *d, TuiState *st, const TuiGlyphs *g, TuiPanel *p);
/* cache may be NULL (computed for this build alone). */
void tui_model_heatmap(const TuiData *d, TuiState *st, const TuiGlyphs *g, TuiPanel *heat, TuiPanel *insp,
                       TuiHeatGeom *geom, TuiHeatCache *cache);
void tui_heat_cache_free(TuiHeatCache *c);
void tui_model_ring(const TuiData *d, TuiState *st, const TuiGlyphs *g, TuiPanel *p);
void tui_model_caches(const TuiData *d, TuiState *st, const TuiGlyphs *g, TuiPanel *p);
void tui_model_cand(const TuiData *d, TuiState *st, const TuiGlyphs *g, TuiPanel *grid, TuiPanel *blocks);
void tui_model_topk(const TuiData *d, TuiState *st, const TuiGlyphs *g, TuiPanel *spark, TuiPanel *sets);
void tui_model_status(const TuiData *d, int width, TuiLine *out);
void tui_model_help(const TuiGlyphs *g, TuiPanel *p);
/* The whole text of every line the panels cut, panel by panel, wrapped to p. */
void tui_model_full(const TuiScreen *s, const TuiGlyphs *g, TuiPanel *p);
/* " (as of step 15: not run in step 16 yet)" when layer l's runs are not of the current step,
 * else "". */
void tui_run_age(const TuiData *d, int l, char *buf, size_t n);

/* ---- each view's keys (tui/keys.h names them), beside its model --------------------------- */

/* Offers a key to the view st->view of the built screen scr: true when the view took it (the
 * state changed; the caller rebuilds). The keys every view shares are the caller's. */
bool tui_view_key(const TuiData *d, TuiState *st, const TuiScreen *scr, int key);
bool tui_layers_key(const TuiData *d, TuiState *st, int key);
bool tui_tensor_key(const TuiData *d, TuiState *st, const TuiHeatGeom *hg, int key);
/* The views without a selection: the keys scroll panel `panel`. */
bool tui_scroll_key(TuiState *st, int panel, int key);
/* Opens the tensor view on st->tensor of st->layer: the whole tensor (zoom 0), the cursor on its
 * worst element. */
void tui_tensor_open(TuiState *st);
/* Switches to view v; entering the tensor view opens it on the worst element. */
void tui_state_set_view(TuiState *st, TuiView v);
/* The go-to prompt of the tensor view: "token 12 head 3 channel 500" (dimension names or their
 * first letters, in any order, each followed by its index; bare numbers fill the dimensions in
 * order; missing ones keep the cursor's). Fills coord and returns true when the text names an
 * element of the shown tensor; else msg says what is wrong. On success msg says where it goes. */
bool tui_heat_goto_parse(const TuiData *d, const TuiState *st, const char *text, int64_t coord[3], char *msg,
                         size_t n);
/* Moves the cursor there, one element a cell. */
void tui_heat_goto(const TuiData *d, TuiState *st, const int64_t coord[3]);

/* The worst element of tensor id in layer l (the diff's; without one, the largest |value|):
 * coordinates in the tensor's own dimensions. false when the tensor is absent. */
bool tui_tensor_worst(const TuiData *d, int l, AsTensorId id, int64_t coord[3], int *ndim);

/* ---- facts the views compute (tested directly) ---------------------------------------------- */

/* The window ring of a layer after the run r (window win): the position slot j holds (-1
 * empty), whether it was written in r's step, and its age rank (0 oldest; -1 empty). */
typedef struct {
    int pos;
    bool written;
    bool attended;              /* by the chosen query (from widx) */
    int age;
    float got_diff;             /* max |engine - reference| over the slot's row (-1: no engine) */
} TuiRingSlot;

/* Fills slots[win]; query picks the widx row; got (may be NULL) the engine's ring to compare.
 * Returns the number of slots filled. */
int tui_ring_slots(const AsRun *r, const AsRun *got, int win, int query, TuiRingSlot *slots);

/* One candidate block for a query. */
typedef enum { TUI_BLK_HIDDEN, TUI_BLK_KEPT, TUI_BLK_DROPPED, TUI_BLK_PINNED } TuiBlockState;
typedef struct {
    TuiBlockState st;
    float score;                /* block maximum of the scores (-inf when none) */
    int got_differs;            /* 1 the engine keeps it and the reference not, -1 the reverse */
} TuiBlock;

/* Blocks of query t of the mask in run r (which must hold AS_T_CAND), block scores from
 * scores_run (the candidate source's run: its scores before any mask), got (may be NULL).
 * Returns the number of blocks (at most max), -1 when r has no mask. */
int tui_cand_blocks(const AsRun *r, const AsRun *scores_run, const AsRun *got, int t, int bs, TuiBlock *out,
                    int max);

#endif
