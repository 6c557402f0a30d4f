#include "model/infile.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_of(mode_t m)
{
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
    if (S_ISSOCK(m))
        return "a socket";
    return "not a plain file";
}

int as_open_input(const char *path, AsError *err)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        as_err(err, AS_EBADINPUT, "%s: cannot open (%s)", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st)) {
        as_err(err, AS_EBADINPUT, "%s: cannot stat (%s)", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        as_err(err, AS_EBADINPUT, "%s: not a regular file (%s)", path, kind_of(st.st_mode));
        close(fd);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

int as_check_input(const char *path, AsError *err)
{
    int fd = as_open_input(path, err);
    if (fd < 0)
        return AS_EBADINPUT;
    close(fd);
    return AS_OK;
}

FILE *as_fopen_input(const char *path, AsError *err)
{
    int fd = as_open_input(path, err);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        as_err(err, AS_ERUNTIME, "%s: cannot open (%s)", path, strerror(errno));
        close(fd);
    }
    return f;
}
