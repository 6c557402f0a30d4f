/* The engine with a planted convention, diagnosed by name (docs/DIAGNOSE.md): the six faults the engine
 * plants that are conventions of the catalogue, in both precisions; at the first mismatching layer run the
 * diagnosis names that convention and no other. */
#include <stdlib.h>

#include "driver/driver.h"
#include "model/precision.h"
#include "tests/lib/harness.h"

GPU_TEST(gpu_diagnose_engine_planted_conventions_named)
{
    static const AsPrecision precisions[] = {AS_PREC_FP8, AS_PREC_BF16};
    for (int pi = 0; pi < 2; pi++)
        for (int f = 1; f < AS_FAULT_COUNT; f++) {
            const AsConvention conv = as_conv_of_fault((AsFault)f);
            if (conv == AS_CONV_NONE)
                continue;
            setenv("ATTNSCOPE_CACHE", getenv("ATTNSCOPE_GPU_CACHE") ? getenv("ATTNSCOPE_GPU_CACHE") : as_test_tmpdir(),
                   1);
            AsDriverOptions o;
            as_driver_options_default(&o);
            o.quiet = true;
            o.inject = as_fault_desc[f].name;
            o.precision = precisions[pi];
            o.diagnose = true;
            const char *prec = as_precision_name(precisions[pi]);
            AsDriver *d;
            AsError err = {0};
            REQUIRE(as_driver_open(&o, &d, &err) == 0, "%s %s: %s", prec, o.inject, err.msg);
            REQUIRE(d->got_kind == AS_GOT_ENGINE, "engine in use");
            AsDivergence dv;
            CHECK(as_driver_first_divergence(d, 16, 6, &dv, &err) == 0, "%s %s: %s", prec, o.inject, err.msg);
            char text[800] = "no diagnosis";
            const AsDiagnosis *dx = dv.found && d->diag_valid[dv.layer] ? &d->diag[dv.layer] : NULL;
            if (dx)
                as_diagnosis_text(dx, text, sizeof text);
            CHECK(dx && dx->n_match == 1 && dx->match[0].conv == conv,
                  "engine %s %s: step %d, layer %d, %s: %s", prec, o.inject, dv.step, dv.layer,
                  dv.found ? as_tensor_desc[dv.tensor].name : "nothing", text);
            as_test_note("engine %s %-14s step %d: %s", prec, o.inject, dv.step, text);
            as_driver_close(d);
        }
}
