#include "model/textfile.h"

#include "model/infile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int as_read_text_file(const char *path, size_t max, const char *what, char **out, size_t *len, AsError *err)
{
    *out = NULL;
    *len = 0;
    FILE *f = as_fopen_input(path, err); /* a FIFO or a device is refused, never waited on */
    if (!f)
        return err ? err->code : AS_EBADINPUT;
    struct stat st;
    /* a regular file's size is the first guess; pipes and devices grow the buffer as they go */
    size_t cap = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 0 ? (size_t)st.st_size : 4096;
    if (cap > max)
        cap = max;
    cap += 2; /* room to see one byte past max, and the NUL */
    char *buf = malloc(cap);
    size_t n = 0;
    int rc = AS_OK;
    while (buf) {
        n += fread(buf + n, 1, cap - 1 - n, f);
        if (n < cap - 1 || n > max)
            break; /* end of file, an error, or past the limit */
        size_t nc = (cap - 1) * 2 + 1; /* full and not past max yet: double, up to max + 2 */
        if (nc > max + 2)
            nc = max + 2;
        char *nb = realloc(buf, nc);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap = nc;
    }
    if (!buf)
        rc = as_err(err, AS_ERUNTIME, "%s: out of memory reading it", path);
    else if (ferror(f))
        rc = as_err(err, AS_EBADINPUT, "%s: read error (%s)", path, strerror(errno));
    else if (n > max)
        rc = as_err(err, AS_EBADINPUT, "%s: larger than %zu MiB: not a %s", path, max >> 20, what);
    fclose(f);
    if (rc) {
        free(buf);
        return rc;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return AS_OK;
}
