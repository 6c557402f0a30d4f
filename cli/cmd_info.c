/* `attnscope info`: a model's geometry, each layer's role and its tensor inventory. */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/command.h"
#include "model/config.h"
#include "model/precision.h"
#include "model/safetensors.h"
#include "model/text_safe.h"
#include "model/weights.h"

static int64_t total_bytes(const AsModel *m)
{
    int64_t total = 0;
    for (int i = 0; i < m->n_tensors; i++)
        total += m->tensors[i].nbytes;
    return total;
}

static int skipped(const AsModel *m)
{
    int n = 0;
    for (int i = 0; i < m->n_files; i++)
        n += m->files[i]->n_skipped;
    return n;
}

/* Tensors of the full model the attention does not use (experts, hyper-connections, ...): not read. */
static int unused(const AsModel *m)
{
    int n = 0;
    for (int i = 0; i < m->n_files; i++)
        n += m->files[i]->n_unused;
    return n;
}

/* Why the model runs in its precision: --precision, the config's dtype, or the weights. */
static const char *precision_why(const AsModel *m, AsPrecision asked)
{
    if (asked != AS_PREC_AUTO)
        return "--precision";
    if (m->cfg.dtype != AS_PREC_AUTO)
        return "the config's dtype";
    return m->precision == AS_PREC_FP8 ? "the weights: every fp8 projection is F8_E4M3 with its block scale"
                                       : "the weights: the fp8 projections are not all F8_E4M3 with block scales";
}

/* What one projection of layer 0 (the fp8 ones, wo_a) is stored as and how it runs, e.g.
 * "F8_E4M3 32x32, fp8 linear" or "BF16, bf16 linear". */
static void proj_line(const AsModel *m, const AsWTensor *w, bool fp8_kind, char *buf, size_t n)
{
    const char *how = fp8_kind && as_proj_fp8(m, w) ? "fp8 linear (act_quant + fp8 GEMM)"
                      : as_wt_is_fp8(w)              ? "bf16 linear of bf16(fp8 * scale)"
                                                     : "bf16 linear";
    if (as_wt_is_fp8(w))
        snprintf(buf, n, "%s %dx%d scales (%s), %s", as_dtype_name(w->dtype), w->block, w->block,
                 as_dtype_name(w->scale->dtype), how);
    else
        snprintf(buf, n, "%s, %s", as_dtype_name(w->dtype), how);
}

/* The norm weights stored with values that are not bf16 (rounded when loaded). */
static int norms_rounded(const AsModel *m)
{
    int n = 0;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const AsLayerWeights *w = &m->layer[l];
        const AsWTensor *norms[] = {w->attn_norm, w->q_norm, w->kv_norm, w->c_norm, w->i_k_norm};
        for (int i = 0; i < 5; i++)
            n += norms[i] && as_wt_norm_rounds(norms[i]);
    }
    return n;
}

/* Each fp8 projection once, from the first layer that has it (indexer.wq_b: the first index source). */
static int first_projections(const AsModel *m, const AsWTensor *out[5], const char *names[5])
{
    int n = 0;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const AsWTensor *p[5];
        const char *nm[5];
        int k = as_fp8_projections(m, l, p, nm);
        for (int i = 0; i < k; i++) {
            bool seen = false;
            for (int j = 0; j < n; j++)
                seen |= !strcmp(names[j], nm[i]);
            if (!seen && n < 5) {
                out[n] = p[i];
                names[n++] = nm[i];
            }
        }
    }
    return n;
}

static void print_precision(const AsModel *m, AsPrecision asked)
{
    printf("precision  %s (%s)\n", as_precision_name(m->precision), precision_why(m, asked));
    const AsWTensor *p[5];
    const char *names[5];
    int n = first_projections(m, p, names);
    char line[160];
    for (int i = 0; i < n; i++) {
        proj_line(m, p[i], true, line, sizeof line);
        printf("  %-13s %s\n", names[i], line);
    }
    proj_line(m, m->layer[0].wo_a, false, line, sizeof line);
    printf("  %-13s %s\n", "wo_a", line);
    int r = norms_rounded(m);
    printf("  %-13s bf16 parameters%s", "norms", r ? "" : " (stored as bf16 values)\n");
    if (r)
        printf(": %d stored with values that are not bf16, rounded once when loaded\n", r);
}

static void print_text(const AsModel *m, AsPrecision asked)
{
    const AsConfig *c = &m->cfg;
    char dir[2 * sizeof m->dir], wn[2 * sizeof m->weights_name]; /* a directory's name may hold anything */
    as_text_escape(m->dir, dir, sizeof dir);
    as_text_escape(m->weights_name, wn, sizeof wn);
    printf("model      %s  (%s, %d file%s)\n", dir, wn, m->n_files, m->n_files == 1 ? "" : "s");
    printf("digest     %s\n", m->digest);
    printf("geometry   dim %d, %d layers, %d heads x %d (rope %d), q_lora_rank %d, %d output groups x %d (gw %d)\n",
           c->dim, c->n_layers, c->n_heads, c->head_dim, c->rope_head_dim, c->q_lora_rank, c->o_groups,
           c->o_lora_rank, c->gw);
    printf("window     %d rows, norm_eps %g, max_seq %d\n", c->window, (double)c->norm_eps, c->max_seq);
    printf("indexer    %d heads x %d, index_topk %d", c->index_n_heads, c->index_head_dim, c->index_topk);
    if (c->candidate_source >= 0)
        printf("; candidates from layer %d: top %d blocks of %d\n", c->candidate_source, c->candidate_topk_blocks,
               c->candidate_block_size);
    else
        printf("; no candidate selection\n");
    print_precision(m, asked);
    printf("rope       ratio 0: theta %g; ratio > 0: theta %g with YaRN factor %g (original %d, beta %g/%g)\n",
           c->rope_theta, c->compress_rope_theta, c->rope_factor, c->original_seq_len, c->beta_fast, c->beta_slow);
    printf("\n%s\n", as_config_role_header());
    for (int l = 0; l < c->n_layers; l++) {
        char line[160];
        as_config_role_line(c, l, line, sizeof line);
        printf("%s\n", line);
    }
    int w = 4;
    for (int i = 0; i < m->n_tensors; i++) {
        int k = (int)strlen(m->tensors[i].name);
        w = k > w ? k : w;
    }
    printf("\n%-*s  %-8s %-14s %s\n", w, "tensor", "dtype", "shape", "bytes");
    for (int i = 0; i < m->n_tensors; i++) {
        const AsWTensor *t = &m->tensors[i];
        char shape[96];
        as_shape_str(t->shape, t->ndim, shape, sizeof shape);
        printf("%-*s  %-8s %-14s %lld\n", w, t->name, as_dtype_name(t->dtype), shape, (long long)t->nbytes);
    }
    int64_t total = total_bytes(m);
    printf("\ntotal      %d tensors, %lld bytes (%.2f MiB)", m->n_tensors, (long long)total,
           (double)total / (1 << 20));
    int sk = skipped(m);
    if (sk)
        printf("; %d tensors of dtypes attnscope does not read not listed", sk);
    int un = unused(m);
    if (un)
        printf("; %d tensors the attention does not use skipped unread", un);
    printf("\n");
}

static cJSON *precision_json(const AsModel *m, AsPrecision asked)
{
    cJSON *o = cJSON_CreateObject(), *projs = cJSON_CreateObject();
    if (!o || !projs) {
        cJSON_Delete(o);
        cJSON_Delete(projs);
        return NULL;
    }
    cJSON_AddStringToObject(o, "runs", as_precision_name(m->precision));
    cJSON_AddStringToObject(o, "why", precision_why(m, asked));
    const AsWTensor *p[5];
    const char *names[5];
    int n = first_projections(m, p, names);
    for (int i = 0; i < n; i++) {
        cJSON *q = cJSON_CreateObject();
        cJSON_AddStringToObject(q, "dtype", as_dtype_name(p[i]->dtype));
        if (as_wt_is_fp8(p[i]))
            cJSON_AddNumberToObject(q, "scale_block", p[i]->block);
        cJSON_AddStringToObject(q, "linear", as_proj_fp8(m, p[i]) ? "fp8" : "bf16");
        cJSON_AddItemToObject(projs, names[i], q);
    }
    cJSON_AddItemToObject(o, "projections", projs);
    cJSON_AddNumberToObject(o, "norms_rounded_to_bf16", norms_rounded(m));
    return o;
}

static int print_json(const AsModel *m, AsPrecision asked)
{
    const AsConfig *c = &m->cfg;
    char *cfg_text = as_config_to_json(c);
    cJSON *root = cJSON_CreateObject(), *cfg = cfg_text ? cJSON_Parse(cfg_text) : NULL;
    free(cfg_text);
    cJSON *roles = cJSON_CreateArray(), *tensors = cJSON_CreateArray();
    if (!root || !cfg || !roles || !tensors) {
        cJSON_Delete(root);
        cJSON_Delete(cfg);
        cJSON_Delete(roles);
        cJSON_Delete(tensors);
        fprintf(stderr, "attnscope info: out of memory\n");
        return 3;
    }
    char dir[2 * sizeof m->dir], wn[2 * sizeof m->weights_name]; /* valid UTF-8 for the JSON */
    as_text_escape(m->dir, dir, sizeof dir);
    as_text_escape(m->weights_name, wn, sizeof wn);
    cJSON_AddStringToObject(root, "path", dir);
    cJSON_AddStringToObject(root, "weights", wn);
    cJSON_AddStringToObject(root, "digest", m->digest);
    cJSON_AddItemToObject(root, "config", cfg);
    cJSON *prec = precision_json(m, asked);
    if (prec)
        cJSON_AddItemToObject(root, "precision", prec);
    for (int l = 0; l < c->n_layers; l++) {
        const AsLayerRole *r = &c->role[l];
        char line[160];
        as_config_role_line(c, l, line, sizeof line);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "layer", l);
        cJSON_AddNumberToObject(o, "ratio", r->ratio);
        cJSON_AddBoolToObject(o, "kv_source", r->kv_source);
        cJSON_AddBoolToObject(o, "index_source", r->index_source);
        cJSON_AddBoolToObject(o, "key_owner", r->key_owner);
        cJSON_AddBoolToObject(o, "candidate_source", r->candidate_source);
        cJSON_AddBoolToObject(o, "uses_candidates", r->uses_candidates);
        cJSON_AddNumberToObject(o, "kv_from", r->kv_from);
        cJSON_AddNumberToObject(o, "keys_from", r->keys_from);
        cJSON_AddNumberToObject(o, "select_from", r->select_from);
        cJSON_AddStringToObject(o, "line", line);
        cJSON_AddItemToArray(roles, o);
    }
    cJSON_AddItemToObject(root, "roles", roles);
    for (int i = 0; i < m->n_tensors; i++) {
        const AsWTensor *t = &m->tensors[i];
        cJSON *o = cJSON_CreateObject(), *sh = cJSON_CreateArray();
        for (int d = 0; sh && d < t->ndim; d++)
            cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->shape[d]));
        cJSON_AddStringToObject(o, "name", t->name);
        cJSON_AddStringToObject(o, "dtype", as_dtype_name(t->dtype));
        cJSON_AddItemToObject(o, "shape", sh);
        cJSON_AddNumberToObject(o, "bytes", (double)t->nbytes);
        cJSON_AddItemToArray(tensors, o);
    }
    cJSON_AddItemToObject(root, "tensors", tensors);
    cJSON_AddNumberToObject(root, "total_bytes", (double)total_bytes(m));
    cJSON_AddNumberToObject(root, "skipped_tensors", skipped(m));
    cJSON_AddNumberToObject(root, "unused_tensors", unused(m));
    char *s = cJSON_Print(root);
    cJSON_Delete(root);
    if (!s) {
        fprintf(stderr, "attnscope info: out of memory\n");
        return 3;
    }
    printf("%s\n", s);
    free(s);
    return 0;
}

static int cmd_info(int argc, char **argv)
{
    int max_seq = 0;
    bool json = false;
    const char *precision = NULL;
    const AsOpt opts[] = {
        {"--max-seq", NULL, AS_OPT_INT, &max_seq, 2, AS_LIMIT_MAX_SEQ},
        {"--precision", NULL, AS_OPT_STR, &precision, 0, 0},
        {"--json", NULL, AS_OPT_FLAG, &json, 0, 0},
        {0},
    };
    const char *path = NULL;
    int n = 0;
    int rc = as_args_parse("info", argc, argv, opts, &path, 0, 1, &n);
    if (rc)
        return rc == AS_ARGS_HELP ? 0 : rc;
    if (!n)
        return as_cli_usage_error("info", "missing the model (a directory or a .safetensors file)");
    AsPrecision asked;
    if ((rc = as_cli_precision("info", precision, &asked)))
        return rc;
    AsModel m;
    AsError err = {0};
    if ((rc = as_model_load(path, max_seq, &m, &err)))
        return as_cli_fail("info", &err);
    if (asked != AS_PREC_AUTO && (rc = as_model_set_precision(&m, asked, &err))) {
        as_model_free(&m);
        return as_cli_fail("info", &err);
    }
    if (json)
        rc = print_json(&m, asked);
    else
        print_text(&m, asked);
    as_model_free(&m);
    return rc;
}

AS_COMMAND(info, cmd_info, "show a model's geometry, layer roles and tensors",
           "info DIR|FILE [--max-seq N] [--precision fp8|bf16] [--json]\n\n"
           "Loads a model (a directory with config.json and model.safetensors or an index and its\n"
           "shards, or a .safetensors file with config.json beside it), checks every tensor each\n"
           "layer's role needs, and prints the geometry, one line per layer (its ratio, roles, and\n"
           "which layer's compressed rows, index keys and selection it reads), the precision it runs in\n"
           "and how each projection computes in it, the tensor inventory and the total size.\n\n"
           "options:\n"
           "  --max-seq N   run capacity to check the config with (default: the config's, or 8192)\n"
           "  --precision P fp8 or bf16 instead of the model's own (the config's dtype, else its weights)\n"
           "  --json        the same as one JSON object\n")
