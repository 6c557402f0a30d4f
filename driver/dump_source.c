#include "driver/dump_source.h"

#include <stdlib.h>

#include "dumps/import.h"
#include "model/weights.h"

int as_load_import(const char *const *paths, int n, const char *model, const char *side, bool quiet,
                   AsImport **out, AsError *err)
{
    *out = NULL;
    if (!model)
        return as_err(err, AS_EBADINPUT, "%s: tensors to import carry no geometry: name their model first (MODEL "
                      "%s ..., or --model MODEL)", paths[0], paths[0]);
    char dir[2048];
    AsModel m;
    int rc = as_resolve_model(model, 1, dir, sizeof dir, quiet, err);
    if (rc || (rc = as_model_load(dir, 0, &m, err)))
        return rc;
    AsImportOptions io = {&m.cfg, side};
    rc = as_import_open(paths, n, &io, out, err);
    as_model_free(&m);
    return rc;
}

int as_check_open_input(const AsCheckOptions *o, AsDumpReader **out, AsError *err)
{
    const char *const *paths = o->n_inputs ? o->inputs : &o->dump;
    int n = o->n_inputs ? o->n_inputs : 1;
    if (n == 1 && as_input_kind(paths[0]) == AS_INPUT_HDF5)
        return as_dump_open(paths[0], out, err);
    AsImport *imp;
    int rc = as_load_import(paths, n, o->model, NULL, o->quiet, &imp, err);
    return rc ? rc : as_dump_open_import(imp, out, err);
}
