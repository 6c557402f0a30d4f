// The selection on the device: torch's CPU top-k index SET (SPEC 5, ref/topk.c) and the
// candidate blocks (SPEC 3, ref/candidates.c), exact, tie order included, so that no decode step
// needs the host.
//
// Why an emulation and not a radix select: the index scores are bf16, so at a real width (2048-8192
// columns, 256 values per binade) the k-th largest value is almost always shared by several columns,
// and WHICH of them torch keeps is decided by libstdc++'s introselect moving pairs around. So each
// row runs that algorithm itself, step for step, on (key, index) pairs in shared memory (key_of: u32
// keys that order as comp does), with one block per row:
//   - introselect's control flow (median-of-three into `first`, the depth limit 2*floor(log2 n),
//     insertion sort below 4 elements, heap_select at the depth limit) and partial_sort's heap_select
//     (k * 64 <= n) run on thread 0, exactly as ref/topk.c, in O(1) or rare steps;
//   - the expensive part, __unguarded_partition, runs on the whole block (ranges of at most 128 columns:
//     on its first warp alone, warp_introselect_fast). Its swap sequence has a closed
//     form: with A = positions of the "left stoppers" (!comp(x, pivot)) in rising order and B = those
//     of the "right stoppers" (!comp(pivot, x)) in falling order, pass m swaps A[m] and B[m] for every
//     m below m* = the number of leading m with A[m] < B[m], and the partition returns
//     min(A[m*], B[m*-1]) (the left scan stops at an original stopper or at the swapped-in one,
//     whichever comes first; see the proof in docs/SELECTION.md). Stoppers are ranked with warp
//     ballots (32 consecutive columns at a time), each warp over its own run of the range, the runs'
//     counts summed in order (so the lists are those one scan would write; one warp doing it all
//     measured much slower); m* is counted in the same scan (A[m] < B[m] exactly
//     when more than m right stoppers lie above A[m]; A rises, B falls), the swaps are disjoint and
//     parallel.
// The set (the first k pairs) is then flagged and compacted in index order: ascending, as the
// reference sorts it. Rows wider than AS_TOPK_MAX_WIDTH are refused by the launcher (the engine then
// selects on the host).
#include <climits>
#include <string.h>
#include <stdlib.h>

#include "kernels/common.cuh"
#include "kernels/kernels.h"

namespace topk {

constexpr unsigned kFull = 0xffffffffu;
// One row's working set: u32 keys (key_of), u16 indices, u16 left / right stopper positions (10 bytes a
// column), rounded up so that what follows it stays aligned, then the block's scratch (per-warp
// counts: kScratch ints, the last 2 * AS_TOPK_NSTATS of them the profile's u64 counters).
constexpr int kScratchCounts = 128, kScratch = kScratchCounts + 2 * AS_TOPK_NSTATS;
__host__ __device__ constexpr size_t pairs_bytes(int n) { return ((size_t)n * 10 + 15) & ~(size_t)15; }
__host__ __device__ constexpr size_t row_bytes(int n) { return pairs_bytes(n) + sizeof(int) * kScratch; }

// A row's values are held as keys that order as ref/topk.c's comp(a, b) = (isnan(a) && !isnan(b)) ||
// a > b does: every NaN one key above +inf, -0 as +0, so comp is one unsigned compare in the scans
// (the float comparison with its NaN tests drew a large share of the ranking scans' samples in
// Nsight Compute's source view).
typedef uint32_t Key;
__device__ __forceinline__ Key key_of(float x)
{
    if (x != x)
        return 0xffffffffu;
    const uint32_t u = x == 0.0f ? 0u : __float_as_uint(x);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
// a before b: NaN first (largest), then larger values
__device__ __forceinline__ bool comp(Key a, Key b) { return a > b; }

struct Row {
    Key *v;
    uint16_t *ix;
    uint16_t *pa, *pb; // stopper positions (partition), then the set's flags
    int *scratch;      // kScratch ints: the warps' counts (partition: A [0, 32), B [32, 64), m* [96, 128);
                       // emission [0, 32)), a block sum ([64]), from kScratchCounts the profile (Prof)
};

__device__ __forceinline__ Row row_in(uint8_t *base, int n)
{
    Row r;
    r.v = (Key *)base;
    r.ix = (uint16_t *)(base + 4 * (size_t)n);
    r.pa = r.ix + n;
    r.pb = r.pa + n;
    r.scratch = (int *)(base + pairs_bytes(n));
    return r;
}

__device__ __forceinline__ void swap_at(const Row &r, int a, int b)
{
    const Key tv = r.v[a];
    r.v[a] = r.v[b];
    r.v[b] = tv;
    const uint16_t ti = r.ix[a];
    r.ix[a] = r.ix[b];
    r.ix[b] = ti;
}

// The lanes below this one: a flag's rank among the warp's 32 consecutive columns.
__device__ __forceinline__ unsigned lanes_below(int lane) { return (1u << lane) - 1u; }

__device__ __forceinline__ int warp_sum_int(int x)
{
    for (int o = 16; o > 0; o >>= 1)
        x += __shfl_xor_sync(kFull, x, o);
    return x;
}

// Where a row's time goes (stats given: the benchmark's uncaptured steps; AS_TOPK_* in kernels.h):
// thread 0's pass counts and clock64 intervals, in the block's shared memory (c: AS_TOPK_NSTATS
// counters, null without stats), added to stats once the row is done.
struct Prof {
    unsigned long long *c;
    __device__ __forceinline__ void add(int i, unsigned long long v) const
    {
        if (c && threadIdx.x == 0)
            c[i] += v;
    }
};
__device__ __forceinline__ long long now()
{
#ifdef AS_EMU
    return 0;
#else
    return clock64();
#endif
}

// ---- lane 0: libstdc++'s sequential pieces (ref/topk.c, same names, same order of moves) ----

__device__ void push_heap(const Row &r, int base, int hole, int top, Key val, uint16_t vix)
{
    int parent = (hole - 1) / 2;
    while (hole > top && comp(r.v[base + parent], val)) {
        r.v[base + hole] = r.v[base + parent];
        r.ix[base + hole] = r.ix[base + parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    r.v[base + hole] = val;
    r.ix[base + hole] = vix;
}

__device__ void adjust_heap(const Row &r, int base, int hole, int len, Key val, uint16_t vix)
{
    const int top = hole;
    int second = hole;
    while (second < (len - 1) / 2) {
        second = 2 * (second + 1);
        if (comp(r.v[base + second], r.v[base + second - 1]))
            second--;
        r.v[base + hole] = r.v[base + second];
        r.ix[base + hole] = r.ix[base + second];
        hole = second;
    }
    if ((len & 1) == 0 && second == (len - 2) / 2) {
        second = 2 * (second + 1);
        r.v[base + hole] = r.v[base + second - 1];
        r.ix[base + hole] = r.ix[base + second - 1];
        hole = second - 1;
    }
    push_heap(r, base, hole, top, val, vix);
}

// heap_select and insertion_sort are thread 0's rare or last steps, each called from several places:
// kept out of line, one copy each (in every build measured since 7f9f84a; not measured inlined since).

// [first, middle) ends up holding the middle - first pairs that compare first (as a heap).
__device__ __attribute__((noinline)) void heap_select(const Row &r, int first, int middle, int last)
{
    const int len = middle - first;
    if (len >= 2)
        for (int parent = (len - 2) / 2;; parent--) {
            adjust_heap(r, first, parent, len, r.v[first + parent], r.ix[first + parent]);
            if (parent == 0)
                break;
        }
    for (int i = middle; i < last; i++)
        if (comp(r.v[i], r.v[first])) { // pop_heap(first, middle, i)
            const Key val = r.v[i];
            const uint16_t vix = r.ix[i];
            r.v[i] = r.v[first];
            r.ix[i] = r.ix[first];
            adjust_heap(r, first, 0, len, val, vix);
        }
}

// move_median_to_first's choice: the position (a, b or c, holding va, vb, vc) whose pair goes to `first`.
__device__ __forceinline__ int median_of_three(Key va, Key vb, Key vc, int a, int b, int c)
{
    if (comp(va, vb)) {
        if (comp(vb, vc))
            return b;
        return comp(va, vc) ? c : a;
    }
    if (comp(va, vc))
        return a;
    return comp(vb, vc) ? c : b;
}

__device__ void move_median_to_first(const Row &r, int result, int a, int b, int c)
{
    swap_at(r, result, median_of_three(r.v[a], r.v[b], r.v[c], a, b, c));
}

__device__ __attribute__((noinline)) void insertion_sort(const Row &r, int first, int last)
{
    if (first == last)
        return;
    for (int i = first + 1; i != last; ++i) {
        const Key val = r.v[i];
        const uint16_t vix = r.ix[i];
        if (comp(val, r.v[first])) {
            for (int j = i; j > first; j--) {
                r.v[j] = r.v[j - 1];
                r.ix[j] = r.ix[j - 1];
            }
            r.v[first] = val;
            r.ix[first] = vix;
        } else { // unguarded_linear_insert
            int hole = i, next = i - 1;
            while (comp(val, r.v[next])) {
                r.v[hole] = r.v[next];
                r.ix[hole] = r.ix[next];
                hole = next--;
            }
            r.v[hole] = val;
            r.ix[hole] = vix;
        }
    }
}

// ---- the block: __unguarded_partition(lo, hi, pivot value P) in closed form ----
// Every function below is called by every thread of the block (blockDim.x a multiple of 32, at most
// 1024: the scratch counts 32 warps).

// Warp w takes the w-th of the block's blockDim.x / 32 contiguous runs of whole 32-column groups of
// [lo, hi): [*c0, *c1).
__device__ __forceinline__ void warp_run(int lo, int hi, int *c0, int *c1)
{
    const int nw = blockDim.x >> 5, w = threadIdx.x >> 5;
    const int per = ((hi - lo + 31) / 32 + nw - 1) / nw * 32;
    *c0 = min(hi, lo + w * per);
    *c1 = min(hi, *c0 + per);
}

// Ranks this warp's flags (one ballot per 32 consecutive columns of its run, kGroups groups read
// ahead): visit(i, rank_a or -1, rank_b or -1, right stoppers below i) for each column with a flag;
// returns the counts.
constexpr int kGroups = 4;
template <class Visit>
__device__ __forceinline__ int2 rank_stoppers(const Row &r, int c0, int c1, Key P, int oa, int ob, Visit visit)
{
    const int lane = threadIdx.x & 31;
    int ta = oa, tb = ob;
    for (int g0 = c0; g0 < c1; g0 += 32 * kGroups) {
        Key xs[kGroups];
#pragma unroll
        for (int u = 0; u < kGroups; u++) {
            const int i = g0 + 32 * u + lane;
            xs[u] = i < c1 ? r.v[i] : 0u;
        }
#pragma unroll
        for (int u = 0; u < kGroups; u++) {
            const int i = g0 + 32 * u + lane;
            const bool in = i < c1;
            const bool sa = in && !comp(xs[u], P), sb = in && !comp(P, xs[u]);
            const unsigned ma = __ballot_sync(kFull, sa), mb = __ballot_sync(kFull, sb);
            const int b_below = tb + __popc(mb & lanes_below(lane));
            if (sa || sb)
                visit(i, sa ? ta + __popc(ma & lanes_below(lane)) : -1, sb ? b_below : -1, b_below);
            ta += __popc(ma);
            tb += __popc(mb);
        }
    }
    return make_int2(ta - oa, tb - ob);
}

// A = r.pa[0..ta) and the right stoppers r.pb[0..tb) both in rising position order (B[m] is
// pb[tb - 1 - m]). Each warp counts its run's stoppers, the runs' offsets are summed in warp order,
// then each warp writes its run's positions from its offsets: the lists a single scan would write.
// m* is counted in the same scan: A[m] < B[m] exactly when more than m right stoppers lie above A[m]
// (a binary search of the lists took eleven dependent loads a pass).
__device__ int block_partition(const Row &r, int lo, int hi, Key P)
{
    int *cnt_a = r.scratch, *cnt_b = r.scratch + 32, *cnt_m = r.scratch + 96;
    const int tid = threadIdx.x, w = tid >> 5, nw = (int)blockDim.x >> 5;
    int c0, c1;
    warp_run(lo, hi, &c0, &c1);
    const int2 n = rank_stoppers(r, c0, c1, P, 0, 0, [](int, int, int, int) {});
    if ((tid & 31) == 0) {
        cnt_a[w] = n.x;
        cnt_b[w] = n.y;
    }
    __syncthreads();
    int oa = 0, ob = 0, ta = 0, tb = 0;
    for (int v = 0; v < nw; v++) {
        if (v < w) {
            oa += cnt_a[v];
            ob += cnt_b[v];
        }
        ta += cnt_a[v];
        tb += cnt_b[v];
    }
    int swapped = 0; // this lane's left stoppers A[m] with m < m*
    rank_stoppers(r, c0, c1, P, oa, ob, [&](int i, int ra, int rb, int b_below) {
        if (ra >= 0) {
            r.pa[ra] = (uint16_t)i;
            swapped += tb - b_below - (rb >= 0 ? 1 : 0) > ra;
        }
        if (rb >= 0)
            r.pb[rb] = (uint16_t)i;
    });
    swapped = warp_sum_int(swapped);
    if ((tid & 31) == 0)
        cnt_m[w] = swapped;
    __syncthreads(); // (also: the counts are read before the next partition writes them)
    int ms = 0; // m*: the leading passes whose stoppers have not crossed (A rises, B falls: a prefix)
    for (int v = 0; v < nw; v++)
        ms += cnt_m[v];
    int cut = ms < ta ? (int)r.pa[ms] : INT_MAX;
    if (ms > 0 && (int)r.pb[tb - ms] < cut) // B[ms - 1]
        cut = r.pb[tb - ms];
    for (int m = tid; m < ms; m += (int)blockDim.x) // (the swaps move v / ix, never pa / pb)
        swap_at(r, r.pa[m], r.pb[tb - 1 - m]);
    __syncthreads();
    return cut;
}

// std::nth_element(first, first + nth, first + n, comp): introselect, its loop while the range is
// longer than `stop` (3 for the whole loop); false when it stopped there, true when it ended (the
// depth limit's heap_select).
__device__ bool block_introselect(const Row &r, int &first, int &last, int &depth, int nth, int stop, Prof pf)
{
    const bool t0 = threadIdx.x == 0;
    while (last - first > stop) {
        if (depth == 0) {
            if (t0) {
                heap_select(r, first, nth + 1, last);
                swap_at(r, first, nth);
            }
            __syncthreads();
            return true;
        }
        --depth;
        if (t0)
            move_median_to_first(r, first, first + 1, first + (last - first) / 2, last - 1);
        __syncthreads();
        pf.add(AS_TOPK_PASSES_BLOCK, 1);
        pf.add(AS_TOPK_RANKED_BLOCK, last - first - 1);
        const int cut = block_partition(r, first + 1, last, r.v[first]);
        if (cut <= nth)
            first = cut;
        else
            last = cut;
    }
    return false;
}

// ---- warp 0 alone on a range of at most kFastCols columns: a pass in a few shared-memory round trips ----
// The same closed form as block_partition, without its lists' two scans and the block's barriers: each
// lane holds kFastSlots columns of the range (lane + 32 s), a left stopper of rank m (from the bottom) is
// swapped when more than m right stoppers lie above it (B[m] > A[m]), so m* is a count of ballots, and
// each swapped stopper finds its partner through a list written by rank. The median-of-three is
// decided by every lane from the values, and its pair swapped by lane 0 once the range is classified.
// (Through the block's lists the decode's short passes on one warp took a large part of the row's
// time.) Four slots, not more: one warp alone exposes the latency of every instruction it issues, and
// slots past the range are predicated off, not skipped; 16 slots and a one-slot form for short ranges
// were measured and not kept (bench/RESULTS.md).
constexpr int kFastSlots = 4, kFastCols = 32 * kFastSlots;

// introselect's loop on warp 0 (every lane calls; first, last, depth uniform) while the range is longer
// than 3 columns, its length at most kFastCols: true when the depth limit ended it (as block_introselect).
__device__ bool warp_introselect_fast(const Row &r, int &first, int &last, int &depth, int nth, Prof pf)
{
    constexpr int S = kFastSlots;
    const int lane = threadIdx.x & 31;
    const unsigned below = lanes_below(lane);
    while (last - first > 3) {
        if (depth == 0) {
            if (lane == 0) {
                heap_select(r, first, nth + 1, last);
                swap_at(r, first, nth);
            }
            __syncwarp();
            return true;
        }
        --depth;
        pf.add(AS_TOPK_PASSES_WARP, 1);
        pf.add(AS_TOPK_RANKED_WARP, last - first - 1);
        const int f = first, lo = first + 1, hi = last, ns = (hi - lo + 31) >> 5;
        const int a = lo, b = f + (hi - f) / 2, c = hi - 1;
        // every load of the pass at once: the median's candidates, `first`, the range
        const Key va = r.v[a], vb = r.v[b], vc = r.v[c], vf = r.v[f];
        Key x[S];
#pragma unroll
        for (int s = 0; s < S; s++) {
            const int i = lo + 32 * s + lane;
            x[s] = s < ns && i < hi ? r.v[i] : 0u;
        }
        const int ch = median_of_three(va, vb, vc, a, b, c);
        const Key P = ch == a ? va : ch == b ? vb : vc;
        // stoppers of the range as it is once `first` and `ch` have swapped: ch holds first's value
        unsigned ma[S], mb[S];
        int tb = 0;
#pragma unroll
        for (int s = 0; s < S; s++) {
            ma[s] = mb[s] = 0;
            if (s < ns) {
                const int i = lo + 32 * s + lane;
                const Key xv = i == ch ? vf : x[s];
                ma[s] = __ballot_sync(kFull, i < hi && !comp(xv, P));
                mb[s] = __ballot_sync(kFull, i < hi && !comp(P, xv));
                tb += __popc(mb[s]);
            }
        }
        // rank_a: left stoppers below (this column is A[rank_a]); above_b: right stoppers above (this
        // column is B[above_b] when it is one); swap_a: A[m] with m < m*, i.e. B[m] lies above A[m]
        int rank_a[S], above_b[S], ms = 0;
        {
            int ca = 0, cb = 0;
#pragma unroll
            for (int s = 0; s < S; s++) {
                rank_a[s] = ca + __popc(ma[s] & below);
                above_b[s] = tb - (cb + __popc(mb[s] & below) + (int)((mb[s] >> lane) & 1));
                if (s < ns) {
                    const bool sa = (ma[s] >> lane) & 1;
                    ms += __popc(__ballot_sync(kFull, sa && above_b[s] > rank_a[s]));
                }
                ca += __popc(ma[s]);
                cb += __popc(mb[s]);
            }
        }
        // the cut: min(A[m*], B[m*-1]) (A[m*] when m* < #A); then the median's swap, and each swapped
        // stopper's partner by rank (A[m] <-> B[m], m < m*)
        int cut = INT_MAX;
        int partner[S];
#pragma unroll
        for (int s = 0; s < S; s++) {
            partner[s] = -1;
            if (s < ns) {
                const int i = lo + 32 * s + lane;
                const bool sa = (ma[s] >> lane) & 1, sb = (mb[s] >> lane) & 1;
                const unsigned ha = __ballot_sync(kFull, sa && rank_a[s] == ms);
                const unsigned hb = __ballot_sync(kFull, ms > 0 && sb && above_b[s] == ms - 1);
                if (ha)
                    cut = min(cut, lo + 32 * s + __ffs(ha) - 1);
                if (hb)
                    cut = min(cut, lo + 32 * s + __ffs(hb) - 1);
                if (sa && above_b[s] > rank_a[s]) {
                    r.pa[rank_a[s]] = (uint16_t)i;
                    partner[s] = 0;
                } else if (sb && above_b[s] < ms) {
                    r.pb[above_b[s]] = (uint16_t)i;
                    partner[s] = 1;
                }
            }
        }
        if (lane == 0)
            swap_at(r, f, ch);
        __syncwarp();
        Key nv[S];
        uint16_t ni[S];
#pragma unroll
        for (int s = 0; s < S; s++)
            if (partner[s] >= 0) {
                const int q = partner[s] == 0 ? r.pb[rank_a[s]] : r.pa[above_b[s]];
                nv[s] = r.v[q];
                ni[s] = r.ix[q];
            }
        __syncwarp();
#pragma unroll
        for (int s = 0; s < S; s++)
            if (partner[s] >= 0) {
                const int i = lo + 32 * s + lane;
                r.v[i] = nv[s];
                r.ix[i] = ni[s];
            }
        __syncwarp();
        if (cut <= nth)
            first = cut;
        else
            last = cut;
    }
    return false;
}

// The block partitions ranges longer than warp_range (at most kFastCols), its first warp the shorter
// ones (the same moves in the same order either way: the same set and order as one thread would leave).
__device__ void block_nth_element(const Row &r, int n, int nth, int warp_range, Prof pf)
{
    int first = 0, last = n;
    int depth = 2 * (31 - __clz(n));
    const int stop = warp_range > 3 ? min(warp_range, kFastCols) : 3;
    const long long t0 = pf.c ? now() : 0;
    const bool ended = block_introselect(r, first, last, depth, nth, stop, pf);
    const long long t1 = pf.c ? now() : 0;
    if (!ended) {
        if (threadIdx.x < 32 && !warp_introselect_fast(r, first, last, depth, nth, pf) && threadIdx.x == 0)
            insertion_sort(r, first, last);
        __syncthreads();
    }
    if (pf.c) {
        pf.add(AS_TOPK_CYC_BLOCK, t1 - t0);
        pf.add(AS_TOPK_CYC_WARP, now() - t1);
    }
}

// Leaves torch's index set in r.ix[0..k) (k <= n) and, with a profile, counts the row and whether its
// k-th value is tied across the cut (the case only the exact emulation decides): a pass over the row.
__device__ void block_torch_topk(const Row &r, int n, int k, int warp_range, Prof pf)
{
    int &ge_all = r.scratch[64];
    if (k <= 0 || k >= n)
        return; // nothing, or everything: no algorithm needed
    const bool partial = (int64_t)k * 64 <= n;
    if (partial) {
        const long long t0 = pf.c ? now() : 0;
        if (threadIdx.x == 0)
            heap_select(r, 0, k, n); // partial_sort's sort_heap orders the set, it does not change it
        __syncthreads();
        if (pf.c)
            pf.add(AS_TOPK_CYC_BLOCK, now() - t0);
    } else {
        block_nth_element(r, n, k - 1, warp_range, pf);
    }
    if (pf.c) {
        const long long t0 = now();
        const Key T = partial ? r.v[0] : r.v[k - 1]; // the k-th in comp order
        if (threadIdx.x == 0)
            ge_all = 0;
        __syncthreads();
        int ge = 0;
        for (int i = threadIdx.x; i < n; i += blockDim.x)
            ge += !comp(T, r.v[i]);
        ge = warp_sum_int(ge);
        if ((threadIdx.x & 31) == 0)
            atomicAdd(&ge_all, ge);
        __syncthreads();
        pf.add(AS_TOPK_ROWS, 1);
        pf.add(AS_TOPK_TIED, ge_all > k);
        pf.add(AS_TOPK_PARTIAL, partial);
        pf.add(AS_TOPK_CYC_CHECK, now() - t0);
    }
}

// The block's profile, in the row's scratch: zeroed by thread 0 (the only thread that touches it) when
// stats are given.
__device__ __forceinline__ Prof prof_begin(const Row &r, const unsigned long long *stats)
{
    unsigned long long *c = (unsigned long long *)(r.scratch + kScratchCounts);
    if (stats && threadIdx.x == 0)
        for (int i = 0; i < AS_TOPK_NSTATS; i++)
            c[i] = 0;
    return Prof{stats ? c : nullptr};
}

// Thread 0 adds the block's profile to the launch's counters.
__device__ void prof_flush(Prof pf, unsigned long long *stats)
{
    if (!pf.c || threadIdx.x != 0)
        return;
    for (int i = 0; i < AS_TOPK_NSTATS; i++)
        if (pf.c[i])
            atomicAdd(stats + i, pf.c[i]);
}

// The set's bits after block_emit_set: column p is in it when bit p % 32 of word p / 32 is set. They
// live in r.pb (free once the partitions are done; 8n bytes into the row, so 4-byte aligned, and its
// 2n bytes plus the row's padding hold the ceil(n / 32) words for every n >= 1).
__device__ __forceinline__ uint32_t *set_bits(const Row &r) { return (uint32_t *)r.pb; }

// Marks the set (the first k indices, or all when k >= n) in set_bits and calls emit(j, p) for the j-th
// member p in ascending order: a word of 32 columns a lane, each warp's words counted first, then each
// lane emits its word's members from its offset (the prefix of the lanes' counts). A word a lane, not
// a column: the flags' 16-bit array took a scan of n / 32 dependent rounds a warp to count and another
// to emit.
template <class Emit>
__device__ void block_emit_set(const Row &r, int n, int k, Emit emit)
{
    int *cnt = r.scratch;
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    uint32_t *bits = set_bits(r);
    const int words = (n + 31) >> 5;
    if (k < n) {
        for (int i = tid; i < words; i += blockDim.x)
            bits[i] = 0;
        __syncthreads();
        for (int j = tid; j < k; j += blockDim.x)
            atomicOr(&bits[r.ix[j] >> 5], 1u << (r.ix[j] & 31));
    } else {
        for (int i = tid; i < words; i += blockDim.x)
            bits[i] = i < (n >> 5) ? kFull : (1u << (n & 31)) - 1u;
    }
    __syncthreads();
    int c0, c1;
    warp_run(0, words, &c0, &c1);
    int mine = 0;
    for (int i = c0 + lane; i < c1; i += 32)
        mine += __popc(bits[i]);
    mine = warp_sum_int(mine);
    if (lane == 0)
        cnt[w] = mine;
    __syncthreads();
    int j = 0;
    for (int v = 0; v < w; v++)
        j += cnt[v];
    for (int g = c0; g < c1; g += 32) {
        const int i = g + lane;
        uint32_t word = i < c1 ? bits[i] : 0u;
        const int c = __popc(word);
        int incl = c; // the lanes' counts, inclusive prefix
        for (int o = 1; o < 32; o <<= 1) {
            const int y = __shfl_up_sync(kFull, incl, o);
            if (lane >= o)
                incl += y;
        }
        for (int at = j + incl - c; word; word &= word - 1)
            emit(at++, (i << 5) + __ffs((int)word) - 1);
        j += __shfl_sync(kFull, incl, 31);
    }
    __syncthreads();
}

__device__ __forceinline__ float load_value(const float *p) { return *p; }
__device__ __forceinline__ float load_value(const uint16_t *p) { return as_d_bf16_to_f32(*p); }

} // namespace topk

// Generic rows (the fixtures' f32 values, tests): set[t][0..k) = torch's set of row t, ascending.
__global__ void topk_rows_kernel(const float *v, int n, int k, int32_t *set, int warp_range,
                                 unsigned long long *stats)
{
    as_d_pdl_wait();
    extern __shared__ __align__(16) uint8_t smem[];
    const topk::Row r = topk::row_in(smem, n);
    const topk::Prof pf = topk::prof_begin(r, stats);
    long long t0 = pf.c ? topk::now() : 0;
    const int t = blockIdx.x;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        r.v[i] = topk::key_of(v[(int64_t)t * n + i]);
        r.ix[i] = (uint16_t)i;
    }
    __syncthreads();
    if (pf.c)
        pf.add(AS_TOPK_CYC_LOAD, topk::now() - t0);
    const int kk = k < n ? k : n;
    topk::block_torch_topk(r, n, kk, warp_range, pf);
    t0 = pf.c ? topk::now() : 0;
    int32_t *out = set + (int64_t)t * k;
    topk::block_emit_set(r, n, kk, [&](int j, int p) { out[j] = p; });
    if (pf.c) {
        pf.add(AS_TOPK_CYC_EMIT, topk::now() - t0);
        topk::prof_flush(pf, stats);
    }
}

// The indexer's selection (ref/indexer.c as_index_topk after the candidate mask of
// engine/select_host.c): row t of the bf16 scores (row stride ld), masked where cand says so (the
// masked scores are written back: they are the run's iscore), torch's set of k, each p mapped to
// p + offset when p < compress_lens[t] (prefill (t + 1) / ratio, decode the width), else -1; written
// to sel (row stride ldsel) and, when given, sel2 (the shared selection). width / k come from width_d
// / k_d when given (the decode graph's step parameters), else by value.
// AsTopkLaunch's idx outputs (null idx: none)
struct TopkIdxOut {
    int32_t *idx;
    int len, nrows;
    const int32_t *nrows_d;
    int *bad;
    unsigned long long *valid;
};

__global__ void index_topk_kernel(uint16_t *score, int64_t ld, int width, const int32_t *width_d, int k,
                                  const int32_t *k_d, int ratio, int prefill, const uint8_t *cand, int64_t cand_ld,
                                  int offset, int32_t *sel, int64_t ldsel, int32_t *sel2, int warp_range,
                                  unsigned long long *stats, TopkIdxOut io)
{
    as_d_pdl_wait();
    extern __shared__ __align__(16) uint8_t smem[];
    long long t0 = stats ? topk::now() : 0;
    const int t = blockIdx.x, tid = threadIdx.x;
    if (width_d)
        width = *width_d;
    if (k_d)
        k = *k_d;
    const int n = width;
    k = k < n ? k : n;
    const topk::Row r = topk::row_in(smem, n);
    const topk::Prof pf = topk::prof_begin(r, stats);
    uint16_t *srow = score + (int64_t)t * ld;
    const uint8_t *crow = cand ? cand + (int64_t)t * cand_ld : nullptr;
    // The row is read by the whole block, every read of a batch before its stores (the masked scores
    // written back could alias what is read next): 8 columns a thread as one 16-byte load (their
    // candidate flags one 8-byte load) where the row is so aligned, kVecBatch of them at a time, so a
    // decode's 4096-column row is one memory latency on 256 threads (one-column batches took several);
    // the rest of the row one column at a time.
    const bool vec = ((uintptr_t)srow & 15) == 0 && (!crow || ((uintptr_t)crow & 7) == 0);
    const int chunks = vec ? n >> 3 : 0;
    constexpr int kVecBatch = 2;
    for (int c0 = tid; c0 < chunks; c0 += kVecBatch * (int)blockDim.x) {
        uint4 sv[kVecBatch];
        uint2 cv[kVecBatch];
#pragma unroll
        for (int u = 0; u < kVecBatch; u++) {
            const int c = c0 + u * (int)blockDim.x;
            sv[u] = c < chunks ? *(const uint4 *)(srow + 8 * c) : make_uint4(0, 0, 0, 0);
            cv[u] = c < chunks && crow ? *(const uint2 *)(crow + 8 * c) : make_uint2(~0u, ~0u);
        }
#pragma unroll
        for (int u = 0; u < kVecBatch; u++) {
            const int c = c0 + u * (int)blockDim.x;
            if (c >= chunks)
                break;
            uint16_t h[8];
            memcpy(h, &sv[u], sizeof h);
            uint8_t keep[8];
            memcpy(keep, &cv[u], sizeof keep);
            topk::Key key[8];
            bool any_masked = false;
#pragma unroll
            for (int e = 0; e < 8; e++) {
                if (!keep[e]) {
                    h[e] = 0xff80; // bf16 -inf
                    any_masked = true;
                }
                key[e] = topk::key_of(as_d_bf16_to_f32(h[e]));
            }
            if (any_masked) {
                uint4 back;
                memcpy(&back, h, sizeof back);
                *(uint4 *)(srow + 8 * c) = back;
            }
            uint4 k0, k1;
            memcpy(&k0, key, sizeof k0);
            memcpy(&k1, key + 4, sizeof k1);
            *(uint4 *)(r.v + 8 * c) = k0; // r.v: 16-byte aligned, 32 bytes a chunk
            *(uint4 *)(r.v + 8 * c + 4) = k1;
#pragma unroll
            for (int e = 0; e < 8; e++)
                r.ix[8 * c + e] = (uint16_t)(8 * c + e);
        }
    }
    constexpr int kLoadBatch = 4;
    for (int i0 = 8 * chunks + tid; i0 < n; i0 += kLoadBatch * (int)blockDim.x) {
        float x[kLoadBatch];
        bool masked[kLoadBatch];
#pragma unroll
        for (int u = 0; u < kLoadBatch; u++) {
            const int i = i0 + u * (int)blockDim.x;
            x[u] = i < n ? topk::load_value(srow + i) : 0.0f;
            masked[u] = i < n && crow && !crow[i];
        }
#pragma unroll
        for (int u = 0; u < kLoadBatch; u++) {
            const int i = i0 + u * (int)blockDim.x;
            if (i >= n)
                break;
            if (masked[u]) {
                x[u] = -INFINITY;
                srow[i] = 0xff80; // bf16 -inf
            }
            r.v[i] = topk::key_of(x[u]);
            r.ix[i] = (uint16_t)i;
        }
    }
    __syncthreads();
    if (pf.c)
        pf.add(AS_TOPK_CYC_LOAD, topk::now() - t0);
    topk::block_torch_topk(r, n, k, warp_range, pf);
    t0 = pf.c ? topk::now() : 0;
    const int clen = prefill ? (t + 1) / ratio : width;
    int32_t *o1 = sel + (int64_t)t * ldsel;
    int32_t *o2 = sel2 ? sel2 + (int64_t)t * ldsel : nullptr;
    const int nrows = io.nrows_d ? *io.nrows_d : io.nrows;
    unsigned long long mine = 0; // idx entries >= 0 (build_idx_decode's count)
    topk::block_emit_set(r, n, k, [&](int j, int p) {
        const int32_t val = p < clen ? p + offset : -1;
        o1[j] = val;
        if (o2)
            o2[j] = val;
        if (io.idx) {
            int32_t v = val;
            if (v >= nrows) {
                atomicOr(io.bad, 1);
                v = -1;
            }
            mine += v >= 0;
            io.idx[j] = v;
        }
    });
    if (io.idx) {
        for (int j = k + tid; j < io.len; j += blockDim.x)
            io.idx[j] = -1;
        if (io.valid && mine)
            atomicAdd(io.valid, mine);
    }
    if (pf.c) {
        pf.add(AS_TOPK_CYC_EMIT, topk::now() - t0);
        topk::prof_flush(pf, stats);
    }
}

// select_candidate_blocks (ref/candidates.c) for row t: block maxima over bs columns (in the
// reference's order), the block of the newest visible position pinned to +inf (floor division), the
// torch set of min(topk_blocks, nblocks) blocks, a kept block whose maximum is -inf dropped; mask row
// t (stride mask_ld) marks every column of a kept block.
__global__ void candidate_blocks_kernel(const uint16_t *score, int64_t ld, int width, const int32_t *width_d,
                                        int ratio, int prefill, int bs, int topk_blocks, uint8_t *mask,
                                        int64_t mask_ld, int warp_range, unsigned long long *stats)
{
    as_d_pdl_wait();
    extern __shared__ __align__(16) uint8_t smem[];
    const int t = blockIdx.x;
    if (width_d)
        width = *width_d;
    const int nb = (width + bs - 1) / bs;
    const int kb = topk_blocks < nb ? topk_blocks : nb;
    const topk::Row r = topk::row_in(smem, nb);
    float *bmax = (float *)(smem + topk::row_bytes(nb)); // the block maxima (the selection moves the pairs)
    const uint16_t *srow = score + (int64_t)t * ld;
    const int clen = prefill ? (t + 1) / ratio : width;
    const int a = clen - 1;
    const int pin = a >= 0 ? a / bs : -((-a + bs - 1) / bs);
    for (int b = threadIdx.x; b < nb; b += blockDim.x) {
        const int end = (b + 1) * bs < width ? (b + 1) * bs : width;
        float m = as_d_bf16_to_f32(srow[b * bs]);
        for (int p = b * bs + 1; p < end; p++) {
            const float x = as_d_bf16_to_f32(srow[p]);
            m = x > m ? x : m;
        }
        if (b == pin)
            m = INFINITY;
        bmax[b] = m;
        r.v[b] = topk::key_of(m);
        r.ix[b] = (uint16_t)b;
    }
    __syncthreads();
    // the passes and the selection's cycles (the block maxima are not a row load)
    const topk::Prof pf = topk::prof_begin(r, stats);
    topk::block_torch_topk(r, nb, kb, warp_range, pf);
    topk::prof_flush(pf, stats);
    topk::block_emit_set(r, nb, kb, [](int, int) {});
    const uint32_t *kept = topk::set_bits(r); // the set's bits, indexed by block
    uint8_t *mrow = mask + (int64_t)t * mask_ld;
    for (int p = threadIdx.x; p < width; p += blockDim.x) {
        const int b = p / bs;
        mrow[p] = ((kept[b >> 5] >> (b & 31)) & 1u) && bmax[b] != -INFINITY;
    }
}

#ifndef AS_EMU // host side (tools/emu runs the kernels above on the CPU)

static size_t topk_smem(int n) { return topk::row_bytes(n); }

// The block of a launch of `rows` rows: 256 threads for one row (a decode's: its latency counts; 8 warps
// read it, scan each partition range in 8 runs and emit the set), 128 for more (a prefill, many rows in
// flight, where throughput counts): the fastest measured (bench/RESULTS.md). The selection is the same for
// every block size (tools/emu/emu_topk.cpp with EMU_TOPK_BLOCK = 32 .. 256).
constexpr int kTopkThreads = 256;
constexpr int kTopkThreadsRows = 128;
static int topk_threads(int rows) { return rows > 1 ? kTopkThreadsRows : kTopkThreads; }

// The longest range introselect leaves to one warp (the block partitions the longer ones; the same set
// for any value): the fastest measured.
constexpr int kTopkWarpRange = 128;
static int topk_warp_range() { return kTopkWarpRange; }

// Shared memory above the default 48 KiB is opted into once per kernel and device, for the widest
// row allowed.
template <auto Kernel> static int topk_allow_smem(size_t bytes)
{
    if (bytes <= 48 * 1024)
        return 0;
    return as_allow_dynamic_smem<Kernel>((int)(topk::row_bytes(AS_TOPK_MAX_WIDTH) + 4 * AS_TOPK_MAX_WIDTH));
}

extern "C" int as_k_topk_rows(const float *v, int rows, int n, int k, int32_t *set, unsigned long long *stats,
                              cudaStream_t st)
{
    if (rows < 0 || n < 1 || n > AS_TOPK_MAX_WIDTH || k < 0 || k > n || !v || !set)
        return (int)cudaErrorInvalidValue;
    if (rows == 0 || k == 0)
        return 0;
    const size_t smem = topk_smem(n);
    int rc = topk_allow_smem<topk_rows_kernel>(smem);
    if (rc)
        return rc;
    as_launch(topk_rows_kernel, rows, topk_threads(rows), smem, st, v, n, k, set, topk_warp_range(), stats);
    return AS_LAUNCH_RESULT();
}

extern "C" int as_k_index_topk(const AsTopkLaunch *a, cudaStream_t st)
{
    const int wmax = a->width_d ? a->max_width : a->width;
    const int kmax = a->k_d ? a->max_k : a->k;
    if (a->s < 0 || wmax < 1 || wmax > AS_TOPK_MAX_WIDTH || kmax < 0 || a->ratio < 1 || !a->score || !a->sel ||
        a->ld < wmax || a->ldsel < kmax || (a->cand && a->cand_ld < wmax) || a->offset < 0 ||
        (a->idx && (a->s != 1 || a->idx_len < kmax || !a->bad || (!a->nrows_d && a->nrows < 0))))
        return (int)cudaErrorInvalidValue;
    const TopkIdxOut io = {a->idx, a->idx_len, a->nrows, a->nrows_d, a->bad, a->valid};
    if (a->s == 0)
        return 0;
    const size_t smem = topk_smem(wmax);
    int rc = topk_allow_smem<index_topk_kernel>(smem);
    if (rc)
        return rc;
    as_launch(index_topk_kernel, a->s, topk_threads(a->s), smem, st, a->score, a->ld, a->width, a->width_d, a->k, a->k_d, a->ratio,
              a->prefill, a->cand, a->cand_ld, a->offset, a->sel, a->ldsel, a->sel2, topk_warp_range(),
              a->stats, io);
    return AS_LAUNCH_RESULT();
}

extern "C" int as_k_candidate_blocks(const AsCandLaunch *a, cudaStream_t st)
{
    const int wmax = a->width_d ? a->max_width : a->width;
    if (a->s < 0 || wmax < 1 || wmax > AS_TOPK_MAX_WIDTH || a->bs < 1 || a->topk_blocks < 0 || a->ratio < 1 ||
        !a->score || !a->mask || a->ld < wmax || a->mask_ld < wmax)
        return (int)cudaErrorInvalidValue;
    if (a->s == 0)
        return 0;
    const int nb = (wmax + a->bs - 1) / a->bs;
    const size_t smem = topk_smem(nb) + 4 * (size_t)nb;
    int rc = topk_allow_smem<candidate_blocks_kernel>(smem);
    if (rc)
        return rc;
    as_launch(candidate_blocks_kernel, a->s, topk_threads(a->s), smem, st, a->score, a->ld, a->width, a->width_d, a->ratio, a->prefill,
              a->bs, a->topk_blocks, a->mask, a->mask_ld, topk_warp_range(), a->stats);
    return AS_LAUNCH_RESULT();
}
#endif // AS_EMU
