/* Which CUDA devices this process sees. */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdio.h>

#include "engine/driver_version.h"
#include "engine/engine.h"

int as_engine_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no device" error */
        return 0;
    }
    return n;
}

void as_engine_describe_devices(char *buf, size_t n)
{
    int count = 0;
    cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess || count == 0) {
        snprintf(buf, n, "no CUDA device (%s)\n",
                 rc == cudaSuccess ? "the driver reports none" : cudaGetErrorString(rc));
        cudaGetLastError();
        return;
    }
    int drv = 0, rt = 0;
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    char nv[32], nvs[48] = "";
    if (as_nvidia_driver_version(nv, sizeof nv))
        snprintf(nvs, sizeof nvs, " (NVIDIA %s)", nv);
    size_t used = (size_t)snprintf(buf, n, "CUDA driver %d.%d%s, runtime %d.%d, %d device%s\n", drv / 1000,
                                   (drv % 1000) / 10, nvs, rt / 1000, (rt % 1000) / 10, count, count == 1 ? "" : "s");
    for (int d = 0; d < count && used < n; d++) {
        struct cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, d) != cudaSuccess)
            continue;
        used += (size_t)snprintf(buf + used, n - used,
                                 "%d: %s, sm_%d%d, %d SMs, %.1f GiB, L2 %.0f MiB, %d-bit bus\n", d, p.name,
                                 p.major, p.minor, p.multiProcessorCount,
                                 (double)p.totalGlobalMem / (1024.0 * 1024 * 1024),
                                 (double)p.l2CacheSize / (1024.0 * 1024), p.memoryBusWidth);
    }
}

const char *as_engine_build_info(void)
{
    static char info[128];
    int rt = 0;
    cudaRuntimeGetVersion(&rt);
    snprintf(info, sizeof info, "CUDA runtime %d.%d (static), cuBLAS %d.%d", rt / 1000, (rt % 1000) / 10,
             CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR);
    return info;
}
