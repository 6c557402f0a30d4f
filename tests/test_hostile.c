/* The hostile corpus (fuzz/hostile.sh): every entry run through its command under a
 * 10 s limit. An entry marked "err" must exit 2 or 3; one marked "any" (a benign mutation: a bit
 * flip that may land in tensor data or a name, an ESC sequence in a name that is only shown
 * escaped) may also exit 0 or 1 (a --json output then parses); one marked "known" (a broken input attnscope is known to accept:
 * listed in the table, reported, not failed on) likewise. Never a signal or a timeout; a failure is one line on stderr;
 * no raw ESC byte on stdout or stderr; and no path outside the test's directory changes (the
 * sentinels the corpus's links point at, the outside directory's entries, /dev/null's type,
 * /etc/passwd). Ends with the table of classes x outcomes. */
#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/lib/cli_util.h"
#include "tests/lib/harness.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The status (128 + signal for a signal), or -1 when it ran past the limit and was killed. */
static int run_limited(const char *const *args, double limit_s)
{
    pid_t pid = as_cli_spawn(args);
    double t0 = now_s();
    int st = 0;
    pid_t w;
    while ((w = waitpid(pid, &st, WNOHANG)) == 0 && now_s() - t0 < limit_s)
        usleep(2000);
    if (w == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        return -1;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

typedef struct {
    char path[600];
    bool exists;
    mode_t mode;
    off_t size;
    dev_t rdev;
    ino_t ino;
    struct timespec mtime;
} Snap;

static void snap(Snap *s, const char *path)
{
    struct stat st;
    memset(s, 0, sizeof *s);
    snprintf(s->path, sizeof s->path, "%s", path);
    if (lstat(path, &st) != 0)
        return;
    s->exists = true;
    s->mode = st.st_mode;
    s->size = st.st_size;
    s->rdev = st.st_rdev;
    s->ino = st.st_ino;
    s->mtime = st.st_mtim;
}

static bool snap_same(const Snap *a)
{
    Snap b;
    snap(&b, a->path);
    return a->exists == b.exists && a->mode == b.mode && a->size == b.size && a->rdev == b.rdev &&
           a->ino == b.ino && a->mtime.tv_sec == b.mtime.tv_sec && a->mtime.tv_nsec == b.mtime.tv_nsec;
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n++;
    closedir(d);
    return n;
}

static bool has_esc(const char *path)
{
    size_t n = 0;
    char *s = as_slurp(path, &n);
    bool esc = s && memchr(s, 0x1b, n) != NULL;
    free(s);
    return esc;
}

enum { O_EXIT0, O_EXIT1, O_EXIT2, O_EXIT3, O_OTHER, O_SIGNAL, O_TIMEOUT, O_N };
static const char *const onames[O_N] = {"exit0", "exit1", "exit2", "exit3", "other", "signal", "timeout"};

#define MAX_CLASSES 96
typedef struct {
    char name[48], expect[8];
    int n[O_N], bad;
} ClassRow;

TEST(hostile_corpus)
{
    const char *tmp = as_test_tmpdir();
    char corpus[700], outside[700], work[700], bin[PATH_MAX], cmd[8192];
    snprintf(corpus, sizeof corpus, "%s/corpus", tmp);
    snprintf(work, sizeof work, "%s/work", tmp);
    const char *td = getenv("TMPDIR");
    snprintf(outside, sizeof outside, "%s/attnscope-hostile-outside-XXXXXX", td && *td ? td : "/tmp");
    REQUIRE(mkdtemp(outside), "mkdtemp %s: %s", outside, strerror(errno));
    REQUIRE(realpath(as_cli_bin(), bin), "no binary %s (set ATTNSCOPE_BIN)", as_cli_bin());
    REQUIRE(access("fuzz/hostile.sh", R_OK) == 0, "run from the repository root (fuzz/hostile.sh)");
    char sentinel[800];
    snprintf(sentinel, sizeof sentinel, "%s/sentinel.txt", outside);
    FILE *f = fopen(sentinel, "w");
    REQUIRE(f, "create %s", sentinel);
    fputs("{\"a sentinel\": true}\n", f);
    fclose(f);

    double t0 = now_s();
    snprintf(cmd, sizeof cmd, "timeout 300 sh fuzz/hostile.sh '%s' '%s' '%s' >'%s/gen.log' 2>&1", bin, corpus,
             outside, tmp);
    int gst = system(cmd);
    if (gst != 0) {
        char lp[800];
        snprintf(lp, sizeof lp, "%s/gen.log", tmp);
        char *log = as_slurp(lp, NULL);
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", outside);
        (void)!system(cmd);
        REQUIRE(false, "fuzz/hostile.sh failed (%d): %.600s", gst, log ? log : "");
    }
    double t_gen = now_s() - t0;
    {
        char lp[800];
        snprintf(lp, sizeof lp, "%s/gen.log", tmp);
        char *log = as_slurp(lp, NULL);
        if (log && strstr(log, "no h5py"))
            as_test_note("no python3 with h5py: the HDF5 structure classes (attributes, hard links, far step, "
                         "config_json, weights_name) are not in this corpus");
        free(log);
    }

    /* the sentinels: everything in the outside directory, the directory itself, and the system */
    Snap snaps[64];
    int ns = 0;
    snap(&snaps[ns++], outside);
    {
        DIR *d = opendir(outside);
        REQUIRE(d, "opendir %s", outside);
        struct dirent *e;
        while ((e = readdir(d)) && ns < 56)
            if (e->d_name[0] != '.') {
                char p[1200];
                snprintf(p, sizeof p, "%s/%s", outside, e->d_name);
                snap(&snaps[ns++], p);
            }
        closedir(d);
    }
    const char *sys_paths[] = {"/dev/null", "/dev/zero", "/etc/passwd", "/etc"};
    for (size_t i = 0; i < sizeof sys_paths / sizeof *sys_paths; i++)
        snap(&snaps[ns++], sys_paths[i]);
    int outside_entries = count_entries(outside);

    /* each run in a directory of its own inside the test's (a relative path a mutation makes
     * stays inside), the corpus's model cache */
    REQUIRE(mkdir(work, 0755) == 0, "mkdir %s", work);
    char cwd[PATH_MAX];
    REQUIRE(getcwd(cwd, sizeof cwd), "getcwd");
    char cache[800];
    snprintf(cache, sizeof cache, "%s/cache", corpus);
    setenv("ATTNSCOPE_CACHE", cache, 1);
    const char *old_bin = getenv("ATTNSCOPE_BIN");
    char *saved_bin = old_bin ? strdup(old_bin) : NULL;
    setenv("ATTNSCOPE_BIN", bin, 1);
    REQUIRE(chdir(work) == 0, "chdir %s", work);

    char mp[800];
    snprintf(mp, sizeof mp, "%s/MANIFEST", corpus);
    FILE *man = fopen(mp, "r");
    ClassRow rows[MAX_CLASSES];
    int nrows = 0, total = 0, failed = 0;
    char line[8192], errp[800], outp[800];
    snprintf(errp, sizeof errp, "%s/cli.stderr", tmp);
    snprintf(outp, sizeof outp, "%s/cli.stdout", tmp);
    double slowest = 0;
    char slowest_what[300] = "";
    while (man && fgets(line, sizeof line, man)) {
        line[strcspn(line, "\n")] = 0;
        char *fields[40];
        int nf = 0;
        for (char *p = line, *tab; p && nf < 39; p = tab ? tab + 1 : NULL) {
            tab = strchr(p, '\t');
            if (tab)
                *tab = 0;
            fields[nf++] = p;
        }
        if (nf < 3)
            continue;
        const char *cls = fields[0];
        bool must_fail = strcmp(fields[1], "err") == 0;
        const char *args[40];
        for (int i = 2; i < nf; i++)
            args[i - 2] = fields[i];
        args[nf - 2] = NULL;
        char what[300] = "";
        for (int i = 2; i < nf && strlen(what) < 200; i++)
            snprintf(what + strlen(what), sizeof what - strlen(what), "%s%s", i > 2 ? " " : "",
                     strrchr(fields[i], '/') ? strrchr(fields[i], '/') + 1 : fields[i]);

        double t1 = now_s();
        int st = run_limited(args, 10.0);
        double dt = now_s() - t1;
        if (dt > slowest) {
            slowest = dt;
            snprintf(slowest_what, sizeof slowest_what, "%s: %s", cls, what);
        }
        total++;
        int o = st == -1 ? O_TIMEOUT : st >= 128 ? O_SIGNAL : st <= 3 ? st : O_OTHER;
        int r = 0;
        while (r < nrows && strcmp(rows[r].name, cls) != 0)
            r++;
        if (r == nrows && nrows < MAX_CLASSES) {
            memset(&rows[r], 0, sizeof rows[r]);
            snprintf(rows[r].name, sizeof rows[r].name, "%s", cls);
            snprintf(rows[r].expect, sizeof rows[r].expect, "%s", fields[1]);
            nrows++;
        }
        bool bad = false;
        char *err = as_slurp(errp, NULL);
        if (o == O_TIMEOUT || o == O_SIGNAL || o == O_OTHER) {
            CHECK(false, "%s: %s: %s after %.1f s: %.300s", cls, what, onames[o], dt, err ? err : "");
            bad = true;
        } else if (must_fail && st < 2) {
            CHECK(false, "%s: %s: exit %d for a broken input", cls, what, st);
            bad = true;
        } else if (st >= 2) {
            int nl = 0;
            for (const char *c = err ? err : ""; *c; c++)
                nl += *c == '\n';
            size_t len = err ? strlen(err) : 0;
            if (nl != 1 || len < 2 || err[len - 1] != '\n') {
                CHECK(false, "%s: %s: exit %d, stderr not one line (%d lines): %.300s", cls, what, st, nl,
                      err ? err : "");
                bad = true;
            }
        }
        bool json_out = false;
        for (int i = 2; i < nf; i++)
            json_out |= strcmp(fields[i], "--json") == 0;
        if (json_out && st == 0) {
            char *out = as_slurp(outp, NULL);
            cJSON *j = out ? cJSON_ParseWithOpts(out, NULL, 1) : NULL;
            if (!j) {
                CHECK(false, "%s: %s: exit 0 but its --json output does not parse", cls, what);
                bad = true;
            }
            cJSON_Delete(j);
            free(out);
        }
        if (has_esc(errp) || has_esc(outp)) {
            CHECK(false, "%s: %s: a raw ESC byte on stdout or stderr", cls, what);
            bad = true;
        }
        free(err);
        for (int i = 0; i < ns; i++)
            if (!snap_same(&snaps[i])) {
                CHECK(false, "%s: %s: %s changed outside the test's directory", cls, what, snaps[i].path);
                snap(&snaps[i], snaps[i].path); /* report each change once */
                bad = true;
            }
        if (count_entries(outside) != outside_entries) {
            CHECK(false, "%s: %s: an entry made or removed in %s", cls, what, outside);
            outside_entries = count_entries(outside);
            bad = true;
        }
        if (r < nrows) {
            rows[r].n[o]++;
            rows[r].bad += bad;
        }
        failed += bad;
    }
    if (man)
        fclose(man);
    REQUIRE(chdir(cwd) == 0, "chdir back");
    if (saved_bin)
        setenv("ATTNSCOPE_BIN", saved_bin, 1);
    else
        unsetenv("ATTNSCOPE_BIN");
    free(saved_bin);
    unsetenv("ATTNSCOPE_CACHE");
    struct stat dn;
    CHECK(stat("/dev/null", &dn) == 0 && S_ISCHR(dn.st_mode), "/dev/null is no longer a character device");
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", outside);
    (void)!system(cmd);
    CHECK(total >= 200, "the corpus has %d entries (a few hundred expected): %s", total, mp);

    as_test_note("%d runs (%d failed the contract), corpus written in %.1f s, runs %.1f s, slowest %.2f s (%s)",
                 total, failed, t_gen, now_s() - t0 - t_gen, slowest, slowest_what);
    as_test_note("%-24s %-6s %6s %6s %6s %6s %6s %6s %6s %5s", "class", "expect", onames[0], onames[1], onames[2], onames[3],
                 onames[4], onames[5], onames[6], "bad");
    for (int r = 0; r < nrows; r++)
        as_test_note("%-24s %-6s %6d %6d %6d %6d %6d %6d %6d %5d", rows[r].name, rows[r].expect, rows[r].n[0], rows[r].n[1],
                     rows[r].n[2], rows[r].n[3], rows[r].n[4], rows[r].n[5], rows[r].n[6], rows[r].bad);
}
