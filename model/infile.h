/* Opening an input file: only a regular file is read. The open is O_NONBLOCK so that a FIFO or a
 * device named as an input never blocks; the descriptor is fstat-checked, then made blocking. */
#ifndef AS_INFILE_H
#define AS_INFILE_H

#include <stdio.h>

#include "model/errors.h"

/* A descriptor (O_RDONLY, O_CLOEXEC) of the regular file at path, or -1 with err set
 * (AS_EBADINPUT): "PATH: cannot open (reason)" or "PATH: not a regular file (a FIFO)". */
int as_open_input(const char *path, AsError *err);
/* The same as a stdio stream ("rb"), or NULL with err set. */
FILE *as_fopen_input(const char *path, AsError *err);
/* The same check for readers that open by name themselves (HDF5): AS_OK or AS_EBADINPUT. */
int as_check_input(const char *path, AsError *err);

#endif
