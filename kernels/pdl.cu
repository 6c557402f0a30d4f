// Whether kernel launches use programmatic dependent launch (kernels/common.cuh, as_launch): on a
// device of compute capability 9.0 or later, unless ATTNSCOPE_PDL=0 (a switch for diagnosis: a
// result that changes with it points at a kernel touching memory before its as_d_pdl_wait()).
#include "kernels/common.cuh"

extern "C" int as_pdl_enabled(void)
{
    // decided once (thread-safe), on the first launch (a prefill, before any graph capture)
    static const int on = !as_env_is("ATTNSCOPE_PDL", "0") && as_compute_capability() >= 90;
    return on;
}
