/* The Compressor of kv sources (SPEC 3 step 5a): the latents of the groups that complete in a
 * call, pre-RoPE, with the position of each group's first token. */
#ifndef AS_COMPRESSOR_H
#define AS_COMPRESSOR_H

#include <stdint.h>

#include "model/weights.h"

/* Ratio 1: latent = rmsnorm(linear(x, wkv), norm), one per token. Returns s. */
int as_compress_ratio1(const float *x, int s, const AsWTensor *wkv, const float *norm, float eps,
                       int hd, int start_pos, float *latent, int *pos);

/* Ratio r >= 2: kv = x wkv^T and score = x wgate^T in f32 (no rounding). Prefill: complete
 * floor(s/r) groups, the s % r trailing rows go to the partial state; decode: row start_pos % r
 * of the state, pooling the whole state when (start_pos + 1) % r == 0. Pooling: softmax over the
 * group per channel, bf16, rmsnorm. Returns the number of latents written (n_new). */
int as_compress_pooled(const float *x, int s, int r, const AsWTensor *wkv, const AsWTensor *wgate,
                       const float *norm, float eps, int hd, int start_pos, float *part_kv,
                       float *part_sc, float *latent, int *pos);

#endif
