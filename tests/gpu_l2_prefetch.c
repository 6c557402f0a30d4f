/* kernels/l2_prefetch.cu: the L2 prefetch has no output, so its twin is the identity: the prefetched
 * memory reads back unchanged, every shape runs without a fault (a bulk prefetch past an allocation's
 * end faults), and the arguments the bulk form cannot take (unaligned, not whole 16-byte units, runs
 * that overlap) are refused before any launch. The engine's use is checked bit for bit through the
 * decode graph (gpu_graph_tiny_300_steps). */
#include <cuda_runtime_api.h>
#include <string.h>

#include "tests/gpu_util.h"
#include "tests/harness.h"

GPU_TEST(gpu_l2_prefetch_writes_nothing)
{
    const size_t bytes = (size_t)9 << 20; /* 9 MB: more chunks than one launch's threads */
    unsigned char *h = as_test_xmalloc(bytes), *back = as_test_xmalloc(bytes);
    for (size_t i = 0; i < bytes; i++)
        h[i] = (unsigned char)(i * 131u + (i >> 12));
    unsigned char *d = as_gpu_bytes(h, bytes);
    static const struct {
        int64_t off, bytes, stride;
        int slices;
    } cases[] = {
        {0, 16, 0, 1},                     /* one 16-byte unit */
        {16, 4096 + 16, 0, 1},             /* a chunk and a tail */
        {0, (int64_t)9 << 20, 0, 1},       /* the whole buffer, to its last byte */
        {0, 1 << 20, (int64_t)9 << 20 >> 3, 8}, /* wo_a's shape: the heads of 8 groups */
        {48, 4080, 8192, 1100},            /* many slices, each ending 16 bytes short of a chunk */
        {(int64_t)9 << 20, 0, 0, 1},       /* nothing, at the end */
        {0, 4096, 4096, 0},                /* no slices */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int rc = as_k_l2_prefetch(d + cases[k].off, cases[k].bytes, cases[k].slices, cases[k].stride, 0);
        as_gpu_check_launch(rc, "as_k_l2_prefetch");
    }
    as_gpu_get_bytes(back, d, bytes);
    CHECK(!memcmp(back, h, bytes), "the prefetched memory changed");

    static const struct {
        int64_t off, bytes, stride;
        int slices;
        const char *why;
    } bad[] = {
        {8, 16, 0, 1, "an address not 16-byte aligned"},
        {0, 24, 0, 1, "bytes not a multiple of 16"},
        {0, 32, 40, 2, "a stride not a multiple of 16"},
        {0, 64, 32, 2, "runs that overlap"},
        {0, -16, 0, 1, "negative bytes"},
        {0, 16, 0, -1, "negative slices"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        int rc = as_k_l2_prefetch(d + bad[k].off, bad[k].bytes, bad[k].slices, bad[k].stride, 0);
        CHECK(rc == (int)cudaErrorInvalidValue, "%s: launcher returned %d, not cudaErrorInvalidValue", bad[k].why, rc);
    }
    CHECK(as_k_l2_prefetch(NULL, 16, 1, 0, 0) == (int)cudaErrorInvalidValue, "a NULL address taken");
    as_gpu_sync("after the refusals");
    as_gpu_free(d);
    free(back);
    free(h);
}
