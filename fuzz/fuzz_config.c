/* libFuzzer target: config.json text in either spelling (as_config_parse_json, then the SPEC
 * section 1 rules of as_config_validate). Seeds: fuzz/corpus/config/ (the presets as `attnscope
 * gen` writes them, the released config in both spellings, the micro geometry).
 *
 * Contract beyond "no crash": an error is code 2 with one line; an accepted config keeps every
 * field within its AS_LIMIT_*, its derived roles point at earlier layers of the right kind, and
 * it round-trips: written back (as_config_to_json) and read again it is the same config. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "model/config.h"
#include "model/gguf.h"

static void cf_check_roles(const AsConfig *c)
{
    FZ_ASSERT(c->n_layers >= 1 && c->n_layers <= AS_MAX_LAYERS, "n_layers %d", c->n_layers);
    FZ_ASSERT(c->dim <= AS_LIMIT_DIM && c->n_heads <= AS_LIMIT_HEADS && c->head_dim <= AS_LIMIT_HEAD_DIM &&
                  c->window <= AS_LIMIT_WINDOW && c->max_seq <= AS_LIMIT_MAX_SEQ && c->index_topk <= AS_LIMIT_TOPK,
              "a field beyond its limit");
    for (int l = 0; l < c->n_layers; l++) {
        const AsLayerRole *r = &c->role[l];
        FZ_ASSERT(r->ratio >= 0 && r->ratio <= 2, "layer %d ratio %d", l, r->ratio);
        FZ_ASSERT(r->kv_from <= l && r->keys_from <= l && r->select_from <= l, "layer %d reads a later layer", l);
        FZ_ASSERT(r->ratio == 0 || (r->kv_from >= 0 && c->role[r->kv_from].kv_source &&
                                    c->role[r->kv_from].ratio == r->ratio),
                  "layer %d (ratio %d) reads kv source %d", l, r->ratio, r->kv_from);
        char line[160];
        as_config_role_line(c, l, line, sizeof line);
        as_config_role_line(c, l, line, 7); /* cut short */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    AsConfig *c = malloc(sizeof *c), *back = malloc(sizeof *back);
    FZ_ASSERT(c && back, "out of memory");
    AsError err = {0};
    int rc = as_config_parse_json((const char *)data, size, c, &err);
    if (!rc)
        rc = as_config_validate(c, &err);
    if (rc) {
        FZ_CHECK_ERR(rc, err);
        goto out;
    }
    cf_check_roles(c);
    char *json = as_config_to_json(c);
    FZ_ASSERT(json, "as_config_to_json failed");
    rc = as_config_parse_json(json, strlen(json), back, &err);
    if (!rc)
        rc = as_config_validate(back, &err);
    FZ_ASSERT(!rc, "the config written back does not read again: %s\n%s", err.msg, json);
    FZ_ASSERT(!memcmp(c, back, sizeof *c), "the config written back reads as another config:\n%s", json);
    free(json);
    AsGgufMeta meta[64];
    FZ_ASSERT(as_gguf_config_meta(c, AS_GGUF_ARCH, meta, 64) > 0, "as_gguf_config_meta failed");
out:
    free(c);
    free(back);
    return 0;
}
