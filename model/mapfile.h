/* A weight container mapped whole, read-only (safetensors, GGUF): one place for the open, the
 * checks and the one-line errors naming the path. */
#ifndef AS_MAPFILE_H
#define AS_MAPFILE_H

#include <stddef.h>
#include <stdint.h>

#include "model/errors.h"

/* Maps path; a file shorter than min_size is refused as "too short for <header>". */
int as_map_file(const char *path, uint64_t min_size, const char *header, void **map, uint64_t *size, AsError *err);

/* A tensor's bytes [begin, end) in a container's data section. */
typedef struct {
    uint64_t begin, end;
    const char *name;
} AsSpan;

/* Refuses two non-empty spans that share a byte: "PATH: tensors 'a' and 'b' overlap in the data
 * section". Sorts sp by begin, then end. */
int as_spans_disjoint(const char *path, AsSpan *sp, size_t n, AsError *err);

#endif
