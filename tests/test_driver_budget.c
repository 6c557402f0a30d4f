/* The host memory a run's tensors take is bounded: past ATTNSCOPE_RUN_BUDGET_MB the latest layers that
 * fit keep their tensors, the earlier ones give theirs up (their diffs stay). */
#include <stdlib.h>

#include "driver/driver.h"
#include "tests/lib/harness.h"
#include "tests/lib/tiny_driver.h"

static size_t layer_bytes(const AsDriver *d, int l)
{
    size_t b = 0;
    for (int i = 0; i < AS_T_COUNT; i++)
        b += d->ref_run[l].t[i].cap + d->got_run[l].t[i].cap;
    return b;
}

TEST(driver_budget_keeps_the_latest_layers_that_fit)
{
    setenv("ATTNSCOPE_RUN_BUDGET_MB", "16", 1);
    AsDriver *d = as_test_tiny_driver("none"); /* a faithful twin: both sides hold tensors */
    AsError err = {0};
    const int n = d->model.cfg.n_layers, s = 300;
    REQUIRE(as_driver_prefill(d, s, &err) == 0, "prefill %d: %s", s, err.msg);
    size_t last = layer_bytes(d, n - 1);
    int keep = (int)(((size_t)16 << 20) / last);
    as_test_note("%d layers, the last holds %zu bytes: %d fit in 16 MiB", n, last, keep);
    REQUIRE(keep >= 2 && keep < n, "the prefill's size puts the budget between one layer and all (%d)", keep);
    for (int l = 0; l < n; l++) {
        bool held = d->ref_run[l].t[AS_T_X].data && d->got_run[l].t[AS_T_X].data;
        CHECK(held == (l >= n - keep), "layer %d %s its tensors", l, held ? "keeps" : "gave up");
        CHECK(d->diff[l].verdict != AS_V_NOT_RUN, "layer %d keeps its diff", l);
    }
    as_driver_close(d);
    unsetenv("ATTNSCOPE_RUN_BUDGET_MB");
}
