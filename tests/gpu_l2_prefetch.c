/* kernels/l2_prefetch.cu on the device: launches at several shapes (1 segment, wo_a's 8 groups, a short
 * last item, the real chunk) complete without an error and leave every byte as it was; bad shapes are
 * refused. Which bytes the items name is checked on the CPU (tests/test_l2_prefetch.c); whether they
 * land in L2 is a matter of speed (bench/RESULTS.md), not of values. */
#include <string.h>

#include "tests/gpu_util.h"
#include "tests/harness.h"

GPU_TEST(gpu_l2_prefetch_leaves_memory_as_it_was)
{
    const size_t bytes = (size_t)8 << 20;
    unsigned char *h = as_test_xmalloc(bytes), *back = as_test_xmalloc(bytes);
    for (size_t i = 0; i < bytes; i++)
        h[i] = (unsigned char)(i * 2654435761u >> 13);
    void *d = as_gpu_bytes(h, bytes);
    static const struct {
        int64_t n_seg, stride, seg, chunk;
    } cases[] = {
        {1, 0, 8 << 20, 16384},          /* the whole buffer, one segment */
        {8, 1 << 20, 512 << 10, 16384},  /* wo_a-like: the first half of 8 groups */
        {8, 1 << 20, (1 << 20), 4096},   /* every group whole, small items */
        {3, 1 << 20, 16400, 16384},      /* a 16-byte last item */
        {1, 0, 16, 16},                  /* one 16-byte item */
        {2, 4 << 20, 1 << 20, 1 << 20},  /* 1 MB items */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        as_gpu_check_launch(as_k_l2_prefetch(d, cases[k].n_seg, cases[k].stride, cases[k].seg, cases[k].chunk, 0),
                            "as_k_l2_prefetch");
    as_gpu_get_bytes(back, d, bytes);
    CHECK(!memcmp(h, back, bytes), "a prefetch changed device memory");
    CHECK(as_k_l2_prefetch(d, 0, 0, 1024, 1024, 0) == 0 && as_k_l2_prefetch(d, 4, 1024, 0, 1024, 0) == 0,
          "nothing to prefetch: no launch, no error");
    as_gpu_free(d);
    free(h);
    free(back);
}

GPU_TEST(gpu_l2_prefetch_refuses_bad_shapes)
{
    const void *p = (const void *)(uintptr_t)4096; /* never dereferenced: every call below is refused */
    const int bad = (int)cudaErrorInvalidValue;
    CHECK(as_k_l2_prefetch(p, 1, 0, 1000, 1024, 0) == bad, "segment not a multiple of 16 refused");
    CHECK(as_k_l2_prefetch(p, 1, 0, 1024, 1000, 0) == bad, "chunk not a multiple of 16 refused");
    CHECK(as_k_l2_prefetch(p, 1, 0, 1024, 0, 0) == bad, "chunk 0 refused");
    CHECK(as_k_l2_prefetch(p, 2, 512, 1024, 1024, 0) == bad, "overlapping segments refused");
    CHECK(as_k_l2_prefetch(p, 2, 1032, 1024, 1024, 0) == bad, "a misaligned stride refused");
    CHECK(as_k_l2_prefetch((const char *)p + 8, 1, 0, 1024, 1024, 0) == bad, "a misaligned start refused");
    CHECK(as_k_l2_prefetch(NULL, 1, 0, 1024, 1024, 0) == bad, "NULL refused");
    CHECK(as_k_l2_prefetch(p, -1, 0, 1024, 1024, 0) == bad && as_k_l2_prefetch(p, 1, 0, -16, 1024, 0) == bad,
          "negative sizes refused");
}

GPU_TEST(gpu_l2_warm_leaves_memory_as_it_was)
{
    const size_t bytes = (size_t)4 << 20;
    unsigned char *h = as_test_xmalloc(bytes), *back = as_test_xmalloc(bytes);
    for (size_t i = 0; i < bytes; i++)
        h[i] = (unsigned char)(i * 40503u >> 7);
    void *d = as_gpu_bytes(h, bytes);
    as_gpu_check_launch(as_k_l2_warm(d, 1, 0, bytes, 0), "as_k_l2_warm, whole");
    as_gpu_check_launch(as_k_l2_warm(d, 8, 512 << 10, 100 * 16, 0), "as_k_l2_warm, 8 short segments");
    as_gpu_check_launch(as_k_l2_warm(d, 4, 1 << 20, 1 << 20, 0), "as_k_l2_warm, 4 whole segments");
    as_gpu_get_bytes(back, d, bytes);
    CHECK(!memcmp(h, back, bytes), "the warm-up loads changed device memory");
    const int bad = (int)cudaErrorInvalidValue;
    CHECK(as_k_l2_warm(d, 1, 0, 1000, 0) == bad && as_k_l2_warm(d, 2, 512, 1024, 0) == bad &&
              as_k_l2_warm((const char *)d + 8, 1, 0, 1024, 0) == bad && as_k_l2_warm(NULL, 1, 0, 1024, 0) == bad,
          "bad shapes refused");
    as_gpu_free(d);
    free(h);
    free(back);
}
