/* Checks model/quants.c against ggml itself and prints the digests that tests/test_quants.c
 * pins. Not part of the build (it needs a ggml shared library): build it by hand,
 *
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -ffp-contract=off -I. tests/lib/oracle/ggml_oracle.c \
 *       model/quants.c model/digest.c model/errors.c -ldl -lm -o /tmp/ggml_oracle
 *   /tmp/ggml_oracle path/to/libggml-base.so [n_random_superblocks]
 *
 * (libggml-base.so of any ggml build, e.g. the prebuilt one in the npm package
 * @node-llama-cpp/linux-x64, llama.cpp b-release of that package). It compares, byte for byte,
 * quantize_row_q2_K_ref, quantize_row_q8_0_ref and the two dequantisers with attnscope's on the
 * fixed inputs of tests/lib/quants_inputs.h and on random blocks of many distributions, then prints
 * the SHA-256 digests of ggml's outputs for the fixed inputs. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/digest.h"
#include "model/quants.h"
#include "tests/lib/quants_inputs.h"

typedef void (*quant_fn)(const float *, void *, int64_t);
typedef void (*dequant_fn)(const void *, float *, int64_t);

static void hex_of(const void *p, size_t n, char hex[65])
{
    AsSha256 s;
    uint8_t d[32];
    as_sha256_init(&s);
    as_sha256_update(&s, p, n);
    as_sha256_final(&s, d);
    as_sha256_hex(d, hex);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s libggml-base.so [n_random_superblocks]\n", argv[0]);
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) {
        fprintf(stderr, "%s\n", dlerror());
        return 2;
    }
    quant_fn q2 = (quant_fn)dlsym(h, "quantize_row_q2_K_ref");
    quant_fn q80 = (quant_fn)dlsym(h, "quantize_row_q8_0_ref");
    dequant_fn dq2 = (dequant_fn)dlsym(h, "dequantize_row_q2_K");
    dequant_fn dq80 = (dequant_fn)dlsym(h, "dequantize_row_q8_0");
    if (!q2 || !q80 || !dq2 || !dq80) {
        fprintf(stderr, "missing symbols\n");
        return 2;
    }
    long n_rand = argc > 2 ? atol(argv[2]) : 20000;
    int bad = 0;

    /* fixed inputs: compare and print digests */
    static float x[AS_QI_CASES * AS_QI_N], yg[AS_QI_CASES * AS_QI_N], ya[AS_QI_CASES * AS_QI_N];
    static AsBlockQ2K bg[AS_QI_CASES * AS_QI_N / 256], ba[AS_QI_CASES * AS_QI_N / 256];
    static AsBlockQ8_0 cg[AS_QI_CASES * AS_QI_N / 32], ca[AS_QI_CASES * AS_QI_N / 32];
    for (int c = 0; c < AS_QI_CASES; c++)
        for (int i = 0; i < AS_QI_N; i++)
            x[c * AS_QI_N + i] = as_qi_value(c, i);
    const int64_t N = AS_QI_CASES * AS_QI_N;
    q2(x, bg, N);
    as_quantize_row_q2_K(x, ba, N);
    if (memcmp(bg, ba, sizeof bg)) {
        for (int b = 0; b < N / 256; b++)
            if (memcmp(&bg[b], &ba[b], sizeof bg[b]) && bad++ < 10)
                printf("fixed inputs: Q2_K super-block %d (case %d) differs\n", b, b / 8);
    }
    dq2(bg, yg, N);
    as_dequantize_row_q2_K(bg, ya, N);
    bad += memcmp(yg, ya, sizeof yg) != 0;
    char hq2[65], hdq2[65], hq8[65], hdq8[65];
    hex_of(bg, sizeof bg, hq2);
    hex_of(yg, sizeof yg, hdq2);
    q80(x, cg, N);
    as_quantize_row_q8_0(x, ca, N);
    bad += memcmp(cg, ca, sizeof cg) != 0;
    dq80(cg, yg, N);
    as_dequantize_row_q8_0(cg, ya, N);
    bad += memcmp(yg, ya, sizeof yg) != 0;
    hex_of(cg, sizeof cg, hq8);
    hex_of(yg, sizeof yg, hdq8);
    printf("fixed inputs (%d cases x %d values):\n  Q2_K blocks    %s\n  Q2_K dequant   %s\n"
           "  Q8_0 blocks    %s\n  Q8_0 dequant   %s\n",
           AS_QI_CASES, AS_QI_N, hq2, hdq2, hq8, hdq8);

    /* random super-blocks: many shapes of data */
    long diffs_q2 = 0, diffs_q8 = 0, diffs_dq = 0;
    for (long r = 0; r < n_rand; r++) {
        float v[256];
        uint64_t base = as_qi_hash(0xabcdef00ull + (uint64_t)r);
        int kind = (int)(base % 8);
        float scale = ldexpf(1.0f, (int)(as_qi_hash(base) % 40) - 20);
        float off = (float)((int)(as_qi_hash(base + 1) % 7) - 3) * scale;
        for (int i = 0; i < 256; i++) {
            uint64_t hh = as_qi_hash(base * 1000003u + (uint64_t)i);
            float u = as_qi_uniform(hh), n = as_qi_normal(hh);
            switch (kind) {
            case 0: v[i] = n * scale; break;
            case 1: v[i] = n * scale + off; break;
            case 2: v[i] = u * scale; break;
            case 3: v[i] = (hh & 7) ? 0.0f : n * scale; break;
            case 4: v[i] = as_qi_bf16(n * scale); break;
            case 5: v[i] = (float)(hh % 4) * scale + off; break;
            case 6: v[i] = (i / 16) % 2 ? n * scale : n * scale * 1e-3f; break;
            default: v[i] = fabsf(n) * scale; break;
            }
        }
        AsBlockQ2K g, a;
        q2(v, &g, 256);
        as_quantize_row_q2_K(v, &a, 256);
        if (memcmp(&g, &a, sizeof g)) {
            if (diffs_q2++ < 5)
                printf("random %ld (kind %d, scale %g): Q2_K differs\n", r, kind, (double)scale);
        }
        float yg2[256], ya2[256];
        dq2(&g, yg2, 256);
        as_dequantize_row_q2_K(&g, ya2, 256);
        diffs_dq += memcmp(yg2, ya2, sizeof yg2) != 0;
        AsBlockQ8_0 g8[8], a8[8];
        q80(v, g8, 256);
        as_quantize_row_q8_0(v, a8, 256);
        diffs_q8 += memcmp(g8, a8, sizeof g8) != 0;
    }
    printf("random: %ld super-blocks, %ld Q2_K differ, %ld Q8_0 differ, %ld dequant differ\n", n_rand, diffs_q2,
           diffs_q8, diffs_dq);
    bad += diffs_q2 + diffs_q8 + diffs_dq > 0;
    printf("%s\n", bad ? "MISMATCH with ggml" : "bit-identical to ggml");
    return bad ? 1 : 0;
}
