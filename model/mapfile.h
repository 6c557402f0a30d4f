/* A weight container mapped whole, read-only (safetensors, GGUF): one place for the open, the
 * checks and the one-line errors naming the path. */
#ifndef AS_MAPFILE_H
#define AS_MAPFILE_H

#include <stdint.h>

#include "model/errors.h"

/* Maps path; a file shorter than min_size is refused as "too short for <header>". */
int as_map_file(const char *path, uint64_t min_size, const char *header, void **map, uint64_t *size, AsError *err);

#endif
