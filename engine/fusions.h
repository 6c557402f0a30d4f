/* The decode's switches, host code so that the CPU tests check their parsers: the fusions
 * (ATTNSCOPE_DECODE_FUSE), each removing a launch from a decode's queries' path, and the L2 prefetch
 * (ATTNSCOPE_L2_PREFETCH). Neither changes an output bit (docs/ENGINE.md, bench/RESULTS.md). */
#pragma once

#include "model/errors.h"

enum {
    AS_FUSE_RESIDUAL = 1, /* the residual add in wo_b's GEMV store */
    AS_FUSE_ROPE = 2,     /* q's RoPE in wq_b's GEMV store */
    AS_FUSE_OBACK = 4,    /* o_back in the one-query attention's combine (graph) */
    AS_FUSE_KV_IDX = 8,   /* a reuse layer's idx (window, shared selection, build_idx) on the kv branch */
    AS_FUSE_ALL = 15,
    /* every one, each measured faster through the graph (H200, 2026-11-29, bench/RESULTS.md); oback measured
     * 3.6% slower at 16:45 and 1.8% faster at 18:36, once the combine issued its loads together */
    AS_FUSE_DEFAULT = AS_FUSE_ALL,
};

/* The fusions an ATTNSCOPE_DECODE_FUSE value names: NULL or "" AS_FUSE_DEFAULT, "0" or "none" none, "1" or
 * "all" every one, else a comma list of residual, rope, oback, kvidx. AS_EBADINPUT, one line, for anything
 * else. */
int as_decode_fusions(const char *v, unsigned *out, AsError *err);

/* The L2 prefetch of a forked decode (engine/forward.c): the head of wq_b warmed while the norm and wq_a
 * run (pf_mb[0] MB), the head of each wo_a group while the attention runs (pf_mb[1] MB in all). */
enum { AS_L2_PREFETCH_WQB_MB = 0, AS_L2_PREFETCH_WOA_MB = 0, AS_L2_PREFETCH_MAX_MB = 64 };

/* The sizes an ATTNSCOPE_L2_PREFETCH value names: NULL or "" the defaults above, "0" or "none" none, else
 * "A,B": wq_b's and wo_a's MB, integers 0..AS_L2_PREFETCH_MAX_MB. AS_EBADINPUT, one line, otherwise. */
int as_l2_prefetch_sizes(const char *v, int pf_mb[2], AsError *err);
