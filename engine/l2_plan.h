/* A captured decode's L2 prefetch (ATTNSCOPE_L2_PREFETCH): while the attention runs, DRAM is idle (it
 * reads a few MB of rows against the ~250 MB of a layer's four projections); a side branch of the graph
 * streams the first part of the next projection's weights into L2 meanwhile, so that GEMV finds them
 * there. Values never change: only where the bytes come from. Host code only (parser and plan), so the
 * CPU tests check both. docs/ENGINE.md, "Switches". */
#pragma once

#include <stdint.h>

#include "model/errors.h"

typedef struct {
    double wo_a_mb; /* forked after wq_b: the first MB of wo_a, beside the attention */
    double wq_b_mb; /* forked at the layer's start: the first MB of wq_b, beside wq_a */
    double wq_a_mb; /* forked after wq_b, after wo_a's: the first MB of the next layer's wq_a */
    int chunk_kb;   /* bytes one prefetch instruction asks for (the kernel's item) */
    int by_loads;   /* mode:ld: the bytes asked for by loads (as_k_l2_warm), not TMA bulk prefetches */
} AsL2Prefetch;

/* The default plan: none (bench/RESULTS.md, 2026-11-30 03:30: every amount tried was slower). */
extern const AsL2Prefetch as_l2_prefetch_default;

/* ATTNSCOPE_L2_PREFETCH's value: NULL or "" the default, "0" or "off" none, else a comma list of
 * woa:MB, wqb:MB, wqa:MB, chunk:KB, mode:bulk|ld (each given one replaces the default's; MB in [0, 1024],
 * KB a power of two in [1, 1024]). AS_EBADINPUT, one line, for anything else. */
int as_l2_prefetch_parse(const char *v, AsL2Prefetch *out, AsError *err);

/* What to prefetch of a weight of `bytes` made of `groups` equal blocks, each read from its start by
 * its own GEMV blocks (wo_a's groups; 1 for a plain matrix): n_seg segments `stride` bytes apart, the
 * first seg_bytes of each (a multiple of 16, at most the block; seg_bytes 0: nothing). The budget is
 * shared evenly by the groups. */
typedef struct {
    int64_t n_seg, stride, seg_bytes;
} AsL2Ranges;
AsL2Ranges as_l2_prefetch_ranges(int64_t bytes, int groups, double mb);
