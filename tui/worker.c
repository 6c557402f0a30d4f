#include "tui/worker.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/errors.h"

enum { W_IDLE, W_QUEUED, W_RUNNING, W_DONE };

struct TuiWorker {
    AsDriver *d;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* new job or quit (worker waits); job done (tui_worker_wait) */
    int state;
    bool quit;
    TuiJob job;
    TuiJobResult res;
    TuiProgress prog;
    double t0;
    double cancel_t;        /* when the running job was cancelled (0: not), and where it was then */
    int cancel_layer, cancel_phase;
    TuiHistory hist;        /* worker-owned; read by the interface only while idle */
};

const char *tui_job_name(TuiJobKind k)
{
    static const char *const n[TUI_JOB_COUNT] = {"idle",        "open",  "prefill", "decode",
                                                 "next layer",  "finish step", "first divergence", "save step",
                                                 "save run", "diagnose"};
    return (unsigned)k < TUI_JOB_COUNT ? n[k] : "?";
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The driver's layer hook, on the worker thread: record the layer, publish the progress. */
static void on_layer(void *ctx, int step, int layer, const AsRun *got, const AsRun *ref, const AsLayerDiff *diff)
{
    TuiWorker *w = ctx;
    tui_history_add(&w->hist, &w->d->cur, layer, got, ref, diff);
    pthread_mutex_lock(&w->mu);
    w->prog.step = step;
    w->prog.layer = layer;
    pthread_mutex_unlock(&w->mu);
}

static void set_total(TuiWorker *w, int done, int total)
{
    pthread_mutex_lock(&w->mu);
    w->prog.done = done;
    w->prog.total = total;
    pthread_mutex_unlock(&w->mu);
}

static void set_phase(TuiWorker *w, const char *phase)
{
    pthread_mutex_lock(&w->mu);
    snprintf(w->prog.phase, sizeof w->prog.phase, "%s", phase);
    pthread_mutex_unlock(&w->mu);
}

/* The driver's hooks into the worker: the layer record, and the state before each decode step
 * (`s` saves a decode step with it: a replay needs it). */
static void attach(TuiWorker *w, AsDriver *d)
{
    as_driver_set_hook(d, on_layer, w);
    as_driver_keep_state_in(d, true);
}

/* The model (a preset is generated on first use), its weights, the engine: the driver. */
static int open_driver(TuiWorker *w, const TuiJob *j, TuiJobResult *r, AsError *err)
{
    if (w->d)
        return as_err(err, AS_EBADINPUT, "the model is open already");
    AsDriverOptions o = j->opt;
    o.quiet = true; /* the terminal is the interface's */
    char dir[1024], what[160];
    snprintf(what, sizeof what, "finding %s (a preset is generated on first use)", o.model ? o.model : "the model");
    set_phase(w, what);
    int rc = as_resolve_model(o.model, o.weight_seed, dir, sizeof dir, true, err);
    if (rc)
        return rc;
    set_phase(w, "loading the weights, starting the engine where there is a device");
    o.model = dir;
    AsDriver *d = NULL;
    if ((rc = as_driver_open(&o, &d, err)))
        return rc;
    d->opt.model = j->opt.model; /* the name given, not the resolved directory (which is on the stack) */
    attach(w, d);
    pthread_mutex_lock(&w->mu);
    w->d = d;
    pthread_mutex_unlock(&w->mu);
    snprintf(r->msg, sizeof r->msg, "opened %s: %d layers, %s", d->model.weights_name, d->model.cfg.n_layers, d->note);
    return 0;
}

static int n_layers(const AsDriver *d) { return d->model.cfg.n_layers; }
static bool step_open(const AsDriver *d) { return d->cur.step >= 0 && d->cur.next_layer < n_layers(d); }

static int need_step(const AsDriver *d, AsError *err)
{
    if (d->cur.step < 0)
        return as_err(err, AS_EBADINPUT, "nothing has run yet: p prefills first");
    return 0;
}

/* One job; fills r->msg on success; err on failure. */
static int run_job(TuiWorker *w, const TuiJob *j, TuiJobResult *r, AsError *err)
{
    AsDriver *d = w->d;
    int rc = 0;
    r->layer = -1;
    r->tensor = AS_T_COUNT;
    if (j->kind == TUI_JOB_OPEN)
        return open_driver(w, j, r, err);
    if (!d)
        return as_err(err, AS_EBADINPUT, "no model open yet");
    switch (j->kind) {
    case TUI_JOB_PREFILL:
        set_total(w, 0, 1);
        if ((rc = as_driver_prefill(d, j->n, err)))
            return rc;
        snprintf(r->msg, sizeof r->msg, "prefill of %d token%s: %d layers run", j->n, j->n == 1 ? "" : "s",
                 n_layers(d));
        return 0;
    case TUI_JOB_DECODE: {
        if ((rc = need_step(d, err)))
            return rc;
        int first = d->cur.step + 1;
        set_total(w, 0, j->n);
        if (step_open(d) && (rc = as_driver_finish_step(d, err)))
            return rc;
        for (int i = 0; i < j->n; i++) {
            if (atomic_load(&d->cancel))
                return as_err(err, AS_ECANCELLED, "cancelled after %d of %d decode steps (step %d done)", i, j->n,
                              d->cur.step);
            if ((rc = as_driver_begin_decode(d, err)) || (rc = as_driver_finish_step(d, err)))
                return rc;
            set_total(w, i + 1, j->n);
        }
        snprintf(r->msg, sizeof r->msg, "decode: %d step%s run (steps %d..%d), next position %d", j->n,
                 j->n == 1 ? "" : "s", first, d->cur.step, d->next_pos);
        return 0;
    }
    case TUI_JOB_LAYER: {
        if ((rc = need_step(d, err)))
            return rc;
        bool began = false;
        if (!step_open(d)) {
            if ((rc = as_driver_begin_decode(d, err)))
                return rc;
            began = true;
        }
        int l = d->cur.next_layer;
        if ((rc = as_driver_step_layer(d, err)))
            return rc;
        r->layer = l;
        snprintf(r->msg, sizeof r->msg, "%sstep %d, layer %d run: %s", began ? "decode step begun; " : "",
                 d->cur.step, l,
                 d->got_kind == AS_GOT_NONE ? "reference only" : as_verdict_name(d->diff[l].verdict));
        return 0;
    }
    case TUI_JOB_FINISH:
        if ((rc = need_step(d, err)))
            return rc;
        if (!step_open(d)) {
            snprintf(r->msg, sizeof r->msg, "step %d was finished already: n or d starts a decode step", d->cur.step);
            return 0;
        }
        if ((rc = as_driver_finish_step(d, err)))
            return rc;
        snprintf(r->msg, sizeof r->msg, "step %d finished", d->cur.step);
        return 0;
    case TUI_JOB_DIVERGE: {
        AsDivergence div;
        set_total(w, 0, j->n);
        if ((rc = as_driver_first_divergence(d, j->n2, j->n, &div, err)))
            return rc;
        if (!div.found) {
            snprintf(r->msg, sizeof r->msg, "no divergence through step %d (position %d)", d->cur.step,
                     d->next_pos - 1);
            return 0;
        }
        char line[512];
        as_tensor_diff_line(div.tensor, &div.diff, line, sizeof line);
        snprintf(r->msg, sizeof r->msg, "first divergence: step %d, layer %d: %s", div.step, div.layer, line);
        r->layer = div.layer;
        r->tensor = div.tensor;
        return 0;
    }
    case TUI_JOB_SAVE_STEP:
        return tui_save_step(d, j->path, r->msg, sizeof r->msg, err);
    case TUI_JOB_SAVE_RUN:
        set_total(w, 0, w->hist.n);
        return tui_save_run(d, &w->hist, j->path, r->msg, sizeof r->msg, err);
    case TUI_JOB_DIAGNOSE: {
        AsDiagnosis dx;
        if ((rc = as_driver_diagnose(d, j->n, &dx, err)))
            return rc;
        as_diagnosis_text(&dx, r->msg, sizeof r->msg);
        r->layer = j->n;
        r->tensor = dx.tensor;
        return 0;
    }
    default:
        return as_err(err, AS_EBADINPUT, "unknown job");
    }
}

static void *worker_main(void *arg)
{
    TuiWorker *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (w->state != W_QUEUED && !w->quit)
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->quit)
            break;
        w->state = W_RUNNING;
        TuiJob job = w->job;
        pthread_mutex_unlock(&w->mu);

        TuiJobResult r;
        memset(&r, 0, sizeof r);
        r.kind = job.kind;
        AsError err = {0};
        double t0 = now_s();
        r.rc = run_job(w, &job, &r, &err);
        r.seconds = now_s() - t0;
        if (r.rc)
            snprintf(r.msg, sizeof r.msg, "%s%s%s", job.kind == TUI_JOB_OPEN ? "" : tui_job_name(job.kind),
                     job.kind == TUI_JOB_OPEN ? "" : ": ", err.msg);

        pthread_mutex_lock(&w->mu);
        if (r.rc == AS_ECANCELLED && w->cancel_t > 0) { /* how long the cancel took, and where it found the job */
            size_t n = strlen(r.msg);
            snprintf(r.msg + n, sizeof r.msg - n, "; it stopped %.0f ms after the cancel, which came in layer %d (%s)",
                     (now_s() - w->cancel_t) * 1e3, w->cancel_layer, as_driver_phase_name(w->cancel_phase));
        }
        w->cancel_t = 0;
        w->res = r;
        w->state = W_DONE;
        w->prog.busy = false;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int tui_worker_start(AsDriver *d, TuiWorker **out, AsError *err)
{
    *out = NULL;
    TuiWorker *w = calloc(1, sizeof *w);
    if (!w)
        return as_err(err, AS_ERUNTIME, "out of memory");
    w->d = d;
    tui_history_init(&w->hist, (size_t)-1);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->prog.step = w->prog.layer = -1;
    if (d)
        attach(w, d);
    /* the thread (and the reference's threads it starts) never takes SIGINT / SIGTERM */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGWINCH);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    int rc = pthread_create(&w->th, NULL, worker_main, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        if (d)
            as_driver_set_hook(d, NULL, NULL);
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
        free(w);
        return as_err(err, AS_ERUNTIME, "cannot start the worker thread");
    }
    *out = w;
    return 0;
}

void tui_worker_stop(TuiWorker *w)
{
    if (!w)
        return;
    tui_worker_cancel(w);
    pthread_mutex_lock(&w->mu);
    w->quit = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->th, NULL);
    if (w->d) {
        as_driver_set_hook(w->d, NULL, NULL);
        atomic_store(&w->d->cancel, 0);
    }
    tui_history_free(&w->hist);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}

bool tui_worker_submit(TuiWorker *w, const TuiJob *job)
{
    pthread_mutex_lock(&w->mu);
    bool ok = w->state == W_IDLE;
    if (ok) {
        w->job = *job;
        w->state = W_QUEUED;
        memset(&w->prog, 0, sizeof w->prog);
        w->cancel_t = 0;
        w->prog.busy = true;
        w->prog.kind = job->kind;
        w->prog.step = w->prog.layer = -1;
        w->t0 = now_s();
        if (w->d)
            atomic_store(&w->d->cancel, 0);
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return ok;
}

bool tui_worker_take_result(TuiWorker *w, TuiJobResult *res)
{
    pthread_mutex_lock(&w->mu);
    bool done = w->state == W_DONE;
    if (done) {
        *res = w->res;
        w->state = W_IDLE;
    }
    pthread_mutex_unlock(&w->mu);
    return done;
}

void tui_worker_cancel(TuiWorker *w)
{
    pthread_mutex_lock(&w->mu);
    if (w->d)
        atomic_store(&w->d->cancel, 1);
    if (w->prog.busy && !w->prog.cancelling) {
        w->prog.cancelling = true;
        w->cancel_t = now_s();
        w->cancel_layer = w->d ? atomic_load(&w->d->progress_layer) : -1;
        w->cancel_phase = w->d ? atomic_load(&w->d->progress_phase) : -1;
    }
    pthread_mutex_unlock(&w->mu);
}

bool tui_worker_busy(TuiWorker *w)
{
    pthread_mutex_lock(&w->mu);
    bool b = w->state == W_QUEUED || w->state == W_RUNNING;
    pthread_mutex_unlock(&w->mu);
    return b;
}

void tui_worker_progress(TuiWorker *w, TuiProgress *p)
{
    pthread_mutex_lock(&w->mu);
    *p = w->prog;
    p->busy = w->state == W_QUEUED || w->state == W_RUNNING;
    p->seconds = p->busy ? now_s() - w->t0 : 0;
    pthread_mutex_unlock(&w->mu);
}

const TuiHistory *tui_worker_history(TuiWorker *w) { return &w->hist; }

AsDriver *tui_worker_driver(TuiWorker *w)
{
    pthread_mutex_lock(&w->mu);
    AsDriver *d = w->d;
    pthread_mutex_unlock(&w->mu);
    return d;
}

void tui_worker_wait(TuiWorker *w)
{
    pthread_mutex_lock(&w->mu);
    while (w->state == W_QUEUED || w->state == W_RUNNING)
        pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}
