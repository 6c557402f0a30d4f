#include "model/text_safe.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

void as_text_escape(const char *in, char *out, size_t n)
{
    if (!n)
        return;
    size_t o = 0;
    const unsigned char *p = (const unsigned char *)(in ? in : "");
    while (*p && o + 1 < n) {
        unsigned c = *p;
        int len = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        bool ok = len > 0;
        for (int k = 1; ok && k < len; k++)
            ok = (p[k] & 0xc0) == 0x80;
        if (ok && len == 1 && (c < 0x20 || c == 0x7f))
            ok = false;
        if (ok && len == 2 && c == 0xc2 && p[1] < 0xa0)
            ok = false; /* C1 controls */
        if (ok && len == 3 && ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0)))
            ok = false;
        if (ok && len == 4 && ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90)))
            ok = false;
        if (ok && c == '\\') {
            if (o + 2 >= n)
                break;
            out[o++] = '\\', out[o++] = '\\';
            p++;
        } else if (ok) {
            if (o + (size_t)len >= n)
                break;
            memcpy(out + o, p, (size_t)len);
            o += (size_t)len, p += len;
        } else {
            if (o + 4 >= n)
                break;
            snprintf(out + o, 5, "\\x%02x", c);
            o += 4, p++;
        }
    }
    out[o] = '\0';
}
