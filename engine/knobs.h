/* The engine's knobs (docs/ENGINE.md, "Knobs"): the choices that remain real, each default the
 * measured winner, given to an engine through AsEngineOptions.knobs and set by the flags of
 * bench-engine, run and tui (cli/engine_knobs.c). The fusions, PDL, the kv fork and the selection's
 * room leave every output bit as it is, and so does the fp8 weights' form; the attention path chooses
 * other kernels (the same numbers up to the f32 summation order); the memory limit only where
 * allocations fail. A test
 * process can run several settings (one engine each). Host code, in every build. */
#ifndef AS_ENGINE_KNOBS_H
#define AS_ENGINE_KNOBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/errors.h"

/* The decode fusions of a captured decode step (engine/decode_schedule.c): each removes a launch from
 * the step's chain; the uncaptured step takes none. */
enum {
    AS_FUSE_RESIDUAL = 1, /* the residual add in wo_b's GEMV store */
    AS_FUSE_ROPE = 2,     /* q's RoPE in wq_b's GEMV store */
    AS_FUSE_OBACK = 4,    /* o_back in the one-query attention's combine */
    AS_FUSE_KV_IDX = 8,   /* a reuse layer's idx (window, shared selection, build_idx) on the kv branch */
    AS_FUSE_NORM = 16,    /* q_norm in wq_a's GEMV, the next layer's attn_norm in wo_b's: their last block */
    AS_FUSE_KV_SEL = 32,  /* a compressor / indexer layer's selection on the kv branch too, the indexer once
                           * q_norm is done: beside wq_b instead of after it (bf16 projections only) */
    AS_FUSE_ALL = 63,
};

/* The sparse attention's kernel: each launch's fastest that applies, or one forced (diagnosis: an o
 * mismatch that moves with the path is the kernel's). The values are kernels/sparse_attn.cu's. */
typedef enum { AS_ATTN_AUTO = 0, AS_ATTN_WARP = 1, AS_ATTN_MMA = 2, AS_ATTN_WGMMA = 3 } AsAttnPath;

#define AS_SEL_ROOM_AUTO (-1)
#define AS_SEL_ROOM_MAX (1 << 20)
#define AS_GPU_MEM_LIMIT_MAX_MB (1 << 30)

typedef struct {
    AsAttnPath attn_path;  /* AS_ATTN_AUTO */
    bool pdl;              /* programmatic dependent launch on sm_90+ (off: diagnosis, a kernel touching memory
                            * before its wait shows as a result that changes) */
    bool kv_fork;          /* a captured decode's kv branch on a stream of its own (off: in line) */
    unsigned fusions;      /* AS_FUSE_* taken by a captured decode (AS_FUSE_ALL) */
    int sel_room;          /* blocks of wq_b's one-wave grid left free beside a compressor / indexer layer's
                            * selection (0: none, the selection after wq_b); AS_SEL_ROOM_AUTO: one block an SM
                            * kept (as_sel_room_default) */
    int gpu_mem_limit_mb;  /* 0: none; else the engine's allocations behave as if the device had this many MiB
                            * above what was in use when it started (tests of the out-of-memory paths) */
    bool fp8_qdq;          /* fp8 precision with the fp8 weights uploaded dequantised to bf16, not as their e4m3
                            * codes (engine/fp8_proj.c): the same bits, twice the bytes */
} AsEngineKnobs;

/* Every knob at its default. */
void as_engine_knobs_default(AsEngineKnobs *k);

/* The values the flags take; anything else is AS_EBADINPUT with one line naming the flag, *out left at
 * its default (auto, all, auto). */
int as_attn_path_parse(const char *v, AsAttnPath *out, AsError *err);      /* auto, warp, mma, wgmma */
const char *as_attn_path_name(AsAttnPath p);
int as_decode_fusions(const char *v, unsigned *out, AsError *err);          /* all, none, or a comma list of
                                                                             * residual, rope, oback, kvidx,
                                                                             * norm, kvsel */
int as_sel_room(const char *v, int *out, AsError *err);                     /* auto, or 0 .. AS_SEL_ROOM_MAX */

/* AS_SEL_ROOM_AUTO's value on a device: wq_b's grid keeps one block an SM, the rest of its one wave
 * (resident blocks) is left free; 0 where that leaves nothing or the SM count is unknown. */
int as_sel_room_default(int64_t resident_blocks, int sms);

/* The flags that set k away from the defaults ("--no-pdl --fusions rope,norm"), in the order of the
 * struct; "" when every knob is at its default. buf is always terminated (n > 0), cut to n - 1 bytes. */
void as_engine_knobs_flags(const AsEngineKnobs *k, char *buf, size_t n);

#endif
