#include "model/mapfile.h"

#include "model/infile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int as_map_file(const char *path, uint64_t min_size, const char *header, void **map, uint64_t *size, AsError *err)
{
    *map = NULL;
    *size = 0;
    int fd = as_open_input(path, err); /* regular files only, a FIFO never blocks */
    if (fd < 0)
        return AS_EBADINPUT;
    struct stat st;
    if (fstat(fd, &st)) {
        close(fd);
        return as_err(err, AS_EBADINPUT, "%s: not a regular file", path);
    }
    uint64_t n = (uint64_t)st.st_size;
    if (n < min_size) {
        close(fd);
        return as_err(err, AS_EBADINPUT, "%s: %llu bytes, too short for %s", path, (unsigned long long)n, header);
    }
    void *m = mmap(NULL, (size_t)n, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return as_err(err, AS_ERUNTIME, "%s: mmap failed (%s)", path, strerror(errno));
    *map = m;
    *size = n;
    return 0;
}

static int span_cmp(const void *a, const void *b)
{
    const AsSpan *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

int as_spans_disjoint(const char *path, AsSpan *sp, size_t n, AsError *err)
{
    qsort(sp, n, sizeof *sp, span_cmp);
    uint64_t end = 0;
    const char *last = NULL;
    for (size_t i = 0; i < n; i++) {
        if (sp[i].begin == sp[i].end)
            continue; /* empty tensors overlap nothing */
        if (last && sp[i].begin < end)
            return as_err(err, AS_EBADINPUT, "%s: tensors '%s' and '%s' overlap in the data section", path, last,
                          sp[i].name);
        if (sp[i].end > end) {
            end = sp[i].end;
            last = sp[i].name;
        }
    }
    return AS_OK;
}
