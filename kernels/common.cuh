// Shared device helpers for attnscope's kernels: the roundings of SPEC section 2 on the
// device (bit-for-bit the same as ref/numerics.h), small math, and the launch convention.
//
// Exactness: nvcc contracts a*b+c into an FMA by default. Where SPEC rounds each operation
// (RoPE, the quantisers' x/s and *s, the index weights, the residual), use __fmul_rn / __fadd_rn /
// __fdiv_rn, which are never contracted; dot products may use FMA (summation order is free).
//
// Launch convention: every kernel file exposes `extern "C"` launchers taking raw pointers
// (bf16 as uint16_t on the C side) and a stream, returning cudaGetLastError() of the launch as
// an int (0 = ok) so the host code can name the operation and the sizes in its message.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define AS_HD __host__ __device__ __forceinline__

static inline int as_ceil_div(int64_t a, int64_t b) { return (int)((a + b - 1) / b); }

// Whether a pointer is 16-byte aligned (what 16-byte vector loads and cp.async need).
static inline bool as_aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

// Read(dev) for the current device, read once per device (each Read has its own cache); `fallback`
// where there is no current device or Read gives no positive value.
template <int (*Read)(int dev)> static inline int as_per_device(int fallback)
{
    static int cached[64];
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0)
        return fallback;
    if (dev < 64 && cached[dev])
        return cached[dev];
    int v = Read(dev);
    if (v <= 0)
        v = fallback;
    if (dev < 64)
        cached[dev] = v;
    return v;
}
static inline int as_read_sm_count(int dev)
{
    int n = 0;
    return cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess ? n : 0;
}
static inline int as_read_compute_capability(int dev)
{
    int major = 0, minor = 0;
    return cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
                   cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess
               ? 10 * major + minor
               : 0;
}

// The current device's SM count (132, an H100 / H200's, when it cannot be read).
static inline int as_sm_count() { return as_per_device<as_read_sm_count>(132); }

// The current device's compute capability as 10 * major + minor (90 for an H100 / H200); 0 when it
// cannot be read.
static inline int as_compute_capability() { return as_per_device<as_read_compute_capability>(0); }

// Opts Kernel into `bytes` of dynamic shared memory (above the default 48 KiB), once per device and
// kernel (each instantiation has its own flags): the first launches are a prefill's, before any
// decode graph is captured. 0, or the CUDA error.
template <auto Kernel> static inline int as_allow_dynamic_smem(int bytes)
{
    static bool done[64];
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess)
        return (int)cudaErrorInvalidDevice;
    if (dev >= 0 && dev < 64 && done[dev])
        return 0;
    const cudaError_t e = cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (e == cudaSuccess && dev >= 0 && dev < 64)
        done[dev] = true;
    return (int)e;
}

// Blocks for one thread per element, at most 65536: the element-wise kernels stride over the rest.
static inline int as_grid_1d(int64_t n, int threads)
{
    const int64_t b = (n + threads - 1) / threads;
    return (int)(b < 65536 ? b : 65536);
}

// bf16 <-> f32 by bits (RNE), identical to ref/numerics.h.
AS_HD float as_d_bf16_to_f32(uint16_t b)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float((uint32_t)b << 16);
#else
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}
__device__ __forceinline__ uint16_t as_d_f32_to_bf16(float x)
{
    uint32_t u = __float_as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
__device__ __forceinline__ float as_d_bf16(float x) { return as_d_bf16_to_f32(as_d_f32_to_bf16(x)); }

// 2^(e + (mantissa != 0)) for a positive normal float, from the IEEE fields.
__device__ __forceinline__ float as_d_pow2_ceil(float v)
{
    uint32_t u = __float_as_uint(v);
    int e = (int)((u >> 23) & 0xff);
    if (u & 0x7fffffu)
        e += 1;
    return __uint_as_float((uint32_t)e << 23);
}

// Nearest float8_e4m3fn value, ties to even, subnormals down to 2^-9. Like ref/numerics.c's
// as_e4m3 (torch's cast): |x| > 464 (the midpoint past 448), inf and NaN give NaN; up to 464 the
// satfinite conversion rounds exactly as the unsaturated one (464 ties to 448, the even code).
__device__ __forceinline__ float as_d_e4m3(float x)
{
    if (!(fabsf(x) <= 464.0f))
        return __int_as_float(0x7fffffff);
    __nv_fp8_storage_t q = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
    __half_raw h = __nv_cvt_fp8_to_halfraw(q, __NV_E4M3);
    return __half2float(__half(h));
}

// Nearest of {0, .5, 1, 1.5, 2, 3, 4, 6} in magnitude, sign kept, ties to the even code.
__device__ __forceinline__ float as_d_e2m1(float x)
{
    if (isnan(x))
        return x; // as ref/numerics.c: NaN stays NaN (not 6)
    float a = fabsf(x), r;
    // Thresholds are the midpoints; at a midpoint the even code wins (codes 0..7 in grid order).
    if (a <= 0.25f) r = 0.0f;        // 0.25 -> 0 (code 0 even)
    else if (a < 0.75f) r = 0.5f;
    else if (a <= 1.25f) r = 1.0f;   // 0.75 -> 1 (code 2), 1.25 -> 1 (code 2)
    else if (a < 1.75f) r = 1.5f;
    else if (a <= 2.5f) r = 2.0f;    // 1.75 -> 2 (code 4), 2.5 -> 2 (code 4)
    else if (a < 3.5f) r = 3.0f;
    else if (a <= 5.0f) r = 4.0f;    // 3.5 -> 4 (code 6), 5 -> 4 (code 6)
    else r = 6.0f;
    return copysignf(r, x);
}

// expf through the double exp (<= 1 double ulp), rounded once to f32: correctly rounded but for
// double-rounding cases (about 1 in 10^8). glibc's expf (<= 0.502 ulp) is correctly rounded in
// all but rare cases, so the two agree far more often than with the device expf (up to 2 ulp).
// Never __expf.
__device__ __forceinline__ float as_d_expf(float x) { return (float)exp((double)x); }

// Max over aligned groups of `width` lanes (a power of two <= 32); every lane of the warp calls it.
__device__ __forceinline__ float as_d_group_max(float v, int width)
{
    for (int o = width >> 1; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float as_d_warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// 16 bytes of a stream read once (the decode GEMV's weights; kbench's read ceiling reads them the same
// way): through the non-coherent path, not kept in L1, so that what is reused there (x) stays.
__device__ __forceinline__ uint4 as_d_ld_stream16(const void *p)
{
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

__device__ __forceinline__ float as_d_warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

#define AS_LAUNCH_RESULT() ((int)cudaGetLastError())

// Programmatic dependent launch (Hopper). Every kernel calls as_d_pdl_wait() first: launched with
// the attribute, it may be scheduled while the previous kernel of its stream still runs (its launch
// latency and block set-up overlap that kernel's tail) and waits here until that kernel has
// finished and its writes are visible; launched without it, the wait returns at once. Nothing that
// an earlier kernel writes is read, and nothing is written, before the wait, so the order of effects
// is the plain stream order.
// Once past the wait, a block lets the next kernel launch (launch_dependents): when every block of
// this grid has done so, the next grid's blocks may take the SMs this one frees and run up to their
// own wait, which still returns only when this grid has completed and its writes are visible. So a
// grid overlaps at most the one before it, never one further back.
__device__ __forceinline__ void as_d_pdl_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    // (launch_dependents before the wait, so that a grid launches while the one before its
    // predecessor still runs, measured slower: bench/RESULTS.md)
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}


// Whether launches carry the attribute: a device of compute capability 9.0 or later, unless the calling
// thread turned it off (as_k_pdl_use, kernels/pdl.cu).
extern "C" int as_pdl_enabled(void);

// kernel<<<grid, block, smem, st>>>(args...) through cudaLaunchKernelEx, with programmatic stream
// serialisation where as_pdl_enabled(); the launch error is left for AS_LAUNCH_RESULT().
template <typename... KArgs, typename... Args>
static inline void as_launch(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t st,
                             Args &&...args)
{
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cfg.attrs = attr;
    cfg.numAttrs = as_pdl_enabled() ? 1 : 0;
    (void)cudaLaunchKernelEx(&cfg, kernel, static_cast<KArgs>(args)...);
}
