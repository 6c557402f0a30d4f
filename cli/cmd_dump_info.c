/* `attnscope dump-info F`: what a dump holds — its root attributes, the steps, per step the
 * layers with the sides and tensors present, and the stored verdicts. */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/command.h"
#include "dumps/dump.h"
#include "model/text_safe.h"

static int popcount64(uint64_t m)
{
    int n = 0;
    for (; m; m &= m - 1)
        n++;
    return n;
}

static void print_tensors(uint64_t mask)
{
    if (mask == AS_DUMP_ALL_TENSORS) {
        printf("all %d tensors", AS_T_COUNT);
        return;
    }
    printf("%d tensor%s:", popcount64(mask), popcount64(mask) == 1 ? "" : "s");
    for (int i = 0; i < AS_T_COUNT; i++)
        if (mask & AS_DUMP_TENSOR_BIT(i))
            printf(" %s", as_tensor_desc[i].name);
}

/* The stored line of a layer's worst tensor, when its verdict is not a plain pass. */
static void print_worst(AsDumpReader *r, int step, const AsDumpLayerInfo *li)
{
    if (!li->has_diff || li->verdict <= AS_V_PASS || li->worst_tensor == AS_T_COUNT)
        return;
    AsLayerDiff *d = malloc(sizeof *d);
    AsError err = {0};
    if (!d)
        return;
    if (as_dump_read_diff(r, step, li->layer, d, NULL, NULL, &err) == 0) {
        char line[512];
        as_tensor_diff_line(li->worst_tensor, &d->t[li->worst_tensor], line, sizeof line);
        printf("      %s\n", line);
    } else {
        printf("      (stored diff unreadable: %s)\n", err.msg);
    }
    free(d);
}

static void print_text(AsDumpReader *r)
{
    const AsDumpInfo *in = as_dump_info(r);
    const AsConfig *c = &in->cfg;
    char path[4096]; /* the command line's path: escaped like every name shown */
    as_text_escape(in->path, path, sizeof path);
    printf("dump       %s\n", path);
    printf("format     %s v%d, mode %s, created %s by attnscope %s\n", AS_DUMP_FORMAT, in->format_version, in->mode,
           in->created, in->version);
    printf("weights    %s%s%s\n", *in->weights_name ? in->weights_name : "(none)", *in->weights_digest ? ", digest " : "",
           in->weights_digest);
    printf("geometry   dim %d, %d layers, %d heads x %d, window %d, indexer %d heads x %d, index_topk %d\n", c->dim,
           c->n_layers, c->n_heads, c->head_dim, c->window, c->index_n_heads, c->index_head_dim, c->index_topk);
    if (in->input_tokens)
        printf("inputs     h0: %d tokens from position %d\n", in->input_tokens, in->input_first_pos);
    else
        printf("inputs     none\n");
    if (in->has_state_in)
        printf("state_in   the state before step %d (position %d)%s%s, every layer\n", in->state_in.step,
               in->state_in.start_pos, in->state_in.side[0] ? ", side " : "", in->state_in.side);
    printf("steps      %d\n", in->n_steps);
    for (int s = 0; s < in->n_steps; s++) {
        const AsDumpStepInfo *si = &in->steps[s];
        printf("\nstep %04d  %s, start_pos %d, %d token%s, %d layer%s\n", si->step, si->kind, si->start_pos, si->tokens,
               si->tokens == 1 ? "" : "s", si->n_layers, si->n_layers == 1 ? "" : "s");
        for (int l = 0; l < si->n_layers; l++) {
            const AsDumpLayerInfo *li = &si->layers[l];
            printf("  layer %02d", li->layer);
            if (li->has_diff)
                printf("  %s%s%s", as_verdict_name(li->verdict), li->worst_tensor < AS_T_COUNT ? ", worst " : "",
                       li->worst_tensor < AS_T_COUNT ? as_tensor_desc[li->worst_tensor].name : "");
            printf("\n");
            for (int k = 0; k < li->n_sides; k++) {
                printf("    %-8s ", li->side[k].name);
                print_tensors(li->side[k].tensors);
                printf("\n");
            }
            print_worst(r, si->step, li);
        }
    }
}

static cJSON *tensor_list(uint64_t mask)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < AS_T_COUNT; i++)
        if (mask & AS_DUMP_TENSOR_BIT(i))
            cJSON_AddItemToArray(a, cJSON_CreateString(as_tensor_desc[i].name));
    return a;
}

static int print_json(AsDumpReader *r)
{
    const AsDumpInfo *in = as_dump_info(r);
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return AS_ERUNTIME;
    char path[4096];
    as_text_escape(in->path, path, sizeof path);
    cJSON_AddStringToObject(root, "path", path);
    cJSON_AddStringToObject(root, "format", AS_DUMP_FORMAT);
    cJSON_AddNumberToObject(root, "format_version", in->format_version);
    cJSON_AddStringToObject(root, "mode", in->mode);
    cJSON_AddStringToObject(root, "created", in->created);
    cJSON_AddStringToObject(root, "attnscope_version", in->version);
    cJSON_AddStringToObject(root, "weights_name", in->weights_name);
    cJSON_AddStringToObject(root, "weights_digest", in->weights_digest);
    cJSON *cfg = cJSON_Parse(in->config_json);
    if (cfg)
        cJSON_AddItemToObject(root, "config", cfg);
    else
        cJSON_AddStringToObject(root, "config_json", in->config_json);
    if (in->input_tokens) {
        cJSON *inp = cJSON_AddObjectToObject(root, "inputs");
        cJSON_AddNumberToObject(inp, "tokens", in->input_tokens);
        cJSON_AddNumberToObject(inp, "first_pos", in->input_first_pos);
    } else {
        cJSON_AddNullToObject(root, "inputs");
    }
    if (in->has_state_in) {
        cJSON *si = cJSON_AddObjectToObject(root, "state_in");
        cJSON_AddNumberToObject(si, "step", in->state_in.step);
        cJSON_AddNumberToObject(si, "start_pos", in->state_in.start_pos);
        cJSON_AddStringToObject(si, "side", in->state_in.side);
    }
    cJSON *steps = cJSON_AddArrayToObject(root, "steps");
    for (int s = 0; steps && s < in->n_steps; s++) {
        const AsDumpStepInfo *si = &in->steps[s];
        cJSON *so = cJSON_CreateObject();
        cJSON_AddNumberToObject(so, "step", si->step);
        cJSON_AddStringToObject(so, "kind", si->kind);
        cJSON_AddNumberToObject(so, "start_pos", si->start_pos);
        cJSON_AddNumberToObject(so, "tokens", si->tokens);
        cJSON *layers = cJSON_AddArrayToObject(so, "layers");
        for (int l = 0; layers && l < si->n_layers; l++) {
            const AsDumpLayerInfo *li = &si->layers[l];
            cJSON *lo = cJSON_CreateObject();
            cJSON_AddNumberToObject(lo, "layer", li->layer);
            cJSON *sides = cJSON_AddArrayToObject(lo, "sides");
            for (int k = 0; sides && k < li->n_sides; k++) {
                cJSON *sd = cJSON_CreateObject();
                cJSON_AddStringToObject(sd, "name", li->side[k].name);
                cJSON_AddItemToObject(sd, "tensors", tensor_list(li->side[k].tensors));
                cJSON_AddItemToArray(sides, sd);
            }
            if (li->has_diff) {
                cJSON_AddStringToObject(lo, "verdict", as_verdict_name(li->verdict));
                if (li->worst_tensor < AS_T_COUNT)
                    cJSON_AddStringToObject(lo, "worst_tensor", as_tensor_desc[li->worst_tensor].name);
            }
            cJSON_AddItemToArray(layers, lo);
        }
        cJSON_AddItemToArray(steps, so);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) {
        fprintf(stderr, "attnscope dump-info: out of memory\n");
        return AS_ERUNTIME;
    }
    printf("%s\n", text);
    free(text);
    return 0;
}

static int cmd_dump_info(int argc, char **argv)
{
    bool json = false;
    const AsOpt opts[] = {
        {"--json", NULL, AS_OPT_FLAG, &json, 0, 0},
        {0},
    };
    const char *path = NULL;
    int n = 0;
    int rc = as_args_parse("dump-info", argc, argv, opts, &path, 1, 1, &n);
    if (rc)
        return rc == AS_ARGS_HELP ? 0 : rc;
    AsDumpReader *r;
    AsError err = {0};
    if (as_dump_open(path, &r, &err))
        return as_cli_fail("dump-info", &err);
    rc = json ? print_json(r) : (print_text(r), 0);
    as_dump_close(r);
    return rc;
}

/* The name has a dash, so the registration is spelled out rather than AS_COMMAND. */
static const AsCommand dump_info_command = {
    "dump-info", cmd_dump_info, "list what a dump holds: attributes, steps, layers, sides, verdicts",
    "dump-info FILE [--json]\n\n"
    "Opens an attnscope dump (HDF5, docs/DUMP_FORMAT.md), validates it whole, and lists its root\n"
    "attributes (format, mode, weights, version, geometry), the token inputs, and per step the\n"
    "layers with the sides stored (engine, ref, or an external writer's names), the tensors of\n"
    "each side, and the stored verdict with the worst tensor's finding.\n\n"
    "options:\n"
    "  --json   the same as one JSON object\n"
    "exit status: 0 ok, 2 not a readable dump (the message names the object), 3 runtime failure\n"};

__attribute__((constructor)) static void register_dump_info(void) { as_command_register(&dump_info_command); }
