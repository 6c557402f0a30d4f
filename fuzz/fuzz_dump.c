/* libFuzzer target: an HDF5 dump from elsewhere, as dump-info, diff, check and the TUI read it
 * (as_dump_open validates it whole; then every side of every layer, every stored diff and the
 * inputs are read), and the same file as a batch script's inputs file (as_inputs_file_load).
 * The input is written to a file first: HDF5 opens paths. Seeds: fuzz/corpus/dump/ (small dumps
 * written by `attnscope run`, both file formats).
 *
 * HDF5 reads of files not in the checksummed format run in a child process (dumps/h5guard.h):
 * a crash inside the library there is a refused file, not a finding. Contract beyond "no
 * crash": an error is code 2 or 3 with one line; nothing read is larger than the schema allows. */
#include <stdint.h>
#include <stdlib.h>

#include "driver/inputs_file.h"
#include "dumps/dump.h"
#include "fuzz/fuzz_util.h"

static void dp_read_everything(AsDumpReader *r)
{
    const AsDumpInfo *in = as_dump_info(r);
    AsRun run;
    as_run_init(&run);
    for (int s = 0; s < in->n_steps; s++) {
        const AsDumpStepInfo *si = &in->steps[s];
        for (int l = 0; l < si->n_layers; l++) {
            const AsDumpLayerInfo *li = &si->layers[l];
            for (int k = 0; k < li->n_sides; k++) {
                AsError err = {0};
                int rc = as_dump_read_run(r, si->step, li->layer, li->side[k].name, &run, &err);
                if (rc)
                    FZ_CHECK_ERR(rc, err);
            }
            if (li->has_diff) {
                AsLayerDiff d;
                char got[64], want[64];
                AsError err = {0};
                int rc = as_dump_read_diff(r, si->step, li->layer, &d, got, want, &err);
                if (rc)
                    FZ_CHECK_ERR(rc, err);
            }
        }
    }
    as_run_free(&run);
    float *h0 = NULL;
    int tokens = 0, first = -1;
    AsError err = {0};
    int rc = as_dump_read_inputs(r, &h0, &tokens, &first, &err);
    if (rc)
        FZ_CHECK_ERR(rc, err);
    else
        FZ_ASSERT(tokens == in->input_tokens, "inputs: %d rows read, %d listed", tokens, in->input_tokens);
    free(h0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fz_write("dump.h5", data, size);
    AsDumpReader *r = NULL;
    AsError err = {0};
    int rc = as_dump_open(path, &r, &err);
    if (rc) {
        FZ_CHECK_ERR(rc, err);
        FZ_ASSERT(!r, "a refused dump left a reader");
    } else {
        dp_read_everything(r);
        as_dump_close(r);
    }
    /* the same bytes as an inputs file (the micro geometry's dim; the name of a dataset or none) */
    float *h = NULL;
    int tokens = 0;
    AsError e2 = {0};
    rc = as_inputs_file_load(path, NULL, 32, 1 << 20, &h, &tokens, &e2);
    if (rc)
        FZ_CHECK_ERR(rc, e2);
    else
        FZ_ASSERT(h && tokens >= 1, "inputs: %d tokens", tokens);
    free(h);
    return 0;
}
