// Whether kernel launches use programmatic dependent launch (kernels/common.cuh, as_launch): on a
// device of compute capability 9.0 or later, unless the calling thread turned it off (the engine's
// --no-pdl knob, for diagnosis: a result that changes with it points at a kernel touching memory before
// its as_d_pdl_wait()). Per thread, so that engines with either setting can run in one process.
#include "kernels/common.cuh"
#include "kernels/kernels.h"

static thread_local int pdl_off = 0;

extern "C" int as_k_pdl_use(int on)
{
    const int was_on = !pdl_off;
    pdl_off = !on;
    return was_on;
}

extern "C" int as_pdl_enabled(void) { return !pdl_off && as_compute_capability() >= 90; }
