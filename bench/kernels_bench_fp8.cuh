// bench/kernels_bench.cu's fp8 part, included inside its namespace: the decode GEMV of fp8-form weights
// (kernels/gemv.cu on e4m3 codes, as_k_gemv_e4m3) at the flash shapes of the fp8 projections and the
// grouped wo_a, m = 1 and 8, bytes against the copy bandwidth and a plain read of the same codes, with a
// sweep of the rows per group (R: no bit changes with it). (The prefill's fp8 projections against
// cuBLASLt's fp8 GEMM: bench-engine.)
// Weights: random e4m3 codes (no NaN code) and scales 2^-7; activations random bf16.

__global__ void fill_e4m3_kernel(uint8_t *p, int64_t n, uint64_t seed)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const uint8_t c = (uint8_t)(hash64(seed * 0x9e3779b97f4a7c15ull + (uint64_t)i) >> 56);
        p[i] = (c & 0x7f) == 0x7f ? 0x7e : c;
    }
}
__global__ void fill_value_kernel(float *p, int64_t n, float v)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        p[i] = v;
}

// One fp8-form weight of rows x cols on the device (codes, then f32 scales of 32 x 32 blocks).
struct Fp8Buf {
    uint8_t *codes = nullptr;
    float *ws = nullptr;
    AsFp8Weight w{};
};
Fp8Buf fp8_weight(int rows, int cols, uint64_t seed)
{
    Fp8Buf b;
    const int64_t ldws = (cols / 32 + 3) / 4 * 4, srows = (rows + 31) / 32;
    b.codes = (uint8_t *)dalloc((size_t)rows * cols);
    b.ws = (float *)dalloc(sizeof(float) * (size_t)(srows * ldws));
    fill_e4m3_kernel<<<1024, 256>>>(b.codes, (int64_t)rows * cols, seed);
    fill_value_kernel<<<256, 256>>>(b.ws, srows * ldws, 0x1p-7f);
    CK(cudaGetLastError());
    b.w = AsFp8Weight{b.codes, cols, b.ws, ldws, rows, cols, 1, 0};
    return b;
}
void fp8_free(Fp8Buf &b)
{
    CK(cudaFree(b.codes));
    CK(cudaFree(b.ws));
}

void bench_fp8_gemv(const GemvShape &g, int m, bool sweep, bool quick)
{
    const size_t wbytes = (size_t)g.batch * g.n_out * g.n_in, sbytes = 4 * (size_t)g.batch * ((g.n_out + 31) / 32) *
                                                                      ((g.n_in / 32 + 3) / 4 * 4);
    const int nset = rotating_sets(wbytes);
    std::vector<Fp8Buf> W(nset);
    for (int i = 0; i < nset; i++)
        W[i] = fp8_weight(g.batch * g.n_out, g.n_in, 80 + i);
    const bool grouped = g.batch > 1; // wo_a: group b reads columns b * n_in.. of the o rows
    const int64_t ldx = grouped ? g.ldx : g.n_in;
    void *xbf = dalloc(2 * (size_t)m * ldx);
    fill_bf16(xbf, (int64_t)m * ldx, 72, 1.0f);
    void *y = dalloc(2 * (size_t)m * g.batch * g.n_out);
    const double bytes = (double)wbytes + sbytes + 2.0 * m * g.batch * g.n_in + 2.0 * m * g.batch * g.n_out;
    const double flops = 2.0 * m * g.batch * g.n_out * (double)g.n_in;
    const int batch = 20, reps = quick ? 5 : 15;
    auto run = [&](int R, int i) {
        AsFp8Weight w = W[i % nset].w;
        if (grouped)
            w.n_out = g.n_out, w.batch = g.batch, w.stride_rows = g.n_out;
        CKL(as_k_gemv_e4m3_cfg(&w, (const as_bf16_t *)xbf, ldx, grouped ? g.strideX : 0, m, y,
                               grouped ? g.ldy : g.n_out, grouped ? g.strideY : 0, 0, R, 0, 0));
    };
    char shape[128];
    snprintf(shape, sizeof shape, "%s %dx%d%s m=%d", g.name, g.n_out, g.n_in,
             grouped ? (std::string(" x") + std::to_string(g.batch)).c_str() : "", m);
    const double us = time_us([&](int i) { run(0, i); }, batch, reps);
    report("e4m3 gemv auto", shape, us, bytes, flops, -1);
    if (sweep) {
        printf("    R sweep:");
        for (int R : {1, 2, 4})
            printf(" R%d %.2f", R, time_us([&](int i) { run(R, i); }, batch, quick ? 3 : 7));
        printf("\n");
    }
    for (Fp8Buf &b : W)
        fp8_free(b);
    CK(cudaFree(xbf));
    CK(cudaFree(y));
}

// The fp8 projections of a flash layer (tests/lib/kernel_shapes.h) and wo_a (in fp8 form where a checkpoint
// stores it so: bf16 activations), in the engine's layout.
std::vector<GemvShape> fp8_shapes()
{
    std::vector<GemvShape> v;
    for (const AsProjShape &p : as_flash_projections) {
        const bool fp8 = !strcmp(p.name, "wq_a") || !strcmp(p.name, "wq_b") || !strcmp(p.name, "wkv") ||
                         !strcmp(p.name, "indexer.wq_b") || !strcmp(p.name, "wo_b");
        const bool grouped = p.groups > 1;
        if (fp8 || grouped)
            v.push_back({p.name, p.n_out, p.n_in, p.groups, p.ldx, grouped ? p.n_in : 0, (int64_t)p.groups * p.n_out,
                         grouped ? p.n_out : 0, false});
    }
    return v;
}

void bench_fp8(bool quick)
{
    printf("\n== fp8 projections: decode GEMV (floor = codes + scales + x + y bytes / copy bandwidth)\n");
    const std::vector<GemvShape> shapes = fp8_shapes();
    for (const GemvShape &g : shapes) {
        bench_fp8_gemv(g, 1, true, quick);
        bench_fp8_gemv(g, 8, false, quick);
    }
    printf("\n== read ceiling at the fp8 weights' sizes (codes only)\n");
    for (const GemvShape &g : shapes)
        bench_read(g.name, (size_t)g.batch * g.n_out * g.n_in, quick);
}
