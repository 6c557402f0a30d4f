/* Output paths that are not plain new files (docs/SECURITY.md, "Writing files"): character
 * devices and FIFOs written in place (/dev/null stays a device), a FIFO with no reader failing at
 * once, a symlink's target replaced and the link kept, a directory, a socket or a dangling link
 * refused before any work, a name too long and steps past max_seq refused before any step; two
 * gens into one directory leaving one model; a script's expectation as its JUnit result. Every
 * run that could block goes through timeout(1). */
#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "model/errors.h"
#include "model/safetensors.h"
#include "tests/lib/cli_util.h"
#include "tests/lib/harness.h"

static void use_test_cache(void) { setenv("ATTNSCOPE_CACHE", as_test_tmpdir(), 1); }

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* A two-step script over the tiny preset into dir/s.json (optionally with a dump path inside). */
static void script(char *path, size_t n, const char *dump)
{
    snprintf(path, n, "%s/s.json", as_test_tmpdir());
    FILE *f = fopen(path, "w");
    REQUIRE(f, "script");
    if (dump)
        fprintf(f, "{\"model\": \"tiny\", \"steps\": [{\"prefill\": 4}, {\"decode\": 2}], \"dump\": {\"path\": \"%s\"}}",
                dump);
    else
        fprintf(f, "{\"model\": \"tiny\", \"steps\": [{\"prefill\": 4}, {\"decode\": 2}]}");
    fclose(f);
}

/* sh -c CMD under timeout 60 with $B the binary, stderr into err; the exit status (124: it hung). */
static int sh(char *err, size_t errn, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int sh(char *err, size_t errn, const char *fmt, ...)
{
    char cmd[4096], full[8192], ep[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    snprintf(ep, sizeof ep, "%s/sh.err", as_test_tmpdir());
    setenv("B", as_cli_bin(), 1);
    snprintf(full, sizeof full, "timeout 60 sh -c '%s' 2>'%s'", cmd, ep);
    int st = system(full);
    char *e = as_slurp(ep, NULL);
    snprintf(err, errn, "%s", e ? e : "");
    free(e);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static bool is_chr(const char *p)
{
    struct stat st;
    return !stat(p, &st) && S_ISCHR(st.st_mode);
}

TEST(outputs_reports_to_dev_null_keep_it_a_device)
{
    use_test_cache();
    char s[700];
    script(s, sizeof s, NULL);
    REQUIRE(is_chr("/dev/null"), "/dev/null is a character device before the test");
    AsCliResult *r = malloc(sizeof *r);
    as_cli_run(r, AS_ARGS("run", "-q", s, "--report-json", "/dev/null", "--junit", "/dev/null"));
    CHECK(r->status == 0, "run --report-json /dev/null --junit /dev/null: exit %d: %s", r->status, r->err);
    CHECK(is_chr("/dev/null"), "/dev/null is still a character device");
    as_cli_run(r, AS_ARGS("run", "-q", s, "--dump", "/dev/null"));
    CHECK(r->status == 0, "run --dump /dev/null: exit %d: %s", r->status, r->err);
    CHECK(is_chr("/dev/null"), "/dev/null is still a character device after a dump");
    free(r);
}

TEST(outputs_dump_and_report_to_dev_stdout)
{
    use_test_cache();
    char s[700], out[800], err[8192];
    script(s, sizeof s, NULL);
    /* stdout a pipe, then a file */
    snprintf(out, sizeof out, "%s/piped.h5", as_test_tmpdir());
    int st = sh(err, sizeof err, "\"$B\" run -q %s --dump /dev/stdout | cat > %s", s, out);
    CHECK(st == 0, "--dump /dev/stdout into a pipe: exit %d: %s", st, err);
    char *d = as_slurp(out, NULL);
    CHECK(d && !memcmp(d, "\x89HDF\r\n\x1a\n", 8), "the pipe got an HDF5 file");
    free(d);
    st = sh(err, sizeof err, "\"$B\" dump-info %s > /dev/null", out);
    CHECK(st == 0, "dump-info of what came through the pipe: exit %d: %s", st, err);
    snprintf(out, sizeof out, "%s/redirected.h5", as_test_tmpdir());
    st = sh(err, sizeof err, "\"$B\" run -q %s --dump /dev/stdout > %s", s, out);
    CHECK(st == 0, "--dump /dev/stdout redirected to a file: exit %d: %s", st, err);
    st = sh(err, sizeof err, "\"$B\" dump-info %s > /dev/null", out);
    CHECK(st == 0, "dump-info of the redirected stdout: exit %d: %s", st, err);
    snprintf(out, sizeof out, "%s/report.json", as_test_tmpdir());
    st = sh(err, sizeof err, "\"$B\" run -q %s --report-json /dev/stdout | cat > %s", s, out);
    d = as_slurp(out, NULL);
    CHECK(st == 0 && d && d[0] == '{' && strstr(d, "\"attnscope-report\""), "--report-json /dev/stdout: exit %d: %s",
          st, err);
    free(d);
    CHECK(is_chr("/dev/null"), "/dev/null is still a character device");
}

TEST(outputs_fifo_with_and_without_a_reader)
{
    use_test_cache();
    char s[700], fifo[800], got[800], err[8192];
    script(s, sizeof s, NULL);
    snprintf(fifo, sizeof fifo, "%s/fifo", as_test_tmpdir());
    snprintf(got, sizeof got, "%s/got.json", as_test_tmpdir());
    REQUIRE(mkfifo(fifo, 0644) == 0, "mkfifo: %s", strerror(errno));
    double t0 = now_s();
    int st = sh(err, sizeof err, "\"$B\" run -q %s --report-json %s > /dev/null", s, fifo);
    CHECK(st == 3 && lines(err) == 1 && strstr(err, "no reader"), "a FIFO with no reader: exit %d (want 3): %s", st,
          err);
    CHECK(now_s() - t0 < 50, "no hang: %.1f s", now_s() - t0);
    st = sh(err, sizeof err, "cat %s > %s & sleep 0.5; \"$B\" run -q %s --report-json %s > /dev/null; r=$?; wait; exit $r", fifo,
            got, s, fifo);
    char *d = as_slurp(got, NULL);
    CHECK(st == 0 && d && strstr(d, "\"attnscope-report\""), "a FIFO with a reader: exit %d: %s", st, err);
    free(d);
    struct stat sb;
    CHECK(!lstat(fifo, &sb) && S_ISFIFO(sb.st_mode), "the FIFO is still a FIFO");
    /* a dump into a FIFO: built aside, its bytes copied in */
    st = sh(err, sizeof err, "cat %s > %s.h5 & sleep 0.5; \"$B\" run -q %s --dump %s > /dev/null; r=$?; wait; exit $r", fifo, got,
            s, fifo);
    CHECK(st == 0, "a dump into a FIFO with a reader: exit %d: %s", st, err);
    st = sh(err, sizeof err, "\"$B\" dump-info %s.h5 > /dev/null", got);
    CHECK(st == 0, "the dump read back from the FIFO: exit %d: %s", st, err);
    /* a reader that goes away: a write error (exit 3, one line), not SIGPIPE; a GGUF of tiny-q is
     * megabytes, past any pipe buffer */
    char model[800], gguf[800];
    snprintf(model, sizeof model, "%s/tq", as_test_tmpdir());
    snprintf(gguf, sizeof gguf, "%s/f.gguf", as_test_tmpdir());
    st = sh(err, sizeof err, "\"$B\" gen --preset tiny-q -o %s > /dev/null && mkfifo %s", model, gguf);
    REQUIRE(st == 0, "gen tiny-q, mkfifo: %s", err);
    st = sh(err, sizeof err, "head -c 1 %s > /dev/null & sleep 0.5; \"$B\" convert --to gguf --quant q8_0 %s %s > /dev/null; "
            "r=$?; wait; exit $r", gguf, model, gguf);
    CHECK(st == 3 && lines(err) == 1 && strstr(err, "Broken pipe"), "a reader that stops: exit %d (want 3): %s", st,
          err);
    st = sh(err, sizeof err, "cat %s > %s.gguf & sleep 0.5; \"$B\" convert --to gguf --quant q8_0 %s %s > /dev/null; "
            "r=$?; wait; exit $r", gguf, got, model, gguf);
    CHECK(st == 0, "a GGUF through a FIFO: exit %d: %s", st, err);
    st = sh(err, sizeof err, "\"$B\" info %s.gguf > /dev/null", got);
    CHECK(st == 0, "the GGUF read back from the FIFO: exit %d: %s", st, err);
}

/* A directory as an output is refused before the model is loaded or a step runs: the script's
 * dump (checked first) is not written, nothing is printed on stdout, and it takes no time. */
TEST(outputs_directory_target_refused_before_any_work)
{
    use_test_cache();
    char s[700], dir[800], dump[800];
    snprintf(dir, sizeof dir, "%s/adir", as_test_tmpdir());
    snprintf(dump, sizeof dump, "%s/d.h5", as_test_tmpdir());
    REQUIRE(mkdir(dir, 0755) == 0, "mkdir");
    script(s, sizeof s, dump);
    AsCliResult *r = malloc(sizeof *r);
    const char *opts[] = {"--report-json", "--junit", "--dump"};
    for (int i = 0; i < 3; i++) {
        double t0 = now_s();
        as_cli_run(r, AS_ARGS("run", "-q", s, opts[i], dir));
        const double dt = now_s() - t0;
        CHECK(r->status == 2 && lines(r->err) == 1 && strstr(r->err, dir) && strstr(r->err, "directory"),
              "%s DIR: exit %d (want 2): %s", opts[i], r->status, r->err);
        CHECK(!strstr(r->out, "verdict"), "%s DIR: no step ran: %s", opts[i], r->out);
        CHECK(access(dump, F_OK) != 0, "%s DIR: the script's dump not written", opts[i]);
        CHECK(dt < 10, "%s DIR: refused at once (%.2f s)", opts[i], dt);
        struct stat st;
        CHECK(!stat(dir, &st) && S_ISDIR(st.st_mode), "the directory is untouched");
    }
    /* check's reports too */
    char d2[800];
    snprintf(d2, sizeof d2, "%s/ok.h5", as_test_tmpdir());
    as_cli_run(r, AS_ARGS("run", "-q", s, "--dump", d2));
    REQUIRE(r->status == 0, "a dump to check: %s", r->err);
    as_cli_run(r, AS_ARGS("check", d2, "--model", "tiny", "--report-json", dir));
    CHECK(r->status == 2 && lines(r->err) == 1 && strstr(r->err, "directory") && !strstr(r->out, "verdict"),
          "check --report-json DIR: exit %d (want 2): %s", r->status, r->err);
    free(r);
}

/* The rule: a link to a regular file has that file replaced atomically and stays a link; a
 * dangling link, a link to a directory, a socket are refused with exit 2. */
TEST(outputs_symlink_socket_and_dangling_targets)
{
    use_test_cache();
    const char *t = as_test_tmpdir();
    char s[700], real[800], link[800], dang[800], ldir[800], sock[800];
    script(s, sizeof s, NULL);
    snprintf(real, sizeof real, "%s/real.json", t);
    snprintf(link, sizeof link, "%s/link.json", t);
    snprintf(dang, sizeof dang, "%s/dangling.json", t);
    snprintf(ldir, sizeof ldir, "%s/linkdir", t);
    snprintf(sock, sizeof sock, "/tmp/attnscope-test-sock-%d", (int)getpid()); /* sun_path is short */
    unlink(sock);
    FILE *f = fopen(real, "w");
    fputs("old\n", f);
    fclose(f);
    REQUIRE(symlink("real.json", link) == 0 && symlink("nothing-here", dang) == 0 && symlink(".", ldir) == 0,
            "symlink");
    AsCliResult *r = malloc(sizeof *r);
    as_cli_run(r, AS_ARGS("run", "-q", s, "--report-json", link));
    CHECK(r->status == 0, "report into a link: exit %d: %s", r->status, r->err);
    struct stat st;
    CHECK(!lstat(link, &st) && S_ISLNK(st.st_mode), "the link is still a link");
    char *d = as_slurp(real, NULL);
    CHECK(d && strstr(d, "\"attnscope-report\""), "the file it names holds the report");
    free(d);
    char d1[800];
    snprintf(d1, sizeof d1, "%s/dl.h5", t);
    REQUIRE(symlink("real.h5", d1) == 0, "symlink");
    snprintf(real, sizeof real, "%s/real.h5", t);
    f = fopen(real, "w");
    fputs("old\n", f);
    fclose(f);
    as_cli_run(r, AS_ARGS("run", "-q", s, "--dump", d1));
    CHECK(r->status == 0 && !lstat(d1, &st) && S_ISLNK(st.st_mode), "dump into a link: exit %d: %s", r->status,
          r->err);
    as_cli_run(r, AS_ARGS("dump-info", real));
    CHECK(r->status == 0, "the dump is in the file the link names: %s", r->err);
    as_cli_run(r, AS_ARGS("run", "-q", s, "--report-json", dang));
    CHECK(r->status == 2 && lines(r->err) == 1 && strstr(r->err, dang), "a dangling link: exit %d: %s", r->status,
          r->err);
    CHECK(!lstat(dang, &st) && S_ISLNK(st.st_mode) && stat(dang, &st) != 0, "the dangling link is untouched");
    as_cli_run(r, AS_ARGS("run", "-q", s, "--junit", ldir));
    CHECK(r->status == 2 && lines(r->err) == 1, "a link to a directory: exit %d: %s", r->status, r->err);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    REQUIRE(strlen(sock) < sizeof a.sun_path, "socket path");
    memcpy(a.sun_path, sock, strlen(sock) + 1);
    REQUIRE(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0,
            "bind %s: %s", sock, strerror(errno));
    const char *opts[] = {"--report-json", "--junit", "--dump"};
    for (int i = 0; i < 3; i++) {
        as_cli_run(r, AS_ARGS("run", "-q", s, opts[i], sock));
        CHECK(r->status == 2 && lines(r->err) == 1 && strstr(r->err, "not a regular file") && !strstr(r->out, "verdict"),
              "%s SOCKET: exit %d (want 2): %s", opts[i], r->status, r->err);
        CHECK(!lstat(sock, &st) && S_ISSOCK(st.st_mode), "the socket is still a socket");
    }
    close(fd);
    unlink(sock);
    /* a block device node (as root; loop0's numbers, never opened): refused, left a block device */
    char blk[800];
    snprintf(blk, sizeof blk, "%s/blk", t);
    if (mknod(blk, S_IFBLK | 0600, makedev(7, 0)) == 0) {
        as_cli_run(r, AS_ARGS("run", "-q", s, "--report-json", blk));
        CHECK(r->status == 2 && lines(r->err) == 1 && strstr(r->err, "not a regular file"),
              "a block device: exit %d (want 2): %s", r->status, r->err);
        CHECK(!lstat(blk, &st) && S_ISBLK(st.st_mode), "the block device is still one");
    } else {
        as_test_note("no block device node (mknod: %s): that case not run", strerror(errno));
    }
    free(r);
}

TEST(outputs_name_too_long_and_steps_past_max_seq_exit_2)
{
    use_test_cache();
    char s[700], dump[1200];
    script(s, sizeof s, NULL);
    int n = snprintf(dump, sizeof dump, "%s/", as_test_tmpdir());
    memset(dump + n, 'a', 300);
    snprintf(dump + n + 300, sizeof dump - (size_t)n - 300, ".h5");
    AsCliResult *r = malloc(sizeof *r);
    as_cli_run(r, AS_ARGS("run", "-q", s)); /* the preset generated, its note out of the way */
    REQUIRE(r->status == 0, "warm-up run: %s", r->err);
    as_cli_run(r, AS_ARGS("run", "-q", s, "--dump", dump));
    CHECK(r->status == 2 && lines(r->err) == 1 && !strstr(r->out, "verdict"), "a dump name too long: exit %d: %s",
          r->status, r->err);
    snprintf(s, sizeof s, "%s/long.json", as_test_tmpdir());
    FILE *f = fopen(s, "w");
    fputs("{\"model\": \"tiny\", \"max_seq\": 8, \"steps\": [{\"prefill\": 6}, {\"decode\": 4}]}", f);
    fclose(f);
    as_cli_run(r, AS_ARGS("run", "-q", s));
    CHECK(r->status == 2 && lines(r->err) == 1 && strstr(r->err, "max_seq") && !strstr(r->out, "verdict"),
          "steps past max_seq: exit %d (want 2, before any step): %s", r->status, r->err);
    free(r);
}

/* Two gens of different geometries into one directory, at once: the directory ends with one
 * of them whole (info loads it: a config of one with the other's weights would not). */
TEST(outputs_concurrent_gens_leave_one_model)
{
    char dir[700];
    snprintf(dir, sizeof dir, "%s/m", as_test_tmpdir());
    AsCliResult *r = malloc(sizeof *r);
    for (int k = 0; k < 4; k++) {
        pid_t a = as_cli_spawn(AS_ARGS("gen", "--preset", "tiny", "-o", dir));
        /* as_cli_spawn's output files are per test: the second one's replace the first's, fine here */
        pid_t b = as_cli_spawn(AS_ARGS("gen", "--preset", "tiny-q", "--seed", k & 1 ? "7" : "0", "-o", dir));
        int sa = as_cli_wait(a), sb = as_cli_wait(b);
        CHECK(sa == 0 && sb == 0, "round %d: gens exit %d and %d", k, sa, sb);
        as_cli_run(r, AS_ARGS("info", dir));
        CHECK(r->status == 0, "round %d: the directory holds one whole model: %s", k, r->err);
    }
    free(r);
}

/* examples/06 expects a mismatch and meets it: exit 0 and a JUnit with no failure. */
TEST(outputs_example_06_junit_agrees_with_the_exit_code)
{
    use_test_cache();
    char x[700], j[700];
    snprintf(x, sizeof x, "%s/06.xml", as_test_tmpdir());
    snprintf(j, sizeof j, "%s/06.json", as_test_tmpdir());
    AsCliResult *r = malloc(sizeof *r);
    as_cli_run(r, AS_ARGS("run", "-q", "examples/06_check_the_checker.json", "--junit", x, "--report-json", j));
    CHECK(r->status == 0, "example 06: exit %d: %s", r->status, r->err);
    char *t = as_slurp(x, NULL);
    REQUIRE(t, "junit written");
    CHECK(strstr(t, "failures=\"0\" errors=\"0\"") && !strstr(t, "<failure "), "no failure in the JUnit:\n%.600s", t);
    CHECK(strstr(t, "name=\"expect\"") && strstr(t, "expectation met"), "the expectation is a test case");
    CHECK(strstr(t, "<system-out>MISMATCH: o: "), "the layers' mismatches are listed as output");
    free(t);
    /* the same script with the expectation turned around: exit 1, one failure */
    char s[700];
    snprintf(s, sizeof s, "%s/06b.json", as_test_tmpdir());
    FILE *f = fopen(s, "w");
    fputs("{\"model\": \"tiny\", \"inject\": \"sink-ignored\", \"steps\": [{\"prefill\": 4}], \"expect\": {\"verdict\": "
          "\"pass\"}}", f);
    fclose(f);
    as_cli_run(r, AS_ARGS("run", "-q", s, "--junit", x));
    t = as_slurp(x, NULL);
    CHECK(r->status == 1 && t && strstr(t, "failures=\"1\"") && strstr(t, "type=\"expectation\""),
          "an unmet expectation: exit %d, one failure", r->status);
    free(t);
    free(r);
}

/* A target that turns into something else while it is written (here a FIFO made at its name
 * between create and commit) is not replaced: the commit fails, the temporary is removed. */
TEST(outputs_target_changed_while_written_is_not_replaced)
{
    char path[700], tmp[AS_ATOMIC_TMP_MAX];
    snprintf(path, sizeof path, "%s/r.json", as_test_tmpdir());
    FILE *f;
    AsError err = {0};
    REQUIRE(as_atomic_create(path, tmp, sizeof tmp, &f, &err) == 0, "create: %s", err.msg);
    fputs("{}\n", f);
    REQUIRE(mkfifo(path, 0644) == 0, "mkfifo");
    CHECK(as_atomic_commit(f, tmp, path, &err) == AS_ERUNTIME && strstr(err.msg, "no longer a regular file"),
          "commit over a FIFO: '%s'", err.msg);
    struct stat st;
    CHECK(!lstat(path, &st) && S_ISFIFO(st.st_mode), "the FIFO is left as it is");
    CHECK(access(tmp, F_OK) != 0, "the temporary is removed");
}

/* gen into a directory it may not create (a read-only parent) is exit 3 like every read-only
 * target, not 2 (as root, run as uid 65534 so that modes apply). */
TEST(outputs_gen_under_a_read_only_parent_exit_3)
{
    if (geteuid() != 0)
        as_test_skip("needs root to run as uid 65534");
    const char *t = as_test_tmpdir();
    REQUIRE(chmod(t, 0755) == 0, "chmod");
    char ro[700], sub[800], ep[800];
    snprintf(ro, sizeof ro, "%s/ro", t);
    snprintf(sub, sizeof sub, "%s/sub", ro);
    snprintf(ep, sizeof ep, "%s/gen.err", t);
    REQUIRE(mkdir(ro, 0555) == 0 && chmod(ro, 0555) == 0, "mkdir");
    int fe = open(ep, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    REQUIRE(fe >= 0, "open %s", ep);
    fflush(stdout);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
        if (dup2(fe, 2) < 0 || setgroups(0, NULL) || setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
            _exit(126);
        execl(as_cli_bin(), as_cli_bin(), "gen", "--preset", "tiny", "-o", sub, (char *)NULL);
        _exit(127);
    }
    close(fe);
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid, "waitpid");
    char *e = as_slurp(ep, NULL);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 3 && e && lines(e) == 1 && strstr(e, "Permission denied"),
          "gen under a read-only parent: status %d (want exit 3): %s", st, e ? e : "");
    free(e);
    CHECK(access(sub, F_OK) != 0, "nothing created");
}
