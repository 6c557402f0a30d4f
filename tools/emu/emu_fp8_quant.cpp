// kernels/act_quant.cu on the emulator against ref/quant.c's as_act_quant, codes and scales bit for bit.
#include "emu.h"
#include "emu_fp8.h"

#include <cstring>

#include "kernels/act_quant.cu"

int main()
{
    int fail = 0;
    const int shapes[][2] = {{1, 64}, {3, 96}, {2, 288}, {1, 1280}};
    for (auto &sh : shapes) {
        g_rs = (uint64_t)sh[1];
        const int s = sh[0], n = sh[1], nk = n / 32, lds = (nk + 3) / 4 * 4 + 4;
        std::vector<float> x = emu_fp8_x(s, n, false);
        for (int i = 0; i < 32; i++) // one block at the floor, one of zeros
            x[(size_t)32 + i] = 1e-5f * (float)(i - 16), x[i] = 0.0f;
        std::vector<uint16_t> xb(x.size());
        for (size_t i = 0; i < x.size(); i++) xb[i] = as_bf16_bits(x[i]);
        std::vector<uint8_t> q((size_t)s * n, 0xee);
        std::vector<float> sc((size_t)s * lds, -1.0f);
        emu::launch(dim3((unsigned)((n + 255) / 256), (unsigned)s), dim3(256),
                    [&] { act_quant_kernel(xb.data(), n, n, q.data(), n, sc.data(), lds); });
        int bad = 0;
        std::vector<float> xq(n), sx(nk), xr(n);
        for (int t = 0; t < s; t++) {
            for (int i = 0; i < n; i++) xr[i] = as_bf16_to_f32(xb[(size_t)t * n + i]);
            as_act_quant(xr.data(), n, xq.data(), sx.data());
            for (int k = 0; k < lds; k++)
                bad += k < nk ? memcmp(&sc[(size_t)t * lds + k], &sx[k], 4) != 0 : sc[(size_t)t * lds + k] != 0.0f;
            for (int i = 0; i < n; i++)
                bad += q[(size_t)t * n + i] != as_e4m3_bits(xq[i]);
        }
        printf("%s act_quant %d rows of %d: %d bad codes or scales\n", bad ? "FAIL" : "ok  ", s, n, bad);
        fail += bad != 0;
    }
    return fail ? 1 : 0;
}
