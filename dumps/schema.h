/* What a version-1 dump holds (docs/DUMP_FORMAT.md), as data both the writer and the reader
 * check against: each tensor's shape from the config geometry and the layer's attributes, and
 * the bounds of those attributes. The reader trusts no size it has not checked here. */
#ifndef AS_DUMP_SCHEMA_H
#define AS_DUMP_SCHEMA_H

#include <stddef.h>
#include <stdint.h>

#include "model/config.h"
#include "ref/run.h"

#define AS_DUMP_FORMAT "attnscope-dump"
#define AS_DUMP_FORMAT_VERSION 1
/* No tensor of a dump may hold more elements than this (4 GiB of float32). */
#define AS_DUMP_MAX_ELEMS ((int64_t)1 << 30)
/* Rows of the cache states (rows filled, any count up to this). */
#define AS_DUMP_MAX_ROWS AS_LIMIT_MAX_SEQ

/* The layer attributes of the format, in the order they are written. */
typedef enum {
    AS_LA_RATIO, AS_LA_ROWS_A_LEN, AS_LA_ROWS_B_LEN, AS_LA_COLS, AS_LA_K, AS_LA_TOPK, AS_LA_WIDTH,
    AS_LA_COMPRESS_LEN, AS_LA_N_NEW, AS_LA_INDEXER_RAN, AS_LA_COUNT
} AsLayerAttr;
extern const char *const as_dump_layer_attr_name[AS_LA_COUNT];
int *as_dump_layer_attr(AsRun *r, AsLayerAttr a);
int as_dump_layer_attr_get(const AsRun *r, AsLayerAttr a);

/* The provenance pairs ([layer, step] each). */
#define AS_DUMP_N_PROV 4
extern const char *const as_dump_prov_name[AS_DUMP_N_PROV];
AsProvenance *as_dump_prov(AsRun *r, int i);

/* The layer attributes SPEC 3 gives layer `layer` of cfg in a step of `tokens` tokens from start_pos
 * (what the reference computes; a writer that leaves an attribute out gets this value): ratio,
 * rows_a_len, cols, rows_b_len = compress_len, width and indexer_ran (index sources with
 * compress_len > 0), k (the layer's own selection, or the one it reuses: its publisher's), topk,
 * n_new (kv sources: the groups that complete). Provenance is [-1, -1] (unknown). */
void as_dump_rule_attrs(const AsConfig *cfg, int layer, int start_pos, int tokens, AsRun *r);
/* The layer state tensors layer `layer` of cfg has (a bit 1 << AsTensorId each): state.ring always;
 * state.part_kv and state.part_score for ratio-2 kv sources; state.ccache for kv sources;
 * state.ikcache for key owners. */
uint64_t as_dump_state_tensors(const AsConfig *cfg, int layer);
/* Checks the attributes of r (layer of cfg, in a step of `tokens` tokens); 0, or -1 with why. */
int as_dump_check_attrs(const AsConfig *cfg, int layer, int tokens, const AsRun *r, char *why, size_t n);
/* The shape tensor id must have: returns its rank; shape[0] = -1 means any row count in
 * [0, AS_DUMP_MAX_ROWS] (cache states). */
int as_dump_expected_shape(const AsConfig *cfg, int tokens, const AsRun *r, AsTensorId id, int64_t shape[3]);
/* Checks a stored shape against the expected one and AS_DUMP_MAX_ELEMS; 0, or -1 with why. */
int as_dump_check_shape(const AsConfig *cfg, int tokens, const AsRun *r, AsTensorId id, int ndim,
                        const int64_t *shape, char *why, size_t n);
/* "token,head,channel" */
void as_dump_dims_string(AsTensorId id, char *buf, size_t n);
/* Valid mode names: "teacher", "free", "engine-only", "reference-only", "external". */
int as_dump_mode_ok(const char *mode);
/* Side names: 1..63 characters of [A-Za-z0-9_.-], not "diff". */
int as_dump_side_name_ok(const char *name);

#endif
