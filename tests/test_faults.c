/* Checking the checker: each named fault, run in a reference twin against the faithful
 * reference, is caught at the layer and tensor where it first acts (tests/lib/fault_cases.h). */
#include <stdlib.h>
#include <string.h>

#include "driver/driver.h"
#include "tests/lib/fault_cases.h"
#include "tests/lib/harness.h"

static void use_test_cache(void)
{
    setenv("ATTNSCOPE_CACHE", as_test_tmpdir(), 1);
}

TEST(faults_each_caught_at_its_layer_and_tensor)
{
    use_test_cache();
    CHECK(AS_N_FAULT_CASES == AS_FAULT_COUNT - 1, "every fault has a case");
    for (int i = 0; i < AS_N_FAULT_CASES; i++) {
        const AsFaultCase *fc = &as_fault_cases[i];
        AsDriverOptions o;
        as_driver_options_default(&o);
        o.model = "tiny";
        o.no_engine = true;
        o.quiet = true;
        o.inject = as_fault_desc[fc->fault].name;
        AsDriver *d;
        AsError err = {0};
        REQUIRE(as_driver_open(&o, &d, &err) == 0, "open: %s", err.msg);
        CHECK(d->got_kind == AS_GOT_TWIN, "%s runs in a twin", o.inject);
        AsDivergence dv;
        int rc = as_driver_first_divergence(d, 16, 6, &dv, &err);
        CHECK(rc == 0, "%s: %s", o.inject, err.msg);
        CHECK(dv.found && dv.step == fc->step && dv.layer == fc->layer && dv.tensor == fc->tensor,
              "%s: caught at step %d, layer %d, %s; want step %d, layer %d, %s (%s)", o.inject, dv.step, dv.layer,
              dv.found ? as_tensor_desc[dv.tensor].name : "nothing", fc->step, fc->layer,
              as_tensor_desc[fc->tensor].name, fc->why);
        if (dv.found)
            as_test_note("%-15s caught at step %d, layer %d, %-8s (%ld bad elements, max |diff| %.3g)", o.inject, dv.step,
                         dv.layer, as_tensor_desc[dv.tensor].name, (long)dv.diff.n_bad, dv.diff.max_abs);
        as_driver_close(d);
    }
}

/* Without a fault the twin is the reference itself: nothing diverges. */
TEST(faults_none_is_clean)
{
    use_test_cache();
    AsDriverOptions o;
    as_driver_options_default(&o);
    o.no_engine = true;
    o.quiet = true;
    o.inject = "none";
    AsDriver *d;
    AsError err = {0};
    REQUIRE(as_driver_open(&o, &d, &err) == 0, "open: %s", err.msg);
    AsDivergence dv;
    REQUIRE(as_driver_first_divergence(d, 16, 6, &dv, &err) == 0, "%s", err.msg);
    CHECK(!dv.found, "the faithful twin diverged at step %d, layer %d, %s", dv.step, dv.layer,
          dv.found ? as_tensor_desc[dv.tensor].name : "-");
    as_driver_close(d);
}
