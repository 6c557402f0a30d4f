/* The engine's knob flags (engine/knobs.h), shared by bench-engine, run and tui: the rows of a command's
 * option table, their usage text, and the knobs they set. */
#ifndef AS_CLI_ENGINE_KNOBS_H
#define AS_CLI_ENGINE_KNOBS_H

#include <stdbool.h>

#include "cli/args.h"
#include "engine/knobs.h"

typedef struct {
    const char *attn_path, *fusions, *sel_room;
    bool no_pdl, no_kv_fork, fp8_qdq;
    int gpu_mem_limit_mb;
} AsKnobFlags;

/* The AsOpt rows of the flags, into a command's table: {..., AS_KNOB_OPTS(kf), {NULL, ...}}. */
#define AS_KNOB_OPTS(kf)                                                                                        \
    {"--attn-path", NULL, AS_OPT_STR, &(kf).attn_path, 0, 0}, {"--fusions", NULL, AS_OPT_STR, &(kf).fusions, 0, 0}, \
        {"--sel-room", NULL, AS_OPT_STR, &(kf).sel_room, 0, 0}, {"--no-pdl", NULL, AS_OPT_FLAG, &(kf).no_pdl, 0, 0}, \
        {"--no-kv-fork", NULL, AS_OPT_FLAG, &(kf).no_kv_fork, 0, 0},                                             \
        {"--gpu-mem-limit", NULL, AS_OPT_INT, &(kf).gpu_mem_limit_mb, 0, AS_GPU_MEM_LIMIT_MAX_MB},               \
        {"--fp8-qdq", NULL, AS_OPT_FLAG, &(kf).fp8_qdq, 0, 0}

#define AS_KNOB_USAGE                                                                                           \
    "  [--attn-path auto|warp|mma|wgmma] [--no-pdl] [--no-kv-fork] [--fusions all|none|LIST] [--sel-room auto|N]\n" \
    "  [--gpu-mem-limit MB] [--fp8-qdq]\n"                                                                     \
    "  The engine's knobs (docs/ENGINE.md, \"Knobs\"; every default the measured winner): --attn-path forces a\n"  \
    "  sparse-attention kernel; --no-pdl launches without programmatic dependent launch; --no-kv-fork keeps a\n" \
    "  decode graph's kv branch on one stream; --fusions names the decode graph's fusions (residual, rope,\n"   \
    "  oback, kvidx, norm, kvsel); --sel-room: wq_b's blocks left free beside an index layer's selection;\n"     \
    "  --gpu-mem-limit MB: the engine's allocations as if the GPU had MB (0: none); --fp8-qdq: fp8 precision\n"  \
    "  with the fp8 weights dequantised to bf16 on the device instead of kept as e4m3 codes (the same bits).\n"

/* The knobs the flags set (the defaults for the rest). A bad value: "attnscope CMD: <one line>" on
 * stderr and AS_EBADINPUT. */
int as_cli_engine_knobs(const char *cmd, const AsKnobFlags *kf, AsEngineKnobs *k);

#endif
