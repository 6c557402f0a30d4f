// Device building blocks of the fp8 linear's kernels (kernels/fp8_gemv.cu, fp8_gemm.cu): the 8-byte
// weight stream load, e4m3 values, the e4m3 tensor-core product (mma.sync m16n8k32, sm_89 and later)
// and the warpgroup one (wgmma m64n128k32, sm_90a). In a file of their own so that the CPU emulator
// (tools/emu) can shadow them.
//
// e4m3 x e4m3 products have at most 8 significant bits and are exact in f32; bf16(e4m3 * 2^k) is
// exact too (4 significant bits). Fragments of mma.m16n8k32 with 8-bit operands (g = lane / 4,
// c = lane % 4; 4 bytes a register, the lower k in the low byte), as kernels/q2k_mmq.cu's s8 form:
//   A a0 (row g, k 4c..4c+3) a1 (row g+8, k 4c..) a2 (row g, k 16+4c..) a3 (row g+8, k 16+4c..)
//   B b0 (k 4c..4c+3, col g) b1 (k 16+4c.., col g)
//   C c0 (g, 2c) c1 (g, 2c+1) c2 (g+8, 2c) c3 (g+8, 2c+1)
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

#include "kernels/common.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
#define AS_FP8_MMA 1 // mma.sync with e4m3 operands and the e4m3x2 conversion instruction
#endif

namespace asfp8 {

// 8 bytes of a stream read once (weights), as as_d_ld_stream16: not kept in L1.
__device__ __forceinline__ uint2 ld_stream8(const void *p)
{
    uint2 v;
    asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
    return v;
}

// The value of an e4m3 code, exactly (NaN codes give NaN).
__device__ __forceinline__ float e4m3_value(uint8_t b)
{
    return __half2float(__half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)b, __NV_E4M3)));
}

// Bytes 2h, 2h + 1 of w (two e4m3 codes) as a bf16x2, the lower byte in the low half: exact.
__device__ __forceinline__ uint32_t e4m3x2_to_bf16x2(uint32_t w, int h)
{
    const __half2 v = __half2(__nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w >> (16 * h)), __NV_E4M3));
    const float2 f = __half22float2(v);
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(f.y), "f"(f.x));
    return r;
}

#ifdef AS_FP8_MMA
// d += a . b, e4m3 operands, f32 accumulators (the fragments above).
__device__ __forceinline__ void mma_e4m3(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#endif

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// d (64 x 128, f32) = A (64 x 32, shared, K-major) . B (32 x 128, shared, K-major), by descriptor
// (kernels/wgmma.cuh): one 32-wide K block of e4m3 codes, the accumulators overwritten (scale-d 0: d
// is only written), so that each block's sum can be scaled before it joins the running sum. The caller
// fences before it and waits and pins d after it (kernels/wgmma.cuh's convention).
__device__ __forceinline__ void wgmma_m64n128k32_e4m3(float (&d)[64], uint64_t desc_a, uint64_t desc_b)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
                 "%64, %65, p, 1, 1;\n}\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]), "=f"(d[4]), "=f"(d[5]), "=f"(d[6]), "=f"(d[7]),
                   "=f"(d[8]), "=f"(d[9]), "=f"(d[10]), "=f"(d[11]), "=f"(d[12]), "=f"(d[13]), "=f"(d[14]), "=f"(d[15]),
                   "=f"(d[16]), "=f"(d[17]), "=f"(d[18]), "=f"(d[19]), "=f"(d[20]), "=f"(d[21]), "=f"(d[22]), "=f"(d[23]),
                   "=f"(d[24]), "=f"(d[25]), "=f"(d[26]), "=f"(d[27]), "=f"(d[28]), "=f"(d[29]), "=f"(d[30]), "=f"(d[31]),
                   "=f"(d[32]), "=f"(d[33]), "=f"(d[34]), "=f"(d[35]), "=f"(d[36]), "=f"(d[37]), "=f"(d[38]), "=f"(d[39]),
                   "=f"(d[40]), "=f"(d[41]), "=f"(d[42]), "=f"(d[43]), "=f"(d[44]), "=f"(d[45]), "=f"(d[46]), "=f"(d[47]),
                   "=f"(d[48]), "=f"(d[49]), "=f"(d[50]), "=f"(d[51]), "=f"(d[52]), "=f"(d[53]), "=f"(d[54]), "=f"(d[55]),
                   "=f"(d[56]), "=f"(d[57]), "=f"(d[58]), "=f"(d[59]), "=f"(d[60]), "=f"(d[61]), "=f"(d[62]), "=f"(d[63])
                 : "l"(desc_a), "l"(desc_b), "r"(0));
}
#endif

} // namespace asfp8
