#include "ref/cancel.h"

#include <stddef.h>

static const atomic_int *_Atomic watched;
static atomic_bool cut;

void as_ref_cancel_watch(const atomic_int *flag)
{
    atomic_store(&cut, false);
    atomic_store(&watched, flag);
}

bool as_ref_cancelled(void)
{
    const atomic_int *f = atomic_load_explicit(&watched, memory_order_relaxed);
    if (!f || !atomic_load_explicit(f, memory_order_relaxed))
        return false;
    atomic_store_explicit(&cut, true, memory_order_relaxed);
    return true;
}

bool as_ref_cancel_cut(void) { return atomic_load(&cut); }
