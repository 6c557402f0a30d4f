// attnscope_boundary: what a dependency between two decode stages costs on the device, by the kind of
// synchronisation that carries it (how much a persistent decode kernel could save).
//
//   make BUILD=build boundary && ./build/attnscope_boundary [--hops N]
//
// Each form passes one value down a chain of N dependent stages (stage i reads what stage i - 1 wrote
// and writes its successor's input), with no other work, so the time a hop is the synchronisation's
// own latency:
//   graph, PDL   N kernels captured in a CUDA graph on one stream with programmatic dependent launch,
//                each block: griddepcontrol.wait, launch_dependents, then one thread of block 0 reads
//                and writes (the engine's decode graph: kernels/common.cuh as_d_pdl_wait);
//   graph        the same without the attribute (a full edge: the grid ends, the next one launches);
//   grid barrier one kernel of G co-resident blocks, N phases; every block arrives on a counter after a
//                fence and spins until the phase's count (what a persistent kernel does where every
//                block needs the previous stage's whole output);
//   flag         one kernel of G blocks, N phases; block 0 publishes each phase's value with a release
//                store, the others spin on it with acquire loads (a persistent kernel's producer ->
//                consumers hop, where one block makes the input: a last-block RMSNorm's row).
// G: 1, 132 (an SM each) and the GEMV's one wave (3 blocks an SM, 256 threads). Timing: CUDA events
// around a graph launch (or the kernel), the median of `reps` after a warm-up.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr int kThreads = 256;

void ck(cudaError_t e, const char *what, int line)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "boundary: %s failed (line %d): %s\n", what, line, cudaGetErrorString(e));
        exit(1);
    }
}
#define CK(x) ck((x), #x, __LINE__)

__global__ void __launch_bounds__(kThreads) hop_kernel(const unsigned *in, unsigned *out)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
    if (blockIdx.x == 0 && threadIdx.x == 0)
        *out = *in + 1u;
}

__device__ __forceinline__ unsigned ld_acquire(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void st_release(unsigned *p, unsigned v)
{
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// N phases separated by a grid-wide barrier: counter's target after phase i is (i + 1) * gridDim.x.
__global__ void __launch_bounds__(kThreads) barrier_kernel(unsigned *counter, unsigned *vals, int hops)
{
    for (int i = 0; i < hops; i++) {
        if (blockIdx.x == 0 && threadIdx.x == 0)
            vals[i + 1] = vals[i] + 1u;
        __syncthreads();
        if (threadIdx.x == 0) {
            __threadfence();
            atomicAdd(counter, 1u);
            const unsigned target = (unsigned)(i + 1) * gridDim.x;
            while (ld_acquire(counter) < target)
                ;
        }
        __syncthreads();
    }
}

// N phases, block 0 the producer: flag = i + 1 publishes vals[i + 1]; every other block waits for it.
__global__ void __launch_bounds__(kThreads) flag_kernel(unsigned *flag, unsigned *vals, int hops)
{
    for (int i = 0; i < hops; i++) {
        if (threadIdx.x == 0) {
            if (blockIdx.x == 0) {
                vals[i + 1] = vals[i] + 1u;
                st_release(flag, (unsigned)i + 1u);
            } else {
                while (ld_acquire(flag) < (unsigned)i + 1u)
                    ;
            }
        }
        __syncthreads();
    }
}

float median(std::vector<float> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Microseconds a hop: the median over `reps` runs (after 3 warm-up runs) of launch() on st, timed by
// events; reset() runs before each, outside the timing.
template <typename Reset, typename Launch>
float us_a_hop(int hops, int reps, cudaStream_t st, Reset reset, Launch launch)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    std::vector<float> t;
    for (int r = 0; r < reps + 3; r++) {
        reset();
        CK(cudaEventRecord(a, st));
        launch();
        CK(cudaEventRecord(b, st));
        CK(cudaEventSynchronize(b));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, a, b));
        if (r >= 3)
            t.push_back(ms * 1000.0f / (float)hops);
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    return median(t);
}

// The chain's last value must be its hop count: every stage saw its predecessor's write.
void check_chain(const unsigned *vals, int hops, const char *what)
{
    unsigned last = 0;
    CK(cudaMemcpy(&last, vals + hops, sizeof last, cudaMemcpyDeviceToHost));
    if (last != (unsigned)hops) {
        fprintf(stderr, "boundary: the %s chain passed %u, not %d\n", what, last, hops);
        exit(1);
    }
}

// A graph of `hops` hop kernels of `grid` blocks (PDL or not); microseconds a hop.
float graph_hops(int hops, int grid, bool pdl, int reps)
{
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    unsigned *vals;
    CK(cudaMalloc(&vals, sizeof(unsigned) * (size_t)(hops + 1)));
    CK(cudaMemset(vals, 0, sizeof(unsigned) * (size_t)(hops + 1)));
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < hops; i++) {
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3((unsigned)grid);
        cfg.blockDim = dim3(kThreads);
        cfg.stream = st;
        cfg.attrs = attr;
        cfg.numAttrs = pdl ? 1 : 0;
        CK(cudaLaunchKernelEx(&cfg, hop_kernel, (const unsigned *)(vals + i), vals + i + 1));
    }
    CK(cudaStreamEndCapture(st, &g));
    cudaGraphExec_t ge;
    CK(cudaGraphInstantiate(&ge, g, 0));
    const float us = us_a_hop(hops, reps, st, [] {}, [&] { CK(cudaGraphLaunch(ge, st)); });
    check_chain(vals, hops, pdl ? "PDL graph" : "graph");
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    CK(cudaFree(vals));
    CK(cudaStreamDestroy(st));
    return us;
}

// One persistent kernel of `grid` blocks, `hops` phases (barrier or flag); microseconds a phase.
float persistent_hops(int hops, int grid, bool barrier, int reps)
{
    unsigned *sync, *vals;
    CK(cudaMalloc(&sync, sizeof(unsigned)));
    CK(cudaMalloc(&vals, sizeof(unsigned) * (size_t)(hops + 1)));
    auto reset = [&] {
        CK(cudaMemset(sync, 0, sizeof(unsigned)));
        CK(cudaMemset(vals, 0, sizeof(unsigned) * (size_t)(hops + 1)));
    };
    auto launch = [&] {
        if (barrier)
            barrier_kernel<<<grid, kThreads>>>(sync, vals, hops);
        else
            flag_kernel<<<grid, kThreads>>>(sync, vals, hops);
        CK(cudaGetLastError());
    };
    const float us = us_a_hop(hops, reps, 0, reset, launch);
    check_chain(vals, hops, barrier ? "barrier" : "flag");
    CK(cudaFree(sync));
    CK(cudaFree(vals));
    return us;
}

} // namespace

int main(int argc, char **argv)
{
    int hops = 400, reps = 21;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--hops") && i + 1 < argc) {
            hops = atoi(argv[++i]);
            if (hops < 1 || hops > 100000) {
                fprintf(stderr, "boundary: --hops wants 1 to 100000\n");
                return 2;
            }
        } else {
            fprintf(stderr, "usage: attnscope_boundary [--hops N]\n");
            return 2;
        }
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    int per_sm = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, barrier_kernel, kThreads, 0));
    const int sms = prop.multiProcessorCount, wave = std::min(3, per_sm) * sms;
    printf("device: %s, %d SMs, cc %d.%d; %d hops, median of %d runs\n\n", prop.name, sms, prop.major, prop.minor,
           hops, reps);
    printf("| blocks | graph, PDL us a hop | graph us a hop | grid barrier us a phase | flag us a phase |\n");
    printf("| --- | --- | --- | --- | --- |\n");
    const int grids[] = {1, sms, wave};
    for (int g : grids)
        printf("| %d | %.2f | %.2f | %.2f | %.2f |\n", g, graph_hops(hops, g, true, reps),
               graph_hops(hops, g, false, reps), persistent_hops(hops, g, true, reps),
               persistent_hops(hops, g, false, reps));
    return 0;
}
