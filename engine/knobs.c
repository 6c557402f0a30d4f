/* The engine's knobs: defaults, the flags' values, and the flags that reproduce a setting. */
#include "engine/knobs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    unsigned bit;
} fusion_names[] = {{"residual", AS_FUSE_RESIDUAL}, {"rope", AS_FUSE_ROPE}, {"oback", AS_FUSE_OBACK},
                    {"kvidx", AS_FUSE_KV_IDX},     {"norm", AS_FUSE_NORM}, {"kvsel", AS_FUSE_KV_SEL}};
static const char *const attn_path_names[] = {"auto", "warp", "mma", "wgmma"};

void as_engine_knobs_default(AsEngineKnobs *k)
{
    memset(k, 0, sizeof *k);
    k->attn_path = AS_ATTN_AUTO;
    k->pdl = true;
    k->kv_fork = true;
    k->fusions = AS_FUSE_ALL;
    k->sel_room = AS_SEL_ROOM_AUTO;
    k->gpu_mem_limit_mb = 0;
}

int as_attn_path_parse(const char *v, AsAttnPath *out, AsError *err)
{
    *out = AS_ATTN_AUTO;
    for (int i = 0; v && i < (int)(sizeof attn_path_names / sizeof attn_path_names[0]); i++)
        if (!strcmp(v, attn_path_names[i])) {
            *out = (AsAttnPath)i;
            return 0;
        }
    return as_err(err, AS_EBADINPUT, "--attn-path: '%.40s' is not auto, warp, mma or wgmma", v ? v : "");
}

const char *as_attn_path_name(AsAttnPath p)
{
    return p >= AS_ATTN_AUTO && p <= AS_ATTN_WGMMA ? attn_path_names[p] : "?";
}

int as_decode_fusions(const char *v, unsigned *out, AsError *err)
{
    *out = AS_FUSE_ALL;
    if (v && !strcmp(v, "all"))
        return 0;
    if (v && !strcmp(v, "none")) {
        *out = 0;
        return 0;
    }
    unsigned bits = 0;
    for (const char *p = v ? v : "";;) {
        size_t n = strcspn(p, ",");
        unsigned bit = 0;
        for (size_t k = 0; k < sizeof fusion_names / sizeof fusion_names[0] && !bit; k++)
            if (strlen(fusion_names[k].name) == n && !strncmp(p, fusion_names[k].name, n))
                bit = fusion_names[k].bit;
        if (!bit)
            return as_err(err, AS_EBADINPUT,
                          "--fusions: unknown fusion '%.*s' (all, none, or a comma list of residual, rope, oback, "
                          "kvidx, norm, kvsel)",
                          (int)(n < 40 ? n : 40), p);
        bits |= bit;
        if (!p[n])
            break;
        p += n + 1;
    }
    *out = bits;
    return 0;
}

int as_sel_room(const char *v, int *out, AsError *err)
{
    *out = AS_SEL_ROOM_AUTO;
    if (v && !strcmp(v, "auto"))
        return 0;
    char *end = NULL;
    const long n = v && *v >= '0' && *v <= '9' ? strtol(v, &end, 10) : -1;
    if (n < 0 || *end || n > AS_SEL_ROOM_MAX)
        return as_err(err, AS_EBADINPUT, "--sel-room: '%.40s' is not 'auto' or a count of blocks from 0 to %d",
                      v ? v : "", AS_SEL_ROOM_MAX);
    *out = (int)n;
    return 0;
}

int as_sel_room_default(int64_t resident_blocks, int sms)
{
    if (sms <= 0)
        return 0;
    const int64_t free_blocks = resident_blocks - sms;
    return free_blocks <= 0 ? 0 : free_blocks > AS_SEL_ROOM_MAX ? AS_SEL_ROOM_MAX : (int)free_blocks;
}

/* Appends text at *at, keeping room for the terminator. */
static void put(char *buf, size_t n, size_t *at, const char *text)
{
    for (; *text && *at + 1 < n; text++)
        buf[(*at)++] = *text;
    buf[*at] = '\0';
}

/* Appends one flag, a space before it when it is not the first. */
static void flag(char *buf, size_t n, size_t *at, const char *text)
{
    if (*at)
        put(buf, n, at, " ");
    put(buf, n, at, text);
}

void as_engine_knobs_flags(const AsEngineKnobs *k, char *buf, size_t n)
{
    if (!buf || !n)
        return;
    AsEngineKnobs d;
    as_engine_knobs_default(&d);
    size_t at = 0;
    char word[160];
    buf[0] = '\0';
    if (k->attn_path != d.attn_path) {
        snprintf(word, sizeof word, "--attn-path %s", as_attn_path_name(k->attn_path));
        flag(buf, n, &at, word);
    }
    if (!k->pdl)
        flag(buf, n, &at, "--no-pdl");
    if (!k->kv_fork)
        flag(buf, n, &at, "--no-kv-fork");
    if (k->fusions != d.fusions) {
        flag(buf, n, &at, "--fusions ");
        if (!(k->fusions & AS_FUSE_ALL))
            put(buf, n, &at, "none");
        for (size_t i = 0, first = 1; i < sizeof fusion_names / sizeof fusion_names[0]; i++)
            if (k->fusions & fusion_names[i].bit) {
                put(buf, n, &at, first ? "" : ",");
                put(buf, n, &at, fusion_names[i].name);
                first = 0;
            }
    }
    if (k->sel_room != d.sel_room) {
        snprintf(word, sizeof word, "--sel-room %d", k->sel_room);
        flag(buf, n, &at, word);
    }
    if (k->gpu_mem_limit_mb) {
        snprintf(word, sizeof word, "--gpu-mem-limit %d", k->gpu_mem_limit_mb);
        flag(buf, n, &at, word);
    }
    if (k->fp8_qdq)
        flag(buf, n, &at, "--fp8-qdq");
}
