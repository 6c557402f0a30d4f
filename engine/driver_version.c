/* The NVIDIA kernel driver's version from /proc/driver/nvidia/version (engine/driver_version.h). */
#include <stdio.h>
#include <string.h>

#include "engine/driver_version.h"

int as_nvidia_driver_version_parse(const char *text, char *out, size_t n)
{
    if (n)
        out[0] = '\0';
    const char *p = text ? strstr(text, "NVRM version:") : NULL;
    if (!p || !n)
        return 0;
    const char *eol = strchr(p, '\n');
    for (p += strlen("NVRM version:"); *p && (!eol || p < eol);) {
        const size_t len = strcspn(p, " \t\n");
        const size_t digits = strspn(p, "0123456789."), dots = (size_t)(memchr(p, '.', len) != NULL);
        if (len && digits == len && dots && p[0] != '.' && p[len - 1] != '.') {
            snprintf(out, n, "%.*s", (int)len, p);
            return 1;
        }
        p += len ? len : 1;
    }
    return 0;
}

int as_nvidia_driver_version(char *out, size_t n)
{
    char text[512] = "";
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    if (f) {
        const size_t got = fread(text, 1, sizeof text - 1, f);
        text[got] = '\0';
        fclose(f);
    }
    return as_nvidia_driver_version_parse(text, out, n);
}
