/* The decode fusions (ATTNSCOPE_DECODE_FUSE): each removes a launch from a decode's queries' path and
 * leaves every output bit as it was (docs/ENGINE.md, bench/RESULTS.md). */
#pragma once

#include <stdint.h>

#include "model/errors.h"

enum {
    AS_FUSE_RESIDUAL = 1, /* the residual add in wo_b's GEMV store */
    AS_FUSE_ROPE = 2,     /* q's RoPE in wq_b's GEMV store */
    AS_FUSE_OBACK = 4,    /* o_back in the one-query attention's combine (graph) */
    AS_FUSE_KV_IDX = 8,   /* a reuse layer's idx (window, shared selection, build_idx) on the kv branch */
    AS_FUSE_NORM = 16,    /* q_norm in wq_a's GEMV, the next layer's attn_norm in wo_b's (graph): the last block */
    AS_FUSE_KV_SEL = 32,  /* a compressor / indexer layer's selection on the kv branch too, the indexer once
                           * q_norm is done: beside wq_b instead of after it (bf16 projections only) */
    AS_FUSE_ALL = 63,
    /* every one, each measured faster through the graph (bench/RESULTS.md); oback only once the combine
     * issued its loads together */
    AS_FUSE_DEFAULT = AS_FUSE_RESIDUAL | AS_FUSE_ROPE | AS_FUSE_OBACK | AS_FUSE_KV_IDX | AS_FUSE_NORM | AS_FUSE_KV_SEL,
};

/* The fusions an ATTNSCOPE_DECODE_FUSE value names: NULL or "" AS_FUSE_DEFAULT, "0" or "none" none, "1" or
 * "all" every one, else a comma list of residual, rope, oback, kvidx, norm, kvsel. AS_EBADINPUT, one line, for anything
 * else. */
int as_decode_fusions(const char *v, unsigned *out, AsError *err);

/* ATTNSCOPE_SEL_ROOM's value (engine/forward.c: blocks of wq_b's grid left free beside a compressor /
 * indexer layer's selection, its queries projected first): NULL, "" or "auto" AS_SEL_ROOM_AUTO (the
 * engine leaves wq_b one block an SM), else a decimal count from 0 (off: the selection after wq_b's
 * grid) to AS_SEL_ROOM_MAX. AS_EBADINPUT, one line, for anything else. */
#define AS_SEL_ROOM_MAX (1 << 20)
#define AS_SEL_ROOM_AUTO (-1)
int as_sel_room(const char *v, int *out, AsError *err);
/* AS_SEL_ROOM_AUTO's value on a device: wq_b's grid keeps one block an SM, the rest of its one wave
 * (resident blocks, 0 when the resident launch is off) is left free; 0 where that leaves nothing or the
 * SM count is unknown. */
int as_sel_room_default(int64_t resident_blocks, int sms);

/* ATTNSCOPE_ATTN_EARLY's value (engine/forward.c: where a decode graph's one-query attention stages its rows
 * before its PDL wait): NULL, "" or "1" AS_EARLY_ALL (every layer whose kv branch is forked), "reuse"
 * AS_EARLY_REUSE (those without a selection of their own), "0" AS_EARLY_OFF. AS_EBADINPUT, one line, for
 * anything else (*out AS_EARLY_OFF). */
enum { AS_EARLY_OFF, AS_EARLY_ALL, AS_EARLY_REUSE };
int as_attn_early(const char *v, int *out, AsError *err);
