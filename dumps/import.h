/* Tensors another engine dumped from its forward hooks, as safetensors, .npy or .npz files named by
 * the scheme of docs/IMPORT.md (step{S}/layer{L}/{tensor}, with each step's start_pos and tokens in
 * the metadata), read as a dump (docs/DUMP_FORMAT.md): checked against the model's geometry as the
 * dump reader checks a file, with the same one-line errors (exit 2), then read in memory by `check`
 * or written to HDF5 by `import`.
 *
 * Open reads headers and metadata only: every name, step, layer, dtype and shape is checked before
 * any tensor's data is read (a tensor's data is converted when its layer is read). */
#ifndef AS_IMPORT_H
#define AS_IMPORT_H

#include "dumps/dump.h"

/* What a path holds, by what it is (a directory), its name, else its first bytes. Anything else (an
 * HDF5 file, a path that does not exist) is AS_INPUT_HDF5: the dump reader says what is wrong. */
typedef enum {
    AS_INPUT_HDF5, AS_INPUT_DIR, AS_INPUT_SAFETENSORS, AS_INPUT_NPY, AS_INPUT_NPZ, AS_INPUT_JSON
} AsInputKind;
AsInputKind as_input_kind(const char *path);

/* Bounds on what an import may hold. */
#define AS_IMPORT_MAX_FILES 65536
#define AS_IMPORT_MAX_DEPTH 8
#define AS_IMPORT_MAX_TENSORS (1 << 22)
#define AS_IMPORT_MAX_JSON ((size_t)1 << 20)

typedef struct AsImport AsImport;

typedef struct {
    const AsConfig *cfg;       /* the model's geometry (validated): every shape is checked against it */
    const char *side;          /* the side's name; NULL: the metadata's "side", else "import" */
} AsImportOptions;

/* Reads paths (files and directories, in order) as one dump. */
int as_import_open(const char *const *paths, int n, const AsImportOptions *o, AsImport **out, AsError *err);
void as_import_free(AsImport *imp);
/* A dump's index of it (as as_dump_open gives: steps, layers, the one side and its tensors; the
 * inputs' rows; precision when the metadata names one; no digest); info's strings are new. */
int as_import_info(const AsImport *imp, AsDumpInfo *info, AsError *err);
/* Layer `layer` of step `step` into out (as as_dump_read_run: SPEC 3's layer attributes, the tensors
 * it holds converted to their storage type). */
int as_import_read_run(AsImport *imp, int step, int layer, AsRun *out, AsError *err);
/* The token inputs (a whole h0 or the steps' own, one after the other); AS_EBADINPUT when none. */
int as_import_read_inputs(AsImport *imp, float **h0, int *tokens, int *first_pos, AsError *err);
/* What it holds: steps, layer runs and tensors (h0 pieces not counted). */
void as_import_counts(const AsImport *imp, int *steps, int *layer_runs, int *tensors);
const char *as_import_side(const AsImport *imp);
/* Writes it as a dump (dumps/dump.h: a temporary beside path, renamed when complete). */
int as_import_write(AsImport *imp, const char *path, AsError *err);

#endif
