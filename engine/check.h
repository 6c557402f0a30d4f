/* Every CUDA and cuBLAS call of the engine goes through these: a failure becomes an AsError
 * naming the operation, the sizes and the error, and the calling function returns it. */
#ifndef AS_ENGINE_CHECK_H
#define AS_ENGINE_CHECK_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdio.h>

#include "engine/trace.h"
#include "model/errors.h"

const char *as_cublas_status_name(cublasStatus_t s);

/* CU(err, call, "what %d", args...): on failure sets err and returns AS_ERUNTIME. While a trace is
 * open (engine/trace.h), the description also names the graph nodes the call captured. */
#define CU(err, call, ...)                                                                          \
    do {                                                                                            \
        cudaError_t cu_rc_ = (call);                                                                \
        if (cu_rc_ != cudaSuccess) {                                                                \
            char cu_what_[256];                                                                     \
            snprintf(cu_what_, sizeof cu_what_, __VA_ARGS__);                                       \
            return as_err(err, AS_ERUNTIME, "%s: %s (%s:%d)", cu_what_, cudaGetErrorString(cu_rc_), \
                          __FILE__, __LINE__);                                                      \
        }                                                                                           \
        if (as_trace_tagging)                                                                       \
            as_trace_tag(__VA_ARGS__);                                                              \
    } while (0)

/* A kernel launcher's return value (a cudaError_t as int). */
#define KL(err, call, ...) CU(err, (cudaError_t)(call), __VA_ARGS__)

#define CB(err, call, ...)                                                                          \
    do {                                                                                            \
        cublasStatus_t cb_rc_ = (call);                                                             \
        if (cb_rc_ != CUBLAS_STATUS_SUCCESS) {                                                      \
            char cb_what_[256];                                                                     \
            snprintf(cb_what_, sizeof cb_what_, __VA_ARGS__);                                       \
            return as_err(err, AS_ERUNTIME, "%s: cuBLAS %s (%s:%d)", cb_what_,                      \
                          as_cublas_status_name(cb_rc_), __FILE__, __LINE__);                       \
        }                                                                                           \
    } while (0)

#define TRY(expr)                                                                                   \
    do {                                                                                            \
        int try_rc_ = (expr);                                                                       \
        if (try_rc_)                                                                                \
            return try_rc_;                                                                         \
    } while (0)

#endif
