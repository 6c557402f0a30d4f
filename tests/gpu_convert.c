/* kernels/convert.cu: f32 -> bf16 RNE against the host's as_bf16_bits, over ties, subnormals,
 * infinities, NaN and the whole exponent range. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref/numerics.h"
#include "tests/lib/gpu_util.h"
#include "tests/lib/harness.h"

GPU_TEST(gpu_convert_f32_to_bf16)
{
    int64_t n = (1 << 20) + 37;
    float *x = malloc(sizeof(float) * (size_t)n);
    uint16_t *got = malloc(sizeof(uint16_t) * (size_t)n);
    uint64_t s = 12345;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        x[i] = as_bits_f32((uint32_t)s); /* every bit pattern: NaN, inf, subnormals, ties */
    }
    float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1.0f, as_bits_f32(0x3f808000u) /* tie, even */,
                       as_bits_f32(0x3f818000u) /* tie, odd */, as_bits_f32(0x00000001u), as_bits_f32(0x7f7fffffu)};
    memcpy(x, special, sizeof special);
    float *dx = as_gpu_f32(x, n);
    as_bf16_t *dy = as_gpu_alloc(sizeof(uint16_t) * (size_t)n);
    as_gpu_check_launch(as_k_f32_to_bf16(dx, dy, n, 0), "f32_to_bf16");
    as_gpu_get_bytes(got, dy, sizeof(uint16_t) * (size_t)n);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        uint16_t want = as_bf16_bits(x[i]);
        bool both_nan = isnan(x[i]) && (got[i] & 0x7fff) > 0x7f80;
        if (got[i] != want && !both_nan && bad++ < 5)
            as_test_note("element %ld: f32 0x%08x -> got 0x%04x, want 0x%04x", (long)i, as_f32_bits(x[i]), got[i], want);
    }
    CHECK(bad == 0, "%ld of %ld conversions differ from the host's RNE", (long)bad, (long)n);
    CHECK(as_k_f32_to_bf16(dx, dy, -1, 0) != 0, "a negative size is refused");
    as_test_note("f32 -> bf16: %ld values (random bit patterns + specials) bit-exact", (long)n);
    as_gpu_free(dx), as_gpu_free(dy);
    free(x), free(got);
}
