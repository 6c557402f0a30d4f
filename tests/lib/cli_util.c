#include "tests/lib/cli_util.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/harness.h"

const char *as_cli_bin(void)
{
    const char *b = getenv("ATTNSCOPE_BIN");
    return b && *b ? b : "./build/attnscope";
}

char *as_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)(n > 0 ? n : 0) + 1);
    size_t k = buf && n > 0 ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    if (!buf)
        return NULL;
    buf[k] = '\0';
    if (len)
        *len = k;
    return buf;
}

static void out_paths(char *out, char *err, size_t n)
{
    snprintf(out, n, "%s/cli.stdout", as_test_tmpdir());
    snprintf(err, n, "%s/cli.stderr", as_test_tmpdir());
}

pid_t as_cli_spawn(const char *const *args)
{
    char out[600], err[600];
    out_paths(out, err, sizeof out);
    const char *argv[40] = {as_cli_bin()};
    int n = 1;
    for (; args[n - 1] && n < 39; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    fflush(stdout);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
        int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0)
            _exit(127);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

int as_cli_wait(pid_t pid)
{
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid, "waitpid");
    int status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    REQUIRE(status != 127, "cannot run %s (set ATTNSCOPE_BIN)", as_cli_bin());
    return status;
}

void as_cli_run(AsCliResult *r, const char *const *args)
{
    r->status = as_cli_wait(as_cli_spawn(args));
    char out[600], err[600];
    out_paths(out, err, sizeof out);
    char *o = as_slurp(out, NULL), *e = as_slurp(err, NULL);
    snprintf(r->out, sizeof r->out, "%s", o ? o : "");
    snprintf(r->err, sizeof r->err, "%s", e ? e : "");
    free(o);
    free(e);
}
