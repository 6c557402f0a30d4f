/* ATTNSCOPE_DECODE_FUSE's, ATTNSCOPE_SEL_ROOM's and ATTNSCOPE_ATTN_EARLY's parsers (engine/fusions.h); host
 * code only, so the CPU tests check them. */
#include <stdlib.h>
#include <string.h>

#include "engine/fusions.h"

int as_decode_fusions(const char *v, unsigned *out, AsError *err)
{
    static const struct {
        const char *name;
        unsigned bit;
    } names[] = {{"residual", AS_FUSE_RESIDUAL}, {"rope", AS_FUSE_ROPE}, {"oback", AS_FUSE_OBACK},
                 {"kvidx", AS_FUSE_KV_IDX}, {"norm", AS_FUSE_NORM},
                 {"kvsel", AS_FUSE_KV_SEL}};
    *out = 0;
    if (!v || !*v) {
        *out = AS_FUSE_DEFAULT;
        return 0;
    }
    if (!strcmp(v, "0") || !strcmp(v, "none"))
        return 0;
    if (!strcmp(v, "1") || !strcmp(v, "all")) {
        *out = AS_FUSE_ALL;
        return 0;
    }
    unsigned bits = 0;
    for (const char *p = v;;) {
        size_t n = strcspn(p, ",");
        unsigned bit = 0;
        for (size_t k = 0; k < sizeof names / sizeof names[0] && !bit; k++)
            if (strlen(names[k].name) == n && !strncmp(p, names[k].name, n))
                bit = names[k].bit;
        if (!bit)
            return as_err(err, AS_EBADINPUT,
                          "ATTNSCOPE_DECODE_FUSE: unknown fusion '%.*s' (0, none, 1, all, or a comma list of "
                          "residual, rope, oback, kvidx, norm, kvsel)",
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
    if (!v || !*v || !strcmp(v, "auto"))
        return 0;
    *out = 0;
    char *end = NULL;
    const long n = strtol(v, &end, 10);
    if (*end || v[0] == '-' || v[0] == '+' || v[0] == ' ' || n < 0 || n > AS_SEL_ROOM_MAX)
        return as_err(err, AS_EBADINPUT, "ATTNSCOPE_SEL_ROOM: '%.40s' is not 'auto' or a count of blocks from 0 to %d", v,
                      AS_SEL_ROOM_MAX);
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

int as_attn_early(const char *v, int *out, AsError *err)
{
    *out = AS_EARLY_OFF;
    if (!v || !*v || !strcmp(v, "1"))
        *out = AS_EARLY_ALL;
    else if (!strcmp(v, "reuse"))
        *out = AS_EARLY_REUSE;
    else if (strcmp(v, "0"))
        return as_err(err, AS_EBADINPUT, "ATTNSCOPE_ATTN_EARLY: '%.40s' is not 0, 1 or reuse", v);
    return 0;
}
