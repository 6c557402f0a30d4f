#include "engine/bench_trace.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "engine/check.h"
#include "engine/internal.h"
#include "engine/trace.h"

/* The steps under the trace; the events of the last one (a replay: the captures come first). */
static int traced_steps(AsEngine *e, AsTrace *t, const float *h0, int pos0, int steps, AsTraceEvent **ev, int *n,
                        int *untagged, AsError *err)
{
    AsDecodeGraph *g = NULL;
    AsDecodeGraphInfo gi = {0};
    int rc = as_decode_graph_create(e, NULL, &g, err), captures = 0;
    for (int i = 0; i < steps && !rc; i++) {
        if (i == steps - 1) { /* what the earlier steps left is dropped */
            AsTraceEvent *old = NULL;
            int m, u;
            rc = as_trace_collect(t, &old, &m, &u, err);
            free(old);
            captures = gi.captures;
        }
        if (!rc)
            rc = as_engine_decode_graph(g, h0 + (size_t)i * e->cfg.dim, pos0 + i, err);
        as_decode_graph_info(g, &gi);
    }
    if (!rc && gi.captures != captures)
        rc = as_err(err, AS_ERUNTIME, "trace: the last of %d steps captured a graph (not a replay)", steps);
    if (!rc)
        rc = as_trace_collect(t, ev, n, untagged, err);
    as_decode_graph_destroy(g);
    return rc;
}

static void report(const AsConfig *c, const AsTraceEvent *ev, int n, int untagged, const char *path,
                   const char (*kind)[48], double graph_ms, FILE *md)
{
    uint64_t t0 = UINT64_MAX, t1 = 0;
    int kernels = 0, copies = 0, memsets = 0;
    for (int i = 0; i < n; i++) {
        if (ev[i].kind != AS_TRACE_KERNEL)
            continue; /* the step's span: its kernels (the parameters' upload and the flags' read-back are copies) */
        t0 = ev[i].start_ns < t0 ? ev[i].start_ns : t0;
        t1 = ev[i].end_ns > t1 ? ev[i].end_ns : t1;
    }
    for (int i = 0; i < n; i++)
        kernels += ev[i].kind == AS_TRACE_KERNEL, copies += ev[i].kind == AS_TRACE_MEMCPY,
            memsets += ev[i].kind == AS_TRACE_MEMSET;
    const double span_us = t1 > t0 ? (double)(t1 - t0) * 1e-3 : 0;
    fprintf(md, "### One decode step through the graph on the device's timeline (--trace, CUPTI)\n\n");
    fprintf(md, "The last replay: %.1f us from its first kernel's start to its last kernel's end (the untraced graph's "
                "median above: %.1f us); %d kernels (%d not named by an engine launch), %d copies, %d memsets. Written to "
                "%s (a Chrome trace: Perfetto, chrome://tracing).\n\n",
            span_us, graph_ms * 1e3, kernels, untagged, copies, memsets, path);
    AsTraceLayer *L = calloc((size_t)c->n_layers, sizeof *L);
    if (!L)
        return;
    as_trace_layers(ev, n, c->n_layers, L);
    fprintf(md, "Per layer kind. Span: from a layer's first start to the next layer's; idle: of the span, the time no "
                "kernel, copy or memset ran. A kernel launched programmatically starts when its blocks are resident, "
                "so its time includes its wait for the kernel before it.\n\n");
    fprintf(md, "| layer kind | layers | span us a layer | idle us a layer | kernels a layer |\n| --- | --- | --- | --- | --- |\n");
    for (int l = 0; l < c->n_layers; l++) {
        if (!as_trace_first_of_kind(kind, l))
            continue;
        double span = 0, idle = 0, kern = 0;
        int layers = 0;
        for (int j = l; j < c->n_layers; j++)
            if (!strcmp(kind[j], kind[l]))
                span += L[j].span_us, idle += L[j].idle_us, kern += L[j].kernels, layers++;
        fprintf(md, "| %s | %d | %.1f | %.1f | %.1f |\n", kind[l], layers, span / layers, idle / layers, kern / layers);
    }
    fprintf(md, "\n");
    as_trace_print_chain(md, ev, n, c->n_layers, kind);
    for (int l = 0; l < c->n_layers; l++) {
        if (!as_trace_first_of_kind(kind, l))
            continue;
        fprintf(md, "#### Layer %d (%s), kernel by kernel: span %.1f us, idle %.1f us\n\n", l, kind[l], L[l].span_us,
                L[l].idle_us);
        as_trace_print_layer(md, ev, n, l);
    }
    free(L);
}

int as_bench_trace(AsEngine *e, const float *h0, int pos0, int steps, const char *path, const char (*kind)[48],
                   double graph_ms, FILE *md, AsError *err)
{
    if (steps < 3)
        return as_err(err, AS_EBADINPUT, "trace: %d steps (at least 3: two capture, the last replays)", steps);
    AsTrace *t = NULL;
    TRY(as_trace_begin(&t, err));
    as_trace_watch(e->st, e->st_kv);
    AsTraceEvent *ev = NULL;
    int n = 0, untagged = 0;
    int rc = traced_steps(e, t, h0, pos0, steps, &ev, &n, &untagged, err);
    as_trace_end(t);
    if (!rc) {
        char title[96];
        snprintf(title, sizeof title, "attnscope decode step at position %d (graph replay)", pos0 + steps - 1);
        rc = as_trace_chrome_write(path, ev, n, title, err);
    }
    if (!rc)
        report(&e->cfg, ev, n, untagged, path, kind, graph_ms, md);
    free(ev);
    return rc;
}
