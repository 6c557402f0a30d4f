/* `attnscope bench-engine`: the engine against the H200's limits measured in the same run.
 * Decode: one step of every layer at `context` tokens, per layer kind, against the HBM floor
 * (bytes of weights and caches read per token / device copy bandwidth), from profiled uncaptured
 * steps; then the same decode through the CUDA graph (engine/graph.c: two captures, then replays;
 * the median device and wall time per token against the same floor). Prefill: per layer
 * kind; the projections against cuBLAS's own bf16 GEMM at the same shapes; the sparse attention
 * and the index scores against the tensor-core rate (cuBLAS's 8192^3 bf16 GEMM). Each measured part
 * is run once before it is timed (a decode step, the prefill), so that first-use costs (module
 * loading, cuBLASLt's choice of algorithm per shape) stay out of the figures. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/bench_chart.h"
#include "engine/bench_fp8.h"
#include "engine/bench_json.h"
#include "engine/bench_trace.h"
#include "engine/check.h"
#include "engine/internal.h"
#include "engine/stats.h"
#include "model/inputs.h"
#include "model/safetensors.h"
#include "ref/numerics.h"

typedef struct {
    double copy_gbs;          /* device copy, read + write bytes per second / 1e9 */
    double gemm_tflops;       /* cuBLAS bf16 8192^3 */
} Limits;

/* Random bf16 data on the device (never zeros: they run faster than real data). */
int as_bench_fill_random(as_bf16_t *d, size_t n, uint64_t seed, AsError *err)
{
    size_t chunk = (size_t)1 << 24;
    uint16_t *h = malloc(sizeof(uint16_t) * chunk);
    if (!h)
        return as_err(err, AS_ERUNTIME, "out of host memory");
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    int rc = 0;
    for (size_t off = 0; off < n && !rc; off += chunk) {
        size_t k = n - off < chunk ? n - off : chunk;
        for (size_t i = 0; i < k; i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            h[i] = as_bf16_bits(((float)(s >> 40) / (float)(1 << 24) - 0.5f) * 2.0f);
        }
        if (cudaMemcpy(d + off, h, sizeof(uint16_t) * k, cudaMemcpyHostToDevice) != cudaSuccess)
            rc = as_err(err, AS_ERUNTIME, "filling %zu random values", n);
    }
    free(h);
    /* a pageable upload may return before its DMA lands, and the engine's stream does not wait for
     * the legacy one */
    if (!rc && cudaDeviceSynchronize() != cudaSuccess)
        rc = as_err(err, AS_ERUNTIME, "filling %zu random values: %s", n, cudaGetErrorString(cudaGetLastError()));
    return rc;
}

static int measure_limits(AsEngine *e, Limits *lim, AsError *err)
{
    size_t bytes = (size_t)2 << 30;
    void *a = NULL, *b = NULL;
    CU(err, cudaMalloc(&a, bytes), "bench: 2 GiB copy source");
    CU(err, cudaMalloc(&b, bytes), "bench: 2 GiB copy destination");
    cudaEvent_t t0, t1;
    cudaEventCreate(&t0), cudaEventCreate(&t1);
    cudaMemsetAsync(a, 1, bytes, e->st);
    double v[10];
    for (int i = 0; i < 12; i++) {
        cudaEventRecord(t0, e->st);
        cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, e->st);
        cudaEventRecord(t1, e->st);
        CU(err, cudaEventSynchronize(t1), "bench: copy");
        float ms;
        cudaEventElapsedTime(&ms, t0, t1);
        if (i >= 2)
            v[i - 2] = 2.0 * bytes / (ms * 1e-3) / 1e9;
    }
    lim->copy_gbs = as_median(v, 10);
    cudaFree(a), cudaFree(b);
    /* bf16 GEMM peak: 8192^3 on random data */
    int n = 8192;
    as_bf16_t *A, *B, *C;
    CU(err, cudaMalloc((void **)&A, sizeof(as_bf16_t) * (size_t)n * n), "bench: GEMM A");
    CU(err, cudaMalloc((void **)&B, sizeof(as_bf16_t) * (size_t)n * n), "bench: GEMM B");
    CU(err, cudaMalloc((void **)&C, sizeof(as_bf16_t) * (size_t)n * n), "bench: GEMM C");
    TRY(as_bench_fill_random(A, (size_t)n * n, 1, err));
    TRY(as_bench_fill_random(B, (size_t)n * n, 2, err));
    const float one = 1, zero = 0;
    for (int i = 0; i < 12; i++) {
        cudaEventRecord(t0, e->st);
        CB(err,
           cublasGemmEx(e->cublas, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, A, CUDA_R_16BF, n, B, CUDA_R_16BF, n, &zero,
                        C, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
           "bench: bf16 GEMM %d^3", n);
        cudaEventRecord(t1, e->st);
        CU(err, cudaEventSynchronize(t1), "bench: GEMM");
        float ms;
        cudaEventElapsedTime(&ms, t0, t1);
        if (i >= 2)
            v[i - 2] = 2.0 * n * (double)n * n / (ms * 1e-3) / 1e12;
    }
    lim->gemm_tflops = as_median(v, 10);
    cudaFree(A), cudaFree(B), cudaFree(C);
    cudaEventDestroy(t0), cudaEventDestroy(t1);
    return 0;
}

/* cuBLAS alone at one projection shape (m = out, n = tokens, k = in), batched for wo_a: ms. */
static int cublas_alone(AsEngine *e, const AsDevWeight *w, int tokens, int batch, double *ms_out, AsError *err)
{
    const AsConfig *c = &e->cfg;
    int m = batch > 1 ? c->o_lora_rank : w->out, k = batch > 1 ? c->gw : w->in;
    as_bf16_t *x, *y, *wb = NULL;
    CU(err, cudaMalloc((void **)&x, sizeof(as_bf16_t) * (size_t)tokens * k * batch), "bench: x");
    CU(err, cudaMalloc((void **)&y, sizeof(as_bf16_t) * (size_t)tokens * m * batch), "bench: y");
    TRY(as_bench_fill_random(x, (size_t)tokens * k * batch, 3, err));
    const void *W = w->d;
    if (w->type != AS_DW_BF16) { /* f32 / Q2_K weights: cuBLAS at the same shape on random bf16 ones */
        CU(err, cudaMalloc((void **)&wb, sizeof(as_bf16_t) * (size_t)m * k * batch), "bench: bf16 weights");
        TRY(as_bench_fill_random(wb, (size_t)m * k * batch, 5, err));
        W = wb;
    }
    cudaEvent_t t0, t1;
    cudaEventCreate(&t0), cudaEventCreate(&t1);
    const float one = 1, zero = 0;
    double v[8];
    for (int i = 0; i < 10; i++) {
        cudaEventRecord(t0, e->st);
        if (batch > 1)
            CB(err,
               cublasGemmStridedBatchedEx(e->cublas, CUBLAS_OP_T, CUBLAS_OP_N, m, tokens, k, &one, W, CUDA_R_16BF, k,
                                          (long long)m * k, x, CUDA_R_16BF, k * batch, k, &zero, y, CUDA_R_16BF,
                                          m * batch, m, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "bench: batched GEMM");
        else
            CB(err,
               cublasGemmEx(e->cublas, CUBLAS_OP_T, CUBLAS_OP_N, m, tokens, k, &one, W, CUDA_R_16BF, k, x, CUDA_R_16BF,
                            k, &zero, y, CUDA_R_16BF, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "bench: GEMM %dx%dx%d", m, tokens, k);
        cudaEventRecord(t1, e->st);
        CU(err, cudaEventSynchronize(t1), "bench: GEMM alone");
        float ms;
        cudaEventElapsedTime(&ms, t0, t1);
        if (i >= 2)
            v[i - 2] = ms;
    }
    *ms_out = as_median(v, 8);
    cudaFree(x), cudaFree(y), cudaFree(wb);
    cudaEventDestroy(t0), cudaEventDestroy(t1);
    return 0;
}

/* A short name for a layer's kind, e.g. "r2 kv+idx", "r1 idx cand-src", "r0". */
static void kind_name(const AsLayerRole *r, char *buf, size_t n)
{
    snprintf(buf, n, "r%d%s%s%s%s", r->ratio, r->kv_source ? " kv" : "", r->index_source ? " idx" : "",
             r->candidate_source ? " cand-src" : "", r->ratio > 0 && !r->kv_source && !r->index_source ? " reuse" : "");
}

typedef struct {
    char name[48];
    int layers;
    double ms[AS_OP_COUNT], flops[AS_OP_COUNT], bytes[AS_OP_COUNT];
} Kind;

/* The index of layer l's kind in k[0..nk), nk when it is not there yet. */
static int kind_index(const AsConfig *c, int l, const Kind *k, int nk)
{
    char name[48];
    kind_name(&c->role[l], name, sizeof name);
    int i = 0;
    while (i < nk && strcmp(k[i].name, name))
        i++;
    return i;
}

/* The bytes a decode reads of a profile's ops (weights, selected cache rows, index keys), and their
 * HBM floor: ms at the copy bandwidth measured in the run. */
static double read_bytes(const double bytes[AS_OP_COUNT])
{
    return bytes[AS_OP_PROJ] + bytes[AS_OP_ATTN] + bytes[AS_OP_ISCORE];
}
static double floor_ms_of(double bytes, double copy_gbs) { return bytes / (copy_gbs * 1e9) * 1e3; }

static int group_kinds(const AsEngine *e, const AsProfile *p, double scale, Kind *k, int *nk)
{
    *nk = 0;
    for (int l = 0; l < e->cfg.n_layers; l++) {
        const int i = kind_index(&e->cfg, l, k, *nk);
        if (i == *nk) {
            memset(&k[i], 0, sizeof k[i]);
            kind_name(&e->cfg.role[l], k[i].name, sizeof k[i].name);
            (*nk)++;
        }
        k[i].layers++;
        for (int op = 0; op < AS_OP_COUNT; op++) {
            k[i].ms[op] += p->layer[l].ms[op] * scale;
            k[i].flops[op] += p->layer[l].flops[op] * scale;
            k[i].bytes[op] += p->layer[l].bytes[op] * scale;
        }
    }
    return 0;
}

/* How often the device selection's exact emulation decided a tie at the cut, and
 * where a row's time goes: introselect's passes and the SM cycles of each part (thread 0's clock64;
 * microseconds at the device's peak clock, clock_khz). */
static void sel_note(FILE *md, const char *phase, const unsigned long long a[AS_SEL_NSTATS],
                     const unsigned long long b[AS_SEL_NSTATS], int clock_khz)
{
    unsigned long long d[AS_SEL_NSTATS];
    for (int i = 0; i < AS_SEL_NSTATS; i++)
        d[i] = b[i] - a[i];
    const unsigned long long rows = d[AS_TOPK_ROWS];
    fprintf(md, "Selection on the device (%s): %llu top-k rows, %llu (%.1f%%) with the k-th value tied across the cut "
                "(the set decided by torch's tie order, emulated exactly), %llu through partial_sort.\n\n",
            phase, rows, d[AS_TOPK_TIED], rows ? 100.0 * d[AS_TOPK_TIED] / rows : 0.0, d[AS_TOPK_PARTIAL]);
    if (!rows)
        return;
    const double per = 1.0 / rows, us = clock_khz > 0 ? 1e3 / clock_khz : 0;
    const unsigned long long cyc = d[AS_TOPK_CYC_LOAD] + d[AS_TOPK_CYC_BLOCK] + d[AS_TOPK_CYC_WARP] +
                                   d[AS_TOPK_CYC_CHECK] + d[AS_TOPK_CYC_EMIT];
    fprintf(md, "A row's top-k (%s, means over rows): introselect %.1f partition passes on the block (%.0f columns "
                "ranked) and %.1f on one warp (%.0f columns); %.0f SM cycles (%.1f us at the peak clock): the row's "
                "load %.0f, the block's passes %.0f, the warp's %.0f, the tie check %.0f (profile only), the set's "
                "emission %.0f.\n\n",
            phase, d[AS_TOPK_PASSES_BLOCK] * per, d[AS_TOPK_RANKED_BLOCK] * per, d[AS_TOPK_PASSES_WARP] * per,
            d[AS_TOPK_RANKED_WARP] * per, cyc * per, cyc * per * us, d[AS_TOPK_CYC_LOAD] * per,
            d[AS_TOPK_CYC_BLOCK] * per, d[AS_TOPK_CYC_WARP] * per, d[AS_TOPK_CYC_CHECK] * per, d[AS_TOPK_CYC_EMIT] * per);
}

static int run_steps(AsEngine *e, const float *h0, int start, int s, AsError *err)
{
    TRY(as_engine_begin_step(e, h0, start, s, err));
    return as_engine_finish_step(e, err);
}

static double wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* The decode through a graph with an event node before each layer and after the last: each layer's device
 * time inside the graph, summed per layer kind over the replays (the first two steps capture). The event
 * nodes cut the programmatic edges between layers, so the whole runs a little slower than the graph
 * without them (`graph_ms`, printed beside it). h0: the steps' inputs from position pos0 on. */
static int graph_per_kind(AsEngine *e, const AsEngineBenchOptions *o, const float *h0, int pos0, const Kind *kinds,
                          int nk, double copy_gbs, double graph_ms, FILE *md, AsError *err)
{
    const AsConfig *c = &e->cfg;
    const int steps = o->decode_steps + 2;
    const AsDecodeGraphOptions go = {.layer_events = true};
    AsDecodeGraph *g = NULL;
    double layer_ms[AS_MAX_LAYERS] = {0}, step_ms[AS_MAX_LAYERS];
    int timed = 0, rc;
    AsDecodeGraphInfo gi = {0};
    if ((rc = as_decode_graph_create(e, &go, &g, err)))
        return rc;
    for (int i = 0; i < steps && !rc; i++) {
        const int captures = gi.captures;
        rc = as_engine_decode_graph(g, h0 + (size_t)i * c->dim, pos0 + i, err);
        as_decode_graph_info(g, &gi);
        if (!rc && gi.captures == captures && !(rc = as_decode_graph_layer_ms(g, step_ms, err))) {
            for (int l = 0; l < c->n_layers; l++)
                layer_ms[l] += step_ms[l];
            timed++;
        }
    }
    as_decode_graph_destroy(g);
    if (rc)
        return rc;
    if (!timed)
        return as_err(err, AS_ERUNTIME, "decode graph with layer events: every one of %d steps captured", steps);
    double sum = 0, kind_ms[AS_MAX_LAYERS] = {0};
    for (int l = 0; l < c->n_layers; l++) {
        sum += layer_ms[l] / timed;
        const int i = kind_index(c, l, kinds, nk);
        if (i < nk)
            kind_ms[i] += layer_ms[l] / timed;
    }
    fprintf(md, "### Decode through the CUDA graph, per layer kind (event nodes between the layers; mean of %d "
                "replays)\n\n",
            timed);
    fprintf(md, "| layer kind | layers | graph ms | ms a layer | floor ms | x floor |\n| --- | --- | --- | --- | --- | --- |\n");
    for (int i = 0; i < nk; i++) {
        const double ms = kind_ms[i], floor_ms = floor_ms_of(read_bytes(kinds[i].bytes), copy_gbs);
        fprintf(md, "| %s | %d | %.3f | %.4f | %.3f | %.2f |\n", kinds[i].name, kinds[i].layers, ms,
                ms / kinds[i].layers, floor_ms, floor_ms > 0 ? ms / floor_ms : 0.0);
    }
    fprintf(md, "| **all %d layers** | %d | **%.3f** | | | |\n\n", c->n_layers, c->n_layers, sum);
    fprintf(md, "The layers' sum here against the graph without event nodes (%.3f ms): what cutting the programmatic "
                "edges between the layers costs.\n\n", graph_ms);
    return 0;
}

int as_engine_bench(const AsModel *m, const AsEngineBenchOptions *o, FILE *md, AsError *err)
{
    const AsConfig *c = &m->cfg;
    /* decode_steps profiled steps, then decode_steps + 2 through the graph (the first two capture), and as
     * many again through the graph with layer events (graph_layers) */
    const int graph_steps = o->decode_steps + 2,
              all_graph_steps = graph_steps * (1 + o->graph_layers + (o->trace_path != NULL));
    if (o->context + o->decode_steps + all_graph_steps > c->max_seq || o->prefill > c->max_seq)
        return as_err(err, AS_EBADINPUT, "context %d + %d + %d steps (or prefill %d) beyond max_seq %d: pass --max-seq",
                      o->context, o->decode_steps, all_graph_steps, o->prefill, c->max_seq);
    AsEngineOptions eo = {.device = o->device, .host_select = o->host_select, .profile = true, .knobs = o->knobs};
    const char *sel_where = o->host_select ? "host" : "device";
    AsEngine *e;
    TRY(as_engine_create(m, &eo, &e, err));
    int rc = 0;
    Limits lim = {0};
    AsBenchFigures fig = {0};
    int n = o->context > o->prefill ? o->context : o->prefill;
    const int rows = n + o->decode_steps + all_graph_steps + 1;
    float *h0 = malloc(sizeof(float) * (size_t)rows * c->dim);
    Kind *kinds = calloc(AS_MAX_LAYERS, sizeof(Kind));
    AsBenchChart *chart = calloc(1, sizeof *chart);
    char kind_names[AS_MAX_LAYERS][48];
    unsigned long long sel0[AS_SEL_NSTATS], sel1[AS_SEL_NSTATS], sel2[AS_SEL_NSTATS];
    int clock_khz = 0; /* the selection note's microseconds */
    double *g_ms = calloc((size_t)graph_steps, sizeof(double)), *g_wall = calloc((size_t)graph_steps, sizeof(double));
    AsDecodeGraph *graph = NULL;
    if (!h0 || !kinds || !g_ms || !g_wall || !chart) {
        rc = as_err(err, AS_ERUNTIME, "out of host memory");
        goto out;
    }
    if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, e->device) != cudaSuccess) {
        rc = as_err(err, AS_ERUNTIME, "cudaDeviceGetAttribute(cudaDevAttrClockRate, device %d) failed", e->device);
        goto out;
    }
    as_inputs_synthetic(1, 0, rows, c->dim, h0);
    if ((rc = measure_limits(e, &lim, err)))
        goto out;
    fprintf(md, "device limits measured in this run: copy %.0f GB/s (read + write), cuBLAS bf16 GEMM 8192^3 %.0f TFLOP/s\n"
                "weights on the device: %.2f GB; layer state: %.1f MB\n\n",
            lim.copy_gbs, lim.gemm_tflops, e->weight_bytes / 1e9, e->state_bytes / 1e6);

    /* ---- decode at `context` ---- */
    /* the context's last token as a decode step outside the profile: the first launches of the decode's
     * kernels (their modules loaded, one-time set-up) would land in the first profiled step's layers */
    const int warm = o->context >= 2 ? 1 : 0;
    if ((rc = run_steps(e, h0, 0, o->context - warm, err)) ||
        (warm && (rc = run_steps(e, h0 + (size_t)(o->context - 1) * c->dim, o->context - 1, 1, err))))
        goto out;
    as_prof_collect(e);
    as_prof_reset(e->prof);
    if ((rc = as_engine_select_stats(e, sel0, err)))
        goto out;
    double t0 = wall_ms();
    double collect_ms = 0;
    for (int i = 0; i < o->decode_steps && !rc; i++) {
        rc = run_steps(e, h0 + (size_t)(o->context + i) * c->dim, o->context + i, 1, err);
        double c0 = wall_ms();
        if (!rc && as_prof_collect(e))
            rc = as_err(err, AS_ERUNTIME, "collecting the profile");
        collect_ms += wall_ms() - c0;
    }
    double step_wall = (wall_ms() - t0 - collect_ms) / o->decode_steps;
    if (rc)
        goto out;
    if (e->prof->dropped)
        fprintf(md, "(profile table full: %d ops not timed)\n", e->prof->dropped);
    if ((rc = as_engine_select_stats(e, sel1, err)))
        goto out;
    int nk;
    group_kinds(e, e->prof, 1.0 / o->decode_steps, kinds, &nk);
    chart->title = o->title ? o->title : "bench-engine";
    chart->n_layers = c->n_layers;
    for (int l = 0; l < c->n_layers; l++) {
        const AsLayerProfile *lp = &e->prof->layer[l];
        kind_name(&c->role[l], kind_names[l], sizeof kind_names[l]);
        chart->kind[l] = kind_names[l];
        chart->decode_ms[l] = lp->ms[AS_OP_LAYER] / o->decode_steps;
        chart->decode_floor_ms[l] = floor_ms_of(read_bytes(lp->bytes) / o->decode_steps, lim.copy_gbs);
    }
    double tot_ms = 0, tot_bytes = 0, cache_bytes = 0;
    fprintf(md, "### Decode, one token at context %d (mean of %d steps)\n\n", o->context, o->decode_steps);
    fprintf(md, "| layer kind | layers | GPU ms | proj ms | attn ms | iscore ms | select ms (%s) | bytes read (MB) | floor ms | x floor |\n"
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n", sel_where);
    for (int i = 0; i < nk; i++) {
        Kind *k = &kinds[i];
        const double bytes = read_bytes(k->bytes), floor_ms = floor_ms_of(bytes, lim.copy_gbs);
        fprintf(md, "| %s | %d | %.3f | %.3f | %.3f | %.3f | %.3f | %.1f | %.3f | %.2f |\n", k->name, k->layers,
                k->ms[AS_OP_LAYER], k->ms[AS_OP_PROJ], k->ms[AS_OP_ATTN], k->ms[AS_OP_ISCORE], k->ms[AS_OP_SELECT],
                bytes / 1e6, floor_ms, k->ms[AS_OP_LAYER] / floor_ms);
        tot_ms += k->ms[AS_OP_LAYER];
        tot_bytes += bytes;
        cache_bytes += k->bytes[AS_OP_ATTN] + k->bytes[AS_OP_ISCORE];
    }
    double floor_ms = floor_ms_of(tot_bytes, lim.copy_gbs);
    fprintf(md, "| **all %d layers** | %d | **%.3f** | | | | | %.1f | %.3f | **%.2f** |\n\n", c->n_layers, c->n_layers,
            tot_ms, tot_bytes / 1e6, floor_ms, tot_ms / floor_ms);
    fprintf(md, "GPU ms: the layers' device time (events around each layer, host gaps excluded); wall time per step "
                "including the selection and launches: %.3f ms (%.2f x floor). Bytes: every weight once (%.1f MB) "
                "plus the selected cache rows and index keys (%.1f MB).\n\n",
            step_wall, step_wall / floor_ms, (tot_bytes - cache_bytes) / 1e6, cache_bytes / 1e6);
    if (!o->host_select)
        sel_note(md, "decode", sel0, sel1, clock_khz);

    /* ---- the same decode as one CUDA graph per step shape ---- */
    double graph_ms = 0, graph_wall = 0;
    AsDecodeGraphInfo gi = {0};
    {
        if ((rc = as_decode_graph_create(e, NULL, &graph, err)))
            goto out;
        const int pos0 = o->context + o->decode_steps;
        int timed = 0;
        for (int i = 0; i < graph_steps && !rc; i++) {
            const int captures = gi.captures;
            double w0 = wall_ms();
            rc = as_engine_decode_graph(graph, h0 + (size_t)(pos0 + i) * c->dim, pos0 + i, err);
            double w = wall_ms() - w0;
            as_decode_graph_info(graph, &gi);
            if (!rc && gi.captures == captures) { /* a replay */
                g_ms[timed] = gi.last_ms;
                g_wall[timed] = w;
                timed++;
            }
        }
        if (rc)
            goto out;
        if (timed == 0) {
            rc = as_err(err, AS_ERUNTIME, "decode graph: every one of %d steps captured a new graph (%d captures)",
                        graph_steps, gi.captures);
            goto out;
        }
        graph_ms = as_median(g_ms, timed);
        graph_wall = as_median(g_wall, timed);
        fprintf(md, "### Decode through the CUDA graph, one token at context %d (median of %d replays)\n\n",
                o->context + o->decode_steps, timed);
        fprintf(md, "| path | GPU ms | wall ms | x floor (GPU) | x floor (wall) |\n| --- | --- | --- | --- | --- |\n");
        fprintf(md, "| uncaptured, profiled (above) | %.3f | %.3f | %.2f | %.2f |\n", tot_ms, step_wall, tot_ms / floor_ms,
                step_wall / floor_ms);
        fprintf(md, "| **graph** | **%.3f** | **%.3f** | **%.2f** | **%.2f** |\n| HBM floor | %.3f | | 1.00 | |\n\n",
                graph_ms, graph_wall, graph_ms / floor_ms, graph_wall / floor_ms, floor_ms);
        fprintf(md, "Graph: %d captured (one per step shape), %d held; the last step's graph has %d nodes: %d kernels, %d "
                    "copies, %d memsets, %d host nodes (top-k), %d other. GPU ms: events around the graph launch "
                    "(host nodes included); wall: the whole call (parameters, launch, synchronisation, bookkeeping).\n\n",
                gi.captures, gi.graphs, gi.nodes, gi.kernels, gi.memcpys, gi.memsets, gi.hosts, gi.others);
        /* the schedule's one device-dependent choice (docs/ENGINE.md, --sel-room) */
        const int64_t wave = as_k_gemv_bf16_resident_blocks();
        if (e->knobs.sel_room > 0)
            fprintf(md, "Index layers: the selection beside wq_b, whose grid leaves %d of its %lld resident blocks free "
                        "(--sel-room).\n\n",
                    e->knobs.sel_room, (long long)wave);
        else
            fprintf(md, "Index layers: wq_b's grid takes its whole wave (%lld blocks), the selection's kernels wait for "
                        "its blocks (--sel-room 0, or one block an SM on this device).\n\n",
                    (long long)wave);
        as_decode_graph_destroy(graph);
        graph = NULL;
    }
    if (o->graph_layers && (rc = graph_per_kind(e, o, h0 + (size_t)(o->context + o->decode_steps + graph_steps) * c->dim,
                                                o->context + o->decode_steps + graph_steps, kinds, nk, lim.copy_gbs,
                                                graph_ms, md, err)))
        goto out;
    if (o->trace_path) {
        const int pos0 = o->context + o->decode_steps + graph_steps * (1 + o->graph_layers);
        if ((rc = as_bench_trace(e, h0 + (size_t)pos0 * c->dim, pos0, graph_steps, o->trace_path,
                                 (const char(*)[48])kind_names, graph_ms, md, err)))
            goto out;
    }

    /* ---- prefill ---- */
    if (o->prefill > 0) {
        /* once outside the profile first: cuBLASLt picks and caches each shape's algorithm on its first use
         * (a context of a different length from the prefill leaves the prefill's shapes unseen, and the
         * first use's search lands in the profile) */
        if ((rc = run_steps(e, h0, 0, o->prefill, err)))
            goto out;
        as_prof_collect(e);
        as_prof_reset(e->prof);
        if ((rc = as_engine_select_stats(e, sel1, err)))
            goto out;
        double p0 = wall_ms();
        if ((rc = run_steps(e, h0, 0, o->prefill, err)) ||
            (rc = as_prof_collect(e) ? as_err(err, AS_ERUNTIME, "collecting the profile") : 0))
            goto out;
        double prefill_wall = wall_ms() - p0;
        if ((rc = as_engine_select_stats(e, sel2, err)))
            goto out;
        group_kinds(e, e->prof, 1.0, kinds, &nk);
        chart->have_prefill = 1;
        chart->prefill_tokens = o->prefill;
        for (int l = 0; l < c->n_layers; l++)
            for (int op = 0; op < AS_OP_COUNT; op++)
                chart->prefill_ms[l][op] = e->prof->layer[l].ms[op];
        /* cuBLAS alone at the same shapes, from layer 0's weights (every layer has them) */
        const AsDevLayerWeights *w0 = &e->w[0];
        const AsDevWeight *shapes[] = {&w0->wq_a, &w0->wq_b, &w0->wkv, &w0->wo_a, &w0->wo_b};
        double alone_ms = 0, alone_flops = 0;
        for (int i = 0; i < 5 && !rc; i++) {
            double ms = 0;
            rc = cublas_alone(e, shapes[i], o->prefill, i == 3 ? c->o_groups : 1, &ms, err);
            alone_ms += ms;
            alone_flops += 2.0 * o->prefill * shapes[i]->out * (double)shapes[i]->in;
        }
        if (rc)
            goto out;
        double alone_tflops = alone_flops / (alone_ms * 1e-3) / 1e12;
        fprintf(md, "### Prefill, %d tokens\n\n", o->prefill);
        fprintf(md, "| layer kind | layers | GPU ms | proj ms | proj TFLOP/s | attn ms | attn TFLOP/s | iscore ms | iscore TFLOP/s | select ms (%s) |\n"
                    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n", sel_where);
        double T[AS_OP_COUNT] = {0}, F[AS_OP_COUNT] = {0};
        for (int i = 0; i < nk; i++) {
            Kind *k = &kinds[i];
            for (int op = 0; op < AS_OP_COUNT; op++)
                T[op] += k->ms[op], F[op] += k->flops[op];
#define TF(op) (k->ms[op] > 0 ? k->flops[op] / (k->ms[op] * 1e-3) / 1e12 : 0.0)
            fprintf(md, "| %s | %d | %.2f | %.2f | %.0f | %.2f | %.0f | %.2f | %.0f | %.2f |\n", k->name, k->layers,
                    k->ms[AS_OP_LAYER], k->ms[AS_OP_PROJ], TF(AS_OP_PROJ), k->ms[AS_OP_ATTN], TF(AS_OP_ATTN),
                    k->ms[AS_OP_ISCORE], TF(AS_OP_ISCORE), k->ms[AS_OP_SELECT]);
#undef TF
        }
        double proj_tf = F[AS_OP_PROJ] / (T[AS_OP_PROJ] * 1e-3) / 1e12;
        double attn_tf = T[AS_OP_ATTN] > 0 ? F[AS_OP_ATTN] / (T[AS_OP_ATTN] * 1e-3) / 1e12 : 0;
        double isc_tf = T[AS_OP_ISCORE] > 0 ? F[AS_OP_ISCORE] / (T[AS_OP_ISCORE] * 1e-3) / 1e12 : 0;
        fprintf(md, "| **all** | %d | **%.1f** | %.1f | %.0f | %.1f | %.0f | %.1f | %.0f | %.1f |\n\n", c->n_layers,
                T[AS_OP_LAYER], T[AS_OP_PROJ], proj_tf, T[AS_OP_ATTN], attn_tf, T[AS_OP_ISCORE], isc_tf,
                T[AS_OP_SELECT]);
        fprintf(md, "Projections: %.0f TFLOP/s in the engine against %.0f TFLOP/s for cuBLAS alone at the same shapes "
                    "(%.0f%%). Sparse attention: %.0f TFLOP/s, %.0f%% of the tensor-core rate (%.0f); index scores: %.0f "
                    "TFLOP/s, %.0f%%. Wall time of the prefill, selection included: %.1f ms.\n\n",
                proj_tf, alone_tflops, 100.0 * proj_tf / alone_tflops, attn_tf, 100.0 * attn_tf / lim.gemm_tflops,
                lim.gemm_tflops, isc_tf, 100.0 * isc_tf / lim.gemm_tflops, prefill_wall);
        if (!o->host_select)
            sel_note(md, "prefill", sel1, sel2, clock_khz);
        if (e->fp8_form) {
            double ours = 0, lt = 0, fl = 0;
            if ((rc = as_bench_fp8_projections(e, o->prefill, &ours, &lt, &fl, err)))
                goto out;
            fprintf(md, "fp8 projections alone (layer 0's five, act_quant + the fp8 GEMM on %d random rows): %.3f ms, "
                        "%.0f TFLOP/s; cuBLASLt's fp8 GEMM at the same shapes with per-tensor scales (the dense fp8 "
                        "rate, this run): %.3f ms, %.0f TFLOP/s: **%.0f%%** of it.\n\n",
                    o->prefill, ours, fl / (ours * 1e-3) / 1e12, lt, fl / (lt * 1e-3) / 1e12, 100.0 * lt / ours);
            if (o->summary) {
                o->summary->fp8_proj_ms = ours, o->summary->fp8_lt_ms = lt;
                o->summary->fp8_proj_tflops = fl / (ours * 1e-3) / 1e12, o->summary->fp8_lt_tflops = fl / (lt * 1e-3) / 1e12;
            }
        }
        fig.prefill_ms = T[AS_OP_LAYER];
        fig.proj_tflops = proj_tf;
        if (o->summary)
            o->summary->proj_ms = T[AS_OP_PROJ];
        fig.proj_alone_tflops = alone_tflops;
        fig.attn_tflops = attn_tf;
        fig.iscore_tflops = isc_tf;
    }
    if (o->summary) {
        AsBenchSummary *S = o->summary;
        S->precision = m->precision;
        S->fp8_form = e->fp8_form;
        S->copy_gbs = lim.copy_gbs;
        S->weight_gb = (tot_bytes - cache_bytes) / 1e9;
        S->cache_gb = cache_bytes / 1e9;
        S->floor_ms = floor_ms;
        S->graph_ms = graph_ms;
        S->prefill_ms = fig.prefill_ms;
        S->proj_tflops = fig.proj_tflops;
    }
    if (o->json_path) {
        fig.copy_gbs = lim.copy_gbs;
        fig.gemm_tflops = lim.gemm_tflops;
        fig.decode_ms = tot_ms;
        fig.decode_wall_ms = step_wall;
        fig.decode_floor_ms = floor_ms;
        fig.decode_graph_ms = graph_ms;
        fig.decode_graph_wall_ms = graph_wall;
        fig.graph_nodes = gi.nodes;
        fig.graph_kernels = gi.kernels;
        fig.graph_host_nodes = gi.hosts;
        if ((rc = as_bench_json_write(o->json_path, &fig, o->knob_flags, err)))
            goto out;
    }
    if (o->svg_path && !rc) {
        char tmp[AS_ATOMIC_TMP_MAX];
        FILE *f;
        if (!(rc = as_atomic_create(o->svg_path, tmp, sizeof tmp, &f, err))) {
            if (as_bench_chart_svg(chart, f)) {
                rc = as_err(err, AS_ERUNTIME, "%s: cannot write the chart", o->svg_path);
                as_atomic_abort(f, tmp);
            } else if (!(rc = as_atomic_commit(f, tmp, o->svg_path, err)))
                fprintf(md, "Chart: %s (per layer: decode against its floor, prefill by stage).\n\n", o->svg_path);
        }
    }
out:
    free(chart);
    as_decode_graph_destroy(graph);
    free(h0);
    free(kinds);
    free(g_ms);
    free(g_wall);
    as_engine_destroy(e);
    return rc;
}
