/* libFuzzer target: a .gguf file, as `attnscope info FILE.gguf` loads it (header, metadata,
 * tensor infos, the geometry from the metadata, the loader's checks), and the reader's accessors
 * over every metadata pair. Seeds: fuzz/corpus/gguf/ (`attnscope convert` of the micro model).
 *
 * Contract beyond "no crash": an error is code 2 or 3 with one line; every tensor info lies
 * inside the data section; every tensor of a loaded model inside its mapping. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz/fuzz_util.h"
#include "model/gguf.h"
#include "model/safetensors.h"

static void gg_walk_reader(const char *path)
{
    AsGguf *g = NULL;
    AsError err = {0};
    int rc = as_gguf_open(path, &g, &err);
    if (rc) {
        FZ_CHECK_ERR(rc, err);
        FZ_ASSERT(!g, "a refused file left a reader");
        return;
    }
    const AsWeightFile *f = g->file;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        const AsGgufTensorInfo *t = &g->tensors[i];
        FZ_ASSERT(t->offset <= f->data_len && t->nbytes <= f->data_len - t->offset,
                  "tensor %s: %llu bytes at %llu past the data section (%llu)", t->name,
                  (unsigned long long)t->nbytes, (unsigned long long)t->offset, (unsigned long long)f->data_len);
    }
    for (int64_t i = 0; i < g->n_kv; i++) {
        const AsGgufKV *kv = &g->kv[i];
        double v;
        as_gguf_kv_number(kv, &v);
        uint64_t n = kv->n < 64 ? kv->n : 64;
        for (uint64_t k = 0; k <= n; k++) /* one past the end: must say false */
            as_gguf_kv_array_number(kv, k, &v);
        FZ_ASSERT(kv->type != AS_GGUF_ARRAY || !as_gguf_kv_array_number(kv, kv->n, &v),
                  "element %llu of a %llu-element array read", (unsigned long long)kv->n,
                  (unsigned long long)kv->n);
    }
    AsWTensor *ts = NULL;
    int n = 0, cap = 0;
    if (!(rc = as_gguf_tensors(g, &ts, &n, &cap, &err))) {
        for (int i = 0; i < n; i++) {
            const uint8_t *p = ts[i].data;
            FZ_ASSERT(p >= f->data && (uint64_t)(p - f->data) + (uint64_t)ts[i].nbytes <= f->data_len,
                      "tensor %s outside the data section", ts[i].name);
            char back[192];
            as_gguf_name_to_llama(ts[i].name, back, sizeof back);
        }
        AsConfig cfg;
        rc = as_gguf_config(g, NULL, &cfg, &err);
        if (!rc)
            rc = as_config_validate(&cfg, &err);
    }
    if (rc)
        FZ_CHECK_ERR(rc, err);
    free(ts);
    as_gguf_close(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fz_write("model.gguf", data, size);
    gg_walk_reader(path);
    AsModel m;
    AsError err = {0};
    int rc = as_model_load(path, 0, &m, &err);
    if (rc) {
        FZ_CHECK_ERR(rc, err);
        return 0;
    }
    for (int i = 0; i < m.n_tensors; i++) {
        const AsWTensor *t = &m.tensors[i];
        const AsWeightFile *f = m.files[0];
        const uint8_t *p = t->data;
        FZ_ASSERT(p >= f->data && (uint64_t)(p - f->data) + (uint64_t)t->nbytes <= f->data_len,
                  "tensor %s outside the data section", t->name);
    }
    /* decode the first row of each bound projection (Q8_0 / Q2_K blocks through ggml's code) */
    for (int l = 0; l < m.cfg.n_layers; l++) {
        const AsWTensor *const *w = (const AsWTensor *const *)&m.layer[l];
        for (size_t k = 0; k < sizeof m.layer[l] / sizeof *w; k++) {
            if (!w[k])
                continue;
            float *row = malloc((size_t)as_wt_cols(w[k]) * sizeof *row);
            FZ_ASSERT(row, "out of memory");
            as_wt_rows_f32(w[k], as_wt_rows(w[k]) - 1, 1, row);
            free(row);
        }
    }
    as_model_free(&m);
    return 0;
}
