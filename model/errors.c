#include "model/errors.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int as_err(AsError *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
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
    return err->code;
}

void as_err_clear(AsError *err)
{
    if (err) {
        err->code = AS_OK;
        err->msg[0] = '\0';
    }
}
