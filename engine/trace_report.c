#include "engine/trace_report.h"

#include <ctype.h>
#include <stdbool.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/stats.h"
#include "model/safetensors.h"

void as_trace_stage_of(const char *launch, int *layer, char *stage, size_t n)
{
    *layer = -1;
    if (n)
        stage[0] = '\0';
    if (!launch || !n)
        return;
    const char *p = launch;
    int l, used = 0;
    if (sscanf(p, "layer %d%n", &l, &used) == 1 && used > 0 && l >= 0) {
        *layer = l;
        p += used;
    }
    while (*p == ':' || *p == ' ')
        p++;
    /* up to the first ':' or '(', or a word starting with a digit (the sizes) */
    size_t len = 0;
    for (; p[len] && p[len] != ':' && p[len] != '('; len++)
        if (len && p[len - 1] == ' ' && isdigit((unsigned char)p[len]))
            break;
    /* then trailing words that carry numbers ("s=1") or join them ("of"), while more than one word is left */
    for (;;) {
        while (len && p[len - 1] == ' ')
            len--;
        size_t w = len;
        while (w && p[w - 1] != ' ')
            w--;
        if (!w)
            break;
        bool digits = false;
        for (size_t i = w; i < len; i++)
            digits |= isdigit((unsigned char)p[i]) != 0;
        if (!digits && !(len - w == 2 && !strncmp(p + w, "of", 2)))
            break;
        len = w;
    }
    if (len >= n)
        len = n - 1;
    memcpy(stage, p, len);
    stage[len] = '\0';
}

void as_trace_short_name(const char *demangled, char *out, size_t n)
{
    if (!n)
        return;
    out[0] = '\0';
    if (!demangled)
        return;
    const char *p = demangled;
    static const char anon[] = "(anonymous namespace)::";
    const char *a = strstr(p, anon);
    if (a && !memchr(p, '<', (size_t)(a - p)) && !memchr(p, '(', (size_t)(a - p)))
        p = a + sizeof anon - 1; /* "void (anonymous namespace)::f<...>(...)": f */
    /* the return type of a template function ("void f<...>(...)"): the name is the last word before '<' or '(' */
    const char *end = p + strcspn(p, "<(");
    const char *start = end;
    while (start > p && start[-1] != ' ')
        start--;
    size_t len = (size_t)(end - start);
    if (len >= n)
        len = n - 1;
    memcpy(out, start, len);
    out[len] = '\0';
}

static int cmp_event(const void *a, const void *b)
{
    const AsTraceEvent *x = a, *y = b;
    if (x->start_ns != y->start_ns)
        return x->start_ns < y->start_ns ? -1 : 1;
    return (x->end_ns > y->end_ns) - (x->end_ns < y->end_ns);
}

void as_trace_sort(AsTraceEvent *ev, int n)
{
    if (n > 1)
        qsort(ev, (size_t)n, sizeof *ev, cmp_event);
}

/* The part of [t0, t1) that no event covers; ev sorted by start. */
static uint64_t idle_in(const AsTraceEvent *ev, int n, uint64_t t0, uint64_t t1)
{
    uint64_t covered_to = t0, idle = 0;
    for (int i = 0; i < n && ev[i].start_ns < t1; i++) {
        if (ev[i].end_ns <= covered_to)
            continue;
        if (ev[i].start_ns > covered_to)
            idle += ev[i].start_ns - covered_to;
        covered_to = ev[i].end_ns < t1 ? ev[i].end_ns : t1;
        if (covered_to >= t1)
            break;
    }
    if (covered_to < t1)
        idle += t1 - covered_to;
    return idle;
}

int as_trace_layers(const AsTraceEvent *ev, int n, int n_layers, AsTraceLayer *out)
{
    memset(out, 0, sizeof *out * (size_t)n_layers);
    uint64_t step_end = 0;
    for (int i = 0; i < n; i++)
        if (ev[i].end_ns > step_end)
            step_end = ev[i].end_ns;
    int found = 0;
    for (int l = 0; l < n_layers; l++) {
        uint64_t start = UINT64_MAX, next = UINT64_MAX;
        for (int i = 0; i < n; i++) {
            if (ev[i].layer == l && ev[i].start_ns < start)
                start = ev[i].start_ns;
            if (ev[i].layer > l && ev[i].start_ns < next)
                next = ev[i].start_ns;
            out[l].kernels += ev[i].layer == l && ev[i].kind == AS_TRACE_KERNEL;
        }
        if (start == UINT64_MAX)
            continue;
        found++;
        const uint64_t end = next != UINT64_MAX && next > start ? next : step_end;
        out[l].span_us = (double)(end - start) * 1e-3;
        out[l].idle_us = (double)idle_in(ev, n, start, end) * 1e-3;
    }
    return found;
}

const char *const as_trace_chain_stage[AS_TRACE_CHAIN] = {"wq_a", "wq_b", "sparse attention", "wo_a", "wo_b"};

/* Whether stage names chain stage k: it starts with the stage's words, then ends or goes on with a space. */
static bool in_stage(const char *stage, int k)
{
    const size_t len = strlen(as_trace_chain_stage[k]);
    return !strncmp(stage, as_trace_chain_stage[k], len) && (stage[len] == '\0' || stage[len] == ' ');
}

/* AsTraceChain's branch figures for layer l, whose wq_b ends at q_end and attention at attn_end: the inputs
 * besides q are the layer's other events (neither wq_b's nor the attention's) that end before the
 * attention's first kernel does (it waits for them; ends, since a programmatic launch starts early). Streams
 * say nothing here: a graph runs its branches on streams of its own choosing. */
static void attention_inputs(const AsTraceEvent *ev, int n, int l, uint64_t q_end, uint64_t attn_end,
                             AsTraceChain *out)
{
    uint64_t a_end = UINT64_MAX, branch_end = 0;
    for (int i = 0; i < n; i++)
        if (ev[i].layer == l && ev[i].kind == AS_TRACE_KERNEL && in_stage(ev[i].stage, 2) && ev[i].end_ns < a_end)
            a_end = ev[i].end_ns;
    for (int i = 0; i < n; i++)
        if (ev[i].layer == l && !in_stage(ev[i].stage, 1) && !in_stage(ev[i].stage, 2) && ev[i].end_ns < a_end &&
            ev[i].end_ns > branch_end)
            branch_end = ev[i].end_ns;
    out->branch = branch_end > 0;
    const uint64_t last = branch_end > q_end ? branch_end : q_end;
    out->branch_us = out->branch ? ((double)branch_end - (double)q_end) * 1e-3 : 0.0;
    out->attn_us = ((double)attn_end - (double)last) * 1e-3;
}

void as_trace_chain(const AsTraceEvent *ev, int n, int n_layers, AsTraceChain *out)
{
    memset(out, 0, sizeof *out * (size_t)n_layers);
    uint64_t prev_end = 0;
    bool prev_ok = false;
    for (int l = 0; l < n_layers; l++) {
        uint64_t end[AS_TRACE_CHAIN] = {0};
        for (int i = 0; i < n; i++)
            for (int k = 0; k < AS_TRACE_CHAIN && ev[i].layer == l; k++)
                if (ev[i].kind == AS_TRACE_KERNEL && in_stage(ev[i].stage, k) && ev[i].end_ns > end[k])
                    end[k] = ev[i].end_ns;
        bool all = true;
        for (int k = 0; k < AS_TRACE_CHAIN; k++)
            all = all && end[k] > 0 && (k == 0 ? (!prev_ok || end[0] > prev_end) : end[k] >= end[k - 1]);
        if (all && prev_ok) {
            out[l].ok = 1;
            for (int k = 0; k < AS_TRACE_CHAIN; k++)
                out[l].us[k] = (double)(end[k] - (k ? end[k - 1] : prev_end)) * 1e-3;
            attention_inputs(ev, n, l, end[1], end[2], &out[l]);
        }
        prev_ok = all;
        prev_end = end[AS_TRACE_CHAIN - 1];
    }
}

bool as_trace_first_of_kind(const char (*kind)[48], int l)
{
    for (int j = 0; j < l; j++)
        if (!strcmp(kind[j], kind[l]))
            return false;
    return true;
}

void as_trace_print_chain(FILE *md, const AsTraceEvent *ev, int n, int n_layers, const char (*kind)[48])
{
    AsTraceChain *ch = calloc((size_t)n_layers, sizeof *ch);
    double *v = calloc((size_t)n_layers, sizeof *v);
    if (!ch || !v) {
        free(ch), free(v);
        return;
    }
    as_trace_chain(ev, n, n_layers, ch);
    fprintf(md, "The chain: each projection stage's end after the previous stage's end (wq_a's after the previous "
                "layer's wo_b; what runs between two of them counts in the later one), medians over a kind's layers, "
                "us; then the attention's inputs: the last end of the layer's other kernels and copies before the "
                "attention's first kernel ends, less wq_b's end (> 0: the kv branch or the selection, not q, came "
                "last), and the attention's end after its last input:\n\n| layer kind | layers |");
    for (int k = 0; k < AS_TRACE_CHAIN; k++)
        fprintf(md, " %s |", as_trace_chain_stage[k]);
    fprintf(md, " total | branch - wq_b | attention after its inputs |\n| --- | --- |");
    for (int k = 0; k <= AS_TRACE_CHAIN + 2; k++)
        fprintf(md, " --- |");
    fprintf(md, "\n");
    for (int l = 0; l < n_layers; l++) {
        if (!as_trace_first_of_kind(kind, l))
            continue;
        int m = 0;
        for (int j = l; j < n_layers; j++)
            m += ch[j].ok && !strcmp(kind[j], kind[l]);
        if (!m)
            continue;
        fprintf(md, "| %s | %d |", kind[l], m);
        for (int k = 0; k <= AS_TRACE_CHAIN; k++) {
            int i = 0;
            for (int j = l; j < n_layers; j++) {
                if (!ch[j].ok || strcmp(kind[j], kind[l]))
                    continue;
                double t = 0;
                for (int q = 0; q < AS_TRACE_CHAIN; q++)
                    t += ch[j].us[q];
                v[i++] = k < AS_TRACE_CHAIN ? ch[j].us[k] : t;
            }
            fprintf(md, " %.1f |", as_median(v, i));
        }
        for (int k = 0; k < 2; k++) {
            int i = 0;
            for (int j = l; j < n_layers; j++)
                if (ch[j].ok && ch[j].branch && !strcmp(kind[j], kind[l]))
                    v[i++] = k ? ch[j].attn_us : ch[j].branch_us;
            if (i)
                fprintf(md, " %.1f |", as_median(v, i));
            else
                fprintf(md, " - |");
        }
        fprintf(md, "\n");
    }
    fprintf(md, "\n");
    free(ch);
    free(v);
}

/* The streams of layer l's events (every event's when l < -1) in their order of first use (16 at most:
 * more share the last index). */
typedef struct {
    uint32_t id[16];
    int n;
} Streams;

static void streams_of(const AsTraceEvent *ev, int n, int l, Streams *s)
{
    s->n = 0;
    for (int i = 0; i < n; i++) {
        if (l >= -1 && ev[i].layer != l)
            continue;
        int seen = 0;
        for (int j = 0; j < s->n && !seen; j++)
            seen = s->id[j] == ev[i].stream;
        if (!seen && s->n < (int)(sizeof s->id / sizeof s->id[0]))
            s->id[s->n++] = ev[i].stream;
    }
}

static int stream_index(const Streams *s, uint32_t stream)
{
    for (int j = 0; j < s->n; j++)
        if (s->id[j] == stream)
            return j;
    return s->n;
}

static const char *kind_word(AsTraceKind k)
{
    return k == AS_TRACE_MEMCPY ? "memcpy" : k == AS_TRACE_MEMSET ? "memset" : "kernel";
}

void as_trace_print_layer(FILE *md, const AsTraceEvent *ev, int n, int l)
{
    uint64_t t0 = UINT64_MAX;
    for (int i = 0; i < n; i++)
        if (ev[i].layer == l && ev[i].start_ns < t0)
            t0 = ev[i].start_ns;
    if (t0 == UINT64_MAX) {
        fprintf(md, "(no event of layer %d)\n\n", l);
        return;
    }
    Streams st;
    streams_of(ev, n, l, &st);
    fprintf(md, "| start us | end us | us | stream | stage | kernel | grid x block |\n| --- | --- | --- | --- | --- | --- | --- |\n");
    for (int i = 0; i < n; i++) {
        const AsTraceEvent *e = &ev[i];
        if (e->layer != l)
            continue;
        char shape[48] = "";
        if (e->kind == AS_TRACE_KERNEL)
            snprintf(shape, sizeof shape, "%d x %d", e->grid, e->block);
        else
            snprintf(shape, sizeof shape, "%llu bytes", (unsigned long long)e->bytes);
        fprintf(md, "| %.2f | %.2f | %.2f | s%d | %s | %s | %s |\n", (double)(e->start_ns - t0) * 1e-3,
                (double)(e->end_ns - t0) * 1e-3, (double)(e->end_ns - e->start_ns) * 1e-3,
                stream_index(&st, e->stream), e->stage[0] ? e->stage : "(untagged)",
                e->kind == AS_TRACE_KERNEL ? e->kernel : kind_word(e->kind), shape);
    }
    fprintf(md, "\n");
}

/* s as a JSON string's contents: quotes, backslashes and control bytes escaped. */
static int json_str(FILE *f, const char *s)
{
    for (; *s; s++) {
        const unsigned char c = (unsigned char)*s;
        int r = c == '"' || c == '\\' ? fprintf(f, "\\%c", c) : c < 0x20 ? fprintf(f, "\\u%04x", c) : fputc(c, f);
        if (r < 0)
            return -1;
    }
    return 0;
}

static int chrome_events(FILE *f, const AsTraceEvent *ev, int n, const char *title)
{
    uint64_t t0 = n ? ev[0].start_ns : 0;
    for (int i = 0; i < n; i++)
        if (ev[i].start_ns < t0)
            t0 = ev[i].start_ns;
    Streams st;
    streams_of(ev, n, -2, &st);
    if (fprintf(f, "{\"displayTimeUnit\": \"ns\", \"otherData\": {\"title\": \"") < 0 || json_str(f, title ? title : "") ||
        fprintf(f, "\"},\n\"traceEvents\": [\n") < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        const AsTraceEvent *e = &ev[i];
        const char *name = e->stage[0] ? e->stage : e->kind == AS_TRACE_KERNEL ? e->kernel : kind_word(e->kind);
        if (fprintf(f, "%s{\"ph\": \"X\", \"pid\": 0, \"tid\": %d, \"cat\": \"%s\", \"ts\": %.3f, \"dur\": %.3f, "
                       "\"name\": \"",
                    i ? ",\n" : "", stream_index(&st, e->stream), kind_word(e->kind),
                    (double)(e->start_ns - t0) * 1e-3, (double)(e->end_ns - e->start_ns) * 1e-3) < 0 ||
            json_str(f, name) || fprintf(f, "\", \"args\": {\"layer\": %d, \"kernel\": \"", e->layer) < 0 ||
            json_str(f, e->kernel) || fprintf(f, "\", \"launch\": \"") < 0 || json_str(f, e->launch) ||
            fprintf(f, "\", \"grid\": %d, \"block\": %d, \"bytes\": %llu, \"node\": %llu}}", e->grid, e->block,
                    (unsigned long long)e->bytes, (unsigned long long)e->node) < 0)
            return -1;
    }
    return fprintf(f, "\n]}\n") < 0 ? -1 : 0;
}

int as_trace_chrome_write(const char *path, const AsTraceEvent *ev, int n, const char *title, AsError *err)
{
    if (!path)
        return as_err(err, AS_EBADINPUT, "no path for the trace");
    char tmp[AS_ATOMIC_TMP_MAX];
    FILE *f;
    int rc = as_atomic_create(path, tmp, sizeof tmp, &f, err);
    if (rc)
        return rc;
    if (chrome_events(f, ev, n, title)) {
        rc = as_err(err, AS_ERUNTIME, "%s: write failed (%s)", path, strerror(errno));
        as_atomic_abort(f, tmp);
        return rc;
    }
    return as_atomic_commit(f, tmp, path, err);
}
