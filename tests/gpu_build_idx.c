/* kernels/build_idx.cu against its CPU twin (ref/layer.c build_idx: widx then csel, entries
 * beyond the attended rows refused): prefill and decode shapes, k = 0, cols = 0, a bad entry. */
#include <stdlib.h>
#include <string.h>

#include "tests/lib/gpu_util.h"
#include "tests/lib/harness.h"

static void one_case(int s, int cols, int k, int nrows, bool plant_bad)
{
    int topk = cols + k;
    int32_t *widx = malloc(sizeof(int32_t) * (size_t)(s * cols + 1)), *csel = malloc(sizeof(int32_t) * (size_t)(s * k + 1));
    int32_t *got = malloc(sizeof(int32_t) * (size_t)(s * topk + 1));
    uint64_t r = 77;
    for (int i = 0; i < s * cols; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        widx[i] = (int)(r >> 33) % (cols + 1) - 1; /* -1 .. cols-1 */
    }
    for (int i = 0; i < s * k; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        csel[i] = (int)(r >> 33) % (nrows - cols + 1) + cols - 1; /* -1 or window..nrows-1 */
        if (csel[i] < cols)
            csel[i] = -1;
    }
    if (plant_bad && s > 0 && k > 0)
        csel[s * k / 2] = nrows; /* one row too far */
    int32_t *dw = as_gpu_bytes(widx, sizeof(int32_t) * (size_t)(s * cols + 1));
    int32_t *dc = as_gpu_bytes(csel, sizeof(int32_t) * (size_t)(s * k + 1));
    int32_t *di = as_gpu_alloc(sizeof(int32_t) * (size_t)(s * topk + 1));
    int *dbad = as_gpu_alloc(sizeof(int));
    unsigned long long *dvalid = as_gpu_alloc(sizeof(unsigned long long));
    int zero = 0;
    unsigned long long zero64 = 0;
    REQUIRE(cudaMemcpy(dbad, &zero, sizeof zero, cudaMemcpyHostToDevice) == cudaSuccess, "clear bad");
    REQUIRE(cudaMemcpy(dvalid, &zero64, sizeof zero64, cudaMemcpyHostToDevice) == cudaSuccess, "clear valid");
    as_gpu_check_launch(as_k_build_idx(dw, cols, dc, k, s, nrows, di, dbad, dvalid, 0), "build_idx");
    as_gpu_get_bytes(got, di, sizeof(int32_t) * (size_t)(s * topk));
    int bad = 0;
    unsigned long long valid = 0, want_valid = 0;
    as_gpu_get_bytes(&bad, dbad, sizeof bad);
    as_gpu_get_bytes(&valid, dvalid, sizeof valid);
    int64_t wrong = 0;
    for (int t = 0; t < s; t++)
        for (int c = 0; c < topk; c++) {
            int32_t want = c < cols ? widx[t * cols + c] : csel[t * k + c - cols];
            if (want >= nrows)
                want = -1;
            want_valid += want >= 0;
            if (got[t * topk + c] != want && wrong++ < 3)
                as_test_note("s %d cols %d k %d: idx[%d][%d] = %d, want %d", s, cols, k, t, c, got[t * topk + c], want);
        }
    CHECK(wrong == 0, "s %d cols %d k %d: %ld entries differ", s, cols, k, (long)wrong);
    CHECK(bad == (plant_bad && s > 0 && k > 0 ? 1 : 0), "s %d cols %d k %d: refusal flag %d", s, cols, k, bad);
    CHECK(valid == want_valid, "valid count %llu, want %llu", valid, want_valid);
    as_gpu_free(dw), as_gpu_free(dc), as_gpu_free(di), as_gpu_free(dbad), as_gpu_free(dvalid);
    free(widx), free(csel), free(got);
}

GPU_TEST(gpu_build_idx_shapes)
{
    one_case(512, 128, 512, 128 + 4096, false); /* flash prefill */
    one_case(1, 128, 512, 128 + 4096, false);   /* flash decode */
    one_case(7, 7, 0, 7, false);                /* ratio 0 / compress_len 0 */
    one_case(13, 8, 8, 8 + 13, false);          /* tiny */
    one_case(5, 0, 3, 10, false);               /* no window columns */
    one_case(9, 8, 8, 8 + 9, true);             /* a stale selection beyond the rows: refused */
    CHECK(as_k_build_idx(NULL, 1, NULL, 0, 1, 1, NULL, NULL, NULL, 0) != 0, "null pointers refused");
}
