/* The TUI's worker thread: jobs run off the interface thread, results hand the driver back,
 * cancellation stops between layers, saves produce dumps the reader accepts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dumps/dump.h"
#include "tests/lib/harness.h"
#include "tests/lib/tiny_driver.h"
#include "tui/worker.h"

static AsDriver *open_tiny(const char *inject) { return as_test_tiny_driver(inject); }

/* Submits and waits; the result. */
static TuiJobResult job(TuiWorker *w, TuiJobKind k, int n, const char *path)
{
    TuiJob j = {.kind = k, .n = n};
    if (path)
        snprintf(j.path, sizeof j.path, "%s", path);
    TuiJobResult r;
    memset(&r, 0, sizeof r);
    REQUIRE(tui_worker_submit(w, &j), "%s accepted while idle", tui_job_name(k));
    tui_worker_wait(w);
    REQUIRE(tui_worker_take_result(w, &r), "%s: a result", tui_job_name(k));
    CHECK(!tui_worker_take_result(w, &r) || true, "one result per job");
    return r;
}

TEST(tui_worker_runs_jobs_off_the_interface_thread)
{
    AsDriver *d = open_tiny(NULL);
    TuiWorker *w = NULL;
    AsError err = {0};
    REQUIRE(tui_worker_start(d, &w, &err) == 0, "start: %s", err.msg);
    CHECK(!tui_worker_busy(w), "idle at start");
    TuiJobResult r = job(w, TUI_JOB_DECODE, 1, NULL);
    CHECK(r.rc == AS_EBADINPUT && strstr(r.msg, "prefill"), "decode before a prefill is refused: %s", r.msg);
    r = job(w, TUI_JOB_PREFILL, 5, NULL);
    CHECK(r.rc == 0 && d->cur.step == 0 && d->cur.s == 5, "prefill 5: %s", r.msg);
    r = job(w, TUI_JOB_LAYER, 0, NULL);
    CHECK(r.rc == 0 && d->cur.step == 1 && d->cur.next_layer == 1 && r.layer == 0,
          "next layer after a finished step begins decode step 1 and runs layer 0: %s", r.msg);
    r = job(w, TUI_JOB_FINISH, 0, NULL);
    CHECK(r.rc == 0 && d->cur.next_layer == 10, "finish: %s", r.msg);
    r = job(w, TUI_JOB_DECODE, 3, NULL);
    CHECK(r.rc == 0 && d->cur.step == 4 && d->next_pos == 9, "decode 3: step 4, next position 9: %s", r.msg);
    r = job(w, TUI_JOB_DIVERGE, 4, NULL);
    CHECK(r.rc == AS_EBADINPUT, "first divergence without a checked side is refused: %s", r.msg);
    /* a second job is refused while one runs */
    TuiJob big = {.kind = TUI_JOB_DECODE, .n = 400};
    REQUIRE(tui_worker_submit(w, &big), "decode 400 queued");
    TuiJob other = {.kind = TUI_JOB_FINISH};
    bool second = tui_worker_submit(w, &other);
    tui_worker_cancel(w);
    tui_worker_wait(w);
    CHECK(!second, "a second job is refused while the first is queued or running");
    REQUIRE(tui_worker_take_result(w, &r), "cancelled decode: a result");
    CHECK(r.rc == AS_ECANCELLED || (r.rc == 0 && d->cur.step == 404), "cancel stops the decode: rc %d, %s", r.rc,
          r.msg);
    as_test_note("cancelled at step %d, next layer %d: %s", d->cur.step, d->cur.next_layer, r.msg);
    /* the driver is consistent after a cancel: the work goes on (from a new prefill where the cancel came
     * inside a layer, whose state it left half written: where it lands depends on the machine's speed) */
    if (d->torn_layer >= 0) {
        r = job(w, TUI_JOB_DECODE, 1, NULL);
        CHECK(r.rc == AS_EBADINPUT && strstr(r.msg, "half written"), "a torn step is not decoded on: %s", r.msg);
        r = job(w, TUI_JOB_PREFILL, 5, NULL);
        CHECK(r.rc == 0 && d->torn_layer < 0, "a prefill starts over: %s", r.msg);
    }
    r = job(w, TUI_JOB_DECODE, 1, NULL);
    CHECK(r.rc == 0 && d->cur.next_layer == 10, "decode after a cancel: %s", r.msg);
    TuiProgress p;
    tui_worker_progress(w, &p);
    CHECK(!p.busy, "progress says idle");
    tui_worker_stop(w);
    CHECK(d->hook == NULL, "the hook is removed on stop");
    as_driver_close(d);
}

TEST(tui_worker_saves_step_and_run)
{
    AsDriver *d = open_tiny("ring-slot");
    TuiWorker *w = NULL;
    AsError err = {0};
    REQUIRE(tui_worker_start(d, &w, &err) == 0, "start: %s", err.msg);
    char step_path[512], run_path[512];
    snprintf(step_path, sizeof step_path, "%s/step.h5", as_test_tmpdir());
    snprintf(run_path, sizeof run_path, "%s/run.h5", as_test_tmpdir());
    TuiJobResult r = job(w, TUI_JOB_SAVE_STEP, 0, step_path);
    CHECK(r.rc == AS_EBADINPUT, "nothing to save before a prefill: %s", r.msg);
    r = job(w, TUI_JOB_PREFILL, 5, NULL);
    REQUIRE(r.rc == 0, "prefill: %s", r.msg);
    r = job(w, TUI_JOB_DECODE, 2, NULL);
    REQUIRE(r.rc == 0, "decode: %s", r.msg);
    /* half a step */
    r = job(w, TUI_JOB_LAYER, 0, NULL);
    r = job(w, TUI_JOB_LAYER, 0, NULL);
    REQUIRE(r.rc == 0 && d->cur.step == 3 && d->cur.next_layer == 2, "two layers of step 3: %s", r.msg);
    const TuiHistory *h = tui_worker_history(w);
    CHECK(h->n == 10 * 3 + 2 && tui_history_steps(h) == 4, "history: 32 layers of 4 steps (%d, %d)", h->n,
          tui_history_steps(h));
    r = job(w, TUI_JOB_SAVE_STEP, 0, step_path);
    CHECK(r.rc == 0 && strstr(r.msg, "saved step 3"), "save step: %s", r.msg);
    r = job(w, TUI_JOB_SAVE_RUN, 0, run_path);
    CHECK(r.rc == 0 && strstr(r.msg, "4 steps"), "save run: %s", r.msg);
    AsDumpReader *rd = NULL;
    REQUIRE(as_dump_open(step_path, &rd, &err) == 0, "the step dump reads back: %s", err.msg);
    const AsDumpInfo *in = as_dump_info(rd);
    CHECK(in->n_steps == 1 && in->steps[0].step == 3 && in->steps[0].n_layers == 2, "step dump: step 3, 2 layers");
    CHECK(in->input_tokens == 1 && in->input_first_pos == 7, "step dump inputs: position 7");
    CHECK(in->steps[0].layers[0].has_diff && in->steps[0].layers[0].verdict == AS_V_MISMATCH,
          "layer 0 of the decode step: the ring-slot fault's mismatch is stored");
    as_dump_close(rd);
    REQUIRE(as_dump_open(run_path, &rd, &err) == 0, "the run dump reads back: %s", err.msg);
    in = as_dump_info(rd);
    CHECK(in->n_steps == 4 && in->steps[0].n_layers == 10 && in->steps[3].n_layers == 2,
          "run dump: 4 steps, the last one half done");
    CHECK(in->input_tokens == 8 && in->input_first_pos == 0, "run dump inputs: positions 0..7 (%d from %d)",
          in->input_tokens, in->input_first_pos);
    CHECK(strcmp(in->mode, "teacher") == 0, "mode teacher: %s", in->mode);
    as_dump_close(rd);
    /* an unwritable path: an error, nothing left behind */
    r = job(w, TUI_JOB_SAVE_RUN, 0, "/nonexistent-dir/x.h5");
    CHECK(r.rc != 0, "an unwritable path fails: %s", r.msg);
    /* a new prefill starts a new record */
    r = job(w, TUI_JOB_PREFILL, 3, NULL);
    CHECK(tui_history_steps(tui_worker_history(w)) == 1 && tui_worker_history(w)->n == 10,
          "the record restarts with the prefill");
    tui_worker_stop(w);
    as_driver_close(d);
}

TEST(tui_worker_history_budget)
{
    AsDriver *d = open_tiny(NULL);
    AsError err = {0};
    TuiHistory h;
    tui_history_init(&h, 64 << 10); /* 64 KiB: a few tiny layers */
    REQUIRE(as_driver_begin_prefill(d, 5, &err) == 0, "begin: %s", err.msg);
    int kept = 0;
    for (int l = 0; l < 10; l++) {
        REQUIRE(as_driver_step_layer(d, &err) == 0, "layer %d: %s", l, err.msg);
        kept += tui_history_add(&h, &d->cur, l, NULL, &d->ref_run[l], NULL) == 0;
    }
    CHECK(kept > 0 && kept < 10 && h.full && h.full_step == 0 && h.full_layer == kept,
          "recording stops at the budget and says where (kept %d, full at %d/%d)", kept, h.full_step, h.full_layer);
    CHECK(h.bytes <= h.budget, "within the budget");
    tui_history_free(&h);
    as_driver_close(d);
}

TEST(tui_worker_opens_the_model_on_its_thread)
{
    setenv("ATTNSCOPE_CACHE", as_test_tmpdir(), 1);
    TuiWorker *w = NULL;
    AsError err = {0};
    REQUIRE(tui_worker_start(NULL, &w, &err) == 0, "start without a driver: %s", err.msg);
    CHECK(tui_worker_driver(w) == NULL, "no driver yet");
    TuiJob j = {.kind = TUI_JOB_PREFILL, .n = 3};
    TuiJobResult r;
    REQUIRE(tui_worker_submit(w, &j), "a job before the model");
    tui_worker_wait(w);
    REQUIRE(tui_worker_take_result(w, &r), "its result");
    CHECK(r.rc == AS_EBADINPUT && strstr(r.msg, "no model open"), "refused: %s", r.msg);
    /* a model that is not there: the message names it, the status is the table's */
    TuiJob bad = {.kind = TUI_JOB_OPEN};
    as_driver_options_default(&bad.opt);
    bad.opt.model = "/nonexistent/model-dir";
    REQUIRE(tui_worker_submit(w, &bad), "open queued");
    tui_worker_wait(w);
    REQUIRE(tui_worker_take_result(w, &r), "its result");
    CHECK(r.rc == AS_EBADINPUT && strstr(r.msg, "/nonexistent/model-dir") && !strstr(r.msg, "open: "),
          "a missing model: exit 2 and its path, one line: %s", r.msg);
    CHECK(tui_worker_driver(w) == NULL, "still no driver");
    /* tiny opens (generated into the cache on first use), progress said meanwhile */
    TuiJob open = {.kind = TUI_JOB_OPEN};
    as_driver_options_default(&open.opt);
    open.opt.no_engine = true;
    open.opt.inject = "ring-slot";
    REQUIRE(tui_worker_submit(w, &open), "open tiny queued");
    TuiProgress p;
    tui_worker_progress(w, &p);
    CHECK(p.kind == TUI_JOB_OPEN && (p.busy || tui_worker_driver(w)), "the open is the running job");
    tui_worker_wait(w);
    REQUIRE(tui_worker_take_result(w, &r), "its result");
    AsDriver *d = tui_worker_driver(w);
    CHECK(r.rc == 0 && d && strstr(r.msg, "10 layers") && strstr(r.msg, "twin"), "opened: %s", r.msg);
    REQUIRE(d, "a driver");
    CHECK(d->hook != NULL && d->opt.quiet && !strcmp(d->opt.model, "tiny"),
          "the worker's layer hook is set, the driver quiet, its model named as given (%s)", d->opt.model);
    r = job(w, TUI_JOB_PREFILL, 5, NULL);
    CHECK(r.rc == 0 && d->cur.step == 0 && tui_history_steps(tui_worker_history(w)) == 1,
          "then a prefill runs and is recorded: %s", r.msg);
    r = job(w, TUI_JOB_OPEN, 0, NULL);
    CHECK(r.rc == AS_EBADINPUT, "a second open is refused: %s", r.msg);
    tui_worker_stop(w);
    CHECK(d->hook == NULL, "stop removes the hook; the driver is the caller's to close");
    as_driver_close(d);
}
