/* The C interface of attnscope's CUDA kernels. Each launcher lives in its own kernels/<op>.cu
 * with a CPU twin test in tests/gpu_<op>.c. Activations are bf16 (raw bits, as_bf16_t), row
 * major; launchers return the launch's cudaError_t as an int (0 = ok). Semantics are those of
 * the reference function named beside each (ref/...), element for element. */
#ifndef AS_KERNELS_H
#define AS_KERNELS_H

#include <cuda_runtime_api.h>
#include <limits.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint16_t as_bf16_t;

enum { AS_KQ_FP8 = 1, AS_KQ_FP4_E8M0 = 2, AS_KQ_FP4_E4M3 = 3 };

/* Programmatic dependent launch (kernels/common.cuh, as_launch) for the launches the calling thread makes
 * from now on: on (the default, where the device is sm_90 or later) or off (kernels/pdl.cu). Returns the
 * setting before. Per thread: engines with either setting can run in one process. */
int as_k_pdl_use(int on);

/* ---- elementwise and small ops (kernels/rmsnorm.cu, rope.cu, quant.cu, window.cu, ...) ---- */

/* as_rmsnorm: y[r] = bf16(w * x[r] / sqrt(mean(x[r]^2) + eps)); rows of n, row strides ldx/ldy.
 * y may alias x. */
int as_k_rmsnorm(const as_bf16_t *x, int64_t ldx, const float *w, as_bf16_t *y, int64_t ldy, int rows, int n,
                 float eps, cudaStream_t st);
/* The same, and yq (rows ldq apart, n a multiple of 32; NULL: none) = the fp8 act_quant's QDQ of y in the
 * same launch (as_k_row_pipe's AS_KQ_FP8 over y: the same bits), for the fp8 linears that read it. A
 * block quantises its whole row: the many rows of a prefill; one row's QDQ spreads over more blocks as
 * a launch of its own (faster by 7 us a layer in the decode graph, measured). */
int as_k_rmsnorm_qdq(const as_bf16_t *x, int64_t ldx, const float *w, as_bf16_t *y, int64_t ldy, as_bf16_t *yq,
                     int64_t ldq, int rows, int n, float eps, cudaStream_t st);

/* The shapes and positions as_k_rope (and the GEMV that rotates in its store) take: rd even and
 * within width, and without pos, rows positions from pos0 that fit in an int. */
static inline int as_rope_shape_ok(int rows, int heads, int width, int rd, int pos0, const int32_t *pos)
{
    return rows >= 0 && heads > 0 && rd > 0 && rd % 2 == 0 && width >= rd &&
           (pos || (pos0 >= 0 && (rows == 0 || pos0 <= INT_MAX - (rows - 1))));
}
/* as_rope_rows / as_rope_heads, in place: `rows` rows (stride ld) of `heads` sub-rows of `width`
 * (contiguous); RoPE on the last rd channels of each sub-row at position pos ? pos[row] :
 * pos0 + row; cos_t / sin_t are the reference's tables [max_seq][rd/2] uploaded as they are. */
int as_k_rope(as_bf16_t *x, int64_t ld, int rows, int heads, int width, int rd, int pos0, const int32_t *pos,
              const float *cos_t, const float *sin_t, int inverse, cudaStream_t st);

/* as_fp8_quant / as_fp4_quant_e8m0 / as_fp4_quant_e4m3 in place over n contiguous values
 * (n a multiple of the block: 32 / 32 / 16). pre (optional) receives the input first. */
int as_k_quant(as_bf16_t *x, as_bf16_t *pre, int64_t n, int kind, cudaStream_t st);

/* as_window_store_prefill (start_pos == 0: the last min(s, win) rows, token p into slot p % win)
 * or as_window_store_decode (slot start_pos % win takes row 0). */
int as_k_ring_store(as_bf16_t *ring, int win, int hd, const as_bf16_t *kv, int s, int start_pos, cudaStream_t st);
/* as_window_select_prefill / _decode: widx [s][cols], cols = prefill ? min(s, win) : win. */
int as_k_window_select(int32_t *widx, int s, int win, int start_pos, cudaStream_t st);

/* as_compress_pooled's state handling and pooling for r >= 2, on the f32 projections ckv, csc
 * ([s][hd] each): prefill pools floor(s/r) groups into latent rows 0.. and stores the s % r trailing
 * rows at state row t % r; decode writes state row start_pos % r and pools the whole state into
 * latent row 0 when (start_pos + 1) % r == 0. latent: bf16(pooled), BEFORE the rmsnorm. */
int as_k_compress_pool(const float *ckv, const float *csc, int s, int r, int hd, int start_pos, float *part_kv,
                       float *part_sc, as_bf16_t *latent, cudaStream_t st);
/* Fills the partial score state with -inf (and kv with 0): the empty state. */
int as_k_compress_state_reset(float *part_kv, float *part_sc, int n, cudaStream_t st);

/* bf16 -> f32 widening (input of the f32 compressor GEMMs). */
int as_k_bf16_to_f32(const as_bf16_t *x, float *y, int64_t n, cudaStream_t st);

/* idx[t] = widx[t] (cols) followed by csel[t] (k), kernels/build_idx.cu. Entries >= nrows become -1
 * and set *bad to 1 (a refusal the host reports); *valid (optional) accumulates the entries >= 0. */
int as_k_build_idx(const int32_t *widx, int cols, const int32_t *csel, int k, int s, int nrows, int32_t *idx, int *bad,
                   unsigned long long *valid, cudaStream_t st);

/* f32 -> bf16 (RNE), kernels/convert.cu. */
int as_k_f32_to_bf16(const float *x, as_bf16_t *y, int64_t n, cudaStream_t st);

/* as_index_weights_scale: w = bf16(w * c), c = (float)(ihd^-0.5 * nh^-0.5). */
int as_k_scale_bf16(as_bf16_t *w, int64_t n, float c, cudaStream_t st);

/* One token row (m = 1): y = x W^T (W n_out x n_in, rows n_in apart), with h: then h = bf16(h + y) as
 * as_k_gemv_bf16_residual, then y_norm = rmsnorm(h or y, norm_w, eps) as as_k_rmsnorm: the same bits as
 * those launches, in one (the block that finishes last normalises the row; y_norm may alias y or h).
 * ctr: a device counter at 0, left at 0; one per concurrent launch. */
int as_k_gemv_bf16_norm(const as_bf16_t *W, int n_out, int n_in, const as_bf16_t *x, as_bf16_t *y, as_bf16_t *h,
                        const float *norm_w, float eps, as_bf16_t *y_norm, unsigned *ctr, cudaStream_t st);

/* h = bf16(h + out) (the attention-only residual stream). */
int as_k_residual_add(as_bf16_t *h, const as_bf16_t *out, int64_t n, cudaStream_t st);

/* ---- the heavy kernels (kernels/index_scores.cu, sparse_attn.cu, gemv.cu) ---- */

/* as_index_scores + as_index_visibility fused: score[t][p] = bf16( sum_h bf16( relu(bf16(iq[t][h] . k[p]))
 * * w[t][h] ) ) for p < width, then -inf where p >= clen[t] (clen = start_pos == 0 ? (t + 1) / ratio : width).
 * iq [s][nh][ihd], keys [width][ihd] (rows of the shared index-key cache), w [s][nh], score [s][width]
 * as bf16 bits (-inf = 0xff80). */
int as_k_index_scores(const as_bf16_t *iq, const as_bf16_t *keys, const as_bf16_t *w, int s, int nh, int ihd,
                      int width, int start_pos, int ratio, as_bf16_t *score, cudaStream_t st);

/* as_sparse_attention: rows i < na come from rows_a, i >= na from rows_b[i - na]; idx [s][topk]
 * (-1 skipped), q / o [s][nh][hd], sink [nh] f32. Tiled over the selection: any topk works. Each launch
 * takes the fastest kernel that applies. */
int as_k_sparse_attn(const as_bf16_t *q, const as_bf16_t *rows_a, int na, const as_bf16_t *rows_b, int nb,
                     const int32_t *idx, int topk, const float *sink, as_bf16_t *o, int s, int nh, int hd,
                     float scale, cudaStream_t st);
/* The same with the kernel chosen (the engine's attention path): AS_K_ATTN_AUTO as above, or the warp
 * kernel, the tensor-core (mma.sync) kernel or the wgmma kernel forced (the last two fail with
 * cudaErrorInvalidValue where they do not apply). split: -1 never split the selection, 0 automatic, n > 0
 * at most n splits (the tests and the micro-benchmark). */
enum { AS_K_ATTN_AUTO = 0, AS_K_ATTN_WARP = 1, AS_K_ATTN_MMA = 2, AS_K_ATTN_WGMMA = 3 };
int as_k_sparse_attn_path(const as_bf16_t *q, const as_bf16_t *rows_a, int na, const as_bf16_t *rows_b, int nb,
                          const int32_t *idx, int topk, const float *sink, as_bf16_t *o, int s, int nh, int hd,
                          float scale, int path, int split, cudaStream_t st);

/* The hd-512 sm_90a form of as_k_sparse_attn (kernels/sparse_attn_wgmma.cu, warpgroup MMA, no split
 * of the selection): as_k_sparse_attn takes it by itself for prefill; _applies says whether it runs
 * here (hd 512, nh a multiple of 16, topk > 0, 16-byte aligned tensors, a compute capability 9.0
 * device); where it does not, as_k_sparse_attn_wgmma returns cudaErrorInvalidValue. */
int as_k_sparse_attn_wgmma_applies(int nh, int hd, int topk, const void *q, const void *o, const void *rows_a, int na,
                                   const void *rows_b, int nb);
int as_k_sparse_attn_wgmma(const as_bf16_t *q, const as_bf16_t *rows_a, int na, const as_bf16_t *rows_b, int nb,
                           const int32_t *idx, int topk, const float *sink, as_bf16_t *o, int s, int nh, int hd,
                           float scale, cudaStream_t st);

/* Decode GEMV, batched: for b < batch, t < m (m <= 8): y_b[t][o] = sum_i x_b[t][i] * W_b[o][i] over
 * n_in, o < n_out; W_b = W + b * strideW (rows ldw apart), x_b = x + b * strideX (rows ldx apart),
 * y_b = y + b * strideY (rows ldy apart). bf16 weights; y is bf16 (rounded) or, with y_f32, f32. */
int as_k_gemv_bf16(const as_bf16_t *W, int64_t ldw, int64_t strideW, int n_out, int n_in, const as_bf16_t *x,
                   int64_t ldx, int64_t strideX, int m, void *y, int64_t ldy, int64_t strideY, int y_f32, int batch,
                   cudaStream_t st);
/* m token rows of y = x W^T (W n_out x n_in, rows n_in apart), bf16, then the residual h = bf16(h + y)
 * (as_k_residual_add) in the same launch: rows of h ldh apart. */
int as_k_gemv_bf16_residual(const as_bf16_t *W, int n_out, int n_in, const as_bf16_t *x, int64_t ldx, int m,
                            as_bf16_t *y, int64_t ldy, as_bf16_t *h, int64_t ldh, cudaStream_t st);
/* m token rows of y = x W^T (W n_out x n_in, rows n_in apart), bf16, then as_k_rope(y, ldy, m, heads,
 * hd, rd, pos0, pos, cos_t, sin_t, inverse) (n_out = heads * hd): q's projection and RoPE, in one launch
 * where the vector kernel reads the rows (the same roundings), else two. room >= 0: blocks of the
 * one-wave grid left free for kernels launched beside it (the same bits at every value). */
int as_k_gemv_bf16_rope(const as_bf16_t *W, int n_out, int n_in, const as_bf16_t *x, int64_t ldx, int m,
                        as_bf16_t *y, int64_t ldy, int heads, int hd, int rd, int pos0, const int32_t *pos,
                        const float *cos_t, const float *sin_t, int inverse, int room, cudaStream_t st);
/* Blocks of as_k_gemv_bf16_rope's m = 1 kernel resident on the whole device at once (its one wave): the
 * engine's sel_room knob leaves all but one an SM free by default (engine/knobs.h). */
int64_t as_k_gemv_bf16_resident_blocks(void);
/* The same with f32 weights and f32 output (the ratio-2 compressor's wkv / wgate).
 * The GEMVs issue their first weight loads before they wait on the kernel launched before them on the
 * stream (programmatic dependent launch): W must not be written by that kernel (model weights never
 * are). */
int as_k_gemv_f32w(const float *W, int64_t ldw, int n_out, int n_in, const as_bf16_t *x, int64_t ldx, int m,
                   float *y, int64_t ldy, cudaStream_t st);

/* ---- the decode step without host round trips: engine/graph.c, tests/gpu_row_pipe.c,
 * tests/gpu_decode_kernels.c. A *_decode variant reads the step's position-dependent scalars from
 * device memory (the decode graph's step parameters, written once per replay) where its by-value
 * twin takes them as arguments, and its launch covers the most they can be; for the same live
 * values it computes what the by-value launch computes, bit for bit. ---- */

/* The row pipeline (kernels/row_pipe.cu): per sub-row (row r's `heads` slices of n channels, the slice
 * h at x + r * ldx + h * n), each stage optional, with the separate kernels' roundings in their order:
 * rmsnorm (norm_w) -> RoPE on the last rd channels at pos[r] (else pos0 + r; negative: not rotated;
 * inverse: the conjugate) -> pre (the quantiser's input, [rows][heads * n]) -> quantiser (quant,
 * AS_KQ_*, n a multiple of its block) -> post_scale (bf16(y * post_scale), when != 1) -> y (may alias
 * x with the same stride), and the same row into a cache: AS_STORE_ROWS: row (*row0_d, else row0) + r;
 * AS_STORE_RING: slot (pos + ring_shift) % ring, for the last `ring` rows only. n <= 12288. */
enum { AS_STORE_NONE = 0, AS_STORE_ROWS = 1, AS_STORE_RING = 2 };
typedef struct {
    const as_bf16_t *x;
    int64_t ldx;
    as_bf16_t *y;
    int64_t ldy;
    as_bf16_t *pre;
    int rows, heads, n;
    const float *norm_w;
    float eps;
    int rd, pos0;
    const int32_t *pos;
    const float *cos_t, *sin_t;
    int inverse;
    int quant;
    float post_scale;
    int store_mode;
    as_bf16_t *store;
    int64_t store_ld;
    int row0;
    const int32_t *row0_d;
    int ring, ring_shift;
} AsRowPipe;
int as_k_row_pipe(const AsRowPipe *p, cudaStream_t st);

/* Decode (s = 1): as_k_window_select's decode widx and as_k_build_idx in one launch: idx = widx (win)
 * followed by csel[0 .. k) and -1 up to win + kmax; entries >= nrows become -1 and raise *bad. sp, k
 * (<= kmax) and nrows are read from sp_d / k_d / nrows_d when those are given. */
int as_k_build_idx_decode(int32_t *widx, int win, int sp, const int32_t *sp_d, const int32_t *csel, int k,
                          const int32_t *k_d, int kmax, int nrows, const int32_t *nrows_d, int32_t *idx, int *bad,
                          unsigned long long *valid, cudaStream_t st);

/* as_k_compress_pool's decode (s = 1) with start_pos read from sp_d. */
int as_k_compress_pool_decode(const float *ckv, const float *csc, int r, int hd, const int32_t *sp_d, float *part_kv,
                              float *part_sc, as_bf16_t *latent, cudaStream_t st);

/* as_k_index_scores for a decode (start_pos > 0: nothing masked) over the width read from width_d
 * (<= max_width, which sizes the launch); score rows are that width apart. */
int as_k_index_scores_decode(const as_bf16_t *iq, const as_bf16_t *keys, const as_bf16_t *w, int s, int nh, int ihd,
                             int max_width, const int32_t *width_d, int ratio, as_bf16_t *score, cudaStream_t st);
/* Sets the tensor-core kernel's shared-memory limit for ihd now (before a graph capture). */
int as_k_index_scores_prepare(int ihd);

/* o's copy rotated back: o_back = RoPE^-1 of each head's last rd channels of o at row t's position
 * (pos_d ? pos_d[t] : pos0 + t; a negative position copies), the other channels copied: the row
 * pipeline's inverse RoPE, bit for bit. Given to as_k_sparse_attn_decode, the one-query kernel's
 * combine writes it in the same launch; any other path launches as_k_o_back after the attention. */
typedef struct {
    as_bf16_t *o_back;
    const float *cos_t, *sin_t; /* [max_seq][rd / 2] */
    int rd, pos0;
    const int32_t *pos_d;
} AsOBack;
/* Whether ob describes an o_back of hd-channel heads the kernels can write (rd even, <= hd). */
static inline int as_oback_ok(const AsOBack *ob, int hd)
{
    return ob->o_back && ob->rd >= 0 && ob->rd <= hd && ob->rd % 2 == 0 && (ob->rd == 0 || (ob->cos_t && ob->sin_t));
}
/* o_back of `rows` rows of nh heads x hd (rows nh * hd apart) through the row pipeline. */
int as_k_o_back(const as_bf16_t *o, int rows, int nh, int hd, const AsOBack *ob, cudaStream_t st);
/* as_k_sparse_attn over the live selection width *topk_d (<= topk_max, idx's row stride) and
 * compressed row count *nb_d (<= nb_max). The tensor-core path splits the selection as the by-value
 * launch at topk_max would (tiles per split from as_k_sparse_attn_decode_plan) into the caller's
 * workspace ws (never allocated here); for the live width it computes what the by-value launch at that
 * width computes whenever both split into single tiles (tiles_per_split 1). With ob,
 * o_back too (AsOBack). early_rows: the caller vouches that the kernel launched just before on st
 * (programmatically) writes none of idx, rows_a, rows_b, nb_d, topk_d, only q; the one-query kernel then
 * stages its rows before its PDL wait (the same bits either way). path: AS_K_ATTN_* (as_k_sparse_attn_path;
 * under AS_K_ATTN_WGMMA a decode keeps the tensor-core or warp kernel). */
int as_k_sparse_attn_decode(const as_bf16_t *q, const as_bf16_t *rows_a, int na, const as_bf16_t *rows_b, int nb_max,
                            const int32_t *nb_d, const int32_t *idx, int topk_max, const int32_t *topk_d,
                            const float *sink, as_bf16_t *o, int s, int nh, int hd, float scale, void *ws,
                            size_t ws_bytes, const AsOBack *ob, int early_rows, int path, cudaStream_t st);
/* The decode launch's plan on path: *mma 1 when the tensor-core kernel takes it (with its tiles per
 * split), 2 when the one-query kernel does (kernels/attn_decode.cu), 0 for the warp kernel; the workspace
 * it needs; also sets the tensor-core kernel's shared-memory limit (before a graph capture). */
int as_k_sparse_attn_decode_plan(int s, int nh, int hd, int topk_max, int path, int *mma, int *tiles_per_split,
                                 size_t *ws_bytes);

/* ---- one query (kernels/attn_decode.cu): the automatic path of as_k_sparse_attn and
 * as_k_sparse_attn_decode at s = 1 where it applies (hd 256 or 512, nh a multiple of 4, 16-byte
 * aligned q and rows, at most 8192 entries). Splits of 64 entries (kernel.py's softmax blocks) x 8
 * heads per block (4 where nh is not a multiple of 8) on tensor cores, then a combine with the sink.
 * topk / nb by value, or read from topk_d / nb_d (at most topk / nb, which size the launch); ws at least
 * as_k_attn_decode_ws_bytes(nh, hd, topk) bytes, or null (by value only: allocated on the stream); ob
 * (optional): the combine also writes o_back (AsOBack, rd <= hd, rd even). _prepare raises the split
 * kernels' shared-memory limits for hd now (as_k_sparse_attn_decode_plan calls it, before a capture). */
int as_k_attn_decode_applies(int nh, int hd, int topk_max);
size_t as_k_attn_decode_ws_bytes(int nh, int hd, int topk_max);
int as_k_attn_decode_prepare(int hd);
int as_k_attn_decode(const as_bf16_t *q, const as_bf16_t *rows_a, int na, const as_bf16_t *rows_b, int nb,
                     const int32_t *nb_d, const int32_t *idx, int topk, const int32_t *topk_d, const float *sink,
                     as_bf16_t *o, int nh, int hd, float scale, void *ws, size_t ws_bytes, const AsOBack *ob,
                     int early_rows, cudaStream_t st);

/* ---- the selection on the device: kernels/topk_select.cu, test tests/gpu_topk.c ----
 * torch's CPU top-k index set (ref/topk.c as_topk_torch_set, ties included) by an exact emulation of
 * libstdc++'s introselect / heap select, one block per row; rows up to AS_TOPK_MAX_WIDTH columns (the
 * engine selects wider rows on the host). stats (optional, AS_TOPK_NSTATS counters, added to): rows
 * selected, rows whose k-th value is tied across the cut (only the exact emulation decides those), rows
 * through partial_sort, then where the time goes (the benchmark's profile): introselect's partition
 * passes on the whole block and on one warp, the columns they ranked, and the SM cycles (clock64, thread
 * 0) of the row's load, the block's passes, the warp's passes, the tie check and the set's emission. */
#define AS_TOPK_MAX_WIDTH 16384
enum {
    AS_TOPK_ROWS,
    AS_TOPK_TIED,
    AS_TOPK_PARTIAL,
    AS_TOPK_PASSES_BLOCK,
    AS_TOPK_PASSES_WARP,
    AS_TOPK_RANKED_BLOCK,
    AS_TOPK_RANKED_WARP,
    AS_TOPK_CYC_LOAD,
    AS_TOPK_CYC_BLOCK,
    AS_TOPK_CYC_WARP,
    AS_TOPK_CYC_CHECK,
    AS_TOPK_CYC_EMIT,
    AS_TOPK_NSTATS
};

/* set[t][0..k) = as_topk_torch_set(v + t * n, n, k) for each of `rows` rows (k <= n). */
int as_k_topk_rows(const float *v, int rows, int n, int k, int32_t *set, unsigned long long *stats, cudaStream_t st);

/* The indexer's selection, ref/indexer.c as_index_topk after select_host.c's candidate mask: row t of
 * the scores (ld apart) masked to -inf where cand[t] (cand_ld apart, optional) is 0 (written back: the
 * run's iscore), its top-k set ascending, p -> p + offset when p < compress_lens[t] (prefill:
 * (t + 1) / ratio; decode: the width), else -1, into sel (and sel2 when given), ldsel apart. width and
 * k are read from width_d / k_d when given (at most max_width / max_k, which size the launch). */
typedef struct {
    as_bf16_t *score;
    int64_t ld;
    int s, width, max_width, k, max_k, ratio, prefill, offset;
    const int32_t *width_d, *k_d;
    const uint8_t *cand;
    int64_t cand_ld;
    int32_t *sel, *sel2;
    int64_t ldsel;
    unsigned long long *stats;
    /* Optional (s == 1, a decode's row): also the compressed part of the attention's idx, as
     * as_k_build_idx_decode writes it, so that the decode needs no build_idx after its top-k: idx[j] =
     * sel's entry j for j < k, -1 for k <= j < idx_len; an entry >= nrows (*nrows_d when given) becomes
     * -1 and raises *bad; *valid counts the entries >= 0. as_k_build_idx_decode with kmax 0 writes the
     * window part. */
    int32_t *idx;
    int idx_len, nrows;
    const int32_t *nrows_d;
    int *bad;
    unsigned long long *valid;
} AsTopkLaunch;
int as_k_index_topk(const AsTopkLaunch *a, cudaStream_t st);

/* ref/candidates.c as_select_candidate_blocks: the candidate mask [s][width] (mask_ld apart) of the
 * scores (ld apart), width from width_d when given (<= max_width). */
typedef struct {
    const as_bf16_t *score;
    int64_t ld;
    int s, width, max_width, ratio, prefill, bs, topk_blocks;
    const int32_t *width_d;
    uint8_t *mask;
    int64_t mask_ld;
    unsigned long long *stats;
} AsCandLaunch;
int as_k_candidate_blocks(const AsCandLaunch *a, cudaStream_t st);

/* ---- Q2_K projections: kernels/q8_1.cu, q2k_mmvq.cu, q2k_mmq.cu; test tests/gpu_q2k.c ----
 * Weights stay raw GGUF Q2_K blocks, activations are quantised to q8_1 blocks (model/ggml_blocks.h:
 * AsBlockQ2K, AsBlockQ8_1, passed as void *; both 4-byte aligned). Twins: model/quants.h. */

/* as_quantize_row_q8_1 of `rows` rows of n bf16 values (n a multiple of 32; row r at x + r * ldx):
 * d = amax / 127, q = round(x / d), s = d * sum q per block of 32, into y + r * ldy blocks. */
int as_k_quantize_q8_1(const as_bf16_t *x, int64_t ldx, int rows, int n, void *y, int64_t ldy, cudaStream_t st);

/* Q2_K projection, batched: for b < batch, t < m, o < n_out: y_b[t][o] = the sum over row o of
 * ggml's vec_dot_q2_K_q8_1 terms (as_vec_dot_q2_K_q8_1), in f32, stored as bf16 (RNE) or, with y_f32,
 * f32. n_in a multiple of 256. W_b = W + b * strideW with rows ldw apart, in Q2_K blocks; the token
 * rows of x_b = xq + b * strideX are ldx apart, in q8_1 blocks; y_b = y + b * strideY, rows ldy apart,
 * in elements. mmvq: m <= 8 (decode, memory bound); mmq: any m (int8 tensor cores, tiles of 128
 * rows x 32 tokens). mmvq computes every term exactly as the twin (only the order of the f32 sum of
 * the terms differs); mmq groups the same exact integers differently (f32 rounding apart). */
int as_k_q2k_mmvq(const void *W, int64_t ldw, int64_t strideW, int n_out, int n_in, const void *xq, int64_t ldx,
                  int64_t strideX, int m, void *y, int64_t ldy, int64_t strideY, int y_f32, int batch,
                  cudaStream_t st);
int as_k_q2k_mmq(const void *W, int64_t ldw, int64_t strideW, int n_out, int n_in, const void *xq, int64_t ldx,
                 int64_t strideX, int m, void *y, int64_t ldy, int64_t strideY, int y_f32, int batch, cudaStream_t st);


/* ---- fp8 precision's weights in the checkpoint's form: kernels/gemv.cu (the e4m3 GEMV), fp8_dequant.cu;
 * twin ref/gemv.c, ref/linear.c on the dequantised weight; test tests/gpu_gemv_e4m3.c. ----
 * An fp8-form weight: e4m3 codes [n_out][n_in] (n_in a multiple of 32), rows ldw bytes apart, and one
 * f32 scale per 32 x 32 block, ws[o / 32][k] (ldws >= n_in / 32; a 128 x 128 scale is spread over its
 * 16 blocks), so that W[o][i] = e4m3(code) * ws exactly. batch > 1 (the grouped wo_a): group b is rows
 * [b * stride_rows, + n_out) of the same arrays. */
typedef struct {
    const uint8_t *w;
    int64_t ldw;
    const float *ws;
    int64_t ldws;
    int n_out, n_in, batch;
    int64_t stride_rows;
} AsFp8Weight;
/* The decode GEMV of kernels/gemv.cu on an fp8-form weight, reading one byte a weight: y_b[t][o] =
 * sum_i x_b[t][i] bf16(e4m3(W_b[o][i]) ws[o / 32][i / 32]), bit for bit as_k_gemv_bf16 on the dequantised
 * weight (the same lanes sum the same chunks in the same order, and every weight widens to exactly the
 * bf16 upload's value), for x the fp8 linear's QDQ'd input (act_quant's values) or wo_a's bf16 o. The
 * scales must be powers of two (model/fp8_form.h: as_fp8_scales_pow2) and batch groups start on a block
 * (stride_rows a multiple of 32); the fused forms as as_k_gemv_bf16_residual, _rope and _norm (batch 1).
 * _cfg: an explicit (R, W) for the micro-benchmark (0: the automatic choice). */
int as_k_gemv_e4m3(const AsFp8Weight *w, const as_bf16_t *x, int64_t ldx, int64_t stride_x, int m, void *y,
                   int64_t ldy, int64_t stride_y, int y_f32, cudaStream_t st);
int as_k_gemv_e4m3_cfg(const AsFp8Weight *w, const as_bf16_t *x, int64_t ldx, int64_t stride_x, int m, void *y,
                       int64_t ldy, int64_t stride_y, int y_f32, int R, int Wn, cudaStream_t st);
int as_k_gemv_e4m3_residual(const AsFp8Weight *w, const as_bf16_t *x, int64_t ldx, int m, as_bf16_t *y,
                            int64_t ldy, as_bf16_t *h, int64_t ldh, cudaStream_t st);
int as_k_gemv_e4m3_rope(const AsFp8Weight *w, const as_bf16_t *x, int64_t ldx, int m, as_bf16_t *y, int64_t ldy,
                        int heads, int hd, int rd, int pos0, const int32_t *pos, const float *cos_t,
                        const float *sin_t, int inverse, int room, cudaStream_t st);
int as_k_gemv_e4m3_norm(const AsFp8Weight *w, const as_bf16_t *x, as_bf16_t *y, as_bf16_t *h, const float *norm_w,
                        float eps, as_bf16_t *y_norm, unsigned *ctr, cudaStream_t st);
/* The fp8-form weight dequantised, out[o][i] = bf16(e4m3(w[o][i]) * ws[o / 32][i / 32]) (exact), rows
 * ldo apart (w's rows and out 16-byte aligned, ldw a multiple of 16, ldo of 8): a prefill's projection
 * through cuBLAS on the same bf16 weights as the bf16 upload. */
int as_k_fp8_dequant_bf16(const AsFp8Weight *w, as_bf16_t *out, int64_t ldo, cudaStream_t st);

#ifdef __cplusplus
}
#endif

#endif
