#include "engine/switches.h"

#include <stdlib.h>
#include <string.h>

const char *const as_engine_switch_names[] = {
    "ATTNSCOPE_ATTN_COMBINE_AHEAD", "ATTNSCOPE_ATTN_EARLY", "ATTNSCOPE_ATTN_MMA_HEADS", "ATTNSCOPE_ATTN_PATH",
    "ATTNSCOPE_ATTN_SPLIT", "ATTNSCOPE_DECODE_FUSE", "ATTNSCOPE_FP8_QDQ", "ATTNSCOPE_GEMV_BLOCKS_PER_SM", "ATTNSCOPE_GEMV_CFG",
    "ATTNSCOPE_GEMV_EARLY", "ATTNSCOPE_GEMV_RESIDENT", "ATTNSCOPE_GPU_MEM_LIMIT_MB", "ATTNSCOPE_ISCORE_ROW",
    "ATTNSCOPE_KV_FORK", "ATTNSCOPE_PDL", "ATTNSCOPE_SEL_ROOM", "ATTNSCOPE_TOPK_THREADS_ROW",
    "ATTNSCOPE_TOPK_THREADS_ROWS", "ATTNSCOPE_TOPK_WARP_RANGE",
    NULL,
};

/* Appends s (at most max bytes of it, unsafe bytes as '?') at *at, keeping room for the terminator. */
static void put(char *buf, size_t n, size_t *at, const char *s, size_t max, int sanitise)
{
    for (size_t i = 0; s[i] && i < max && *at + 1 < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        buf[(*at)++] = sanitise && (c < 0x20 || c > 0x7e || c == '"' || c == '\\') ? '?' : (char)c;
    }
    buf[*at] = '\0';
}

int as_engine_switches_set(char *buf, size_t n)
{
    size_t at = 0;
    int count = 0;
    if (!buf || !n)
        return 0;
    buf[0] = '\0';
    for (const char *const *name = as_engine_switch_names; *name; name++) {
        const char *v = getenv(*name);
        if (!v)
            continue;
        if (count++)
            put(buf, n, &at, " ", 1, 0);
        put(buf, n, &at, *name, strlen(*name), 0);
        put(buf, n, &at, "=", 1, 0);
        put(buf, n, &at, v, 48, 1);
    }
    return count;
}
