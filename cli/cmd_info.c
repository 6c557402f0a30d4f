/* `attnscope info`: a model's geometry, each layer's role and its tensor inventory. */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/command.h"
#include "model/config.h"
#include "model/safetensors.h"
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

static void print_text(const AsModel *m)
{
    const AsConfig *c = &m->cfg;
    printf("model      %s  (%s, %d file%s)\n", m->dir, m->weights_name, m->n_files, m->n_files == 1 ? "" : "s");
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
    printf("\n");
}

static int print_json(const AsModel *m)
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
    cJSON_AddStringToObject(root, "path", m->dir);
    cJSON_AddStringToObject(root, "weights", m->weights_name);
    cJSON_AddStringToObject(root, "digest", m->digest);
    cJSON_AddItemToObject(root, "config", cfg);
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
    const AsOpt opts[] = {
        {"--max-seq", NULL, AS_OPT_INT, &max_seq, 2, AS_LIMIT_MAX_SEQ},
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
    AsModel m;
    AsError err = {0};
    if ((rc = as_model_load(path, max_seq, &m, &err)))
        return as_cli_fail("info", &err);
    if (json)
        rc = print_json(&m);
    else
        print_text(&m);
    as_model_free(&m);
    return rc;
}

AS_COMMAND(info, cmd_info, "show a model's geometry, layer roles and tensors",
           "info DIR|FILE [--max-seq N] [--json]\n\n"
           "Loads a model (a directory with config.json and model.safetensors or an index and its\n"
           "shards, or a .safetensors file with config.json beside it), checks every tensor each\n"
           "layer's role needs, and prints the geometry, one line per layer (its ratio, roles, and\n"
           "which layer's compressed rows, index keys and selection it reads), the tensor inventory\n"
           "and the total size.\n\n"
           "options:\n"
           "  --max-seq N   run capacity to check the config with (default: the config's, or 8192)\n"
           "  --json        the same as one JSON object\n")
