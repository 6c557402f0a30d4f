/* `attnscope bench-ref`: the CPU reference at a model's geometry (flash by default) against the
 * host's limits: a decode step of every layer at a long context against the memory-bandwidth
 * floor (bytes of weights read / measured read bandwidth), and a prefill of every layer. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/command.h"
#include "driver/driver.h"
#include "model/inputs.h"
#include "model/precision.h"
#include "ref/blas_core.h"
#include "ref/linear.h"
#include "ref/synthetic_state.h"
#include "model/version.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Read bandwidth with every thread: the best of a few sums over a buffer far larger than the caches. */
static double read_bandwidth_gbs(size_t bytes)
{
    size_t n = bytes / sizeof(double);
    double *a = malloc(bytes);
    if (!a)
        return 0;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        a[i] = (double)(i & 1023);
    double best = 0, sink = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now(), sum = 0;
#pragma omp parallel for schedule(static) reduction(+ : sum)
        for (size_t i = 0; i < n; i++)
            sum += a[i];
        double dt = now() - t0;
        sink += sum;
        if (bytes / dt / 1e9 > best)
            best = bytes / dt / 1e9;
    }
    free(a);
    return sink == -1 ? 0 : best;
}

static double weight_bytes(const AsModel *m)
{
    double b = 0;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const AsLayerWeights *w = &m->layer[l];
        const AsWTensor *ts[] = {w->attn_norm, w->wq_a, w->q_norm, w->wq_b, w->wkv, w->kv_norm, w->wo_a, w->wo_b,
                                 w->attn_sink, w->c_wkv, w->c_wgate, w->c_norm, w->i_wq_b, w->i_weights_proj,
                                 w->i_wk, w->i_k_norm};
        for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
            if (ts[i])
                b += (double)ts[i]->nbytes;
    }
    return b;
}

static int cmd_bench_ref(int argc, char **argv)
{
    const char *model = "flash";
    int context = 4096, steps = 3, prefill = 512, threads = 0;
    const char *precision = NULL;
    const char *pos[1];
    int n_pos = 0;
    const AsOpt opts[] = {
        {"--context", NULL, AS_OPT_INT, &context, 1, 1 << 20},
        {"--steps", NULL, AS_OPT_INT, &steps, 1, 1000},
        {"--prefill", NULL, AS_OPT_INT, &prefill, 0, 1 << 20},
        {"--threads", NULL, AS_OPT_INT, &threads, 0, 4096},
        {"--precision", NULL, AS_OPT_STR, &precision, 0, 0},
        {NULL, NULL, 0, NULL, 0, 0},
    };
    int rc = as_args_parse("bench-ref", argc, argv, opts, pos, 0, 1, &n_pos);
    if (rc)
        return rc == AS_ARGS_HELP ? 0 : rc;
    if (n_pos)
        model = pos[0];
    if (threads)
        as_ref_set_threads(threads);
    AsError err = {0};
    char dir[1024];
    AsModel m;
    int max_seq = ((context + steps > prefill ? context + steps : prefill) + 8 + 1) / 2 * 2;
    AsPrecision asked;
    if ((rc = as_cli_precision("bench-ref", precision, &asked)))
        return rc;
    if ((rc = as_resolve_model(model, 1, dir, sizeof dir, false, &err)) || (rc = as_model_load(dir, max_seq, &m, &err)))
        return as_cli_fail("bench-ref", &err);
    if (asked != AS_PREC_AUTO && (rc = as_model_set_precision(&m, asked, &err))) {
        as_model_free(&m);
        return as_cli_fail("bench-ref", &err);
    }
    AsRefStack k;
    if ((rc = as_ref_stack_init(&k, &m, &err))) {
        as_model_free(&m);
        return as_cli_fail("bench-ref", &err);
    }
    const AsConfig *c = &m.cfg;
    float *h0 = malloc(sizeof(float) * (size_t)(prefill > 0 ? prefill : 1) * c->dim);
    struct utsname u;
    uname(&u);
    time_t tn = time(NULL);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&tn));
    double bw = read_bandwidth_gbs((size_t)2 << 30);
    double wb = weight_bytes(&m);
    printf("## bench-ref, %s\n\nhost %s (%s), %ld cores online, %d reference threads, OpenBLAS's %s kernels; attnscope %s, "
           "model %s\n\n"
           "command: attnscope bench-ref %s --context %d --steps %d --prefill %d%s\n\n",
           date, u.nodename, u.machine, sysconf(_SC_NPROCESSORS_ONLN), as_ref_threads(), as_blas_core_name(), as_version(),
           m.weights_name, model, context,
           steps, prefill, threads ? " --threads N" : "");
    printf("read bandwidth (all threads, 2 GiB): %.1f GB/s; weights read per decode step: %.2f GB -> floor %.3f s\n\n",
           bw, wb / 1e9, wb / (bw * 1e9));
    /* decode at `context`: a warm-up step (faults the mapping in), then the timed ones */
    double best = 1e30, sum = 0;
    for (int i = 0; i <= steps && !rc; i++) {
        if ((rc = as_ref_stack_fast_forward(&k, context, 1, &err)))
            break;
        as_inputs_synthetic(1, context, 1, c->dim, h0);
        double t0 = now();
        rc = as_ref_decode(&k, h0, &err);
        double dt = now() - t0;
        if (i > 0) {
            sum += dt;
            best = dt < best ? dt : best;
        }
    }
    if (!rc) {
        double floor = wb / (bw * 1e9);
        printf("| measurement | value | target |\n| --- | --- | --- |\n");
        printf("| decode step, %d layers, context %d (best of %d) | %.3f s = %.2f x floor (mean %.3f s) | <= 3 x floor |\n",
               c->n_layers, context, steps, best, best / floor, sum / steps);
    }
    if (!rc && prefill > 0) {
        as_inputs_synthetic(1, 0, prefill, c->dim, h0);
        double t0 = now();
        rc = as_ref_prefill(&k, h0, prefill, &err);
        if (!rc)
            printf("| prefill %d tokens, %d layers | %.1f s | <= 60 s on 16 cores |\n", prefill, c->n_layers, now() - t0);
    }
    free(h0);
    as_ref_stack_free(&k);
    as_model_free(&m);
    return rc ? as_cli_fail("bench-ref", &err) : 0;
}

AS_COMMAND_NAMED(bench_ref, "bench-ref", cmd_bench_ref,
                 "benchmark the CPU reference (decode at a context, prefill) against the host's memory bandwidth",
                 "bench-ref [MODEL] [--context N] [--steps N] [--prefill N] [--threads N] [--precision fp8|bf16]\n"
                 "  MODEL: a preset (default flash, generated once into the cache) or a model directory. The decode\n"
                 "  state at the context is synthesised (ref/synthetic_state.h): only the work and traffic are real.")
