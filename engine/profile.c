#include "engine/profile.h"

#include <stdlib.h>
#include <string.h>

#include "engine/internal.h"

int as_prof_create(AsProfile **out)
{
    AsProfile *p = calloc(1, sizeof *p);
    if (!p)
        return -1;
    for (int i = 0; i < AS_PROF_MAX_EVENTS; i++)
        if (cudaEventCreate(&p->ev[i][0]) != cudaSuccess || cudaEventCreate(&p->ev[i][1]) != cudaSuccess) {
            as_prof_destroy(p);
            return -1;
        }
    *out = p;
    return 0;
}

void as_prof_destroy(AsProfile *p)
{
    if (!p)
        return;
    for (int i = 0; i < AS_PROF_MAX_EVENTS; i++) {
        if (p->ev[i][0])
            cudaEventDestroy(p->ev[i][0]);
        if (p->ev[i][1])
            cudaEventDestroy(p->ev[i][1]);
    }
    free(p);
}

void as_prof_reset(AsProfile *p)
{
    p->n = 0;
    p->dropped = 0;
    memset(p->layer, 0, sizeof p->layer);
    memset(p->host_ms, 0, sizeof p->host_ms);
}

int as_prof_begin(AsEngine *e, AsOp op, int layer, double flops, double bytes)
{
    AsProfile *p = e->prof;
    if (!p)
        return -1;
    if (p->n == AS_PROF_MAX_EVENTS) {
        /* full: collecting here would read slots still open; callers collect between steps */
        p->dropped++;
        return -1;
    }
    int i = p->n++;
    p->rec[i].op = op;
    p->rec[i].layer = layer;
    p->rec[i].flops = flops;
    p->rec[i].bytes = bytes;
    cudaEventRecord(p->ev[i][0], e->st);
    return i;
}

void as_prof_end(AsEngine *e, int slot)
{
    if (slot >= 0 && e->prof)
        cudaEventRecord(e->prof->ev[slot][1], e->st);
}

int as_prof_collect(AsEngine *e)
{
    AsProfile *p = e->prof;
    if (!p)
        return 0;
    if (cudaStreamSynchronize(e->st) != cudaSuccess)
        return -1;
    unsigned long long valid[AS_MAX_LAYERS] = {0};
    if (e->wk.valid && cudaMemcpy(valid, e->wk.valid, sizeof valid, cudaMemcpyDeviceToHost) != cudaSuccess)
        return -1;
    for (int i = 0; i < p->n; i++) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, p->ev[i][0], p->ev[i][1]) != cudaSuccess) {
            cudaGetLastError(); /* an op that failed before its end event: not counted */
            continue;
        }
        AsLayerProfile *lp = &p->layer[p->rec[i].layer];
        lp->ms[p->rec[i].op] += ms;
        double flops = p->rec[i].flops;
        if (flops < 0) /* per selected row, counted on the device this step */
            flops = -flops * (double)valid[p->rec[i].layer];
        lp->flops[p->rec[i].op] += flops;
        lp->bytes[p->rec[i].op] += p->rec[i].bytes;
    }
    p->n = 0;
    return 0;
}
