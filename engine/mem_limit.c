#include "engine/mem_limit.h"

#include <stdio.h>
#include <stdlib.h>

static int state;          /* 0 unread, 1 no limit, 2 limited */
static size_t limit, base_free;

static void init(void)
{
    if (state)
        return;
    state = 1;
    const char *s = getenv("ATTNSCOPE_GPU_MEM_LIMIT_MB");
    char *end = NULL;
    long long mb = s && *s ? strtoll(s, &end, 10) : -1;
    size_t fr = 0, tot = 0;
    if (mb < 0 || (end && *end) || mb > (1LL << 30) || cudaMemGetInfo(&fr, &tot) != cudaSuccess)
        return;
    limit = (size_t)mb << 20;
    base_free = fr;
    state = 2;
}

/* Bytes taken since the first call (0 when the device gave some back). */
static size_t used(size_t fr) { return base_free > fr ? base_free - fr : 0; }

cudaError_t as_dev_mem_info(size_t *free_b, size_t *total_b)
{
    init();
    cudaError_t rc = cudaMemGetInfo(free_b, total_b);
    if (rc == cudaSuccess && state == 2) {
        size_t u = used(*free_b);
        *free_b = u < limit ? limit - u : 0;
        *total_b = limit;
    }
    return rc;
}

cudaError_t as_dev_malloc(void **p, size_t bytes)
{
    init();
    if (state == 2) {
        size_t fr = 0, tot = 0;
        if (cudaMemGetInfo(&fr, &tot) == cudaSuccess && (used(fr) > limit || bytes > limit - used(fr))) {
            *p = NULL;
            return cudaErrorMemoryAllocation;
        }
    }
    return cudaMalloc(p, bytes);
}

static void human(char *buf, size_t n, double bytes)
{
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024.0 && u < 4)
        bytes /= 1024.0, u++;
    snprintf(buf, n, u ? "%.1f %s" : "%.0f %s", bytes, unit[u]);
}

int as_dev_oom(AsError *err, const char *what, size_t asked, int device, cudaError_t rc)
{
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    as_dev_mem_info(&free_b, &total_b);
    char a[32], f[32], t[32];
    human(a, sizeof a, (double)asked);
    human(f, sizeof f, (double)free_b);
    human(t, sizeof t, (double)total_b);
    return as_err(err, AS_ERUNTIME, "out of GPU memory allocating %s: asked %s, device %d has %s free of %s (%s)", what,
                  a, device, f, t, cudaGetErrorString(rc));
}
