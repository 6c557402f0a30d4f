/* bench-engine's fp8 prefill figure (engine/bench_fp8.c): layer 0's fp8 projections in fp8 form
 * (act_quant + the fp8 GEMM on `tokens` random rows) against cuBLASLt's fp8 GEMM at the same shapes with
 * per-tensor scales (e4m3 in, bf16 out, f32 accumulation): the dense fp8 tensor-core rate this device
 * reaches, in the same run. */
#ifndef AS_ENGINE_BENCH_FP8_H
#define AS_ENGINE_BENCH_FP8_H

#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"
#include "kernels/kernels.h"

/* Random bf16 values on the device, never zeros (engine/bench.c). */
int as_bench_fill_random(as_bf16_t *d, size_t n, uint64_t seed, AsError *err);

/* Sums over the fp8-form projections of layer 0: the engine's ms (median of 10), cuBLASLt's, and their
 * FLOPs; all 0 when no projection is in fp8 form. */
int as_bench_fp8_projections(AsEngine *e, int tokens, double *ours_ms, double *lt_ms, double *flops, AsError *err);

#endif
