/* One layer's plan (SPEC 3): what its forward must know before it runs, as one pure function of the
 * config, the layer, start_pos, s and the shared state's provenance: the sizes (rows attended, the
 * window's columns, the latents completed, the index width, k, rows_b_len), which shared slots the
 * layer reads and which it publishes, and the refusals of SPEC 3.6, each with its one-line message.
 * The reference (ref/layer.c), the engine's forward (engine/forward.c) and the decode graph
 * (engine/graph.c) all follow it, so the three cannot drift apart. */
#ifndef AS_REF_PLAN_H
#define AS_REF_PLAN_H

#include <stdbool.h>

#include "model/config.h"
#include "model/errors.h"
#include "ref/faults.h"
#include "ref/run.h"

/* The shared state (`SharedV41`) as the plan sees it: who published each slot (layer -1: nothing yet)
 * and the shapes of the two copies. The caches are the publishers' own: layer L's holds
 * as_plan_cache_rows(c, L) rows. */
typedef struct {
    AsProvenance compress_kv_from;  /* the latest kv source's compressed cache */
    AsProvenance index_k_from;      /* the latest published index-key cache */
    AsProvenance sel_from;          /* the latest index source's selection, [sel_s][sel_k] */
    int sel_s, sel_k;
    AsProvenance cand_from;         /* the candidate source's mask, [cand_s][cand_width] */
    int cand_s, cand_width;
} AsSharedProv;

/* Nothing published (a fresh prefill's state). */
void as_shared_prov_init(AsSharedProv *p);

typedef struct {
    int layer, step, start_pos, s, ratio;
    bool prefill;             /* start_pos == 0 */
    /* step 3: the window */
    int rows_a_len;           /* prefill: the chunk's s rows; decode: the whole ring */
    int cols;                 /* the window selection's columns: prefill min(s, window), decode window */
    /* step 5 (ratio > 0; all 0 / false at ratio 0) */
    int compress_len;         /* end_pos / ratio */
    bool compresses;          /* 5a-b: a kv source: the compressor runs, the cache is published */
    int n_new;                /* latents the compressor completes (0: no group completes) */
    int latent_pos0;          /* latent i sits at latent_pos0 + i * latent_pos_step (its group's first token) */
    int latent_pos_step;
    int cache_row0;           /* the first row the latents and index keys are written at: start_pos / ratio */
    bool stores_keys;         /* 5c: a key owner that indexes with new latents: index keys written, published */
    bool indexes;             /* 5c: an index source with compress_len > 0: scores, top-k, publishes */
    bool publishes_empty;     /* 5c: an index source with compress_len 0 publishes an empty selection [s][0] */
    bool reuses;              /* 5d: no index source, a selection published: it is used unchanged */
    bool makes_cand;          /* the candidate source's indexer publishes its mask */
    bool applies_cand;        /* an index source after it masks its scores with that mask */
    bool stores_latents;      /* 5e: a kv source with new latents writes them into its cache */
    int width;                /* index-score columns (indexes), else 0 */
    int k;                    /* compressed selection entries: min(index_topk, width) when indexing, the shared
                               * selection's when reusing, else 0 */
    int sel_offset;           /* added to a picked position: rows_a_len (0 with the no-offset fault) */
    int keys_cap;             /* rows of the index-key cache scored against (indexes) */
    int rows_b_len;           /* 5f: compress_len rows of the shared compressed cache */
    int rows_b_cap;           /* rows that cache holds */
    int topk;                 /* cols + k: the attention's selection width */
    /* who published what the layer reads (layer -1: nothing read); the run carries the same */
    AsProvenance rows_b_from, keys_from, sel_from, cand_from;
} AsLayerPlan;

/* Rows of layer l's compressed and index-key caches (a kv source): max_seq / ratio. */
int as_plan_cache_rows(const AsConfig *c, int l);

/* A step's shape: a prefill (start_pos 0, s >= 1) or a decode of one token (AS_EBADINPUT), within
 * max_seq (AS_EREFUSED). */
int as_plan_step(const AsConfig *c, int start_pos, int s, AsError *err);
/* The same for a stack about to begin a step; a decode needs a prefill first (AS_EBADINPUT). */
int as_plan_begin_step(const AsConfig *c, int start_pos, int s, bool started, AsError *err);

/* Layer l of step `step` at (start_pos, s) after the shared state `in`: fills p and, in `out` (may be
 * `in`), the shared state's provenance after the layer. fault changes what the layer plans for the
 * faults that do (AS_FAULT_CAND_MASK_OFF, AS_FAULT_NO_OFFSET). Returns 0, or AS_EBADINPUT / AS_EREFUSED
 * with one line naming the layer (p and out are then unchanged). */
int as_plan_layer(const AsConfig *c, int l, int step, int start_pos, int s, const AsSharedProv *in, AsFault fault,
                  AsLayerPlan *p, AsSharedProv *out, AsError *err);

/* The run's scalars and provenance from the plan (its tensors are left as they are). */
void as_plan_to_run(const AsLayerPlan *p, AsRun *run);

#endif
