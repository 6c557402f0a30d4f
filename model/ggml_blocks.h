/* The ggml quantised block layouts attnscope reads and writes (GGUF files), one definition for
 * the host code and the CUDA kernels: byte for byte those of ggml-common.h. */
#ifndef AS_GGML_BLOCKS_H
#define AS_GGML_BLOCKS_H

#include <stdint.h>

#define AS_QK_K 256   /* weights per K-quant super-block */
#define AS_QK8_0 32
#define AS_QK8_1 32

/* Q2_K: 16 sub-blocks of 16 weights; each has a 4-bit scale (low nibble) and a 4-bit min (high
 * nibble) in scales[]; weight = d * scale * q - dmin * min, q in 0..3 (2 bits, 4 per byte in qs,
 * interleaved as ggml's dequantize_row_q2_K reads them). d and dmin are IEEE fp16. */
typedef struct {
    uint8_t scales[AS_QK_K / 16];
    uint8_t qs[AS_QK_K / 4];
    uint16_t d;
    uint16_t dmin;
} AsBlockQ2K;

/* Q8_0: 32 weights, weight = d * q, q int8, d fp16. */
typedef struct {
    uint16_t d;
    int8_t qs[AS_QK8_0];
} AsBlockQ8_0;

/* Q8_1 (activations on the GPU): 32 values, value = d * q, with s = d * sum(q) for the min term. */
typedef struct {
    uint16_t d, s;
    int8_t qs[AS_QK8_1];
} AsBlockQ8_1;

#ifdef __cplusplus
static_assert(sizeof(AsBlockQ2K) == 84, "block_q2_K is 84 bytes");
static_assert(sizeof(AsBlockQ8_0) == 34, "block_q8_0 is 34 bytes");
static_assert(sizeof(AsBlockQ8_1) == 36, "block_q8_1 is 36 bytes");
#else
_Static_assert(sizeof(AsBlockQ2K) == 84, "block_q2_K is 84 bytes");
_Static_assert(sizeof(AsBlockQ8_0) == 34, "block_q8_0 is 34 bytes");
_Static_assert(sizeof(AsBlockQ8_1) == 36, "block_q8_1 is 36 bytes");
#endif

#endif
