// Variants of the e4m3 decode GEMV (kernels/gemv.cu's TW = uint8_t form), m = 1, to find what holds it
// at half the copy bandwidth: V bit 0, 16-byte chunks (16 codes a load) instead of 8; bit 1, the codes
// widened to f32 by integer operations (byte to the top, arithmetic shift, mask: the value times 2^-120,
// scaled back with the block scale) instead of f16 bits and a conversion; bit 2, a ring: each chunk's
// registers refilled with the next pass's chunk as soon as it is consumed (no more registers). Same structure otherwise (groups of W warps, lane li takes
// chunks li, li + L, ..., one wave, the group's partials through shared memory). Included by
// kernels_bench.cu inside its namespace.

template <int CW> struct VChunk;
template <> struct VChunk<8> {
    uint2 v;
    __device__ __forceinline__ void load(const uint8_t *p) { v = ase4m3::ld_stream8(p); }
    __device__ __forceinline__ uint32_t word(int i) const { return i ? v.y : v.x; }
};
template <> struct VChunk<16> {
    uint4 v;
    __device__ __forceinline__ void load(const uint8_t *p) { v = as_d_ld_stream16(p); }
    __device__ __forceinline__ uint32_t word(int i) const { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }
};

// four codes of u times s (s: the block scale times 2^120)
__device__ __forceinline__ void e4m3x4_int(uint32_t u, float s, float *f)
{
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const uint32_t v = __byte_perm(u, 0u, 0x0444u | (uint32_t)j << 12);
        f[j] = __int_as_float((int32_t)v >> 4 & (int32_t)0x87ffffff) * s;
    }
}

template <int V, int R>
__global__ void __launch_bounds__(256, 3) e4m3_variant_kernel(const uint8_t *W, const float *ws, int64_t ldws, int n_out,
                                                            int n_in, const uint16_t *x, float *y, int w_warps)
{
    constexpr int CW = (V & 1) ? 16 : 8, kU = (V & 1) ? 2 : 4;
    constexpr bool kInt = V & 2, kRing = V & 4;
    __shared__ float red[8][R];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gpb = 8 / w_warps;
    const int group = warp / w_warps, wig = warp % w_warps, li = wig * 32 + lane, L = 32 * w_warps;
    const int row_sets = (n_out + R * gpb - 1) / (R * gpb), nchunks = n_in / CW;
    const float sx = kInt ? 0x1p120f : 256.0f;
    for (int set = blockIdx.x; set < row_sets; set += gridDim.x) {
        const int row0 = (set * gpb + group) * R;
        const uint8_t *wrow[R];
#pragma unroll
        for (int r = 0; r < R; r++)
            wrow[r] = W + (int64_t)(row0 + r < n_out ? row0 + r : n_out - 1) * n_in;
        const float *srow = ws + (int64_t)(row0 >> 5) * ldws;
        float acc[R] = {};
        VChunk<CW> w[kU][R];
        float s[kU];
        auto load_slot = [&](int u, int c) {
#pragma unroll
            for (int r = 0; r < R; r++)
                w[u][r].load(wrow[r] + (int64_t)c * CW);
            s[u] = srow[c * CW / 32] * sx;
        };
        int c = li;
        if (kRing && c + (kU - 1) * L < nchunks)
#pragma unroll
            for (int u = 0; u < kU; u++)
                load_slot(u, c + u * L);
        for (; c + (kU - 1) * L < nchunks; c += kU * L) {
            if (!kRing)
#pragma unroll
                for (int u = 0; u < kU; u++)
                    load_slot(u, c + u * L);
            const bool more = kRing && c + kU * L + (kU - 1) * L < nchunks;
#pragma unroll
            for (int u = 0; u < kU; u++) {
                float xf[CW];
#pragma unroll
                for (int h = 0; h < CW / 8; h++) {
                    const uint4 xv = __ldg((const uint4 *)(x + (int64_t)(c + u * L) * CW + 8 * h));
                    const uint32_t q[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
                    for (int i = 0; i < 4; i++)
                        xf[8 * h + 2 * i] = __uint_as_float(q[i] << 16), xf[8 * h + 2 * i + 1] = __uint_as_float(q[i] & 0xffff0000u);
                }
#pragma unroll
                for (int r = 0; r < R; r++) {
                    float wf[CW];
#pragma unroll
                    for (int i = 0; i < CW / 4; i++) {
                        if constexpr (kInt)
                            e4m3x4_int(w[u][r].word(i), s[u], wf + 4 * i);
                        else
                            ase4m3::e4m3x4_scaled(w[u][r].word(i), s[u], wf + 4 * i);
                    }
#pragma unroll
                    for (int e = 0; e < CW; e++)
                        acc[r] = fmaf(wf[e], xf[e], acc[r]);
                }
                if (more)
                    load_slot(u, c + kU * L + u * L);
            }
        }
        // the rest of the chunks one at a time (fewer than kU a lane)
        for (; c < nchunks; c += L) {
            float xf[CW];
            for (int e = 0; e < CW; e++)
                xf[e] = as_d_bf16_to_f32(x[(int64_t)c * CW + e]);
            const float sc = srow[c * CW / 32] * sx;
#pragma unroll
            for (int r = 0; r < R; r++) {
                VChunk<CW> one;
                one.load(wrow[r] + (int64_t)c * CW);
                float wf[CW];
#pragma unroll
                for (int i = 0; i < CW / 4; i++) {
                    if constexpr (kInt)
                        e4m3x4_int(one.word(i), sc, wf + 4 * i);
                    else
                        ase4m3::e4m3x4_scaled(one.word(i), sc, wf + 4 * i);
                }
#pragma unroll
                for (int e = 0; e < CW; e++)
                    acc[r] = fmaf(wf[e], xf[e], acc[r]);
            }
        }
#pragma unroll
        for (int r = 0; r < R; r++)
            acc[r] = as_d_warp_sum(acc[r]);
        if (lane == 0)
#pragma unroll
            for (int r = 0; r < R; r++)
                red[warp][r] = acc[r];
        __syncthreads();
        if (wig == 0 && lane < R && row0 + lane < n_out) {
            float out = 0;
            for (int k = 0; k < w_warps; k++)
                out += red[group * w_warps + k][lane];
            y[row0 + lane] = out;
        }
        __syncthreads();
    }
}

template <int V, int R> void launch_variant(const AsFp8Weight &w, const uint16_t *x, float *y, int Wn)
{
    static int per_sm = 0;
    if (!per_sm)
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, e4m3_variant_kernel<V, R>, 256, 0));
    int dev = 0, sms = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const int gpb = 8 / Wn, sets = (w.n_out + R * gpb - 1) / (R * gpb), grid = std::min(sets, per_sm * sms);
    e4m3_variant_kernel<V, R><<<grid, 256>>>(w.w, w.ws, w.ldws, w.n_out, w.n_in, x, y, Wn);
    CK(cudaGetLastError());
}

template <int V> void launch_variant_r(int R, const AsFp8Weight &w, const uint16_t *x, float *y, int Wn)
{
    if (R == 1)
        launch_variant<V, 1>(w, x, y, Wn);
    else if (R == 2)
        launch_variant<V, 2>(w, x, y, Wn);
    else
        launch_variant<V, 4>(w, x, y, Wn);
}

// Every variant at a shape (m = 1), at the automatic (R, W) of the bf16 GEMV and at R 1, 2, 4 with W 1, 8.
void bench_e4m3_variants(const GemvShape &g, const std::vector<Fp8Buf> &W, const void *xbf, bool quick)
{
    if (g.batch > 1)
        return;
    int aR = 0, aW = 0;
    as_k_gemv_pick_config(g.n_out, g.n_in, 1, &aR, &aW);
    float *y = (float *)dalloc(sizeof(float) * (size_t)g.n_out);
    const int nset = (int)W.size(), batch = 20, reps = quick ? 3 : 7;
    const double bytes = (double)g.n_out * g.n_in;
    printf("    variants (GB/s of codes; auto R%d W%d):", aR, aW);
    static const int Vs[] = {0, 1, 2, 3, 4, 5, 6, 7};
    for (int V : Vs) {
        auto run = [&](int R, int Wn, int i) {
            const AsFp8Weight &w = W[i % nset].w;
            switch (V) {
            case 0: launch_variant_r<0>(R, w, (const uint16_t *)xbf, y, Wn); break;
            case 1: launch_variant_r<1>(R, w, (const uint16_t *)xbf, y, Wn); break;
            case 2: launch_variant_r<2>(R, w, (const uint16_t *)xbf, y, Wn); break;
            case 3: launch_variant_r<3>(R, w, (const uint16_t *)xbf, y, Wn); break;
            case 4: launch_variant_r<4>(R, w, (const uint16_t *)xbf, y, Wn); break;
            case 5: launch_variant_r<5>(R, w, (const uint16_t *)xbf, y, Wn); break;
            case 6: launch_variant_r<6>(R, w, (const uint16_t *)xbf, y, Wn); break;
            default: launch_variant_r<7>(R, w, (const uint16_t *)xbf, y, Wn); break;
            }
        };
        printf("\n      V%d:", V);
        const double ta = time_us([&](int i) { run(aR, aW, i); }, batch, reps);
        printf(" auto %.2f us (%.0f)", ta, bytes / ta * 1e-3);
        for (int R : {1, 2, 4})
            for (int Wn : {1, 8}) {
                const double t = time_us([&](int i) { run(R, Wn, i); }, batch, reps);
                printf(" R%dW%d %.0f", R, Wn, bytes / t * 1e-3);
            }
    }
    printf("\n");
    CK(cudaFree(y));
}
