/* What one layer's forward exposes (SPEC section 4, `AttnV41Run` and beyond), on the host, in
 * one form for the reference, the engine (copied back) and the dumps. Every tensor has a fixed
 * id, a SPEC name and named dimensions, so diff, dump and TUI code loops over the table. */
#ifndef AS_RUN_H
#define AS_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    AS_VT_BF16,   /* bf16 values held in float */
    AS_VT_F32,    /* true f32 (partial-group state) */
    AS_VT_I32,    /* indices, -1 = nothing */
    AS_VT_U8,     /* boolean mask */
} AsValType;

/* Which quantiser a tensor leaves (for quantisation flips, SPEC section 6). */
typedef enum { AS_QZ_NONE, AS_QZ_FP8, AS_QZ_FP4_E4M3, AS_QZ_FP4_E8M0 } AsQuantKind;

typedef enum {
    /* per-step intermediates, in forward order */
    AS_T_X,          /* [s][dim]          the layer's normalised input */
    AS_T_QR,         /* [s][q_lora_rank]  rmsnorm(x wq_a) */
    AS_T_Q,          /* [s][nh][hd]       after RoPE */
    AS_T_KV_PRE,     /* [s][hd]           rope(rmsnorm(x wkv)), before fp8 */
    AS_T_KV,         /* [s][hd]           after fp8 */
    AS_T_ROWS_A,     /* [rows_a_len][hd]  window rows attended */
    AS_T_WIDX,       /* [s][cols]         window selection (-1 nothing) */
    AS_T_LATENT,     /* [n_new][hd]       compressor output, pre-RoPE (kv sources) */
    AS_T_LATENT_PRE, /* [n_new][hd]       rotated latents before fp4-e4m3 */
    AS_T_LATENT_Q,   /* [n_new][hd]       rows written to the compressed cache */
    AS_T_IK_PRE,     /* [n_new][ihd]      index keys before fp4-e8m0 (key owners) */
    AS_T_IK,         /* [n_new][ihd]      index keys written */
    AS_T_IQ_PRE,     /* [s][nh_i][ihd]    index queries before fp4-e8m0 */
    AS_T_IQ,         /* [s][nh_i][ihd] */
    AS_T_W,          /* [s][nh_i]         head weights */
    AS_T_KEYS,       /* [width][ihd]      the index keys scored against (rows of the shared cache) */
    AS_T_ISCORE,     /* [s][width]        index scores after visibility and candidate masks */
    AS_T_CAND,       /* [s][width]        candidate mask published (source) or applied (users) */
    AS_T_CSEL,       /* [s][k]            compressed selection used (offset added, -1 nothing) */
    AS_T_ROWS_B,     /* [rows_b_len][hd]  compressed rows attended */
    AS_T_IDX,        /* [s][topk]         window slots then compressed positions */
    AS_T_O,          /* [s][nh][hd]       attention output BEFORE the inverse rotation */
    AS_T_O_BACK,     /* [s][nh][hd]       after the inverse rotation */
    AS_T_OG,         /* [s][o_groups][o_lora_rank] */
    AS_T_OUT,        /* [s][dim] */
    /* layer state after the step */
    AS_T_ST_RING,    /* [win][hd] */
    AS_T_ST_PART_KV, /* [ratio][hd] f32 (ratio 2 kv sources) */
    AS_T_ST_PART_SC, /* [ratio][hd] f32 */
    AS_T_ST_CCACHE,  /* [rows filled][hd] compressed cache (kv sources) */
    AS_T_ST_IKCACHE, /* [rows filled][ihd] index-key cache (key owners) */
    AS_T_COUNT
} AsTensorId;

#define AS_T_FIRST_STATE AS_T_ST_RING

typedef struct {
    const char *name;        /* SPEC name, also the dump dataset name */
    AsValType type;
    int ndim;
    const char *dims[3];     /* "token", "head", "channel", "slot", "row", "group", "pos", "col" */
    AsQuantKind quant;       /* quantiser this tensor leaves */
    AsTensorId pre;          /* its pre-quantisation twin (AS_T_COUNT: none) */
    bool selection;          /* compared exactly (SPEC 6) */
    const char *what;        /* one line for help screens and reports */
} AsTensorDesc;

extern const AsTensorDesc as_tensor_desc[AS_T_COUNT];
/* AS_T_COUNT when the name is unknown. */
AsTensorId as_tensor_by_name(const char *name);

typedef struct {
    AsValType type;
    int ndim;
    int64_t shape[3];
    void *data;      /* owned by the run; NULL when the tensor is absent for this layer/step */
    size_t cap;      /* bytes allocated */
} AsHostTensor;

static inline int64_t as_ht_numel(const AsHostTensor *t)
{
    if (!t->data) return 0;
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

/* Which layer published a shared slot, in which step (-1: never). */
typedef struct {
    int layer, step;
} AsProvenance;

typedef struct {
    int layer, step, start_pos, s;
    int ratio;
    int rows_a_len, rows_b_len;
    int cols;            /* window selection width */
    int k;               /* compressed selection width (0 when none) */
    int topk;            /* cols + k */
    int width;           /* index score width (0: indexer did not run) */
    int compress_len;    /* end_pos / ratio (0 at ratio 0) */
    int n_new;           /* latents completed in this call (kv sources) */
    bool indexer_ran;
    AsProvenance rows_b_from;  /* publisher of the compressed cache attended */
    AsProvenance keys_from;    /* publisher of the index keys scored against (aliasing quirk) */
    AsProvenance sel_from;     /* publisher of the compressed selection used (stale quirk) */
    AsProvenance cand_from;    /* publisher of the candidate mask applied / published */
    AsHostTensor t[AS_T_COUNT];
} AsRun;

void as_run_init(AsRun *r);
void as_run_free(AsRun *r);
/* Shapes tensor id (allocating or reusing its buffer); returns its data or NULL on OOM. */
void *as_run_shape(AsRun *r, AsTensorId id, int ndim, int64_t d0, int64_t d1, int64_t d2);
/* Marks a tensor absent and frees its buffer. */
void as_run_clear(AsRun *r, AsTensorId id);
/* Deep copy (dst initialised or freshly init'ed). Returns 0 or -1 on OOM. */
int as_run_copy(AsRun *dst, const AsRun *src);

#endif
