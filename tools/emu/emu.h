// A functional CPU emulator for attnscope's tensor-core kernels (tools/emu/README.md):
// every CUDA thread of a block is an OS thread; __syncthreads, named barriers and the warp-level
// operations (shuffles, ldmatrix, mma.sync) are emulated with barriers and exchange buffers, with
// the fragment layouts of the PTX ISA. cp.async copies synchronously. It checks the kernels' own
// logic (indexing, swizzles, fragment plumbing, pipelines, masks, splits) on small shapes; it does
// not model timing, asynchrony or races (compute-sanitizer on the device does).
#pragma once

#include <cuda_runtime.h>

#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>

#define __launch_bounds__(...)

namespace emu {
extern thread_local dim3 tid3;
extern dim3 bid3, bdim3, gdim3;
extern uint8_t *smem_base;
void sync_block();
void sync_warp();
void sync_named(int id, int count);
uint32_t xchg_u32(uint32_t v, int src_lane); // value of lane src_lane (all lanes call)
float xchg_f32(float v, int src_lane);
uint32_t ballot(bool pred);                  // __ballot_sync over the whole warp
void ldmatrix(uint32_t (&r)[4], uint32_t addr, bool trans);
void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
// Runs body() on every thread of every block of the grid, block after block.
void launch(dim3 grid, dim3 block, const std::function<void()> &body);
} // namespace emu

#define threadIdx (emu::tid3)
#define blockIdx (emu::bid3)
#define blockDim (emu::bdim3)
#define gridDim (emu::gdim3)

inline void __syncthreads() { emu::sync_block(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu::sync_warp(); }
inline float __shfl_xor_sync(unsigned, float v, int o)
{
    return emu::xchg_f32(v, (int)((threadIdx.x & 31) ^ (unsigned)o));
}
inline int __shfl_xor_sync(unsigned, int v, int o)
{
    return (int)emu::xchg_u32((uint32_t)v, (int)((threadIdx.x & 31) ^ (unsigned)o));
}
inline int __shfl_sync(unsigned, int v, int src) { return (int)emu::xchg_u32((uint32_t)v, src & 31); }
inline float __shfl_sync(unsigned, float v, int src) { return emu::xchg_f32(v, src & 31); }
// lanes below d keep their own value, as on the device
inline int __shfl_up_sync(unsigned, int v, unsigned d)
{
    const int lane = (int)(threadIdx.x & 31), src = lane - (int)d;
    const int got = (int)emu::xchg_u32((uint32_t)v, src < 0 ? lane : src);
    return got;
}
inline unsigned __ballot_sync(unsigned, int pred) { return emu::ballot(pred != 0); }
inline int __any_sync(unsigned, int pred) { return emu::ballot(pred != 0) != 0u; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline float __uint_as_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
inline uint32_t __float_as_uint(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline int atomicOr(int *p, int v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicOr(unsigned *p, unsigned v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v)
{
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
template <class T> inline T __ldg(const T *p) { return *p; }
template <class T> inline T __ldcg(const T *p) { return *p; }
inline unsigned atomicAdd(unsigned *p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
