/* libFuzzer target: a batch script (as_script_parse, docs/BATCH.md). Seeds: the examples and
 * near-valid variants (fuzz/corpus/script/). Nothing runs: a script is checked whole up front.
 *
 * Contract beyond "no crash": an error is code 2 with one line; an accepted script has 1..256
 * steps, none before a prefill is a decode, counts within AS_LIMIT_MAX_SEQ, finite tolerances,
 * paths that are NUL-terminated inside their buffers. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "driver/script.h"
#include "fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    AsScript *s = malloc(sizeof *s);
    FZ_ASSERT(s, "out of memory");
    AsError err = {0};
    int rc = as_script_parse((const char *)data, size, "/fuzz/dir/script.json", s, &err);
    if (rc) {
        FZ_CHECK_ERR(rc, err);
        free(s);
        return 0;
    }
    FZ_ASSERT(s->n_steps >= 1 && s->n_steps <= AS_SCRIPT_MAX_STEPS, "%d steps", s->n_steps);
    FZ_ASSERT(s->steps[0].kind != AS_SS_DECODE, "a decode first");
    for (int i = 0; i < s->n_steps; i++)
        FZ_ASSERT(s->steps[i].n >= 0 && s->steps[i].n <= AS_LIMIT_MAX_SEQ && s->steps[i].prefill >= 0 &&
                      s->steps[i].prefill <= AS_LIMIT_MAX_SEQ,
                  "step %d: n %d prefill %d", i, s->steps[i].n, s->steps[i].prefill);
    for (int i = 0; i < AS_T_COUNT; i++)
        FZ_ASSERT(isfinite(s->tol[i].rel) && isfinite(s->tol[i].abs) && s->tol[i].rel >= 0 && s->tol[i].abs >= 0,
                  "tolerance %d", i);
    FZ_ASSERT(memchr(s->dump_path, 0, sizeof s->dump_path) && memchr(s->model_buf, 0, sizeof s->model_buf) &&
                  memchr(s->report_json, 0, sizeof s->report_json) && memchr(s->name, 0, sizeof s->name),
              "an unterminated string");
    FZ_ASSERT(s->dump_layers.n <= AS_SCRIPT_MAX_LIST && s->dump_steps.n <= AS_SCRIPT_MAX_LIST, "list sizes");
    FZ_ASSERT(s->drv.model == s->model_buf, "the model path is the script's");
    free(s);
    return 0;
}
