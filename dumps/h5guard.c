/* as_guard_run: fork, run, pass the one-line message back through a pipe, wait. The child
 * leaves by _exit so that nothing of the parent's (atexit handlers, HDF5's own close, leak
 * checks) runs twice. */
#include "dumps/h5guard.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

void *as_guard_alloc(size_t bytes)
{
    if (!bytes)
        return NULL;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void as_guard_free(void *p, size_t bytes)
{
    if (p)
        munmap(p, bytes);
}

static void write_all(int fd, const char *s, size_t len)
{
    while (len) {
        ssize_t k = write(fd, s, len);
        if (k <= 0)
            return;
        s += k;
        len -= (size_t)k;
    }
}

int as_guard_run(AsGuardFn fn, void *ctx, const char *what, AsError *err)
{
    int fds[2];
    if (pipe(fds) < 0)
        return fn(ctx, err);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return fn(ctx, err);
    }
    if (pid == 0) {
        close(fds[0]);
        /* a crash must end the child by its signal, whatever handlers the process installed
         * (a sanitizer's or a fuzzer's would report it as their own and exit with a status) */
        static const int crash_sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS};
        for (size_t i = 0; i < sizeof crash_sigs / sizeof crash_sigs[0]; i++)
            signal(crash_sigs[i], SIG_DFL);
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            dup2(devnull, STDERR_FILENO); /* the library's crash report is not the message */
        AsError e = {0};
        int rc = fn(ctx, &e);
        write_all(fds[1], e.msg, strlen(e.msg));
        _exit(rc & 0xff);
    }
    close(fds[1]);
    char msg[sizeof err->msg];
    size_t n = 0;
    for (;;) {
        ssize_t k = read(fds[0], msg + n, sizeof msg - 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        n += (size_t)k;
        if (n == sizeof msg - 1)
            break;
    }
    msg[n] = '\0';
    close(fds[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR)
            return as_err(err, AS_ERUNTIME, "%s: lost the reading process: %s", what, strerror(errno));
    }
    if (WIFSIGNALED(st))
        return as_err(err, AS_EBADINPUT, "%s: damaged: the HDF5 library crashed reading it (signal %d)", what,
                      WTERMSIG(st));
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : AS_ERUNTIME;
    if (rc == AS_EBADINPUT || rc == AS_ERUNTIME || rc == AS_EREFUSED || rc == AS_ECANCELLED)
        as_err(err, rc, "%s", n ? msg : "the reading process failed without a message");
    else if (rc) /* not one of ours: the library (or a sanitizer) ended it */
        rc = as_err(err, AS_EBADINPUT, "%s: damaged: the reading process exited with status %d", what, rc);
    return rc;
}
