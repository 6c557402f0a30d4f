// Tensor-core and async-copy building blocks shared by kernels/index_scores.cu and
// kernels/sparse_attn.cu: cp.async (16 bytes, zero-fill), ldmatrix, mma.sync m16n8k16 bf16 with f32
// accumulation. All of these exist from sm_80 on, so the compute_80 PTX build compiles them too.
//
// Fragment layouts of mma.m16n8k16 (g = lane / 4, c = lane % 4), bf16 pairs packed in a u32 with
// the lower index in the low half:
//   A (16x16, row major): a0 = (row g,   k 2c..2c+1)   a1 = (row g+8, k 2c..2c+1)
//                         a2 = (row g,   k 2c+8..)     a3 = (row g+8, k 2c+8..)
//   B (16x8, "col"):      b0 = (k 2c..2c+1, col g)     b1 = (k 2c+8..2c+9, col g)
//   C (16x8, f32):        c0 = (row g, col 2c)  c1 = (row g, col 2c+1)  c2 = (row g+8, col 2c)  c3 = (row g+8, col 2c+1)
#pragma once

#include <stdint.h>

// A kernel's dynamic shared memory, 16-byte aligned (tools/emu's shadow of this file declares the
// emulator program's buffer instead, the one its ldmatrix addresses are relative to).
#define AS_DYNAMIC_SMEM(name) extern __shared__ __align__(16) uint8_t name[]

namespace asmma {

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

// 16-byte async copy global -> shared; src_bytes 0 fills the 16 bytes with zeros (src must still be
// a valid address; nothing is read).
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3, uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3,
                                                  uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

// Named barrier `id` (1..15; 0 is __syncthreads') for `count` threads (a multiple of 32).
__device__ __forceinline__ void bar_named(int id, int count)
{
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}

// d += a * b (bf16 inputs, f32 accumulators).
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two f32 -> one u32 of two bf16 (RNE; lo in the low half): cvt.rn.bf16x2.f32. Equal to
// as_d_f32_to_bf16 on both halves for every non-NaN input.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi)
{
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
__device__ __forceinline__ float bf16lo(uint32_t u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float bf16hi(uint32_t u) { return __uint_as_float(u & 0xffff0000u); }

} // namespace asmma
