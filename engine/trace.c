/* CUPTI through dlopen: each engine call during a capture names the nodes it added to the watched
 * streams, a resource callback follows the clones an instantiation makes of them, and the activity
 * API records what the device ran. CUPTI's callbacks are process-wide, so the state is one static;
 * the handle only says a trace is open. */
#include "engine/trace.h"

#include <cuda_runtime_api.h>
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

bool as_trace_tagging = false;

/* libstdc++'s demangler (the kernels are C++ functions); linked with the CUDA runtime's -lstdc++ */
char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

typedef struct {
    CUptiResult (*get_version)(uint32_t *);
    CUptiResult (*result_string)(CUptiResult, const char **);
    CUptiResult (*subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
    CUptiResult (*unsubscribe)(CUpti_SubscriberHandle);
    CUptiResult (*enable_callback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId);
    CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
    CUptiResult (*activity_enable)(CUpti_ActivityKind);
    CUptiResult (*activity_disable)(CUpti_ActivityKind);
    CUptiResult (*flush_all)(uint32_t);
    CUptiResult (*next_record)(uint8_t *, size_t, CUpti_Activity **);
    CUptiResult (*node_id)(CUgraphNode, uint64_t *);
} Cupti;

typedef struct {
    uint64_t id, original; /* a clone and the node it was cloned from (or a node's second id and its first) */
} ClonePair;

typedef struct {
    uint64_t id;
    const void *handle; /* the CUgraphNode as the capture returned it */
    int tag;            /* index into tags */
} NodeTag;

struct AsTrace {
    int open;
};

static struct {
    Cupti f;
    void *lib;
    CUpti_SubscriberHandle sub;
    AsTrace handle;
    /* host thread only (the resource callbacks run inside the capturing calls) */
    cudaStream_t watch[2];
    NodeTag *nodes;
    int n_nodes, cap_nodes;
    ClonePair *clones;
    int n_clones, cap_clones;
    char **tags;
    int n_tags, cap_tags;
    /* the activity buffers may complete on CUPTI's thread */
    pthread_mutex_t mu;
    AsTraceEvent *ev;
    int n_ev, cap_ev;
    int oom; /* a record or node dropped for want of host memory */
} T = {.mu = PTHREAD_MUTEX_INITIALIZER};

#define BUF_BYTES (8u << 20)

static bool grow(void **p, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return true;
    int c = *cap ? *cap * 2 : 256;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q)
        return false;
    *p = q;
    *cap = c;
    return true;
}

static void CUPTIAPI on_resource(void *ud, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data)
{
    (void)ud;
    if (domain != CUPTI_CB_DOMAIN_RESOURCE || !data)
        return;
    const CUpti_GraphData *g = ((const CUpti_ResourceData *)data)->resourceDescriptor;
    if (!g)
        return;
    uint64_t id = 0, orig = 0;
    if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED) {
        /* a captured graph's nodes are reported when its capture ends: should CUPTI number a node then
         * other than it did during the capture, the handle ties the two ids */
        if (T.f.node_id(g->node, &id) != CUPTI_SUCCESS)
            return;
        for (int i = 0; i < T.n_nodes && !orig; i++)
            if (T.nodes[i].handle == (const void *)g->node && T.nodes[i].id != id)
                orig = T.nodes[i].id;
        if (!orig)
            return;
    } else if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) {
        if (!g->originalNode || T.f.node_id(g->node, &id) != CUPTI_SUCCESS ||
            T.f.node_id(g->originalNode, &orig) != CUPTI_SUCCESS)
            return;
    } else
        return;
    if (!grow((void **)&T.clones, &T.cap_clones, T.n_clones + 1, sizeof *T.clones)) {
        T.oom = 1;
        return;
    }
    T.clones[T.n_clones++] = (ClonePair){.id = id, .original = orig};
}

static bool known(uint64_t id)
{
    for (int i = 0; i < T.n_nodes; i++)
        if (T.nodes[i].id == id)
            return true;
    return false;
}

void as_trace_watch(cudaStream_t a, cudaStream_t b)
{
    T.watch[0] = a, T.watch[1] = b;
}

/* Names node and, through its dependencies, every node not named yet: the ones the same call added
 * before it (a launcher of two kernels leaves only the second as the stream's end). */
static void name_node(cudaGraphNode_t node, uint64_t id, int tag)
{
    cudaGraphNode_t stack[64];
    uint64_t ids[64];
    int top = 0;
    stack[top] = node, ids[top++] = id;
    while (top > 0) {
        cudaGraphNode_t n = stack[--top];
        const uint64_t nid = ids[top];
        if (known(nid))
            continue;
        if (!grow((void **)&T.nodes, &T.cap_nodes, T.n_nodes + 1, sizeof *T.nodes)) {
            T.oom = 1;
            return;
        }
        T.nodes[T.n_nodes++] = (NodeTag){.id = nid, .handle = (const void *)n, .tag = tag};
        cudaGraphNode_t deps[16];
        cudaGraphEdgeData edges[16]; /* programmatic edges carry data: a query without it is refused */
        size_t nd = 16;
        if (cudaGraphNodeGetDependencies(n, deps, edges, &nd) != cudaSuccess) {
            cudaGetLastError();
            continue;
        }
        for (size_t j = 0; j < nd && j < 16 && top < 64; j++) {
            uint64_t did = 0;
            if (T.f.node_id((CUgraphNode)deps[j], &did) == CUPTI_SUCCESS && !known(did))
                stack[top] = deps[j], ids[top++] = did;
        }
    }
}

/* The nodes a capturing stream now ends with that no call has named yet were added by this call
 * (CUPTI reports a captured graph's nodes only when its capture ends, so they are found here). */
void as_trace_tag(const char *fmt, ...)
{
    if (!as_trace_tagging)
        return;
    int tag = -1;
    for (int w = 0; w < 2; w++) {
        enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
        const cudaGraphNode_t *deps = NULL;
        size_t nd = 0;
        if (!T.watch[w] || (w == 1 && T.watch[1] == T.watch[0]))
            continue;
        if (cudaStreamGetCaptureInfo(T.watch[w], &cs, NULL, NULL, &deps, NULL, &nd) != cudaSuccess) {
            cudaGetLastError();
            continue;
        }
        for (size_t j = 0; cs == cudaStreamCaptureStatusActive && j < nd; j++) {
            uint64_t id = 0;
            if (T.f.node_id((CUgraphNode)deps[j], &id) != CUPTI_SUCCESS || known(id))
                continue;
            if (tag < 0) {
                char buf[sizeof(((AsTraceEvent *)0)->launch)];
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(buf, sizeof buf, fmt, ap);
                va_end(ap);
                char *str = strdup(buf);
                if (!str || !grow((void **)&T.tags, &T.cap_tags, T.n_tags + 1, sizeof *T.tags)) {
                    free(str);
                    T.oom = 1;
                    return;
                }
                T.tags[tag = T.n_tags++] = str;
            }
            name_node(deps[j], id, tag);
        }
    }
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = aligned_alloc(8, BUF_BYTES);
    *size = *buffer ? BUF_BYTES : 0;
    *max_records = 0;
}

static void add_event(const AsTraceEvent *e)
{
    pthread_mutex_lock(&T.mu);
    if (grow((void **)&T.ev, &T.cap_ev, T.n_ev + 1, sizeof *T.ev))
        T.ev[T.n_ev++] = *e;
    else
        T.oom = 1;
    pthread_mutex_unlock(&T.mu);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
    (void)ctx, (void)stream, (void)size;
    CUpti_Activity *r = NULL;
    while (buffer && T.f.next_record(buffer, valid, &r) == CUPTI_SUCCESS) {
        AsTraceEvent e = {.layer = -1};
        if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
            e.kind = AS_TRACE_KERNEL;
            e.start_ns = k->start, e.end_ns = k->end, e.stream = k->streamId, e.node = k->graphNodeId;
            e.grid = k->gridX * k->gridY * k->gridZ;
            e.block = k->blockX * k->blockY * k->blockZ;
            int st = -1;
            char *dm = k->name ? __cxa_demangle(k->name, NULL, NULL, &st) : NULL;
            as_trace_short_name(st == 0 && dm ? dm : k->name, e.kernel, sizeof e.kernel);
            free(dm);
        } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)r;
            e.kind = AS_TRACE_MEMCPY;
            e.start_ns = m->start, e.end_ns = m->end, e.stream = m->streamId, e.node = m->graphNodeId;
            e.bytes = m->bytes;
            snprintf(e.kernel, sizeof e.kernel, "memcpy");
        } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
            const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)r;
            e.kind = AS_TRACE_MEMSET;
            e.start_ns = m->start, e.end_ns = m->end, e.stream = m->streamId, e.node = m->graphNodeId;
            e.bytes = m->bytes;
            snprintf(e.kernel, sizeof e.kernel, "memset");
        } else
            continue;
        add_event(&e);
    }
    free(buffer);
}

/* The launch that named node id, following clones back to the captured node; -1: none. */
static int tag_of(uint64_t id)
{
    for (int hop = 0; hop < 8 && id; hop++) {
        for (int i = 0; i < T.n_nodes; i++)
            if (T.nodes[i].id == id)
                return T.nodes[i].tag;
        uint64_t orig = 0;
        for (int i = 0; i < T.n_clones && !orig; i++)
            if (T.clones[i].id == id)
                orig = T.clones[i].original;
        id = orig;
    }
    return -1;
}

static const char *cupti_str(CUptiResult r)
{
    const char *s = NULL;
    return T.f.result_string && T.f.result_string(r, &s) == CUPTI_SUCCESS && s ? s : "unknown CUPTI error";
}

#define CP(err, call, what)                                                                         \
    do {                                                                                            \
        CUptiResult cp_ = (call);                                                                   \
        if (cp_ != CUPTI_SUCCESS)                                                                   \
            return as_err(err, AS_ERUNTIME, "trace: CUPTI %s: %s", what, cupti_str(cp_));           \
    } while (0)

static int load(AsError *err)
{
    if (T.lib)
        return 0;
    void *lib = dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        lib = dlopen("libcupti.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return as_err(err, AS_ERUNTIME, "trace: CUPTI is not found (libcupti.so.13: the bundle's lib/ or the CUDA "
                      "toolkit's lib64): %s", dlerror());
    struct {
        const char *name;
        void **slot;
    } sym[] = {
        {"cuptiGetVersion", (void **)&T.f.get_version},
        {"cuptiGetResultString", (void **)&T.f.result_string},
        {"cuptiSubscribe", (void **)&T.f.subscribe},
        {"cuptiUnsubscribe", (void **)&T.f.unsubscribe},
        {"cuptiEnableCallback", (void **)&T.f.enable_callback},
        {"cuptiActivityRegisterCallbacks", (void **)&T.f.register_callbacks},
        {"cuptiActivityEnable", (void **)&T.f.activity_enable},
        {"cuptiActivityDisable", (void **)&T.f.activity_disable},
        {"cuptiActivityFlushAll", (void **)&T.f.flush_all},
        {"cuptiActivityGetNextRecord", (void **)&T.f.next_record},
        {"cuptiGetGraphNodeId", (void **)&T.f.node_id},
    };
    for (size_t i = 0; i < sizeof sym / sizeof sym[0]; i++)
        if (!(*sym[i].slot = dlsym(lib, sym[i].name))) {
            memset(&T.f, 0, sizeof T.f);
            dlclose(lib);
            return as_err(err, AS_ERUNTIME, "trace: CUPTI lacks %s", sym[i].name);
        }
    uint32_t v = 0;
    if (T.f.get_version(&v) != CUPTI_SUCCESS || v / 10000 != CUPTI_API_VERSION / 10000) {
        memset(&T.f, 0, sizeof T.f);
        dlclose(lib);
        return as_err(err, AS_ERUNTIME, "trace: CUPTI's API version %u, built for %u (the activity records' layout "
                      "differs between major versions)", v, (unsigned)CUPTI_API_VERSION);
    }
    T.lib = lib; /* kept loaded: CUPTI's threads outlive a trace */
    return 0;
}

static const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                           CUPTI_ACTIVITY_KIND_MEMSET};

static void clear_state(void)
{
    for (int i = 0; i < T.n_tags; i++)
        free(T.tags[i]);
    free(T.tags);
    free(T.nodes);
    free(T.clones);
    pthread_mutex_lock(&T.mu);
    free(T.ev);
    T.ev = NULL;
    T.n_ev = T.cap_ev = 0;
    pthread_mutex_unlock(&T.mu);
    T.tags = NULL, T.nodes = NULL, T.clones = NULL;
    T.n_tags = T.cap_tags = T.n_nodes = T.cap_nodes = T.n_clones = T.cap_clones = 0;
    T.watch[0] = T.watch[1] = NULL;
    T.oom = 0;
}

int as_trace_begin(AsTrace **out, AsError *err)
{
    *out = NULL;
    if (T.handle.open)
        return as_err(err, AS_EBADINPUT, "trace: one is open already (CUPTI allows one subscriber)");
    int rc = load(err);
    if (rc)
        return rc;
    clear_state();
    CUptiResult sr = T.f.subscribe(&T.sub, on_resource, NULL);
    if (sr == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
        return as_err(err, AS_ERUNTIME, "trace: CUPTI has another subscriber (a profiler or sanitizer is attached)");
    CP(err, sr, "subscribe");
    CUptiResult r = T.f.enable_callback(1, T.sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED);
    if (r == CUPTI_SUCCESS)
        r = T.f.enable_callback(1, T.sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED);
    if (r == CUPTI_SUCCESS)
        r = T.f.register_callbacks(buffer_requested, buffer_completed);
    size_t on = 0;
    for (; r == CUPTI_SUCCESS && on < sizeof kinds / sizeof kinds[0]; on++)
        r = T.f.activity_enable(kinds[on]);
    if (r != CUPTI_SUCCESS) {
        for (size_t i = 0; i < on; i++)
            T.f.activity_disable(kinds[i]);
        T.f.unsubscribe(T.sub);
        return as_err(err, AS_ERUNTIME, "trace: CUPTI's callbacks or activity records: %s", cupti_str(r));
    }
    as_trace_tagging = true;
    T.handle.open = 1;
    *out = &T.handle;
    return 0;
}

int as_trace_collect(AsTrace *t, AsTraceEvent **ev, int *n, int *untagged, AsError *err)
{
    *ev = NULL, *n = 0, *untagged = 0;
    if (!t || !t->open)
        return as_err(err, AS_EBADINPUT, "trace: not open");
    CP(err, T.f.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "flush");
    pthread_mutex_lock(&T.mu);
    AsTraceEvent *e = T.ev;
    int m = T.n_ev;
    T.ev = NULL;
    T.n_ev = T.cap_ev = 0;
    pthread_mutex_unlock(&T.mu);
    if (T.oom) {
        free(e);
        return as_err(err, AS_ERUNTIME, "trace: out of host memory for the records");
    }
    for (int i = 0; i < m; i++) {
        const int tg = tag_of(e[i].node);
        if (tg < 0) {
            *untagged += e[i].kind == AS_TRACE_KERNEL;
            continue;
        }
        snprintf(e[i].launch, sizeof e[i].launch, "%s", T.tags[tg]);
        as_trace_stage_of(e[i].launch, &e[i].layer, e[i].stage, sizeof e[i].stage);
    }
    as_trace_sort(e, m);
    *ev = e, *n = m;
    return 0;
}

void as_trace_end(AsTrace *t)
{
    if (!t || !t->open)
        return;
    as_trace_tagging = false;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        T.f.activity_disable(kinds[i]);
    T.f.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    T.f.unsubscribe(T.sub);
    clear_state();
    t->open = 0;
}
