/* Runs saved to HDF5 (docs/DUMP_FORMAT.md): a writer the driver calls as it steps, and a
 * reader for dump-info, diff, the TUI and (later) check. A dump appears under its name only
 * when committed: the writer fills a temporary beside it and renames it into place. */
#ifndef AS_DUMP_H
#define AS_DUMP_H

#include <stdbool.h>
#include <stdint.h>

#include "driver/compare.h"
#include "dumps/schema.h"
#include "model/config.h"
#include "model/errors.h"
#include "ref/run.h"

/* Tensor filters: one bit per AsTensorId. */
#define AS_DUMP_TENSOR_BIT(id) ((uint64_t)1 << (id))
#define AS_DUMP_ALL_TENSORS (((uint64_t)1 << AS_T_COUNT) - 1)
/* "q,kv,rows_a", "all", "state" (the layer state tensors), "none". */
int as_dump_parse_tensor_list(const char *list, uint64_t *mask, AsError *err);

/* ---- writer ---------------------------------------------------------------------------- */

typedef struct {
    const AsConfig *cfg;        /* geometry (required, validated): every shape is checked against it */
    const char *config_json;    /* the config as JSON text; NULL: as_config_to_json(cfg) */
    const char *weights_name;   /* NULL = "" */
    const char *weights_digest; /* NULL = "" */
    const char *precision;      /* "fp8" / "bf16": the precision the run computed in; NULL: not written */
    const char *mode;           /* "teacher", "free", "engine-only", "reference-only", "external" */
    const char *version;        /* NULL: this build's AS_VERSION */
    const char *created;        /* NULL: now, ISO-8601 UTC */
} AsDumpMeta;

typedef struct AsDumpWriter AsDumpWriter;

/* Starts a dump: creates ".NAME.tmp-XXXXXX" beside path and writes the root attributes. I/O
 * failures (unwritable directory...) are AS_ERUNTIME; a bad meta is AS_EBADINPUT. */
int as_dump_create(const char *path, const AsDumpMeta *meta, AsDumpWriter **out, AsError *err);
/* Appends the token inputs h0 ([tokens][dim], bf16 values) of positions pos .. pos+tokens-1;
 * the first call sets first_pos, later calls must continue where the previous one stopped. */
int as_dump_write_inputs(AsDumpWriter *w, const float *h0, int tokens, int pos, AsError *err);
/* Opens /steps/NNNN; kind is "prefill" or "decode". */
int as_dump_begin_step(AsDumpWriter *w, int step, const char *kind, int start_pos, int tokens, AsError *err);
/* One layer of a begun step: the engine side, the ref side (either may be NULL), the diff
 * (NULL: none), the tensors in the filter that are present. The layer attributes come from
 * ref when given, else engine. */
int as_dump_write_layer(AsDumpWriter *w, int step, int layer, const AsRun *engine, const AsRun *ref,
                        const AsLayerDiff *diff, uint64_t tensors, AsError *err);
/* One side under any name (an external writer's "mine", "theirs"...). */
int as_dump_write_side(AsDumpWriter *w, int step, int layer, const char *side, const AsRun *run, uint64_t tensors,
                       AsError *err);
/* The diff group of a layer, naming the sides compared (got against want). */
int as_dump_write_diff(AsDumpWriter *w, int step, int layer, const AsLayerDiff *diff, const char *got_side,
                       const char *want_side, AsError *err);
/* The state before a step (docs/DUMP_FORMAT.md, "The state_in group"): what a replay of a dump that
 * starts mid-run needs. `layers` holds, per layer of the model, the layer state tensors
 * (AS_T_ST_RING .. AS_T_ST_IKCACHE: those its role has) as they were before step `step`, which starts
 * at start_pos; the provenances name which layer's caches the shared slots held then (and in which
 * step it published them). side: whose state it is (attnscope writes its reference's: "ref"). */
typedef struct {
    int step, start_pos;
    AsProvenance compress_kv_from, index_k_from, sel_from, cand_from;
    char side[64];
} AsDumpStateIn;
int as_dump_write_state_in(AsDumpWriter *w, const AsDumpStateIn *si, const AsRun *layers, AsError *err);

/* Flushes, fsyncs and renames into place; frees w whatever happens (a failure unlinks the
 * temporary). After an earlier write failed, commit refuses. */
int as_dump_commit(AsDumpWriter *w, AsError *err);
/* Drops the dump: closes and unlinks the temporary; frees w. NULL is fine. */
void as_dump_abort(AsDumpWriter *w);
/* Unlinks the temporaries of every dump not yet committed, and those of model files being
 * written (as_atomic_abort_all), and nothing else: safe in a signal handler (static tables of
 * paths, unlink(2) only). The writers stay allocated; their commit then fails and
 * as_dump_abort still frees them. */
void as_dump_abort_all(void);

/* ---- reader ---------------------------------------------------------------------------- */

#define AS_DUMP_MAX_SIDES 8
#define AS_DUMP_MAX_STEPS (1 << 20)

typedef struct {
    char name[64];
    uint64_t tensors;           /* AS_DUMP_TENSOR_BIT(id) for each tensor stored */
} AsDumpSideInfo;

typedef struct {
    int layer;
    char group[16];             /* its group's name ("03"; other writers may spell it "3") */
    int n_sides;
    AsDumpSideInfo side[AS_DUMP_MAX_SIDES];
    bool has_diff;
    AsVerdict verdict;          /* the stored layer verdict (AS_V_NOT_RUN without a diff) */
    AsTensorId worst_tensor;    /* AS_T_COUNT when none */
} AsDumpLayerInfo;

typedef struct {
    int step;
    char group[16];             /* its group's name ("0007") */
    char kind[16];              /* "prefill" / "decode" */
    int start_pos, tokens;
    int n_layers;
    AsDumpLayerInfo *layers;    /* ascending layer */
} AsDumpStepInfo;

typedef struct {
    char *path;
    int format_version;
    char *config_json, *weights_name, *weights_digest, *version, *mode, *created;
    char *precision;            /* the optional "precision" attribute ("fp8" / "bf16"); NULL when absent */
    AsConfig cfg;               /* config_json parsed and validated */
    int input_tokens;           /* rows of /inputs/h0 (0 when absent) */
    int input_first_pos;        /* -1 when absent */
    int n_steps;
    AsDumpStepInfo *steps;      /* ascending step */
    bool has_state_in;          /* a /state_in group (validated whole at open) */
    AsDumpStateIn state_in;     /* its attributes */
} AsDumpInfo;

typedef struct AsDumpReader AsDumpReader;

/* Opens a dump and validates it whole (attributes, every dataset's rank, shape and type
 * against the schema; no tensor data is read). A malformed dump is AS_EBADINPUT with the
 * object's path in the message. */
int as_dump_open(const char *path, AsDumpReader **out, AsError *err);
/* A reader over tensors imported in memory (dumps/import.h): the same index and reads, no file. It
 * takes imp (freed with the reader, or at once when this fails). */
struct AsImport;
int as_dump_open_import(struct AsImport *imp, AsDumpReader **out, AsError *err);
void as_dump_close(AsDumpReader *r);
const AsDumpInfo *as_dump_info(const AsDumpReader *r);
const AsDumpStepInfo *as_dump_find_step(const AsDumpReader *r, int step);
const AsDumpLayerInfo *as_dump_find_layer(const AsDumpStepInfo *s, int layer);
/* Index of side `name` in l (-1 when absent). */
int as_dump_side_index(const AsDumpLayerInfo *l, const char *name);

/* One side of one layer into out (initialised with as_run_init or used before: its tensors
 * are replaced): every stored tensor, the layer attributes and provenance, layer, step,
 * start_pos and s. */
int as_dump_read_run(AsDumpReader *r, int step, int layer, const char *side, AsRun *out, AsError *err);
/* /inputs/h0 as a new array ([tokens][dim]; caller frees). AS_EBADINPUT when absent. */
int as_dump_read_inputs(AsDumpReader *r, float **h0, int *tokens, int *first_pos, AsError *err);
/* The /state_in group's layer states into layers[0 .. n_layers) (each initialised with as_run_init:
 * the state tensors of the layer's role). AS_EBADINPUT when the dump has none. */
int as_dump_read_state_in(AsDumpReader *r, AsRun *layers, AsError *err);
/* The stored diff of a layer (AS_EBADINPUT when it has none); the sides compared (may be NULL). */
int as_dump_read_diff(AsDumpReader *r, int step, int layer, AsLayerDiff *out, char got_side[64],
                      char want_side[64], AsError *err);

#endif
