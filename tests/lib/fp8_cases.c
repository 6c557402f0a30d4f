/* fp8 test weights and activations (tests/lib/fp8_cases.h). */
#include "tests/lib/fp8_cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/numerics.h"
#include "ref/quant.h"
#include "tests/lib/harness.h"

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void as_test_fp8w_make(AsTestFp8W *f, int64_t rows, int64_t cols, int B, int grid, uint64_t seed)
{
    memset(f, 0, sizeof *f);
    const int64_t sr = (rows + B - 1) / B, sc = (cols + B - 1) / B;
    f->codes = malloc((size_t)(rows * cols));
    f->scale_bytes = malloc((size_t)(sr * sc));
    REQUIRE(f->codes && f->scale_bytes, "out of host memory for an fp8 weight of %lld x %lld", (long long)rows,
            (long long)cols);
    uint64_t s = seed * 0x2545f4914f6cdd1dull + 7;
    for (int64_t i = 0; i < rows * cols; i++) {
        const uint8_t c = (uint8_t)(mix(&s) >> 56);
        if (grid)
            f->codes[i] = (uint8_t)((c & 0x80) | (7 << 3) | (c & 7)); /* +-(1 + m / 8) */
        else
            f->codes[i] = (c & 0x7f) == 0x7f ? 0x7e : c;
    }
    for (int64_t i = 0; i < sr * sc; i++)
        f->scale_bytes[i] = (uint8_t)(117 + mix(&s) % 8); /* 2^-10 .. 2^-3 */
    f->scale = (AsWTensor){.dtype = AS_DT_F8_E8M0, .ndim = 2, .shape = {sr, sc}, .data = f->scale_bytes,
                           .nbytes = sr * sc};
    f->w = (AsWTensor){.dtype = AS_DT_F8_E4M3, .ndim = 2, .shape = {rows, cols}, .data = f->codes,
                       .nbytes = rows * cols, .scale = &f->scale, .block = B};
    snprintf(f->w.name, sizeof f->w.name, "test.fp8.%lldx%lld.b%d%s", (long long)rows, (long long)cols, B,
             grid ? ".grid" : "");
}

void as_test_fp8w_free(AsTestFp8W *f)
{
    free(f->codes);
    free(f->scale_bytes);
    memset(f, 0, sizeof *f);
}
