/* Work buffers of the reference's kernels. They run inside OpenMP regions, where an error cannot be
 * returned: out of memory there ends the process with one line naming the step. */
#ifndef AS_REF_ALLOC_H
#define AS_REF_ALLOC_H

#include <stddef.h>

/* malloc(n ? n : 1), or "attnscope: WHAT: out of memory (N bytes)" and abort. */
void *as_ref_xmalloc(size_t n, const char *what);

#endif
