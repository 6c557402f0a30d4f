/* libFuzzer target: a safetensors file, as `attnscope info DIR` loads it. The input is the
 * model.safetensors of a directory whose config.json is the micro geometry of the seed corpus
 * (fuzz/corpus/safetensors/, written by `attnscope gen`), so that a mutated header reaches the
 * header checks, and an intact one the loader's presence / shape / dtype checks, the fp8 scale
 * wiring, the digest and the weight decoding.
 *
 * Contract checked beyond "no crash": an error is code 2 or 3 with one line; every tensor of a
 * loaded model lies inside its file's data section. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "model/safetensors.h"
#include "model/weights.h"

static void st_check_inside(const AsModel *m)
{
    for (int i = 0; i < m->n_tensors; i++) {
        const AsWTensor *t = &m->tensors[i];
        const uint8_t *p = t->data;
        int inside = 0;
        for (int k = 0; k < m->n_files && !inside; k++) {
            const AsWeightFile *f = m->files[k];
            inside = p >= f->data && t->nbytes >= 0 && (uint64_t)(p - f->data) <= f->data_len &&
                     (uint64_t)t->nbytes <= f->data_len - (uint64_t)(p - f->data);
        }
        FZ_ASSERT(inside, "tensor %s (%lld bytes) is not inside its file's data section", t->name,
                  (long long)t->nbytes);
    }
}

/* Decodes the first and last row of every bound tensor (fp8 through its block scale). */
static void st_decode_rows(const AsModel *m)
{
    float *row = NULL;
    size_t cap = 0;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const AsWTensor *const *w = (const AsWTensor *const *)&m->layer[l];
        for (size_t k = 0; k < sizeof m->layer[l] / sizeof *w; k++) {
            const AsWTensor *t = w[k];
            if (!t)
                continue;
            int64_t rows = as_wt_rows(t), cols = as_wt_cols(t);
            if ((size_t)cols > cap) {
                free(row);
                cap = (size_t)cols;
                row = malloc(cap * sizeof *row);
                FZ_ASSERT(row, "out of memory for a row of %lld", (long long)cols);
            }
            as_wt_rows_f32(t, 0, 1, row);
            as_wt_rows_f32(t, rows - 1, 1, row);
        }
    }
    free(row);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_write("config.json", fz_micro_config(), strlen(fz_micro_config()));
    fz_write("model.safetensors", data, size);
    AsModel m;
    AsError err = {0};
    int rc = as_model_load(fz_dir(), 0, &m, &err);
    if (rc) {
        FZ_CHECK_ERR(rc, err);
        return 0;
    }
    st_check_inside(&m);
    st_decode_rows(&m);
    as_model_free(&m);
    return 0;
}
