/* Item i of as_k_l2_prefetch: which bytes one prefetch instruction asks for. Shared by the kernel and
 * its CPU twin test (tests/test_l2_prefetch.c), which checks that the items cover the segments exactly. */
#pragma once

#include <stdint.h>

#ifdef __CUDACC__
#define AS_L2PF_HD __host__ __device__
#else
#define AS_L2PF_HD
#endif

/* Chunks a segment of seg_bytes splits into (the last may be shorter). */
static inline AS_L2PF_HD int64_t as_l2_prefetch_chunks(int64_t seg_bytes, int64_t chunk)
{
    return (seg_bytes + chunk - 1) / chunk;
}

/* Items run segment-major within a chunk index (item i: chunk i / n_seg of segment i % n_seg), so the
 * first instructions of the launch cover the start of every segment: what each GEMV block reads first. */
static inline AS_L2PF_HD void as_l2_prefetch_item(int64_t i, int64_t n_seg, int64_t stride, int64_t seg_bytes,
                                                  int64_t chunk, int64_t *off, int64_t *len)
{
    const int64_t seg = i % n_seg, c = i / n_seg, at = c * chunk;
    const int64_t rest = seg_bytes - at;
    *off = seg * stride + at;
    *len = rest < chunk ? rest : chunk;
}
