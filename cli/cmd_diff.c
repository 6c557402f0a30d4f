/* `attnscope diff A B`: two dumps compared tensor by tensor (A's side as got, B's as want, by
 * the rules of SPEC 6) for every step and layer present in both; a one-screen summary and the
 * worst finding. Exit 0 all within tolerance, 1 a mismatch, 2 bad input, 3 runtime failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/command.h"
#include "driver/compare.h"
#include "driver/report.h"
#include "dumps/dump.h"

#define MAX_LISTED 10

static const char *const CMD = "diff";

/* Fields that decide shapes and roles: both dumps must agree on them. */
static int same_geometry(const AsConfig *a, const AsConfig *b, char *why, size_t n)
{
#define F(f)                                                                                   \
    if (a->f != b->f) {                                                                        \
        snprintf(why, n, "%s %d vs %d", #f, (int)a->f, (int)b->f);                             \
        return 0;                                                                              \
    }
    F(dim) F(n_layers) F(n_heads) F(head_dim) F(rope_head_dim) F(q_lora_rank) F(o_groups) F(o_lora_rank)
    F(window) F(index_n_heads) F(index_head_dim) F(index_topk) F(candidate_source) F(candidate_topk_blocks)
    F(candidate_block_size) F(n_kv_sources) F(n_index_sources)
#undef F
    for (int l = 0; l < a->n_layers; l++)
        if (a->compress_ratios[l] != b->compress_ratios[l]) {
            snprintf(why, n, "layer %d ratio %d vs %d", l, a->compress_ratios[l], b->compress_ratios[l]);
            return 0;
        }
    if (memcmp(a->kv_sources, b->kv_sources, (size_t)a->n_kv_sources * sizeof(int)) ||
        memcmp(a->index_sources, b->index_sources, (size_t)a->n_index_sources * sizeof(int))) {
        snprintf(why, n, "the kv / index source layers differ");
        return 0;
    }
    return 1;
}

static bool parse_tol(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (!*s || *end || !isfinite(v) || v < 0)
        return false;
    *out = v;
    return true;
}

/* The side to compare in a layer: the one asked for, else "engine", else the only one. */
static const char *pick_side(const AsDumpLayerInfo *li, const char *asked)
{
    if (asked)
        return as_dump_side_index(li, asked) >= 0 ? asked : NULL;
    if (as_dump_side_index(li, "engine") >= 0)
        return "engine";
    return li->n_sides == 1 ? li->side[0].name : NULL;
}

static void side_names(const AsDumpLayerInfo *li, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k < li->n_sides && used < n; k++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", k ? ", " : "", li->side[k].name);
    if (!li->n_sides)
        snprintf(buf, n, "none");
}

typedef struct {
    int step, layer;
    AsTensorId id;
    AsTensorDiff d;
    double score;       /* how bad, to pick the worst finding: verdict first, then max_abs / tol */
} Finding;

static double finding_score(const AsTensorDiff *d)
{
    double r = d->tol > 0 ? d->max_abs / d->tol : 0;
    return (double)d->verdict * 1e6 + (r < 1e5 ? r : 1e5);
}

typedef struct {
    int64_t n_steps, n_layers, n_tensors, by_verdict[AS_V_COUNT];
    int64_t only_a, only_b; /* layers present in one dump */
    uint64_t compared, absent_a, absent_b; /* tensors compared; stored on one side only (not judged) */
    int n_listed;
    Finding listed[MAX_LISTED];
    bool have_worst;
    Finding worst;
} Summary;

static void note(Summary *s, int step, int layer, AsTensorId id, const AsTensorDiff *d)
{
    s->n_tensors++;
    s->by_verdict[d->verdict]++;
    Finding f = {step, layer, id, *d, finding_score(d)};
    if (d->verdict > AS_V_PASS && s->n_listed < MAX_LISTED)
        s->listed[s->n_listed++] = f;
    /* strictly worse only: among equals the first in (step, layer, forward) order, where a
     * divergence starts, stays */
    if (!s->have_worst || f.score > s->worst.score) {
        s->worst = f;
        s->have_worst = true;
    }
}

static int compare_layer(AsDumpReader *a, AsDumpReader *b, const AsDumpStepInfo *sa, const AsDumpLayerInfo *la,
                         const AsDumpLayerInfo *lb, const char *side_a, const char *side_b, bool common,
                         const AsCompareOptions *opt, Summary *sum, AsError *err)
{
    const char *ga = pick_side(la, side_a), *gb = pick_side(lb, side_b);
    if (!ga || !gb) {
        const AsDumpLayerInfo *li = ga ? lb : la;
        const char *asked = ga ? side_b : side_a;
        char names[256], what[128];
        side_names(li, names, sizeof names);
        if (asked)
            snprintf(what, sizeof what, "no side '%.60s'", asked);
        else
            snprintf(what, sizeof what, "several sides, none named engine: pick one with --side-a / --side-b");
        return as_err(err, AS_EBADINPUT, "dump %s: step %d, layer %d: %s (sides: %s)", as_dump_info(ga ? b : a)->path,
                      sa->step, li->layer, what, names);
    }
    AsRun got, want;
    as_run_init(&got);
    as_run_init(&want);
    AsLayerDiff *ld = malloc(sizeof *ld);
    int rc = ld ? 0 : as_err(err, AS_ERUNTIME, "out of memory");
    if (!rc)
        rc = as_dump_read_run(a, sa->step, la->layer, ga, &got, err);
    if (!rc)
        rc = as_dump_read_run(b, sa->step, lb->layer, gb, &want, err);
    (void)common; /* the default now: a tensor stored on one side only is listed, not judged */
    if (!rc) {
        as_compare_layer(&got, &want, opt, ld);
        sum->n_layers++;
        for (int i = 0; i < AS_T_COUNT; i++) {
            const AsTensorDiff *t = &ld->t[i];
            if (t->verdict != AS_V_ABSENT && t->verdict != AS_V_NOT_RUN) {
                sum->compared |= AS_DUMP_TENSOR_BIT(i);
                note(sum, sa->step, la->layer, (AsTensorId)i, t);
            } else if (t->verdict == AS_V_ABSENT && t->absent_got != t->absent_want) {
                if (t->absent_got)
                    sum->absent_a |= AS_DUMP_TENSOR_BIT(i);
                else
                    sum->absent_b |= AS_DUMP_TENSOR_BIT(i);
            }
        }
    }
    free(ld);
    as_run_free(&got);
    as_run_free(&want);
    return rc;
}

static void print_finding(const char *lead, const Finding *f, const AsDumpReader *a)
{
    char line[640];
    as_tensor_diff_line(f->id, &f->d, line, sizeof line);
    const AsDumpStepInfo *si = as_dump_find_step(a, f->step);
    printf("%sstep %04d (%s), layer %02d, %s\n", lead, f->step, si ? si->kind : "?", f->layer, line);
}

/* Token inputs: the same rows on both sides, or the first difference. */
static void print_inputs(AsDumpReader *a, AsDumpReader *b)
{
    const AsDumpInfo *ia = as_dump_info(a), *ib = as_dump_info(b);
    if (!ia->input_tokens || !ib->input_tokens) {
        printf("inputs     %s\n", !ia->input_tokens && !ib->input_tokens ? "none in either dump" : "stored in one dump only");
        return;
    }
    float *ha = NULL, *hb = NULL;
    int na, nb, fa, fb;
    AsError err = {0};
    if (as_dump_read_inputs(a, &ha, &na, &fa, &err) || as_dump_read_inputs(b, &hb, &nb, &fb, &err)) {
        printf("inputs     unreadable: %s\n", err.msg);
    } else if (na != nb || fa != fb) {
        printf("inputs     DIFFER: %d tokens from %d vs %d tokens from %d\n", na, fa, nb, fb);
    } else {
        size_t n = (size_t)na * (size_t)ia->cfg.dim, i = 0;
        while (i < n && (ha[i] == hb[i] || (isnan(ha[i]) && isnan(hb[i]))))
            i++;
        if (i == n)
            printf("inputs     identical (%d tokens from position %d)\n", na, fa);
        else
            printf("inputs     DIFFER first at token %zu, channel %zu: %g vs %g\n", i / (size_t)ia->cfg.dim,
                   i % (size_t)ia->cfg.dim, ha[i], hb[i]);
    }
    free(ha);
    free(hb);
}

static void print_mask(const char *lead, uint64_t m, const char *tail)
{
    printf("%s", lead);
    if (!m)
        printf(" none");
    for (int i = 0; i < AS_T_COUNT; i++)
        if (m & AS_DUMP_TENSOR_BIT(i))
            printf(" %s", as_tensor_desc[i].name);
    printf("%s\n", tail);
}

static int run_diff(AsDumpReader *a, AsDumpReader *b, const char *side_a, const char *side_b, bool common,
                    const AsCompareOptions *opt, AsError *err)
{
    const AsDumpInfo *ia = as_dump_info(a), *ib = as_dump_info(b);
    Summary *sum = calloc(1, sizeof *sum);
    if (!sum)
        return as_err(err, AS_ERUNTIME, "out of memory");
    int rc = 0;
    for (int s = 0; !rc && s < ia->n_steps; s++) {
        const AsDumpStepInfo *sa = &ia->steps[s], *sb = as_dump_find_step(b, sa->step);
        if (!sb) {
            sum->only_a += sa->n_layers;
            continue;
        }
        if (strcmp(sa->kind, sb->kind) || sa->start_pos != sb->start_pos || sa->tokens != sb->tokens) {
            rc = as_err(err, AS_EBADINPUT, "step %d is not the same step: %s at %d, %d tokens in %s; %s at %d, %d tokens in %s",
                        sa->step, sa->kind, sa->start_pos, sa->tokens, ia->path, sb->kind, sb->start_pos, sb->tokens,
                        ib->path);
            break;
        }
        bool any = false;
        for (int l = 0; !rc && l < sa->n_layers; l++) {
            const AsDumpLayerInfo *la = &sa->layers[l], *lb = as_dump_find_layer(sb, la->layer);
            if (!lb) {
                sum->only_a++;
                continue;
            }
            any = true;
            rc = compare_layer(a, b, sa, la, lb, side_a, side_b, common, opt, sum, err);
        }
        for (int l = 0; l < sb->n_layers; l++)
            if (!as_dump_find_layer(sa, sb->layers[l].layer))
                sum->only_b++;
        sum->n_steps += any;
    }
    for (int s = 0; s < ib->n_steps; s++)
        if (!as_dump_find_step(a, ib->steps[s].step))
            sum->only_b += ib->steps[s].n_layers;
    if (!rc && !sum->n_layers)
        rc = as_err(err, AS_EBADINPUT, "%s and %s have no step and layer in common", ia->path, ib->path);
    if (rc) {
        free(sum);
        return rc;
    }

    char pa[1200], pb[1200]; /* paths as given: escaped for the terminal (driver/report.h) */
    as_text_escape(ia->path, pa, sizeof pa);
    as_text_escape(ib->path, pb, sizeof pb);
    printf("diff       %s (got) against %s (want)\n", pa, pb);
    print_inputs(a, b);
    printf("compared   %lld step%s, %lld layer%s, %lld tensors", (long long)sum->n_steps, sum->n_steps == 1 ? "" : "s",
           (long long)sum->n_layers, sum->n_layers == 1 ? "" : "s", (long long)sum->n_tensors);
    if (sum->only_a || sum->only_b)
        printf(" (layers only in A: %lld, only in B: %lld, not compared)", (long long)sum->only_a, (long long)sum->only_b);
    printf("\n");
    print_mask("tensors   ", sum->compared, "");
    if (sum->absent_a)
        print_mask("absent     ", sum->absent_a, " (stored in B only: not judged)");
    if (sum->absent_b)
        print_mask("absent     ", sum->absent_b, " (stored in A only: not judged)");
    printf("verdicts  ");
    for (int v = AS_V_PASS; v < AS_V_COUNT; v++)
        printf(" %s %lld%s", as_verdict_name((AsVerdict)v), (long long)sum->by_verdict[v], v + 1 < AS_V_COUNT ? "," : "\n");
    int64_t not_pass = sum->by_verdict[AS_V_FLIPS] + sum->by_verdict[AS_V_NEAR_TIE] + sum->by_verdict[AS_V_MISMATCH];
    if (sum->n_listed) {
        printf("\nfindings (%d of %lld):\n", sum->n_listed, (long long)not_pass);
        for (int i = 0; i < sum->n_listed; i++)
            print_finding("  ", &sum->listed[i], a);
    }
    if (sum->have_worst && (sum->worst.d.verdict > AS_V_PASS || sum->worst.d.max_abs > 0))
        print_finding("\nworst      ", &sum->worst, a);
    bool mismatch = sum->by_verdict[AS_V_MISMATCH] > 0;
    printf("%s\n", mismatch ? "result     MISMATCH" : "result     all within tolerance");
    free(sum);
    return mismatch ? AS_EMISMATCH : 0;
}

static int cmd_diff(int argc, char **argv)
{
    const char *side_a = NULL, *side_b = NULL, *tol_rel = NULL, *tol_abs = NULL, *require = NULL;
    bool common = false;
    const AsOpt opts[] = {
        {"--common", NULL, AS_OPT_FLAG, &common, 0, 0},
        {"--side-a", NULL, AS_OPT_STR, &side_a, 0, 0},
        {"--side-b", NULL, AS_OPT_STR, &side_b, 0, 0},
        {"--tol-rel", NULL, AS_OPT_STR, &tol_rel, 0, 0},
        {"--tol-abs", NULL, AS_OPT_STR, &tol_abs, 0, 0},
        {"--require", NULL, AS_OPT_STR, &require, 0, 0},
        {0},
    };
    const char *pos[2];
    int n = 0;
    int rc = as_args_parse(CMD, argc, argv, opts, pos, 2, 2, &n);
    if (rc)
        return rc == AS_ARGS_HELP ? 0 : rc;
    AsCompareOptions opt;
    as_compare_options_default(&opt);
    double rel = AS_TOL_DEFAULT.rel, abs_ = AS_TOL_DEFAULT.abs;
    if (tol_rel && !parse_tol(tol_rel, &rel))
        return as_cli_usage_error(CMD, "--tol-rel: '%s' is not a non-negative number", tol_rel);
    if (tol_abs && !parse_tol(tol_abs, &abs_))
        return as_cli_usage_error(CMD, "--tol-abs: '%s' is not a non-negative number", tol_abs);
    for (int i = 0; i < AS_T_COUNT; i++)
        opt.tol[i] = (AsTolerance){rel, abs_};
    /* what each side stores is compared; a tensor stored on one side only is absent (not judged)
     * unless --require names it */
    opt.got_partial = opt.want_partial = true;
    AsError perr = {0};
    if (require) {
        if (as_dump_parse_tensor_list(require, &opt.require, &perr))
            return as_cli_usage_error(CMD, "--require: %s", perr.msg);
        if (!opt.require)
            return as_cli_usage_error(CMD, "--require: name tensors (x,q,idx...)");
    }

    AsDumpReader *a = NULL, *b = NULL;
    AsError err = {0};
    if (as_dump_open(pos[0], &a, &err) || as_dump_open(pos[1], &b, &err)) {
        as_dump_close(a);
        return as_cli_fail(CMD, &err);
    }
    char why[160];
    if (!same_geometry(&as_dump_info(a)->cfg, &as_dump_info(b)->cfg, why, sizeof why)) {
        err.code = AS_EBADINPUT;
        snprintf(err.msg, sizeof err.msg, "%s and %s have different geometries: %s", pos[0], pos[1], why);
        rc = as_cli_fail(CMD, &err);
    } else {
        opt.cand_block = as_dump_info(b)->cfg.candidate_block_size;
        opt.cand_topk_blocks = as_dump_info(b)->cfg.candidate_topk_blocks;
        rc = run_diff(a, b, side_a, side_b, common, &opt, &err);
        if (rc && rc != AS_EMISMATCH)
            rc = as_cli_fail(CMD, &err);
    }
    as_dump_close(a);
    as_dump_close(b);
    return rc;
}

static const AsCommand diff_command = {
    "diff", cmd_diff, "compare two dumps tensor by tensor (SPEC 6 tolerances)",
    "diff A B [--side-a NAME] [--side-b NAME] [--tol-rel X] [--tol-abs Y] [--require T,...]\n\n"
    "Compares the runs stored in dump A (got) with those in dump B (want) for every step and layer\n"
    "present in both, by the rules of SPEC section 6: tensors within max|want| * rel + abs,\n"
    "quantisation flips counted apart, selections exact (differences explained as near-ties or\n"
    "called real). Both dumps must have the same geometry. Prints the tensors compared and absent,\n"
    "the verdict counts, the first findings and the worst one with its coordinates.\n\n"
    "options:\n"
    "  --side-a NAME   side of A to compare (default: engine, else the layer's only side)\n"
    "  --side-b NAME   side of B to compare (same default)\n"
    "  --tol-rel X     relative tolerance for every tensor (default 2^-7 = 0.0078125)\n"
    "  --tol-abs Y     absolute floor (default 1e-4)\n"
    "  --require T,... tensors both sides must store (a tensor stored on one side only is\n"
    "                  otherwise listed as absent and not judged)\n"
    "  --common        accepted for older scripts: comparing what both sides store is the default\n"
    "exit status: 0 all within tolerance, 1 a mismatch, 2 bad input (unreadable dump, different\n"
    "geometry, no layer in common), 3 runtime failure\n"};

__attribute__((constructor)) static void register_diff(void) { as_command_register(&diff_command); }
