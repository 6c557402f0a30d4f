#include "ref/alloc.h"

#include <stdio.h>
#include <stdlib.h>

void *as_ref_xmalloc(size_t n, const char *what)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "attnscope: %s: out of memory (%zu bytes)\n", what, n);
        abort();
    }
    return p;
}
