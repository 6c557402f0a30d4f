/* The kernel shapes shared by the GPU tests (tests/gpu_*.c), the kernel micro-benchmark
 * (bench/kernels_bench.cu) and the CPU emulator (tools/emu): the flash model's geometry and
 * projections (model/presets.c's "flash"; tests/test_kernel_shapes.c checks them against the
 * preset and the loader's tensor table), and small, awkward projections that reach every path of
 * the GEMV kernels: row tails, padded and unpadded rows, groups, misaligned x, fewer inputs than a
 * vector. Header only, plain C: C, C++ and CUDA sources include it. */
#ifndef AS_KERNEL_SHAPES_H
#define AS_KERNEL_SHAPES_H

/* The flash geometry, in the SPEC's names. */
enum {
    AS_FLASH_DIM = 5120,
    AS_FLASH_HEADS = 64,
    AS_FLASH_HEAD_DIM = 512,
    AS_FLASH_ROPE_DIM = 64,
    AS_FLASH_Q_LORA = 1280,
    AS_FLASH_O_GROUPS = 8,
    AS_FLASH_O_LORA = 1024,
    AS_FLASH_WINDOW = 128,
    AS_FLASH_INDEX_HEADS = 32,
    AS_FLASH_INDEX_HEAD_DIM = 128,
    AS_FLASH_INDEX_TOPK = 512,
    AS_FLASH_MAX_SEQ = 8192,
    /* the sparse attention's entries a query: the window and the index selection */
    AS_FLASH_ATTN_TOPK = AS_FLASH_WINDOW + AS_FLASH_INDEX_TOPK,
    /* the decode context the benchmark and the decode-kernel tests use */
    AS_FLASH_CONTEXT = 4096,
};

/* One projection y = W x as a GEMV launch sees it: `groups` weight matrices of [n_out][n_in]
 * (rows ldw apart), each against its own n_in slice of an x row of ldx values. */
typedef struct {
    const char *name;
    const char *tensor;  /* the weight after "layers.{l}." (flash shapes; NULL for the others) */
    int n_out, n_in;
    int ldw;             /* a weight row's stride in values: n_in, or padded past it */
    int ldx;             /* an x row's stride in values: groups * n_in for a grouped projection */
    int groups;          /* wo_a: o_groups, one launch */
    int f32_weights;     /* the ratio-2 compressor's weights stay f32 (no batch) */
    int x_off;           /* x starts this many values into its buffer (off the 16-byte alignment) */
} AsProjShape;

#define AS_FLASH_GW (AS_FLASH_HEADS * AS_FLASH_HEAD_DIM / AS_FLASH_O_GROUPS)

/* The projections of a flash layer, in the order of a layer's forward. */
static const AsProjShape as_flash_projections[] = {
    {"wq_a", "attn.wq_a.weight", AS_FLASH_Q_LORA, AS_FLASH_DIM, AS_FLASH_DIM, AS_FLASH_DIM, 1, 0, 0},
    {"wq_b", "attn.wq_b.weight", AS_FLASH_HEADS * AS_FLASH_HEAD_DIM, AS_FLASH_Q_LORA, AS_FLASH_Q_LORA,
     AS_FLASH_Q_LORA, 1, 0, 0},
    {"wkv", "attn.wkv.weight", AS_FLASH_HEAD_DIM, AS_FLASH_DIM, AS_FLASH_DIM, AS_FLASH_DIM, 1, 0, 0},
    {"compressor.wkv f32", "attn.compressor.wkv.weight", AS_FLASH_HEAD_DIM, AS_FLASH_DIM, AS_FLASH_DIM,
     AS_FLASH_DIM, 1, 1, 0},
    {"indexer.wq_b", "attn.indexer.wq_b.weight", AS_FLASH_INDEX_HEADS * AS_FLASH_INDEX_HEAD_DIM, AS_FLASH_Q_LORA,
     AS_FLASH_Q_LORA, AS_FLASH_Q_LORA, 1, 0, 0},
    {"indexer.weights_proj", "attn.indexer.weights_proj.weight", AS_FLASH_INDEX_HEADS, AS_FLASH_DIM, AS_FLASH_DIM,
     AS_FLASH_DIM, 1, 0, 0},
    {"wo_a grouped", "attn.wo_a.weight", AS_FLASH_O_LORA, AS_FLASH_GW, AS_FLASH_GW,
     AS_FLASH_HEADS * AS_FLASH_HEAD_DIM, AS_FLASH_O_GROUPS, 0, 0},
    {"wo_b", "attn.wo_b.weight", AS_FLASH_DIM, AS_FLASH_O_GROUPS * AS_FLASH_O_LORA, AS_FLASH_O_GROUPS * AS_FLASH_O_LORA,
     AS_FLASH_O_GROUPS * AS_FLASH_O_LORA, 1, 0, 0},
};
#define AS_N_FLASH_PROJECTIONS ((int)(sizeof as_flash_projections / sizeof as_flash_projections[0]))

/* Small and awkward projections: the tiny geometry's sizes, and the shapes that take each of the
 * GEMV's paths (the vector kernel with a scalar tail, the scalar kernel for unaligned rows or x). */
static const AsProjShape as_small_projections[] = {
    {"tiny wq_a", 0, 64, 256, 256, 256, 1, 0, 0},
    {"tiny wo_a grouped", 0, 32, 64, 64, 256, 4, 0, 0},
    {"64 rows, 3 groups", 0, 64, 512, 512, 3 * 512, 3, 0, 0},
    /* n_in % 8 != 0, rows padded to 8: the vector body and its scalar tail */
    {"tail padded", 0, 301, 1003, 1008, 1008, 1, 0, 0},
    {"tail padded f32w", 0, 77, 1003, 1008, 1008, 1, 1, 0},
    {"tail padded, 2 groups", 0, 37, 203, 208, 2 * 208, 2, 0, 0},
    {"tail padded f32w, 37 rows", 0, 37, 203, 208, 208, 1, 1, 0},
    {"many row sets, 2 groups", 0, 203, 520, 520, 2 * 520, 2, 0, 0},
    {"9 rows, tail padded", 0, 9, 1030, 1032, 1032, 1, 0, 0},
    /* unpadded odd rows: the scalar kernel */
    {"tail unpadded", 0, 301, 1003, 1003, 1003, 1, 0, 0},
    {"tail unpadded f32w", 0, 77, 1003, 1003, 1003, 1, 1, 0},
    {"tail unpadded, 2 groups", 0, 37, 203, 203, 2 * 203, 2, 0, 0},
    /* x one value off the 16-byte alignment: the scalar kernel */
    {"x misaligned", 0, 129, 1024, 1024, 1024, 1, 0, 1},
    /* fewer than 8 inputs */
    {"n_in 5", 0, 1, 5, 5, 5, 1, 0, 0},
    {"n_in 7 padded", 0, 3, 7, 8, 8, 2, 0, 0},
    {"f32w, 5 rows of 64", 0, 5, 64, 64, 64, 1, 1, 0},
};
#define AS_N_SMALL_PROJECTIONS ((int)(sizeof as_small_projections / sizeof as_small_projections[0]))

/* The shape every (R, W, M) instantiation of the GEMV runs on: n_out a multiple of neither R nor a
 * block's rows, n_in with a tail, three groups (the f32-weight kernel runs it with one). */
static const AsProjShape as_every_config_projection = {"every config", 0, 301, 1027, 1032, 1032, 3, 0, 0};

#endif
