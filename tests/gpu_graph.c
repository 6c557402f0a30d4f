/* The decode graph (engine/graph.c) against the uncaptured decode, bit for bit. Two engines on one
 * model take the same prefill; then every decode step runs uncaptured on one (as_engine_begin_step
 * and each layer in turn, every layer's out copied aside) and through the graph on the other
 * (as_engine_decode_graph, keep_layer_outs). After every step: every layer's out, the residual, every
 * layer's window ring, partial-group state, compressed cache and index-key cache (whole buffers),
 * the shared state's provenance and sizes, the caches' filled rows, the last layer's run
 * (as_engine_layer_run: every tensor and scalar) and every layer's run scalars and provenance
 * (as_decode_graph_layer_meta against the forward's) must be identical. The graph must have been
 * captured once per step shape (two: the parity of start_pos) and replayed for every other step, or
 * a position baked into a graph would go unseen.
 * tiny: 300 steps (the window wraps, groups complete on odd positions, k grows to index_topk, the
 * candidate selection narrows); the faults, each through both paths; a graph step between uncaptured
 * ones and a new prefill (bigger: the work buffers move, the graphs are captured again); a refusal.
 * flash ($ATTNSCOPE_FLASH_MODEL, a directory written by `attnscope gen --preset flash`): 512-token
 * prefill + 64 steps at max_seq 1024. The first difference is reported with its step, layer, buffer
 * and element, and the test stops there. The tiny checks run in both precisions of the same (fp8)
 * weights: bf16, and fp8 (the fp8 projections' inputs through act_quant's QDQ first); the 300 tiny steps
 * under several settings of the engine's knobs (fusions, PDL, the kv fork, the selection's room, the
 * attention path), one pair of engines each, in this one process. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/internal.h"
#include "model/inputs.h"
#include "model/precision.h"
#include "ref/numerics.h"
#include "tests/lib/harness.h"
#include "tests/lib/model_fixture.h"

typedef struct {
    const AsModel *m;
    const AsConfig *c;
    AsEngine *a;           /* uncaptured */
    AsEngine *b;           /* through the graph */
    AsDecodeGraph *g;
    float *h0;             /* synthetic inputs, [rows][dim] */
    int rows;
    float *outs_a, *outs_b; /* [n_layers][dim] */
    AsRun *meta_a;          /* [n_layers]: every layer's run scalars and provenance (uncaptured) */
    int steps, first_bad_step;
    uint64_t outs_fnv;      /* FNV-1a over every step's layer outs: runs with other fusions must end equal */
} Pair;

static const AsPrecision precisions[2] = {AS_PREC_BF16, AS_PREC_FP8};

/* The tiny preset in precision p; NULL, with a failure recorded, where the weights cannot run in it. */
static AsModel *tiny_in(uint64_t seed, AsPrecision p)
{
    AsModel *m = as_test_model("tiny", NULL, seed);
    AsError err = {0};
    if (as_model_set_precision(m, p, &err)) {
        as_test_fail(__FILE__, __LINE__, "the %s precision of tiny: %s", as_precision_name(p), err.msg);
        as_test_model_free(m);
        return NULL;
    }
    return m;
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    REQUIRE(p, "out of host memory (%zu bytes)", bytes);
    return p;
}

/* The knobs of the engines pair_open makes (NULL: the defaults). */
static const AsEngineKnobs *g_knobs;

static void pair_open_events(Pair *p, const AsModel *m, const char *inject, int rows, bool host_select,
                             bool layer_events)
{
    memset(p, 0, sizeof *p);
    p->m = m;
    p->c = &m->cfg;
    p->rows = rows;
    p->first_bad_step = -1;
    p->outs_fnv = 0xcbf29ce484222325ull;
    AsError err = {0};
    AsEngineOptions eo = {.device = 0, .inject = inject, .host_select = host_select, .knobs = g_knobs};
    REQUIRE(as_engine_create(m, &eo, &p->a, &err) == 0, "engine (uncaptured): %s", err.msg);
    REQUIRE(as_engine_create(m, &eo, &p->b, &err) == 0, "engine (graph): %s", err.msg);
    AsDecodeGraphOptions go = {.keep_layer_outs = true, .layer_events = layer_events};
    REQUIRE(as_decode_graph_create(p->b, &go, &p->g, &err) == 0, "decode graph: %s", err.msg);
    p->h0 = xmalloc(sizeof(float) * (size_t)rows * p->c->dim);
    as_inputs_synthetic(1, 0, rows, p->c->dim, p->h0);
    p->outs_a = xmalloc(sizeof(float) * (size_t)p->c->n_layers * p->c->dim);
    p->outs_b = xmalloc(sizeof(float) * (size_t)p->c->n_layers * p->c->dim);
    p->meta_a = xmalloc(sizeof(AsRun) * (size_t)p->c->n_layers);
}

static void pair_open(Pair *p, const AsModel *m, const char *inject, int rows, bool host_select)
{
    pair_open_events(p, m, inject, rows, host_select, false);
}

static void pair_close(Pair *p)
{
    as_decode_graph_destroy(p->g);
    as_engine_destroy(p->a);
    as_engine_destroy(p->b);
    free(p->h0), free(p->outs_a), free(p->outs_b), free(p->meta_a);
}

/* A prefill of s tokens on both engines (uncaptured). */
static void pair_prefill(Pair *p, int s)
{
    AsError err = {0};
    REQUIRE(s <= p->rows, "test bug: prefill past the inputs");
    REQUIRE(as_engine_begin_step(p->a, p->h0, 0, s, &err) == 0 && as_engine_finish_step(p->a, &err) == 0,
            "prefill %d (uncaptured engine): %s", s, err.msg);
    REQUIRE(as_engine_begin_step(p->b, p->h0, 0, s, &err) == 0 && as_engine_finish_step(p->b, &err) == 0,
            "prefill %d (graph engine): %s", s, err.msg);
}

/* One uncaptured decode step on e, layer by layer, its layers' outs into outs ([n_layers][dim]) and
 * their run scalars into meta (when given). */
static int step_uncaptured(Pair *p, AsEngine *e, int pos, float *outs, AsRun *meta, AsError *err)
{
    const AsConfig *c = p->c;
    int rc = as_engine_begin_step(e, p->h0 + (size_t)pos * c->dim, pos, 1, err);
    uint16_t *tmp = xmalloc(sizeof(uint16_t) * (size_t)c->dim);
    for (int l = 0; !rc && l < c->n_layers; l++) {
        int done;
        rc = as_engine_next_layer(e, &done, err);
        if (!rc && meta) {
            meta[l] = e->last; /* scalars and provenance: the engine keeps no tensors in it */
            for (int i = 0; i < AS_T_COUNT; i++)
                meta[l].t[i].data = NULL;
        }
        if (!rc && outs) {
            /* the engine's stream does not block on the legacy one: a plain cudaMemcpy here would race
             * the layer still running (the uncaptured side then reads a stale out, and a test passes
             * only under compute-sanitizer, which serialises) */
            cudaError_t cr = cudaMemcpyAsync(tmp, e->wk.out, sizeof(uint16_t) * (size_t)c->dim, cudaMemcpyDeviceToHost,
                                             e->st);
            if (cr == cudaSuccess)
                cr = cudaStreamSynchronize(e->st);
            REQUIRE(cr == cudaSuccess, "copying layer %d's out: %s", l, cudaGetErrorString(cr));
            for (int i = 0; i < c->dim; i++)
                outs[(size_t)l * c->dim + i] = as_bf16_to_f32(tmp[i]);
        }
    }
    free(tmp);
    if (!rc)
        rc = as_engine_finish_step(e, err);
    return rc;
}

/* Byte-compares device buffers of the two engines; the first difference is reported. */
static bool same_dev(int pos, int l, const char *what, const void *da, const void *db, size_t bytes,
                     size_t esz)
{
    if (!bytes)
        return true;
    unsigned char *a = xmalloc(bytes), *b = xmalloc(bytes);
    /* both engines' streams are idle here (finish_step and the graph step synchronise), and the
     * device is synchronised anyway: a comparison must never read a buffer still being written */
    cudaError_t ra = cudaDeviceSynchronize(), rb = cudaSuccess;
    if (ra == cudaSuccess)
        ra = cudaMemcpy(a, da, bytes, cudaMemcpyDeviceToHost), rb = cudaMemcpy(b, db, bytes, cudaMemcpyDeviceToHost);
    REQUIRE(ra == cudaSuccess && rb == cudaSuccess, "copying %s: %s", what, cudaGetErrorString(ra ? ra : rb));
    size_t i = 0;
    while (i < bytes && a[i] == b[i])
        i++;
    bool same = i == bytes;
    if (!same) {
        size_t e = i / esz;
        uint32_t va = 0, vb = 0;
        memcpy(&va, a + e * esz, esz < 4 ? esz : 4);
        memcpy(&vb, b + e * esz, esz < 4 ? esz : 4);
        as_test_fail(__FILE__, __LINE__, "decode at position %d, layer %d, %s: element %zu differs: graph 0x%x, "
                     "uncaptured 0x%x", pos, l, what, e, vb, va);
    }
    free(a), free(b);
    return same;
}

static bool same_prov(AsProvenance x, AsProvenance y) { return x.layer == y.layer && x.step == y.step; }

/* The engines' state after a step: caches, shared state, residual. */
static bool same_state(const Pair *p, int pos)
{
    const AsConfig *c = p->c;
    const AsEngine *a = p->a, *b = p->b;
    bool ok = same_dev(pos, -1, "residual h", a->wk.h, b->wk.h, sizeof(uint16_t) * (size_t)c->dim, 2);
    for (int l = 0; ok && l < c->n_layers; l++) {
        const AsDevLayerState *x = &a->ls[l], *y = &b->ls[l];
        const int r = c->role[l].ratio, hd = c->head_dim, ihd = c->index_head_dim;
        ok = same_dev(pos, l, "window ring", x->ring, y->ring, sizeof(uint16_t) * (size_t)c->window * hd, 2);
        if (ok && x->part_kv)
            ok = same_dev(pos, l, "partial-group kv", x->part_kv, y->part_kv, sizeof(float) * (size_t)r * hd, 4) &&
                 same_dev(pos, l, "partial-group score", x->part_sc, y->part_sc, sizeof(float) * (size_t)r * hd, 4);
        if (ok && x->ccache)
            ok = same_dev(pos, l, "compressed cache", x->ccache, y->ccache, sizeof(uint16_t) * (size_t)x->cap * hd, 2);
        if (ok && x->ikcache)
            ok = same_dev(pos, l, "index-key cache", x->ikcache, y->ikcache, sizeof(uint16_t) * (size_t)x->cap * ihd,
                          2);
        if (ok && (x->ccache_rows != y->ccache_rows || x->ikcache_rows != y->ikcache_rows)) {
            as_test_fail(__FILE__, __LINE__, "decode at position %d, layer %d: cache rows %d / %d, uncaptured %d / %d",
                         pos, l, y->ccache_rows, y->ikcache_rows, x->ccache_rows, x->ikcache_rows);
            ok = false;
        }
    }
    const AsSharedProv *s = &a->sh.prov, *t = &b->sh.prov;
    if (ok && (!same_prov(s->compress_kv_from, t->compress_kv_from) || !same_prov(s->index_k_from, t->index_k_from) ||
               !same_prov(s->sel_from, t->sel_from) || !same_prov(s->cand_from, t->cand_from) ||
               s->sel_s != t->sel_s || s->sel_k != t->sel_k || s->cand_s != t->cand_s ||
               s->cand_width != t->cand_width || a->step != b->step)) {
        as_test_fail(__FILE__, __LINE__,
                     "decode at position %d: shared state differs: compressed cache from layer %d step %d (uncaptured "
                     "%d, %d), keys from %d, %d (%d, %d), selection from %d, %d k %d (%d, %d k %d), candidates from %d, "
                     "%d width %d (%d, %d width %d), engine step %d (%d)",
                     pos, t->compress_kv_from.layer, t->compress_kv_from.step, s->compress_kv_from.layer,
                     s->compress_kv_from.step, t->index_k_from.layer, t->index_k_from.step, s->index_k_from.layer,
                     s->index_k_from.step, t->sel_from.layer, t->sel_from.step, t->sel_k, s->sel_from.layer,
                     s->sel_from.step, s->sel_k, t->cand_from.layer, t->cand_from.step, t->cand_width,
                     s->cand_from.layer, s->cand_from.step, s->cand_width, b->step, a->step);
        ok = false;
    }
    return ok;
}

/* The last layer's run of both engines, every tensor and scalar. */
static bool same_last_run(const Pair *p, int pos)
{
    AsRun ra, rb;
    as_run_init(&ra), as_run_init(&rb);
    AsError err = {0};
    REQUIRE(as_engine_layer_run(p->a, &ra, &err) == 0, "layer run (uncaptured) at position %d: %s", pos, err.msg);
    REQUIRE(as_engine_layer_run(p->b, &rb, &err) == 0, "layer run after a graph step at position %d: %s", pos, err.msg);
    bool ok = true;
#define SC(f)                                                                                                    \
    if (ok && ra.f != rb.f) {                                                                                    \
        as_test_fail(__FILE__, __LINE__, "decode at position %d, last layer's run: " #f " %d after the graph, %d", \
                     pos, (int)rb.f, (int)ra.f);                                                                 \
        ok = false;                                                                                              \
    }
    SC(layer) SC(step) SC(start_pos) SC(s) SC(ratio) SC(rows_a_len) SC(rows_b_len) SC(cols) SC(k) SC(topk) SC(width)
    SC(compress_len) SC(n_new) SC(indexer_ran)
#undef SC
    if (ok && (!same_prov(ra.rows_b_from, rb.rows_b_from) || !same_prov(ra.keys_from, rb.keys_from) ||
               !same_prov(ra.sel_from, rb.sel_from) || !same_prov(ra.cand_from, rb.cand_from))) {
        as_test_fail(__FILE__, __LINE__, "decode at position %d, last layer's run: provenance differs (rows_b %d/%d, "
                     "keys %d/%d, selection %d/%d, candidates %d/%d: graph/uncaptured layers)", pos,
                     rb.rows_b_from.layer, ra.rows_b_from.layer, rb.keys_from.layer, ra.keys_from.layer,
                     rb.sel_from.layer, ra.sel_from.layer, rb.cand_from.layer, ra.cand_from.layer);
        ok = false;
    }
    for (int i = 0; ok && i < AS_T_COUNT; i++) {
        const AsHostTensor *x = &ra.t[i], *y = &rb.t[i];
        const int64_t n = as_ht_numel(x);
        const size_t esz = x->type == AS_VT_U8 ? 1 : 4;
        if (!x->data != !y->data || n != as_ht_numel(y) || x->ndim != y->ndim ||
            (n && memcmp(x->data, y->data, (size_t)n * esz))) {
            int64_t e = 0;
            while (e < n && y->data && !memcmp((char *)x->data + e * esz, (char *)y->data + e * esz, esz))
                e++;
            as_test_fail(__FILE__, __LINE__,
                         "decode at position %d, last layer's run, %s: %s (%ld elements uncaptured, %ld after the "
                         "graph; first difference at element %ld)",
                         pos, as_tensor_desc[i].name, !x->data != !y->data ? "present on one side only" : "differs",
                         (long)n, (long)as_ht_numel(y), (long)e);
            ok = false;
        }
    }
    as_run_free(&ra), as_run_free(&rb);
    return ok;
}

/* Every layer's run scalars and provenance after a graph step (the plan's) against the uncaptured
 * forward's. */
static bool same_layer_metas(const Pair *p, int pos)
{
    for (int l = 0; l < p->c->n_layers; l++) {
        AsRun mb;
        as_run_init(&mb);
        AsError err = {0};
        REQUIRE(as_decode_graph_layer_meta(p->g, l, &mb, &err) == 0, "layer %d meta: %s", l, err.msg);
        const AsRun *ma = &p->meta_a[l];
        if (ma->layer != mb.layer || ma->step != mb.step || ma->start_pos != mb.start_pos || ma->s != mb.s ||
            ma->ratio != mb.ratio || ma->rows_a_len != mb.rows_a_len || ma->rows_b_len != mb.rows_b_len ||
            ma->cols != mb.cols || ma->k != mb.k || ma->topk != mb.topk || ma->width != mb.width ||
            ma->compress_len != mb.compress_len || ma->n_new != mb.n_new || ma->indexer_ran != mb.indexer_ran ||
            !same_prov(ma->rows_b_from, mb.rows_b_from) || !same_prov(ma->keys_from, mb.keys_from) ||
            !same_prov(ma->sel_from, mb.sel_from) || !same_prov(ma->cand_from, mb.cand_from)) {
            as_test_fail(__FILE__, __LINE__,
                         "decode at position %d, layer %d's run after the graph step: k %d width %d topk %d n_new %d, "
                         "rows_b from %d/%d, keys from %d/%d, selection from %d/%d, candidates from %d/%d; the "
                         "uncaptured forward: k %d width %d topk %d n_new %d, rows_b %d/%d, keys %d/%d, selection "
                         "%d/%d, candidates %d/%d (layer/step)",
                         pos, l, mb.k, mb.width, mb.topk, mb.n_new, mb.rows_b_from.layer, mb.rows_b_from.step,
                         mb.keys_from.layer, mb.keys_from.step, mb.sel_from.layer, mb.sel_from.step,
                         mb.cand_from.layer, mb.cand_from.step, ma->k, ma->width, ma->topk, ma->n_new,
                         ma->rows_b_from.layer, ma->rows_b_from.step, ma->keys_from.layer, ma->keys_from.step,
                         ma->sel_from.layer, ma->sel_from.step, ma->cand_from.layer, ma->cand_from.step);
            return false;
        }
    }
    return true;
}

/* Decode steps at positions pos0 .. pos0 + n - 1: uncaptured on a, through the graph on b (or
 * uncaptured on b too when b_uncaptured), compared after each; stops at the first difference. */
static bool pair_decode(Pair *p, int pos0, int n, bool b_uncaptured)
{
    const AsConfig *c = p->c;
    for (int i = 0; i < n; i++) {
        const int pos = pos0 + i;
        AsError ea = {0}, eb = {0};
        int ra = step_uncaptured(p, p->a, pos, p->outs_a, p->meta_a, &ea);
        int rb = b_uncaptured ? step_uncaptured(p, p->b, pos, p->outs_b, NULL, &eb)
                              : as_engine_decode_graph(p->g, p->h0 + (size_t)pos * c->dim, pos, &eb);
        if (ra || rb) {
            CHECK(ra == rb && !strcmp(ea.msg, eb.msg),
                  "decode at position %d: the uncaptured step returned %d (%s), the graph step %d (%s)", pos, ra,
                  ra ? ea.msg : "ok", rb, rb ? eb.msg : "ok");
            if (ra == rb)
                as_test_note("decode at position %d: both paths refuse alike: %s", pos, ea.msg);
            return false;
        }
        p->steps++;
        if (!b_uncaptured) {
            AsError err = {0};
            REQUIRE(as_decode_graph_layer_outs(p->g, p->outs_b, &err) == 0, "%s", err.msg);
        }
        bool ok = true;
        for (int l = 0; ok && l < c->n_layers; l++)
            if (memcmp(p->outs_a + (size_t)l * c->dim, p->outs_b + (size_t)l * c->dim, sizeof(float) * (size_t)c->dim)) {
                int j = 0;
                while (!memcmp(&p->outs_a[(size_t)l * c->dim + j], &p->outs_b[(size_t)l * c->dim + j], sizeof(float)))
                    j++;
                as_test_fail(__FILE__, __LINE__, "decode at position %d, layer %d, out[%d]: graph %.9g, uncaptured %.9g",
                             pos, l, j, p->outs_b[(size_t)l * c->dim + j], p->outs_a[(size_t)l * c->dim + j]);
                ok = false;
            }
        const unsigned char *bytes = (const unsigned char *)p->outs_b;
        for (size_t k = 0; k < sizeof(float) * (size_t)c->n_layers * c->dim; k++)
            p->outs_fnv = (p->outs_fnv ^ bytes[k]) * 0x100000001b3ull;
        /* every comparison runs, so that one failing run says which buffers and scalars differ too */
        bool state_ok = same_state(p, pos), run_ok = same_last_run(p, pos);
        bool meta_ok = b_uncaptured || same_layer_metas(p, pos);
        ok = ok && state_ok && run_ok && meta_ok;
        if (!ok) {
            p->first_bad_step = pos;
            return false;
        }
    }
    return true;
}

static void expect_shapes(const Pair *p, const char *name, int captures)
{
    AsDecodeGraphInfo gi;
    as_decode_graph_info(p->g, &gi);
    as_test_note("%s: %d graph steps identical to the uncaptured ones; %d captures, %d replays; last graph %d nodes "
                 "(%d kernels, %d copies, %d memsets, %d host nodes, %d other), %.3f ms",
                 name, p->steps, gi.captures, gi.replays, gi.nodes, gi.kernels, gi.memcpys, gi.memsets, gi.hosts,
                 gi.others, gi.last_ms);
    CHECK(gi.captures == captures, "%s: %d graphs captured, %d expected (one per step shape): a recapture per step "
          "would hide a baked position", name, gi.captures, captures);
}

/* A knob setting of the 300-step runs: the flags' values (engine/knobs.h), "" for the default. */
typedef struct {
    const char *fusions, *how;
    bool no_pdl, no_kv_fork;
    const char *sel_room, *attn_path;
} KnobRun;

static AsEngineKnobs knobs_of(const KnobRun *r)
{
    AsEngineKnobs k;
    as_engine_knobs_default(&k);
    AsError err = {0};
    REQUIRE((!r->fusions[0] || as_decode_fusions(r->fusions, &k.fusions, &err) == 0) &&
                (!r->sel_room || as_sel_room(r->sel_room, &k.sel_room, &err) == 0) &&
                (!r->attn_path || as_attn_path_parse(r->attn_path, &k.attn_path, &err) == 0),
            "%s: %s", r->how, err.msg);
    k.pdl = !r->no_pdl;
    k.kv_fork = !r->no_kv_fork;
    return k;
}

GPU_TEST(gpu_graph_tiny_300_steps)
{
    /* without the decode fusions, with three (residual in wo_b's GEMV, RoPE in wq_b's, a reuse layer's idx
     * on the kv branch), with the RMSNorms in the GEMVs but not the residual (so wo_b's GEMV leaves the next
     * layer's attn_norm to its own kernel), with every layer's selection on the kv branch (kvsel: the
     * compressor and indexer layers' too), as the engine runs by default (all six), then the other knobs one
     * at a time: without PDL, without the kv fork, no room beside wq_b, the warp attention forced (tiny's own
     * path: the same bits). Every run's layer outs equal the unfused run's. The uncaptured decode takes the
     * by-value attention and the row pipeline for o_back, so the fused runs also check the fused o_back. */
    static const KnobRun runs[] = {
        {.fusions = "none", .how = "tiny, unfused"},
        {.fusions = "residual,rope,kvidx", .how = "tiny, three fused"},
        {.fusions = "norm,oback", .how = "tiny, norm without the residual: wq_a's RMSNorm alone"},
        {.fusions = "kvsel,kvidx,norm", .how = "tiny, every selection on the kv branch"},
        {.fusions = "", .how = "tiny, the default knobs"},
        {.fusions = "", .how = "tiny, --no-pdl", .no_pdl = true},
        {.fusions = "", .how = "tiny, --no-kv-fork", .no_kv_fork = true},
        {.fusions = "", .how = "tiny, --sel-room 0", .sel_room = "0"},
        {.fusions = "", .how = "tiny, --attn-path warp", .attn_path = "warp"},
    };
    /* in each precision; fp8's outs must differ from bf16's (its projections read act_quant's inputs) */
    uint64_t unfused_fnv[2] = {0, 0};
    for (int pi = 0; pi < 2; pi++)
        for (size_t run = 0; run < sizeof runs / sizeof runs[0]; run++) {
            const AsEngineKnobs k = knobs_of(&runs[run]);
            g_knobs = &k;
            char how[128];
            snprintf(how, sizeof how, "%s (%s)", runs[run].how, as_precision_name(precisions[pi]));
            AsModel *m = tiny_in(7, precisions[pi]);
            if (!m)
                break;
            Pair p;
            pair_open(&p, m, NULL, 9 + 300 + 1, false);
            pair_prefill(&p, 9);
            bool ok = pair_decode(&p, 9, 300, false);
            CHECK(ok, "%s: the graph and the uncaptured decode differ (first at position %d)", how, p.first_bad_step);
            if (run == 0)
                unfused_fnv[pi] = p.outs_fnv;
            else /* each knob keeps every bit: the same outs as without any fusion, at every layer of every step */
                CHECK(p.outs_fnv == unfused_fnv[pi], "%s: the 300 steps' layer outs differ from the unfused run's",
                      how);
            expect_shapes(&p, how, 2);
            AsDecodeGraphInfo gi;
            as_decode_graph_info(p.g, &gi);
            CHECK(gi.replays == p.steps - 2, "%s: %d replays for %d steps", how, gi.replays, p.steps);
            CHECK(gi.hosts == 0, "%s: %d host nodes in a graph whose selection runs on the device", how, gi.hosts);
            pair_close(&p);
            as_test_model_free(m);
            g_knobs = NULL;
        }
    if (unfused_fnv[0] && unfused_fnv[1])
        CHECK(unfused_fnv[0] != unfused_fnv[1], "tiny: fp8 precision's 300 steps gave bf16's layer outs bit for bit: "
              "no projection input was quantised");
}

/* A forced attention kernel that the geometry cannot take is refused when the engine is made, with one
 * line: tiny's 4 heads of 64 fit neither the tensor-core kernel nor the wgmma one. */
GPU_TEST(gpu_graph_attn_path_that_does_not_fit)
{
    AsModel *m = as_test_model("tiny", NULL, 7);
    static const char *paths[] = {"mma", "wgmma"};
    for (int i = 0; i < 2; i++) {
        AsEngineKnobs k;
        as_engine_knobs_default(&k);
        AsError err = {0};
        REQUIRE(as_attn_path_parse(paths[i], &k.attn_path, &err) == 0, "%s", err.msg);
        AsEngineOptions eo = {.device = 0, .knobs = &k};
        AsEngine *e = NULL;
        int rc = as_engine_create(m, &eo, &e, &err);
        CHECK(rc == AS_EBADINPUT && e == NULL && strstr(err.msg, "--attn-path") && !strchr(err.msg, '\n'),
              "--attn-path %s on tiny: rc %d, '%s' (want AS_EBADINPUT, one line)", paths[i], rc, err.msg);
        as_engine_destroy(e);
    }
    as_test_model_free(m);
}

/* The host selection path (--host-select) through the graph: top-k in host nodes. */
GPU_TEST(gpu_graph_tiny_host_select)
{
    for (int pi = 0; pi < 2; pi++) {
        const char *prec = as_precision_name(precisions[pi]);
        AsModel *m = tiny_in(7, precisions[pi]);
        if (!m)
            continue;
        Pair p;
        pair_open(&p, m, NULL, 9 + 60 + 1, true);
        pair_prefill(&p, 9);
        bool ok = pair_decode(&p, 9, 60, false);
        CHECK(ok, "tiny %s (host selection): the graph and the uncaptured decode differ (first at position %d)", prec,
              p.first_bad_step);
        char how[96];
        snprintf(how, sizeof how, "tiny %s prefill 9 + 60 decode, selection on the host", prec);
        expect_shapes(&p, how, 2);
        AsDecodeGraphInfo gi;
        as_decode_graph_info(p.g, &gi);
        CHECK(gi.hosts > 0, "tiny %s (host selection): no host node in the graph", prec);
        pair_close(&p);
        as_test_model_free(m);
    }
}

/* After a 1-token prefill, whose ratio-2 index sources published empty selections (compress_len 0), the
 * decode steps through the graph equal the uncaptured ones, in both precisions. */
GPU_TEST(gpu_graph_tiny_prefill1)
{
    for (int pi = 0; pi < 2; pi++) {
        const char *prec = as_precision_name(precisions[pi]);
        AsModel *m = tiny_in(11, precisions[pi]);
        if (!m)
            continue;
        Pair p;
        pair_open(&p, m, NULL, 1 + 30 + 1, false);
        pair_prefill(&p, 1);
        CHECK(p.a->sh.prov.sel_from.layer >= 0 && p.a->sh.prov.sel_from.step == 0,
              "tiny %s prefill 1: no selection published (the empty ones count)", prec);
        bool ok = pair_decode(&p, 1, 30, false);
        CHECK(ok, "tiny %s after a 1-token prefill: the graph and the uncaptured decode differ (first at position %d)",
              prec, p.first_bad_step);
        char how[64];
        snprintf(how, sizeof how, "tiny %s prefill 1 + 30 decode", prec);
        expect_shapes(&p, how, 2);
        pair_close(&p);
        as_test_model_free(m);
    }
}

/* The graph with an event node around each layer (bench-engine --graph-layers): the same bits as the
 * uncaptured decode, and a device time for every layer of every replay, positive and finite, whose sum
 * stays within the step's. */
static void layer_events_in(AsModel *m, const char *prec)
{
    const AsConfig *c = &m->cfg;
    Pair p;
    pair_open_events(&p, m, NULL, 9 + 12 + 1, false, true);
    pair_prefill(&p, 9);
    double ms[AS_MAX_LAYERS];
    int timed = 0;
    for (int i = 0; i < 12; i++) {
        bool ok = pair_decode(&p, 9 + i, 1, false);
        CHECK(ok, "tiny %s with layer events: the graph and the uncaptured decode differ at position %d", prec, 9 + i);
        if (!ok)
            break;
        AsError err = {0};
        REQUIRE(as_decode_graph_layer_ms(p.g, ms, &err) == 0, "layer times: %s", err.msg);
        AsDecodeGraphInfo gi;
        as_decode_graph_info(p.g, &gi);
        CHECK(gi.others >= c->n_layers + 1, "position %d: %d nodes of other kinds, fewer than the %d event nodes",
              9 + i, gi.others, c->n_layers + 1);
        double sum = 0;
        for (int l = 0; l < c->n_layers; l++) {
            CHECK(ms[l] > 0 && isfinite(ms[l]), "position %d, layer %d: %g ms", 9 + i, l, ms[l]);
            sum += ms[l];
        }
        CHECK(sum <= gi.last_ms * 1.001 + 1e-3, "position %d: the layers' %.4f ms above the step's %.4f ms", 9 + i, sum,
              gi.last_ms);
        timed++;
    }
    as_test_note("tiny %s prefill 9 + 12 decode through a graph with layer events: %d steps timed, identical to "
                 "the uncaptured ones", prec, timed);
    AsError err = {0};
    AsDecodeGraph *g2 = NULL;
    REQUIRE(as_decode_graph_create(p.a, NULL, &g2, &err) == 0, "decode graph: %s", err.msg);
    CHECK(as_decode_graph_layer_ms(g2, ms, &err) == AS_EBADINPUT && strstr(err.msg, "layer_events"),
          "a graph without layer events gave layer times ('%s')", err.msg);
    as_decode_graph_destroy(g2);
    pair_close(&p);
}


GPU_TEST(gpu_graph_tiny_layer_events)
{
    for (int pi = 0; pi < 2; pi++) {
        AsModel *m = tiny_in(7, precisions[pi]);
        if (m)
            layer_events_in(m, as_precision_name(precisions[pi]));
        as_test_model_free(m);
    }
}

/* Mixing paths: graph steps, uncaptured steps on the graph engine, graph again (the same graphs), a
 * new and longer prefill (the work buffers are reallocated: captured again), a refusal; in both
 * precisions. */
GPU_TEST(gpu_graph_tiny_mixed_and_refusal)
{
    for (int pi = 0; pi < 2; pi++) {
        const char *prec = as_precision_name(precisions[pi]);
        AsModel *m = tiny_in(8, precisions[pi]);
        if (!m)
            continue;
        const AsConfig *c = &m->cfg;
        Pair p;
        pair_open(&p, m, NULL, c->max_seq + 1, false);
        pair_prefill(&p, 9);
        bool ok = pair_decode(&p, 9, 10, false) && pair_decode(&p, 19, 3, true) && pair_decode(&p, 22, 10, false);
        CHECK(ok, "tiny %s mixed: differ at position %d", prec, p.first_bad_step);
        char how[96];
        snprintf(how, sizeof how, "tiny %s mixed, before the second prefill", prec);
        expect_shapes(&p, how, 2);
        pair_prefill(&p, 40);
        ok = pair_decode(&p, 40, 20, false);
        CHECK(ok, "tiny %s after a second prefill: differ at position %d", prec, p.first_bad_step);
        snprintf(how, sizeof how, "tiny %s after a second, longer prefill", prec);
        expect_shapes(&p, how, 4);
        /* a step past max_seq is refused before anything runs, and the engine goes on */
        AsError err = {0};
        int rc = as_engine_decode_graph(p.g, p.h0, c->max_seq, &err);
        CHECK(rc == AS_EREFUSED, "tiny %s: decode graph at max_seq: %d (%s), want a refusal", prec, rc, err.msg);
        if (rc)
            as_test_note("tiny %s: decode graph at position %d (max_seq): %s", prec, c->max_seq, err.msg);
        ok = pair_decode(&p, 60, 2, false);
        CHECK(ok, "tiny %s after a refusal: differ at position %d", prec, p.first_bad_step);
        pair_close(&p);
        as_test_model_free(m);
    }
}

/* Every fault, injected into both engines, acts alike through the graph, in both precisions. */
GPU_TEST(gpu_graph_tiny_faults)
{
    for (int pi = 0; pi < 2; pi++) {
        const char *prec = as_precision_name(precisions[pi]);
        AsModel *m = tiny_in(9, precisions[pi]);
        if (!m)
            continue;
        for (int f = 1; f < AS_FAULT_COUNT; f++) {
            Pair p;
            pair_open(&p, m, as_fault_desc[f].name, 9 + 14 + 1, false);
            pair_prefill(&p, 9);
            bool ok = pair_decode(&p, 9, 14, false);
            CHECK(ok || p.first_bad_step < 0, "%s fault %s: the graph and the uncaptured decode differ at position %d",
                  prec, as_fault_desc[f].name, p.first_bad_step);
            as_test_note("%s fault %-15s: %d decode steps identical through the graph", prec, as_fault_desc[f].name,
                         p.steps);
            pair_close(&p);
        }
        as_test_model_free(m);
    }
}

/* The decode graph against the uncaptured decode at the released geometry, bit for bit, in one
 * precision. */
static void graph_flash(AsPrecision precision)
{
    const char *dir = getenv("ATTNSCOPE_FLASH_MODEL");
    if (!dir || !*dir)
        as_test_skip("ATTNSCOPE_FLASH_MODEL not set (a directory written by attnscope gen --preset flash)");
    AsModel *m = calloc(1, sizeof *m);
    REQUIRE(m, "out of host memory");
    AsError err = {0};
    REQUIRE(as_model_load(dir, 1024, m, &err) == 0, "load %s: %s", dir, err.msg);
    REQUIRE(as_model_set_precision(m, precision, &err) == 0, "%s in %s precision: %s", dir,
            as_precision_name(precision), err.msg);
    Pair p;
    pair_open(&p, m, NULL, 512 + 64 + 1, false);
    pair_prefill(&p, 512);
    bool ok = pair_decode(&p, 512, 64, false);
    CHECK(ok, "flash: the graph and the uncaptured decode differ (first at position %d)", p.first_bad_step);
    expect_shapes(&p, "flash prefill 512 + 64 decode", 2);
    pair_close(&p);
    as_model_free(m);
    free(m);
}

GPU_TEST(gpu_graph_flash_prefill512_decode64_fp8) { graph_flash(AS_PREC_FP8); }
GPU_TEST(gpu_graph_flash_prefill512_decode64_bf16) { graph_flash(AS_PREC_BF16); }
