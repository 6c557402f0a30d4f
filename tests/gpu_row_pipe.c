/* kernels/row_pipe.cu against the chain of the separate kernels it fuses, bit for bit on the device:
 * as_k_rmsnorm -> as_k_rope -> as_k_quant (pre) -> as_k_scale_bf16 -> y, and as_k_ring_store or a
 * row copy into the cache. Every use the engine makes of it (kv: rmsnorm + RoPE + fp8 + ring store,
 * prefill shorter and longer than the window, decode at a device position with and without the
 * ring-slot fault's shift; index keys: rmsnorm + YaRN RoPE + fp4-e8m0 + cache rows at a row from the
 * device; latents: YaRN RoPE at an array of positions + fp4-e4m3 x 2 out of place + cache rows; index
 * queries: 32 heads in padded rows; o: 64 heads, inverse RoPE out of place) at the flash and tiny
 * shapes with the reference's RoPE tables, then special values. y (padding included), pre and the
 * whole cache are compared. The existing twins (gpu_rmsnorm, gpu_rope, gpu_quant, gpu_window) pin
 * the separate kernels to ref/; bench/emu/emu_decode.cpp runs the fused kernel against ref/ too. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/config.h"
#include "ref/numerics.h"
#include "ref/rope.h"
#include "tests/lib/gpu_util.h"
#include "tests/lib/harness.h"
#include "tests/lib/rand.h"

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    REQUIRE(p, "out of host memory (%zu bytes)", bytes);
    return p;
}


typedef struct {
    AsRopeTable t;
    float *dcos, *dsin;
} Tables;

static void tables_init(Tables *tb, const char *preset, int ratio)
{
    AsConfig cfg;
    AsError err = {0};
    REQUIRE(as_config_preset(preset, &cfg, &err) == 0, "preset %s: %s", preset, err.msg);
    REQUIRE(as_rope_init_for_ratio(&tb->t, &cfg, ratio) == 0, "rope tables %s ratio %d", preset, ratio);
    int64_t n = (int64_t)tb->t.max_seq * (tb->t.rd / 2);
    tb->dcos = as_gpu_f32(tb->t.cos, n);
    tb->dsin = as_gpu_f32(tb->t.sin, n);
}

static void tables_free(Tables *tb)
{
    as_gpu_free(tb->dcos);
    as_gpu_free(tb->dsin);
    as_rope_free(&tb->t);
}

typedef struct {
    const char *name;
    int rows, heads, n, ldx_pad, ldy_pad;
    int inplace, norm, rope;
    int pos_mode;   /* 0: pos0 + row; 1: a device array of positions; 2: one position on the device */
    int pos0, inverse, quant;
    float post_scale;
    int pre, store_mode, ring, ring_shift, row0, row0_dev, special;
} Case;

/* Counts differing bf16 words; reports the first few with their index. */
static int64_t diff_words(const char *case_name, const char *what, const uint16_t *got, const uint16_t *want, size_t n)
{
    int64_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i] && bad++ < 4)
            as_test_note("%s: %s[%zu]: fused 0x%04x, separate kernels 0x%04x", case_name, what, i, got[i], want[i]);
    return bad;
}

static void run_case(const Case *c, const Tables *tb, uint64_t seed)
{
    g_rs = seed;
    const int64_t width = (int64_t)c->heads * c->n, ldx = width + c->ldx_pad;
    const int64_t ldy = c->inplace ? ldx : width + c->ldy_pad;
    const int rd = c->rope ? tb->t.rd : 0;
    const size_t nx = (size_t)c->rows * ldx, ny = (size_t)c->rows * ldy, npre = (size_t)c->rows * width;
    uint16_t *x = xmalloc(sizeof(uint16_t) * nx), *y0 = xmalloc(sizeof(uint16_t) * ny);
    for (size_t i = 0; i < nx; i++)
        x[i] = as_bf16_bits(urnd(3.0f) * (rnd() % 5 == 0 ? 64.0f : 1.0f));
    for (size_t i = 0; i < ny; i++)
        y0[i] = as_bf16_bits(urnd(1.0f));
    if (c->special) {
        for (int i = 0; i < c->n; i++)
            x[i] = 0; /* sub-row 0: zeros (the rmsnorm's eps alone) */
        static const uint16_t sp[5] = {0x7fc1, 0xff81, 0x7f80, 0x8000, 0x0001};
        for (size_t i = 0; i < nx; i += 37)
            x[i] = sp[(i / 37) % 5];
    }
    float *w = xmalloc(sizeof(float) * (size_t)c->n);
    for (int i = 0; i < c->n; i++)
        w[i] = urnd(2.0f);
    int32_t *pos = xmalloc(sizeof(int32_t) * (size_t)c->rows);
    for (int r = 0; r < c->rows; r++)
        pos[r] = c->pos_mode == 1 ? (int32_t)(rnd() % (uint64_t)tb->t.max_seq) : c->pos0 + r;
    if (c->pos_mode == 1 && c->rows > 2)
        pos[1] = -1; /* a row left unrotated */
    const int store_rows = c->store_mode == AS_STORE_RING ? c->ring : c->row0 + c->rows + 3;
    const size_t nstore = (size_t)store_rows * width;
    uint16_t *store0 = xmalloc(sizeof(uint16_t) * nstore);
    for (size_t i = 0; i < nstore; i++)
        store0[i] = as_bf16_bits(urnd(1.0f));

    /* device buffers: the fused kernel's and the chain's */
    as_bf16_t *fx = as_gpu_bytes(x, sizeof(uint16_t) * nx), *cx = as_gpu_bytes(x, sizeof(uint16_t) * nx);
    as_bf16_t *fy = c->inplace ? fx : as_gpu_bytes(y0, sizeof(uint16_t) * ny);
    as_bf16_t *cy = c->inplace ? cx : as_gpu_bytes(y0, sizeof(uint16_t) * ny);
    as_bf16_t *fpre = as_gpu_alloc(sizeof(uint16_t) * npre), *cpre = as_gpu_alloc(sizeof(uint16_t) * npre);
    REQUIRE(cudaMemset(fpre, 0x7f, sizeof(uint16_t) * npre) == cudaSuccess && cudaMemset(cpre, 0x7f, sizeof(uint16_t) * npre) == cudaSuccess, "memset");
    as_bf16_t *fstore = as_gpu_bytes(store0, sizeof(uint16_t) * nstore), *cstore = as_gpu_bytes(store0, sizeof(uint16_t) * nstore);
    float *dw = as_gpu_f32(w, c->n);
    int32_t *dpos = as_gpu_bytes(pos, sizeof(int32_t) * (size_t)c->rows);
    int32_t row0 = c->row0;
    int32_t *drow0 = as_gpu_bytes(&row0, sizeof row0);

    /* the fused kernel */
    AsRowPipe p = {.x = fx, .ldx = ldx, .y = fy, .ldy = ldy, .pre = c->pre ? fpre : NULL, .rows = c->rows,
                   .heads = c->heads, .n = c->n, .norm_w = c->norm ? dw : NULL, .eps = 1e-6f, .rd = rd,
                   .pos0 = c->pos0, .pos = c->pos_mode ? dpos : NULL, .cos_t = tb->dcos, .sin_t = tb->dsin,
                   .inverse = c->inverse, .quant = c->quant, .post_scale = c->post_scale, .store_mode = c->store_mode,
                   .store = c->store_mode ? fstore : NULL, .store_ld = width, .row0 = c->row0_dev ? -1 : c->row0,
                   .row0_d = c->row0_dev ? drow0 : NULL, .ring = c->ring, .ring_shift = c->ring_shift};
    as_gpu_check_launch(as_k_row_pipe(&p, 0), c->name);

    /* the separate kernels, in the engine's former order */
    for (int h = 0; h < c->heads && c->norm; h++)
        as_gpu_check_launch(as_k_rmsnorm(cx + (size_t)h * c->n, ldx, dw, cx + (size_t)h * c->n, ldx, c->rows, c->n,
                                         1e-6f, 0),
                            "chain: rmsnorm");
    if (!c->inplace)
        REQUIRE(cudaMemcpy2D(cy, sizeof(uint16_t) * (size_t)ldy, cx, sizeof(uint16_t) * (size_t)ldx,
                             sizeof(uint16_t) * (size_t)width, (size_t)c->rows, cudaMemcpyDeviceToDevice) == cudaSuccess,
                "chain: copy");
    if (rd)
        as_gpu_check_launch(as_k_rope(cy, ldy, c->rows, c->heads, c->n, rd, c->pos0, c->pos_mode ? dpos : NULL,
                                      tb->dcos, tb->dsin, c->inverse, 0),
                            "chain: rope");
    for (int r = 0; r < c->rows; r++) {
        as_bf16_t *yr = cy + (size_t)r * ldy;
        if (c->pre)
            REQUIRE(cudaMemcpy(cpre + (size_t)r * width, yr, sizeof(uint16_t) * (size_t)width,
                               cudaMemcpyDeviceToDevice) == cudaSuccess, "chain: pre");
        if (c->quant)
            as_gpu_check_launch(as_k_quant(yr, NULL, width, c->quant, 0), "chain: quant");
        if (c->post_scale != 1.0f)
            as_gpu_check_launch(as_k_scale_bf16(yr, width, c->post_scale, 0), "chain: scale");
    }
    if (c->store_mode == AS_STORE_RING) {
        REQUIRE(c->heads == 1 && ldy == width, "test bug: ring cases are contiguous single-head rows");
        /* as_k_ring_store: prefill (pos0 0, any rows) or decode (one row at start_pos + shift) */
        int sp = c->rows == 1 ? pos[0] + c->ring_shift : 0;
        REQUIRE(c->rows == 1 || (c->pos_mode == 0 && c->pos0 == 0 && c->ring_shift == 0), "test bug: ring case");
        as_gpu_check_launch(as_k_ring_store(cstore, c->ring, c->n, cy, c->rows, sp, 0), "chain: ring store");
    } else if (c->store_mode == AS_STORE_ROWS) {
        REQUIRE(cudaMemcpy2D(cstore + (size_t)c->row0 * width, sizeof(uint16_t) * (size_t)width, cy,
                             sizeof(uint16_t) * (size_t)ldy, sizeof(uint16_t) * (size_t)width, (size_t)c->rows,
                             cudaMemcpyDeviceToDevice) == cudaSuccess,
                "chain: cache rows");
    }
    as_gpu_sync(c->name);

    uint16_t *g = xmalloc(sizeof(uint16_t) * (ny > nstore ? ny : nstore)), *want = xmalloc(sizeof(uint16_t) * (ny > nstore ? ny : nstore));
    int64_t bad = 0;
    as_gpu_get_bytes(g, fy, sizeof(uint16_t) * ny);
    as_gpu_get_bytes(want, cy, sizeof(uint16_t) * ny);
    bad += diff_words(c->name, "y", g, want, ny);
    if (c->pre) {
        as_gpu_get_bytes(g, fpre, sizeof(uint16_t) * npre);
        as_gpu_get_bytes(want, cpre, sizeof(uint16_t) * npre);
        bad += diff_words(c->name, "pre", g, want, npre);
    }
    as_gpu_get_bytes(g, fstore, sizeof(uint16_t) * nstore);
    as_gpu_get_bytes(want, cstore, sizeof(uint16_t) * nstore);
    bad += diff_words(c->name, "cache", g, want, nstore);
    CHECK(bad == 0, "row pipe, %s: %lld words differ from the separate kernels", c->name, (long long)bad);
    if (!bad)
        as_test_note("row pipe, %s: y%s and the cache bit-exact with the separate kernels", c->name,
                     c->pre ? ", pre" : "");

    free(x), free(y0), free(w), free(pos), free(store0), free(g), free(want);
    as_gpu_free(fx), as_gpu_free(cx);
    if (!c->inplace)
        as_gpu_free(fy), as_gpu_free(cy);
    as_gpu_free(fpre), as_gpu_free(cpre), as_gpu_free(fstore), as_gpu_free(cstore), as_gpu_free(dw), as_gpu_free(dpos),
        as_gpu_free(drow0);
}

GPU_TEST(gpu_row_pipe_flash)
{
    Tables plain, yarn;
    tables_init(&plain, "flash", 0);
    tables_init(&yarn, "flash", 2);
    /* name rows heads n ldx_pad ldy_pad inplace norm rope pos_mode pos0 inverse quant post pre store ring shift row0 row0_dev special */
    const Case kv[] = {
        {"flash kv prefill 5 rows (ring 128)", 5, 1, 512, 0, 0, 1, 1, 1, 0, 0, 0, AS_KQ_FP8, 1.0f, 1, AS_STORE_RING, 128, 0, 0, 0, 0},
        {"flash kv prefill 200 rows (past the ring)", 200, 1, 512, 0, 0, 1, 1, 1, 0, 0, 0, AS_KQ_FP8, 1.0f, 1, AS_STORE_RING, 128, 0, 0, 0, 0},
        {"flash kv decode at device position 4097", 1, 1, 512, 0, 0, 1, 1, 1, 2, 4097, 0, AS_KQ_FP8, 1.0f, 1, AS_STORE_RING, 128, 0, 0, 0, 0},
        {"flash kv decode, ring-slot shift", 1, 1, 512, 0, 0, 1, 1, 1, 2, 8191, 0, AS_KQ_FP8, 1.0f, 1, AS_STORE_RING, 128, 1, 0, 0, 0},
        {"flash o, 64 heads, inverse, out of place", 3, 64, 512, 0, 0, 0, 0, 1, 0, 8189, 1, 0, 1.0f, 0, AS_STORE_NONE, 0, 0, 0, 0, 0},
        {"flash o decode at a device position", 1, 64, 512, 0, 0, 0, 0, 1, 2, 5000, 1, 0, 1.0f, 0, AS_STORE_NONE, 0, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        run_case(&kv[i], &plain, 100 + i);
    const Case yc[] = {
        {"flash index keys 7 rows, cache rows from row 40", 7, 1, 128, 0, 0, 1, 1, 1, 0, 80, 0, AS_KQ_FP4_E8M0, 1.0f, 1, AS_STORE_ROWS, 0, 0, 40, 0, 0},
        {"flash index key decode, device position and row", 1, 1, 128, 0, 0, 1, 1, 1, 2, 4095, 0, AS_KQ_FP4_E8M0, 1.0f, 1, AS_STORE_ROWS, 0, 0, 2047, 1, 0},
        {"flash latents at positions, e4m3 x2, cache rows", 6, 1, 512, 0, 0, 0, 0, 1, 1, 0, 0, AS_KQ_FP4_E4M3, 2.0f, 1, AS_STORE_ROWS, 0, 0, 3, 0, 0},
        {"flash latent decode, e4m3, device row", 1, 1, 512, 0, 0, 0, 0, 1, 2, 4096, 0, AS_KQ_FP4_E4M3, 1.0f, 1, AS_STORE_ROWS, 0, 0, 2048, 1, 0},
        {"flash index queries, 32 heads, padded rows", 4, 32, 128, 64, 0, 1, 0, 1, 0, 100, 0, AS_KQ_FP4_E8M0, 1.0f, 1, AS_STORE_NONE, 0, 0, 0, 0, 0},
        {"flash index queries decode", 1, 32, 128, 0, 0, 1, 0, 1, 2, 7000, 0, AS_KQ_FP4_E8M0, 1.0f, 1, AS_STORE_NONE, 0, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof yc / sizeof yc[0]; i++)
        run_case(&yc[i], &yarn, 200 + i);
    tables_free(&plain);
    tables_free(&yarn);
}

GPU_TEST(gpu_row_pipe_tiny_and_specials)
{
    Tables plain, yarn;
    tables_init(&plain, "tiny", 0);
    tables_init(&yarn, "tiny", 2);
    const Case c[] = {
        {"tiny kv prefill 20 rows (ring 8)", 20, 1, 64, 0, 0, 1, 1, 1, 0, 0, 0, AS_KQ_FP8, 1.0f, 1, AS_STORE_RING, 8, 0, 0, 0, 0},
        {"tiny kv decode, ring-slot shift", 1, 1, 64, 0, 0, 1, 1, 1, 2, 13, 0, AS_KQ_FP8, 1.0f, 1, AS_STORE_RING, 8, 1, 0, 0, 0},
        {"tiny o, 4 heads, inverse", 2, 4, 64, 0, 0, 0, 0, 1, 0, 9, 1, 0, 1.0f, 0, AS_STORE_NONE, 0, 0, 0, 0, 0},
        {"specials: zeros, NaN, inf, -0, subnormal, rope only", 3, 2, 64, 0, 0, 1, 0, 1, 0, 1, 0, 0, 1.0f, 1, AS_STORE_NONE, 0, 0, 0, 0, 1},
        {"specials with rmsnorm and fp8", 3, 1, 64, 0, 0, 1, 1, 1, 0, 1, 0, AS_KQ_FP8, 1.0f, 1, AS_STORE_NONE, 0, 0, 0, 0, 1},
        {"n 48, e4m3 (lanes past n), no rope", 3, 1, 48, 0, 0, 1, 1, 0, 0, 0, 0, AS_KQ_FP4_E4M3, 1.0f, 1, AS_STORE_NONE, 0, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < 3; i++)
        run_case(&c[i], &plain, 300 + i);
    for (size_t i = 3; i < sizeof c / sizeof c[0]; i++)
        run_case(&c[i], &yarn, 300 + i);
    const Case ik = {"tiny index keys, device row", 1, 1, 32, 0, 0, 1, 1, 1, 2, 11, 0, AS_KQ_FP4_E8M0, 1.0f, 1, AS_STORE_ROWS, 0, 0, 5, 1, 0};
    run_case(&ik, &yarn, 400);
    tables_free(&plain);
    tables_free(&yarn);
}

GPU_TEST(gpu_row_pipe_refuses_bad_sizes)
{
    as_bf16_t *x = (as_bf16_t *)(uintptr_t)256; /* never dereferenced: every call below is refused */
    const AsRowPipe ok = {.x = x, .ldx = 64, .y = x, .ldy = 64, .rows = 1, .heads = 1, .n = 64, .post_scale = 1.0f};
    AsRowPipe p = ok;
    p.n = 0;
    CHECK(as_k_row_pipe(&p, 0) == (int)cudaErrorInvalidValue, "n 0 refused");
    p = ok, p.n = 12289, p.ldx = p.ldy = 12289;
    CHECK(as_k_row_pipe(&p, 0) == (int)cudaErrorInvalidValue, "n past 12288 refused");
    p = ok, p.quant = AS_KQ_FP8, p.n = 48, p.ldx = p.ldy = 48;
    CHECK(as_k_row_pipe(&p, 0) == (int)cudaErrorInvalidValue, "fp8 over rows not a multiple of 32 refused");
    p = ok, p.ldx = 32;
    CHECK(as_k_row_pipe(&p, 0) == (int)cudaErrorInvalidValue, "ldx < heads * n refused");
    p = ok, p.ldy = 128;
    CHECK(as_k_row_pipe(&p, 0) == (int)cudaErrorInvalidValue, "in place with two strides refused");
    p = ok, p.rd = 63;
    CHECK(as_k_row_pipe(&p, 0) == (int)cudaErrorInvalidValue, "odd rd refused");
    p = ok, p.store_mode = AS_STORE_RING, p.ring = 0, p.store = x, p.store_ld = 64;
    CHECK(as_k_row_pipe(&p, 0) == (int)cudaErrorInvalidValue, "ring of 0 slots refused");
    p = ok, p.store_mode = AS_STORE_ROWS, p.store = NULL, p.store_ld = 64;
    CHECK(as_k_row_pipe(&p, 0) == (int)cudaErrorInvalidValue, "store without a cache refused");
    p = ok, p.rows = 0;
    CHECK(as_k_row_pipe(&p, 0) == 0, "rows 0 is a no-op");
}
