#include "ref/compressor.h"

#include <stdlib.h>
#include <string.h>

#include "ref/attention.h"
#include "ref/linear.h"
#include "ref/rmsnorm.h"

int as_compress_ratio1(const float *x, int s, const AsWTensor *wkv, const float *norm, float eps,
                       int hd, int start_pos, float *latent, int *pos)
{
    as_linear(x, s, wkv, latent, true);
    as_rmsnorm(latent, norm, latent, s, hd, eps);
    for (int t = 0; t < s; t++)
        pos[t] = start_pos + t;
    return s;
}

int as_compress_pooled(const float *x, int s, int r, const AsWTensor *wkv, const AsWTensor *wgate,
                       const float *norm, float eps, int hd, int start_pos, float *part_kv,
                       float *part_sc, float *latent, int *pos)
{
    size_t row = sizeof(float) * (size_t)hd;
    float *kv = malloc(row * (size_t)s), *sc = malloc(row * (size_t)s);
    if (!kv || !sc) {
        free(kv), free(sc);
        return -1;
    }
    as_linear(x, s, wkv, kv, false);
    as_linear(x, s, wgate, sc, false);
    int n = 0;
    if (start_pos == 0) {
        int groups = s / r;
        for (int g = 0; g < groups; g++) {
            as_softmax_pool(kv + (size_t)g * r * hd, sc + (size_t)g * r * hd, r, hd, latent + (size_t)g * hd);
            pos[g] = g * r;
        }
        n = groups;
        for (int t = groups * r; t < s; t++) {
            memcpy(part_kv + (size_t)(t % r) * hd, kv + (size_t)t * hd, row);
            memcpy(part_sc + (size_t)(t % r) * hd, sc + (size_t)t * hd, row);
        }
    } else {
        int slot = start_pos % r;
        memcpy(part_kv + (size_t)slot * hd, kv, row);
        memcpy(part_sc + (size_t)slot * hd, sc, row);
        if ((start_pos + 1) % r == 0) {
            as_softmax_pool(part_kv, part_sc, r, hd, latent);
            pos[0] = start_pos + 1 - r;
            n = 1;
        }
    }
    as_rmsnorm(latent, norm, latent, n, hd, eps);
    free(kv);
    free(sc);
    return n;
}
