/* kernels/window.cu against ref/window.c, exactly: the ring update (prefill s < win, s == win,
 * s > win; decode before the ring is full, at the wrap start_pos = win - 1, win, and far past it)
 * and the window selection widx for the same steps; then chains of decode steps after a prefill,
 * the ring compared after every step. The ring starts with random old rows (the slots a step
 * does not write must keep them); widx is poisoned and guarded past its end. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#include "ref/numerics.h"
#include "ref/window.h"
#include "tests/lib/gpu_util.h"
#include "tests/lib/harness.h"

/* ---- helpers ---- */

/* Compares the device ring with the host one, bit for bit; reports the first rows that differ
 * with slot, channel, got and want. Returns the number of differing elements. */
static int64_t compare_ring(const char *what, const as_bf16_t *dring, const float *ring, int win, int hd)
{
    int64_t n = (int64_t)win * hd, bad = 0;
    uint16_t *got = as_test_xmalloc(sizeof(uint16_t) * (size_t)n);
    as_gpu_get_bytes(got, dring, sizeof(uint16_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        uint16_t want = as_bf16_bits(ring[i]);
        if (got[i] != want && bad++ < 6)
            as_test_note("%s: ring slot %lld channel %lld: got 0x%04x, want 0x%04x", what, (long long)(i / hd),
                         (long long)(i % hd), got[i], want);
    }
    free(got);
    return bad;
}

/* One ring store: prefill (start_pos 0, s rows) or decode (s 1). ring / dring hold the same state
 * on entry and are compared after. */
static void ring_step(const char *geom, float *ring, as_bf16_t *dring, int win, int hd, int s, int start_pos,
                      uint64_t seed, int quiet)
{
    char what[160];
    snprintf(what, sizeof what, "ring_store %s win=%d hd=%d %s s=%d start_pos=%d", geom, win, hd,
             start_pos ? "decode" : "prefill", s, start_pos);
    int64_t n = (int64_t)s * hd;
    float *kv = as_test_xmalloc(sizeof(float) * (size_t)n);
    as_fill_uniform(kv, n, 2.0f, seed, 1);
    as_bf16_t *dkv = as_gpu_bf16(kv, n);
    as_gpu_check_launch(as_k_ring_store(dring, win, hd, dkv, s, start_pos, 0), what);
    if (start_pos == 0)
        as_window_store_prefill(ring, win, hd, kv, s);
    else
        as_window_store_decode(ring, win, hd, kv, start_pos);
    int64_t bad = compare_ring(what, dring, ring, win, hd);
    CHECK(bad == 0, "%s: %lld of %lld ring elements differ", what, (long long)bad, (long long)win * hd);
    if (!bad && !quiet)
        as_test_note("%s: ring %lld/%lld exact", what, (long long)win * hd, (long long)win * hd);
    free(kv);
    as_gpu_free(dkv);
}

/* A ring with random old content on both sides. */
static float *ring_new(int win, int hd, uint64_t seed, as_bf16_t **dring)
{
    float *ring = as_test_xmalloc(sizeof(float) * (size_t)win * hd);
    as_fill_uniform(ring, (int64_t)win * hd, 8.0f, seed, 1);
    *dring = as_gpu_bf16(ring, (int64_t)win * hd);
    return ring;
}

static void ring_single(const char *geom, int win, int hd, int s, int start_pos, uint64_t seed)
{
    as_bf16_t *dring;
    float *ring = ring_new(win, hd, seed, &dring);
    ring_step(geom, ring, dring, win, hd, s, start_pos, seed + 1, 0);
    free(ring);
    as_gpu_free(dring);
}

/* Prefill of s0 tokens, then decode steps start_pos = s0 .. s0 + steps - 1, ring compared after each. */
static void ring_chain(const char *geom, int win, int hd, int s0, int steps, uint64_t seed)
{
    as_bf16_t *dring;
    float *ring = ring_new(win, hd, seed, &dring);
    ring_step(geom, ring, dring, win, hd, s0, 0, seed + 1, 0);
    for (int k = 0; k < steps && !as_test_failed(); k++)
        ring_step(geom, ring, dring, win, hd, 1, s0 + k, seed + 2 + (uint64_t)k, 1);
    if (!as_test_failed())
        as_test_note("ring_store %s win=%d hd=%d: prefill %d then %d decode steps (to start_pos %d): ring exact "
                     "after every step", geom, win, hd, s0, steps, s0 + steps - 1);
    free(ring);
    as_gpu_free(dring);
}

GPU_TEST(gpu_window_ring_store)
{
    /* flash: win 128, hd 512 */
    const int fs[] = {1, 7, 127, 128, 129, 389, 512};
    for (int i = 0; i < 7; i++)
        ring_single("flash", 128, 512, fs[i], 0, 100 + (uint64_t)i);
    const int fd[] = {1, 126, 127, 128, 129, 3 * 128 + 5, 8191};
    for (int i = 0; i < 7; i++)
        ring_single("flash", 128, 512, 1, fd[i], 200 + (uint64_t)i);
    /* tiny: win 8, hd 64 */
    const int ts[] = {1, 3, 7, 8, 9, 20};
    for (int i = 0; i < 6; i++)
        ring_single("tiny", 8, 64, ts[i], 0, 300 + (uint64_t)i);
    const int td[] = {1, 7, 8, 29};
    for (int i = 0; i < 4; i++)
        ring_single("tiny", 8, 64, 1, td[i], 400 + (uint64_t)i);
    /* chains across the wrap */
    ring_chain("tiny", 8, 64, 5, 25, 500);
    ring_chain("tiny", 8, 64, 8, 9, 510);
    ring_chain("flash", 128, 512, 7, 134, 520);
    ring_chain("flash", 128, 512, 200, 60, 530);
}

/* ---- selection ---- */

#define GUARD 8

static void select_case(const char *geom, int s, int win, int start_pos)
{
    char what[160];
    snprintf(what, sizeof what, "window_select %s win=%d %s s=%d start_pos=%d", geom, win,
             start_pos ? "decode" : "prefill", s, start_pos);
    const int cols = start_pos ? win : (s < win ? s : win);
    const int64_t n = (int64_t)s * cols;
    int32_t *want = as_test_xmalloc(sizeof(int32_t) * (size_t)n), *got = as_test_xmalloc(sizeof(int32_t) * (size_t)(n + GUARD));
    int rc_cols = start_pos ? as_window_select_decode(want, win, start_pos) : as_window_select_prefill(want, s, win);
    REQUIRE(rc_cols == cols, "%s: test bug: reference gives %d columns, expected %d", what, rc_cols, cols);
    int32_t *dw = as_gpu_alloc(sizeof(int32_t) * (size_t)(n + GUARD));
    as_gpu_poison(dw, sizeof(int32_t) * (size_t)(n + GUARD));
    as_gpu_check_launch(as_k_window_select(dw, s, win, start_pos, 0), what);
    as_gpu_get_bytes(got, dw, sizeof(int32_t) * (size_t)(n + GUARD));
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++)
        if (got[i] != want[i] && bad++ < 6)
            as_test_note("%s: widx[%lld][%lld]: got %d, want %d", what, (long long)(i / cols), (long long)(i % cols),
                         got[i], want[i]);
    int64_t guard_bad = 0;
    for (int i = 0; i < GUARD; i++)
        guard_bad += got[n + i] != -1; /* 0xffffffff poison */
    CHECK(bad == 0, "%s: %lld of %lld entries differ", what, (long long)bad, (long long)n);
    CHECK(guard_bad == 0, "%s: wrote %lld entries past [%d][%d]", what, (long long)guard_bad, s, cols);
    if (!bad && !guard_bad)
        as_test_note("%s: widx [%d][%d] exact", what, s, cols);
    free(want), free(got);
    as_gpu_free(dw);
}

GPU_TEST(gpu_window_select)
{
    const int fs[] = {1, 7, 127, 128, 129, 389, 512};
    for (int i = 0; i < 7; i++)
        select_case("flash", fs[i], 128, 0);
    const int fd[] = {1, 2, 126, 127, 128, 129, 3 * 128 + 5, 8191};
    for (int i = 0; i < 8; i++)
        select_case("flash", 1, 128, fd[i]);
    const int ts[] = {1, 3, 7, 8, 9, 20};
    for (int i = 0; i < 6; i++)
        select_case("tiny", ts[i], 8, 0);
    for (int p = 1; p <= 30; p++) /* every decode position through 3 wraps */
        select_case("tiny", 1, 8, p);
}

GPU_TEST(gpu_window_refuses_bad_sizes)
{
    as_bf16_t *r = (as_bf16_t *)(uintptr_t)16; /* never dereferenced: every call below is refused */
    int32_t *w = (int32_t *)(uintptr_t)16;
    CHECK(as_k_ring_store(r, 0, 64, r, 1, 0, 0) == (int)cudaErrorInvalidValue, "win = 0 refused");
    CHECK(as_k_ring_store(r, 8, 0, r, 1, 0, 0) == (int)cudaErrorInvalidValue, "hd = 0 refused");
    CHECK(as_k_ring_store(r, 8, 64, r, 0, 0, 0) == (int)cudaErrorInvalidValue, "s = 0 refused");
    CHECK(as_k_ring_store(r, 8, 64, r, 2, 5, 0) == (int)cudaErrorInvalidValue, "decode with s = 2 refused");
    CHECK(as_k_ring_store(r, 8, 64, r, 1, -1, 0) == (int)cudaErrorInvalidValue, "negative start_pos refused");
    CHECK(as_k_window_select(w, 0, 8, 0, 0) == (int)cudaErrorInvalidValue, "s = 0 refused");
    CHECK(as_k_window_select(w, 1, 0, 0, 0) == (int)cudaErrorInvalidValue, "win = 0 refused");
    CHECK(as_k_window_select(w, 3, 8, 4, 0) == (int)cudaErrorInvalidValue, "decode with s = 3 refused");
}
