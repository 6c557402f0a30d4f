/* The engine entry points of a build without CUDA (the sanitizer build): no device, ever. */
#include "engine/engine.h"

#include <stdio.h>

int as_engine_device_count(void) { return 0; }

void as_engine_describe_devices(char *buf, size_t n)
{
    snprintf(buf, n, "no CUDA device: this attnscope was built without CUDA\n");
}

const char *as_engine_build_info(void) { return "built without CUDA"; }

int as_engine_create(const AsModel *m, const AsEngineOptions *opt, AsEngine **out, AsError *err)
{
    (void)m;
    (void)opt;
    *out = NULL;
    return as_err(err, AS_ERUNTIME, "no CUDA device: this attnscope was built without CUDA");
}

void as_engine_destroy(AsEngine *e) { (void)e; }
void as_engine_reset(AsEngine *e) { (void)e; }

static int no_engine(AsError *err) { return as_err(err, AS_ERUNTIME, "no engine in a build without CUDA"); }

int as_engine_begin_step(AsEngine *e, const float *h0, int start_pos, int s, AsError *err)
{
    (void)e, (void)h0, (void)start_pos, (void)s;
    return no_engine(err);
}
int as_engine_next_layer(AsEngine *e, int *layer, AsError *err)
{
    (void)e;
    *layer = -1;
    return no_engine(err);
}
int as_engine_finish_step(AsEngine *e, AsError *err) { (void)e; return no_engine(err); }
int as_engine_layer_run(AsEngine *e, AsRun *out, AsError *err) { (void)e, (void)out; return no_engine(err); }
int as_engine_residual(AsEngine *e, float *h, AsError *err) { (void)e, (void)h; return no_engine(err); }

int as_engine_bench(const AsModel *m, const AsEngineBenchOptions *o, FILE *md, AsError *err)
{
    (void)m, (void)o, (void)md;
    return no_engine(err);
}

int as_decode_graph_create(AsEngine *e, const AsDecodeGraphOptions *opt, AsDecodeGraph **out, AsError *err)
{
    (void)e, (void)opt;
    *out = NULL;
    return no_engine(err);
}
void as_decode_graph_destroy(AsDecodeGraph *g) { (void)g; }
int as_engine_decode_graph(AsDecodeGraph *g, const float *h0, int start_pos, AsError *err)
{
    (void)g, (void)h0, (void)start_pos;
    return no_engine(err);
}
void as_decode_graph_info(const AsDecodeGraph *g, AsDecodeGraphInfo *out)
{
    (void)g;
    *out = (AsDecodeGraphInfo){0};
}
int as_decode_graph_layer_outs(AsDecodeGraph *g, float *outs, AsError *err)
{
    (void)g, (void)outs;
    return no_engine(err);
}

int as_decode_graph_layer_ms(const AsDecodeGraph *g, double *ms, AsError *err)
{
    (void)g, (void)ms;
    return no_engine(err);
}
int as_decode_graph_layer_meta(const AsDecodeGraph *g, int l, AsRun *out, AsError *err)
{
    (void)g, (void)l, (void)out;
    return no_engine(err);
}
