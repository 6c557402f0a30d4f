/* What `check` replays: an HDF5 dump, or tensors another engine dumped as safetensors, .npy or .npz
 * files (docs/IMPORT.md), imported in memory against the model's geometry. The kind is found from
 * each input (an HDF5 signature, a directory, a file's extension or magic), never from the option. */
#ifndef AS_DUMP_SOURCE_H
#define AS_DUMP_SOURCE_H

#include "driver/check.h"
#include "dumps/dump.h"

/* o->inputs (o->n_inputs of them; none: o->dump alone) opened as one dump: a lone HDF5 file through
 * as_dump_open, anything else imported (dumps/import.h), which needs o->model for its geometry. */
int as_check_open_input(const AsCheckOptions *o, AsDumpReader **out, AsError *err);

/* paths imported against the geometry of model (a directory, file or preset, resolved as every
 * command does; NULL is refused: an import carries no config); side: its side's name (NULL: the
 * metadata's, else "import"). */
struct AsImport;
int as_load_import(const char *const *paths, int n, const char *model, const char *side, bool quiet,
                   struct AsImport **out, AsError *err);

#endif
