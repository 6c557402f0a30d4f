#include "tests/lib/harness.h"

#include <dirent.h>
#include <fnmatch.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"

#define MAX_TESTS 2048

typedef struct {
    const char *name;
    as_test_fn fn;
    bool gpu;
    const char *file;
} Test;

static Test tests[MAX_TESTS];
static int n_tests;
static jmp_buf abort_jmp;
static bool cur_failed, cur_skipped;
static char skip_reason[256];
static char tmpdir[256];
static int cur_fail_lines;

void as_test_register(const char *name, as_test_fn fn, bool gpu, const char *file)
{
    if (n_tests < MAX_TESTS)
        tests[n_tests++] = (Test){name, fn, gpu, file};
}

bool as_test_name_fits_file(const char *name, const char *file)
{
    const char *stem = strrchr(file, '/');
    stem = stem ? stem + 1 : file;
    if (!strncmp(stem, "test_", 5))
        stem += 5;
    const char *dot = strchr(stem, '.');
    size_t n = dot ? (size_t)(dot - stem) : strlen(stem);
    return n > 0 && !strncmp(name, stem, n) && name[n] == '_';
}

int as_test_count(void) { return n_tests; }

void as_test_at(int i, const char **name, const char **file)
{
    *name = tests[i].name;
    *file = tests[i].file;
}

void as_test_fail(const char *file, int line, const char *fmt, ...)
{
    cur_failed = true;
    if (++cur_fail_lines > 20)
        return; /* the first failures say enough */
    va_list ap;
    va_start(ap, fmt);
    printf("    %s:%d: ", file, line);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}

void as_test_skip(const char *why, ...)
{
    va_list ap;
    va_start(ap, why);
    vsnprintf(skip_reason, sizeof skip_reason, why, ap);
    va_end(ap);
    cur_skipped = true;
    longjmp(abort_jmp, 1);
}

void as_test_note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("    ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}

_Noreturn void as_test_abort(void) { longjmp(abort_jmp, 1); }
bool as_test_failed(void) { return cur_failed; }

const char *as_fixtures_dir(void)
{
    const char *d = getenv("ATTNSCOPE_FIXTURES");
    return d && *d ? d : "../shared/fixtures";
}

const char *as_test_tmpdir(void)
{
    if (!tmpdir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(tmpdir, sizeof tmpdir, "%s/attnscope-test-XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(tmpdir)) {
            tmpdir[0] = '\0';
            as_test_fail(__FILE__, __LINE__, "mkdtemp failed");
            as_test_abort();
        }
    }
    return tmpdir;
}

static void rm_rf(const char *path)
{
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char sub[1024];
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            rm_rf(sub);
        }
        closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

bool as_test_have_gpu(void) { return as_engine_device_count() > 0; }

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Runs one test body; setjmp lives here so the runner's locals stay intact. */
static void run_body(as_test_fn fn)
{
    if (!setjmp(abort_jmp))
        fn();
}

/* Usage: attnscope_tests [--list] [--cpu-only] [GLOB ...]: runs the tests whose names match. */
int main(int argc, char **argv)
{
    bool list = false, cpu_only = false;
    int n_pat = 0;
    const char *pats[64];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--list"))
            list = true;
        else if (!strcmp(argv[i], "--cpu-only"))
            cpu_only = true;
        else if (n_pat < 64)
            pats[n_pat++] = argv[i];
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    int passed = 0, failed = 0, skipped = 0;
    int gpu_state = -1; /* probed once, on the first GPU test */
    for (int i = 0; i < n_tests; i++) {
        Test *t = &tests[i];
        bool match = n_pat == 0;
        for (int p = 0; p < n_pat && !match; p++)
            match = fnmatch(pats[p], t->name, 0) == 0;
        if (!match)
            continue;
        if (list) {
            printf("%s%s\n", t->name, t->gpu ? " (gpu)" : "");
            continue;
        }
        if (t->gpu && cpu_only)
            continue;
        if (t->gpu && gpu_state < 0)
            gpu_state = as_test_have_gpu();
        if (t->gpu && !gpu_state) {
            printf("skip %s: no CUDA device visible (GPU test)\n", t->name);
            skipped++;
            continue;
        }
        cur_failed = cur_skipped = false;
        cur_fail_lines = 0;
        tmpdir[0] = '\0';
        printf("run  %s\n", t->name);
        double t0 = now_s();
        run_body(t->fn);
        double dt = now_s() - t0;
        if (tmpdir[0])
            rm_rf(tmpdir);
        if (cur_skipped) {
            printf("skip %s: %s\n", t->name, skip_reason);
            skipped++;
        } else if (cur_failed) {
            printf("FAIL %s (%.2f s)\n", t->name, dt);
            failed++;
        } else {
            printf("ok   %s (%.2f s)\n", t->name, dt);
            passed++;
        }
    }
    if (!list)
        printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
