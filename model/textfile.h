/* Reading a small text file (config.json, a script, an index) whole: the buffer grows with what
 * is read, never past the limit, so a file's size decides the memory it takes, up to max. */
#ifndef AS_TEXTFILE_H
#define AS_TEXTFILE_H

#include <stddef.h>

#include "model/errors.h"

/* *out: the bytes read and a NUL (caller frees), *len their count. Errors (AS_EBADINPUT unless
 * out of memory): "PATH: cannot open (reason)", "PATH: read error (reason)", "PATH: larger than
 * N MiB: not a WHAT". */
int as_read_text_file(const char *path, size_t max, const char *what, char **out, size_t *len, AsError *err);

#endif
