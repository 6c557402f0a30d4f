/* libFuzzer target: an .npy file or an .npz archive from elsewhere, as `check MODEL FILES...` and
 * `import` read it: as_npy_open (the npy header grammar, the zip records, every offset and size),
 * then each array's data (stored members in place with their CRC, deflated ones inflated) where it
 * is small; then the same file with a metadata JSON beside it imported against the micro geometry
 * (dumps/import.h: the names by the scheme, dtypes and shapes against the schema), every layer read.
 * Seeds: fuzz/corpus/npy/ (numpy's own files, fuzz/make_corpus.sh).
 *
 * Contract beyond "no crash": an error is code 2 or 3 with one line; every array accepted lies in
 * the file (its preamble plus numel * size is its member's size, its stored bytes inside the file);
 * data handed out is inside the mapping or a buffer of the member's size. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dumps/import.h"
#include "fuzz/fuzz_util.h"
#include "model/config.h"
#include "model/npy.h"

/* Arrays whose data the target reads (a larger one is only a claim the fuzzer made). */
#define NPY_FUZZ_MAX_DATA ((uint64_t)16 << 20)

static void npy_check_arrays(const AsNpyFile *f)
{
    for (int i = 0; i < f->n; i++) {
        const AsNpyArray *a = &f->a[i];
        uint64_t bytes = (uint64_t)a->numel * (uint64_t)as_elem_size(a->type);
        FZ_ASSERT(a->header <= a->usize && a->usize - a->header == bytes, "array %d: %llu + %llu bytes in a member of %llu",
                  i, (unsigned long long)a->header, (unsigned long long)bytes, (unsigned long long)a->usize);
        FZ_ASSERT(a->off <= f->size && a->csize <= f->size - a->off, "array %d: bytes [%llu, +%llu) outside the file", i,
                  (unsigned long long)a->off, (unsigned long long)a->csize);
        if (a->usize > NPY_FUZZ_MAX_DATA)
            continue;
        const uint8_t *data;
        void *owned;
        AsError err = {0};
        int rc = as_npy_data(f, i, &data, &owned, &err);
        if (rc) {
            FZ_CHECK_ERR(rc, err);
            continue;
        }
        const uint8_t *lo = owned ? owned : f->map, *hi = owned ? (const uint8_t *)owned + a->usize : f->map + f->size;
        FZ_ASSERT(data >= lo && bytes <= (uint64_t)(hi - data), "array %d: data outside its buffer", i);
        volatile uint8_t sink = 0;
        for (uint64_t k = 0; k < bytes; k += 4096)
            sink ^= data[k];
        (void)sink;
        free(owned);
    }
}

static void npy_import(const char *path)
{
    static const char meta[] = "{\"step0/start_pos\": 0, \"step0/tokens\": 2}";
    const char *paths[2] = {path, fz_write("meta.json", meta, sizeof meta - 1)};
    AsConfig cfg;
    AsError err = {0};
    const char *text = fz_micro_config();
    FZ_ASSERT(!as_config_parse_json(text, strlen(text), &cfg, &err) && !as_config_validate(&cfg, &err),
              "the micro config: %s", err.msg);
    AsImportOptions o = {&cfg, NULL};
    AsImport *imp = NULL;
    int rc = as_import_open(paths, 2, &o, &imp, &err);
    if (rc) {
        FZ_CHECK_ERR(rc, err);
        FZ_ASSERT(!imp, "a refused import left an import");
        return;
    }
    AsRun run;
    as_run_init(&run);
    for (int l = 0; l < cfg.n_layers; l++) {
        AsError e2 = {0};
        rc = as_import_read_run(imp, 0, l, &run, &e2);
        if (rc)
            FZ_CHECK_ERR(rc, e2);
    }
    as_run_free(&run);
    as_import_free(imp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* the name says neither: the reader tells .npy from .npz by the magic */
    const char *path = fz_write("step0.layer1.x.npy", data, size);
    AsNpyFile *f = NULL;
    AsError err = {0};
    int rc = as_npy_open(path, &f, &err);
    if (rc) {
        FZ_CHECK_ERR(rc, err);
        FZ_ASSERT(!f, "a refused file left a reader");
    } else {
        npy_check_arrays(f);
        as_npy_close(f);
    }
    npy_import(path);
    return 0;
}
