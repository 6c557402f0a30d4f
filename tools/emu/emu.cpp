// The emulator's runtime (see emu.h).
#include "emu.h"

#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace emu {

thread_local dim3 tid3;
dim3 bid3, bdim3, gdim3;
uint8_t *smem_base;

namespace {
struct Block {
    std::unique_ptr<std::barrier<>> block;
    std::unique_ptr<std::barrier<>> warp[32];
    std::unique_ptr<std::barrier<>> named[16];
    std::mutex mu;
    uint32_t xu[1024][8];
    float xf[1024][4];
};
Block *g_blk;

inline int tid() { return (int)tid3.x; }
inline int lane() { return (int)(tid3.x & 31); }
inline int wbase() { return (int)(tid3.x & ~31u); }
inline float lo16(uint32_t u) { return __uint_as_float(u << 16); }
inline float hi16(uint32_t u) { return __uint_as_float(u & 0xffff0000u); }
} // namespace

void sync_block() { g_blk->block->arrive_and_wait(); }
void sync_warp() { g_blk->warp[tid() >> 5]->arrive_and_wait(); }
void sync_named(int id, int count)
{
    std::barrier<> *b;
    {
        std::lock_guard<std::mutex> lk(g_blk->mu);
        if (!g_blk->named[id])
            g_blk->named[id] = std::make_unique<std::barrier<>>(count);
        b = g_blk->named[id].get();
    }
    b->arrive_and_wait();
}

uint32_t xchg_u32(uint32_t v, int src_lane)
{
    g_blk->xu[tid()][7] = v;
    sync_warp();
    uint32_t r = g_blk->xu[wbase() + src_lane][7];
    sync_warp();
    return r;
}

uint32_t ballot(bool pred)
{
    g_blk->xu[tid()][6] = pred;
    sync_warp();
    uint32_t m = 0;
    for (int l = 0; l < 32; l++)
        m |= (g_blk->xu[wbase() + l][6] ? 1u : 0u) << l;
    sync_warp();
    return m;
}

float xchg_f32(float v, int src_lane)
{
    g_blk->xf[tid()][3] = v;
    sync_warp();
    float r = g_blk->xf[wbase() + src_lane][3];
    sync_warp();
    return r;
}

// ldmatrix .m8n8.x4.b16: lanes 8i..8i+7 give the row addresses of matrix i; lane l receives of
// matrix i the pair (row l/4, cols 2(l%4), +1), or with .trans (rows 2(l%4), +1; col l/4).
void ldmatrix(uint32_t (&r)[4], uint32_t addr, bool trans)
{
    g_blk->xu[tid()][6] = addr;
    sync_warp();
    const int l = lane(), b = wbase();
    for (int i = 0; i < 4; i++) {
        if (!trans) {
            uint32_t a = g_blk->xu[b + i * 8 + l / 4][6] + 4 * (l % 4);
            memcpy(&r[i], smem_base + a, 4);
        } else {
            uint16_t v0, v1;
            memcpy(&v0, smem_base + g_blk->xu[b + i * 8 + 2 * (l % 4)][6] + 2 * (l / 4), 2);
            memcpy(&v1, smem_base + g_blk->xu[b + i * 8 + 2 * (l % 4) + 1][6] + 2 * (l / 4), 2);
            r[i] = (uint32_t)v0 | ((uint32_t)v1 << 16);
        }
    }
    sync_warp();
}

// mma.m16n8k16.row.col f32.bf16.bf16.f32 with the PTX fragment layouts (g = lane/4, c = lane%4):
// A a0 (g, 2c..) a1 (g+8, 2c..) a2 (g, 2c+8..) a3 (g+8, 2c+8..); B b0 (k 2c.., n g) b1 (k 2c+8.., n g);
// C c0 (g, 2c) c1 (g, 2c+1) c2 (g+8, 2c) c3 (g+8, 2c+1).
void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    uint32_t *x = g_blk->xu[tid()];
    x[0] = a[0], x[1] = a[1], x[2] = a[2], x[3] = a[3], x[4] = b0, x[5] = b1;
    sync_warp();
    float A[16][16], B[16][8];
    const int b = wbase();
    for (int L = 0; L < 32; L++) {
        const uint32_t *y = g_blk->xu[b + L];
        const int g = L / 4, c = L % 4;
        A[g][2 * c] = lo16(y[0]), A[g][2 * c + 1] = hi16(y[0]);
        A[g + 8][2 * c] = lo16(y[1]), A[g + 8][2 * c + 1] = hi16(y[1]);
        A[g][2 * c + 8] = lo16(y[2]), A[g][2 * c + 9] = hi16(y[2]);
        A[g + 8][2 * c + 8] = lo16(y[3]), A[g + 8][2 * c + 9] = hi16(y[3]);
        B[2 * c][g] = lo16(y[4]), B[2 * c + 1][g] = hi16(y[4]);
        B[2 * c + 8][g] = lo16(y[5]), B[2 * c + 9][g] = hi16(y[5]);
    }
    const int l = lane(), g = l / 4, c = l % 4;
    const int rows[4] = {g, g, g + 8, g + 8}, cols[4] = {2 * c, 2 * c + 1, 2 * c, 2 * c + 1};
    for (int e = 0; e < 4; e++) {
        float acc = d[e];
        for (int k = 0; k < 16; k++)
            acc = fmaf(A[rows[e]][k], B[k][cols[e]], acc);
        d[e] = acc;
    }
    sync_warp();
}

void launch(dim3 grid, dim3 block, const std::function<void()> &body)
{
    const int n = (int)(block.x * block.y * block.z);
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                auto blk = std::make_unique<Block>();
                blk->block = std::make_unique<std::barrier<>>(n);
                for (int w = 0; w < (n + 31) / 32; w++)
                    blk->warp[w] = std::make_unique<std::barrier<>>(std::min(32, n - 32 * w));
                g_blk = blk.get();
                bid3 = dim3(x, y, z);
                bdim3 = block;
                gdim3 = grid;
                std::vector<std::thread> th;
                th.reserve((size_t)n);
                for (int t = 0; t < n; t++)
                    th.emplace_back([t, &body] {
                        tid3 = dim3((unsigned)t, 0, 0);
                        body();
                        g_blk->block->arrive_and_drop();
                        g_blk->warp[t >> 5]->arrive_and_drop();
                    });
                for (auto &t : th)
                    t.join();
                g_blk = nullptr;
            }
}

} // namespace emu
