// Whether kernel launches use programmatic dependent launch (kernels/common.cuh, as_launch): on a
// device of compute capability 9.0 or later, unless ATTNSCOPE_PDL=0 (a switch for diagnosis: a
// result that changes with it points at a kernel touching memory before its as_d_pdl_wait()).
#include <stdlib.h>
#include <string.h>

#include "kernels/common.cuh"

extern "C" int as_pdl_enabled(void)
{
    static int on = -1; // decided once, on the first launch (a prefill, before any graph capture)
    if (on < 0) {
        const char *e = getenv("ATTNSCOPE_PDL");
        on = !(e && !strcmp(e, "0")) && as_compute_capability() >= 90;
    }
    return on;
}
