#include "model/errors.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Messages quote what files say (names, keys, values): one line of printable text whatever a
 * file holds. Control characters (C0, DEL, C1 as U+0080..U+009F) and bytes that are not UTF-8
 * become '?', so that a message is one line and a hostile name cannot drive the terminal. */
static void printable(char *s)
{
    for (unsigned char *p = (unsigned char *)s; *p;) {
        unsigned c = *p;
        if (c < 0x80) {
            if (c < 0x20 || c == 0x7f)
                *p = '?';
            p++;
            continue;
        }
        int n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        int ok = n > 0;
        for (int k = 1; ok && k < n; k++)
            ok = (p[k] & 0xc0) == 0x80;
        if (ok && n == 2 && c == 0xc2 && p[1] < 0xa0)
            ok = 0; /* C1 controls */
        if (ok && n == 3 && ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0)))
            ok = 0; /* overlong, surrogates */
        if (ok && n == 4 && ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90)))
            ok = 0; /* overlong, beyond U+10FFFF */
        if (!ok) {
            *p++ = '?';
            continue;
        }
        p += n;
    }
}

bool as_has_control(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n; i++)
        if (p[i] < 0x20 || p[i] == 0x7f || (p[i] == 0xc2 && i + 1 < n && p[i + 1] >= 0x80 && p[i + 1] < 0xa0))
            return true;
    return false;
}

int as_err(AsError *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        printable(err->msg);
        err->code = code;
    }
    return code;
}

int as_err_wrap(AsError *err, const char *fmt, ...)
{
    if (!err)
        return AS_ERUNTIME;
    char prefix[256], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    if (snprintf(err->msg, sizeof err->msg, "%s: %s", prefix, old) >= (int)sizeof err->msg)
        memcpy(err->msg + sizeof err->msg - 4, "...", 4); /* long chains are cut, visibly */
    printable(err->msg);
    return err->code;
}

void as_err_clear(AsError *err)
{
    if (err) {
        err->code = AS_OK;
        err->msg[0] = '\0';
    }
}
