/* A cancel inside a layer: the reference's long loops stop (ref/cancel.h), the layer is thrown
 * away, and the step that it cut short is refused until a prefill starts over. */
#include <stdlib.h>
#include <string.h>

#include "driver/driver.h"
#include "ref/cancel.h"
#include "tests/lib/harness.h"
#include "tests/lib/tiny_driver.h"

static AsDriver *open_tiny(const char *inject) { return as_test_tiny_driver(inject); }

TEST(driver_cancel_inside_a_layer_tears_the_step_until_a_prefill)
{
    AsDriver *d = open_tiny("ring-slot");
    AsError err = {0};
    REQUIRE(as_driver_prefill(d, 12, &err) == 0 && as_driver_begin_decode(d, &err) == 0, "run: %s", err.msg);
    REQUIRE(as_driver_step_layer(d, &err) == 0, "layer 0 of the decode: %s", err.msg);
    /* the flag is up when layer 1 starts: its first loop sees it */
    atomic_store(&d->cancel, 1);
    int rc = as_driver_step_layer(d, &err);
    CHECK(rc == AS_ECANCELLED && strstr(err.msg, "inside layer 1") && strstr(err.msg, "prefill starts over"),
          "cancelled inside layer 1: %s", err.msg);
    CHECK(d->torn_layer == 1 && d->cur.next_layer == 1 && !d->layer_done[1], "layer 1 not done, the step torn there");
    CHECK(!as_ref_cancelled(), "the watch is off once the layer returned");
    /* the layer ends at its first stage's boundary: nothing after qr ran (not even on zeros) */
    CHECK(d->got_run[1].t[AS_T_QR].data && !d->got_run[1].t[AS_T_Q].data && !d->got_run[1].t[AS_T_O].data,
          "the twin's layer 1 stopped after qr");
    atomic_store(&d->cancel, 0);
    rc = as_driver_step_layer(d, &err);
    CHECK(rc == AS_EBADINPUT && strstr(err.msg, "cancelled inside layer 1"), "the torn step is refused: %s", err.msg);
    rc = as_driver_finish_step(d, &err);
    CHECK(rc == AS_EBADINPUT, "finishing it too: %s", err.msg);
    rc = as_driver_begin_decode(d, &err);
    CHECK(rc == AS_EBADINPUT, "and a decode after it: %s", err.msg);
    /* a prefill starts over and everything runs again */
    rc = as_driver_prefill(d, 12, &err);
    CHECK(rc == 0 && d->torn_layer < 0 && d->cur.next_layer == d->model.cfg.n_layers, "a prefill: %s", err.msg);
    rc = as_driver_decode(d, 1, &err);
    CHECK(rc == 0 && d->diff[0].verdict == AS_V_MISMATCH, "then decode, the fault found as before: %s", err.msg);
    as_driver_close(d);
}

TEST(driver_cancel_between_layers_leaves_a_step_to_go_on_with)
{
    AsDriver *d = open_tiny(NULL);
    AsError err = {0};
    REQUIRE(as_driver_begin_prefill(d, 8, &err) == 0 && as_driver_step_layer(d, &err) == 0, "one layer: %s", err.msg);
    atomic_store(&d->cancel, 1);
    int rc = as_driver_finish_step(d, &err);
    CHECK(rc == AS_ECANCELLED && d->torn_layer < 0 && d->cur.next_layer == 1,
          "a cancel seen between layers stops before layer 1 and tears nothing: %s", err.msg);
    atomic_store(&d->cancel, 0);
    CHECK(as_driver_finish_step(d, &err) == 0 && d->cur.next_layer == d->model.cfg.n_layers, "the step goes on: %s",
          err.msg);
    /* the watch is the driver's while a layer runs only: a loop outside one sees nothing */
    atomic_store(&d->cancel, 1);
    CHECK(!as_ref_cancelled() && !as_ref_cancel_cut(), "no watch outside a layer");
    atomic_store(&d->cancel, 0);
    as_driver_close(d);
}
