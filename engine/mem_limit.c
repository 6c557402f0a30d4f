#include "engine/mem_limit.h"

#include <stdio.h>

cudaError_t as_mem_limit_init(AsMemLimit *m, int limit_mb)
{
    m->limit = m->base_free = 0;
    if (limit_mb <= 0)
        return cudaSuccess;
    size_t fr = 0, tot = 0;
    cudaError_t rc = cudaMemGetInfo(&fr, &tot);
    if (rc != cudaSuccess)
        return rc;
    m->limit = (size_t)limit_mb << 20;
    m->base_free = fr;
    return cudaSuccess;
}

/* Bytes taken since the limit was set (0 when the device gave some back). */
static size_t used(const AsMemLimit *m, size_t fr) { return m->base_free > fr ? m->base_free - fr : 0; }

cudaError_t as_dev_mem_info(const AsMemLimit *m, size_t *free_b, size_t *total_b)
{
    cudaError_t rc = cudaMemGetInfo(free_b, total_b);
    if (rc == cudaSuccess && m->limit) {
        size_t u = used(m, *free_b);
        *free_b = u < m->limit ? m->limit - u : 0;
        *total_b = m->limit;
    }
    return rc;
}

cudaError_t as_dev_malloc(const AsMemLimit *m, void **p, size_t bytes)
{
    if (m->limit) {
        size_t fr = 0, tot = 0;
        if (cudaMemGetInfo(&fr, &tot) == cudaSuccess && (used(m, fr) > m->limit || bytes > m->limit - used(m, fr))) {
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

int as_dev_oom(const AsMemLimit *m, AsError *err, const char *what, size_t asked, int device, cudaError_t rc)
{
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    as_dev_mem_info(m, &free_b, &total_b);
    char a[32], f[32], t[32];
    human(a, sizeof a, (double)asked);
    human(f, sizeof f, (double)free_b);
    human(t, sizeof t, (double)total_b);
    return as_err(err, AS_ERUNTIME, "out of GPU memory allocating %s: asked %s, device %d has %s free of %s (%s)", what,
                  a, device, f, t, cudaGetErrorString(rc));
}
