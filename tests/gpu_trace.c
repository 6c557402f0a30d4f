/* engine/trace.c and bench_trace.c on the device: a tiny decode graph under CUPTI. Every kernel the
 * replay ran is one of the graph's kernel nodes, named by the engine launch that captured it (its
 * layer and stage); every layer has its kernels, in order of start, each with a positive duration;
 * the per-layer figures add up; bench-engine's --trace writes a Chrome trace that parses with one
 * event a record; a second trace opens after the first ends. */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/bench_trace.h"
#include "engine/internal.h"
#include "engine/trace.h"
#include "model/inputs.h"
#include "tests/lib/cli_util.h"
#include "tests/lib/harness.h"
#include "tests/lib/model_fixture.h"

GPU_TEST(gpu_trace_tiny_graph)
{
    AsModel *m = as_test_model("tiny", NULL, 7);
    const AsConfig *c = &m->cfg;
    AsError err = {0};
    AsEngineOptions eo = {.device = 0};
    AsEngine *e = NULL;
    REQUIRE(as_engine_create(m, &eo, &e, &err) == 0, "engine: %s", err.msg);
    const int pre = 9, steps = 4, rows = pre + 2 * steps;
    float *h0 = malloc(sizeof(float) * (size_t)rows * c->dim);
    REQUIRE(h0, "out of host memory");
    as_inputs_synthetic(1, 0, rows, c->dim, h0);
    REQUIRE(as_engine_begin_step(e, h0, 0, pre, &err) == 0 && as_engine_finish_step(e, &err) == 0, "prefill: %s",
            err.msg);

    AsTrace *t = NULL;
    if (as_trace_begin(&t, &err)) {
        if (strstr(err.msg, "another subscriber")) {
            as_test_skip("%s", err.msg);
            goto out;
        }
        REQUIRE(0, "trace: %s", err.msg);
    }
    as_trace_watch(e->st, e->st_kv);
    AsDecodeGraph *g = NULL;
    REQUIRE(as_decode_graph_create(e, NULL, &g, &err) == 0, "decode graph: %s", err.msg);
    AsTraceEvent *ev = NULL;
    int n = 0, untagged = 0;
    for (int i = 0; i < steps; i++) {
        if (i == steps - 1) {
            REQUIRE(as_trace_collect(t, &ev, &n, &untagged, &err) == 0, "collect: %s", err.msg);
            CHECK(n > 0, "the first %d steps left no record", steps - 1);
            free(ev);
        }
        REQUIRE(as_engine_decode_graph(g, h0 + (size_t)(pre + i) * c->dim, pre + i, &err) == 0, "step %d: %s", i,
                err.msg);
    }
    REQUIRE(as_trace_collect(t, &ev, &n, &untagged, &err) == 0, "collect: %s", err.msg);
    AsDecodeGraphInfo gi;
    as_decode_graph_info(g, &gi);
    CHECK(gi.captures == 2, "%d captures in %d steps (two step shapes)", gi.captures, steps);
    int kernels = 0, copies = 0, memsets = 0, per_layer[AS_MAX_LAYERS] = {0};
    for (int i = 0; i < n; i++) {
        const AsTraceEvent *x = &ev[i];
        CHECK(x->end_ns > x->start_ns, "event %d (%s): ends at %llu, starts at %llu", i, x->kernel,
              (unsigned long long)x->end_ns, (unsigned long long)x->start_ns);
        CHECK(i == 0 || x->start_ns >= ev[i - 1].start_ns, "event %d starts before event %d", i, i - 1);
        copies += x->kind == AS_TRACE_MEMCPY, memsets += x->kind == AS_TRACE_MEMSET;
        if (x->kind != AS_TRACE_KERNEL)
            continue;
        kernels++;
        CHECK(x->node != 0, "kernel %s: no graph node (not from the replay)", x->kernel);
        CHECK(x->layer >= 0 && x->layer < c->n_layers && x->stage[0] && !strncmp(x->launch, "layer ", 6),
              "kernel %s: layer %d, stage '%s', launch '%s'", x->kernel, x->layer, x->stage, x->launch);
        CHECK(x->grid > 0 && x->block > 0 && x->kernel[0] && !strchr(x->kernel, '(') && !strchr(x->kernel, '<'),
              "kernel '%s': grid %d, block %d", x->kernel, x->grid, x->block);
        if (x->layer >= 0 && x->layer < c->n_layers)
            per_layer[x->layer]++;
    }
    CHECK(kernels == gi.kernels, "%d kernels recorded, the graph has %d kernel nodes", kernels, gi.kernels);
    CHECK(untagged == 0, "%d kernels not named by a launch", untagged);
    CHECK(copies >= gi.memcpys && memsets >= gi.memsets, "%d copies, %d memsets recorded; the graph has %d and %d",
          copies, memsets, gi.memcpys, gi.memsets);
    AsTraceLayer L[AS_MAX_LAYERS];
    CHECK(as_trace_layers(ev, n, c->n_layers, L) == c->n_layers, "not every layer found");
    for (int l = 0; l < c->n_layers; l++)
        CHECK(per_layer[l] > 0 && L[l].kernels == per_layer[l] && L[l].span_us > 0 && L[l].idle_us >= 0 &&
                  L[l].idle_us <= L[l].span_us,
              "layer %d: %d kernels (%d counted), span %.2f us, idle %.2f us", l, per_layer[l], L[l].kernels,
              L[l].span_us, L[l].idle_us);
    as_test_note("tiny, one graph replay traced: %d kernels (every one named: layer and stage), %d copies, %d memsets; "
                 "layer 0 spans %.1f us", kernels, copies, memsets, L[0].span_us);
    free(ev);
    as_decode_graph_destroy(g);
    as_trace_end(t);

    /* bench-engine's half: a second trace, its Chrome file */
    char path[1100];
    snprintf(path, sizeof path, "%s/trace_tiny.json", as_test_tmpdir());
    char kinds[AS_MAX_LAYERS][48];
    for (int l = 0; l < c->n_layers; l++)
        snprintf(kinds[l], sizeof kinds[l], "r%d", c->role[l].ratio);
    char *md = NULL;
    size_t md_len = 0;
    FILE *mf = open_memstream(&md, &md_len);
    REQUIRE(mf, "open_memstream");
    int rc = as_bench_trace(e, h0 + (size_t)(pre + steps) * c->dim, pre + steps, steps, path,
                            (const char(*)[48])kinds, 1.0, mf, &err);
    fclose(mf);
    REQUIRE(rc == 0, "bench trace: %s", err.msg);
    CHECK(strstr(md, "One decode step through the graph") && strstr(md, "| r0 |") && strstr(md, "#### Layer 0"),
          "the report lacks its tables:\n%s", md);
    CHECK(strstr(md, "(0 not named"), "the report's kernels are not all named:\n%s", md);
    CHECK(strstr(md, "The chain:") && strstr(md, "| wq_a | wq_b | sparse attention | wo_a | wo_b | total |"),
          "the report lacks the chain's table:\n%s", md);
    char *json = as_slurp(path, NULL);
    REQUIRE(json, "%s: cannot read", path);
    cJSON *j = cJSON_Parse(json);
    CHECK(j != NULL, "%s: not JSON", path);
    const cJSON *te = cJSON_GetObjectItemCaseSensitive(j, "traceEvents");
    CHECK(cJSON_IsArray(te) && cJSON_GetArraySize(te) > gi.kernels - 1, "%s: %d trace events", path,
          cJSON_IsArray(te) ? cJSON_GetArraySize(te) : -1);
    cJSON_Delete(j);
    free(json);
    free(md);
    REQUIRE(as_bench_trace(e, h0, pre, 2, path, (const char(*)[48])kinds, 1.0, stdout, &err) == AS_EBADINPUT,
            "two steps accepted (the last would capture)");
out:
    free(h0);
    as_engine_destroy(e);
    as_test_model_free(m);
}
