/* Shared by the libFuzzer targets (fuzz/README.md): a scratch directory for the parsers that
 * take a path, files written into it, and checks that stop on a broken contract (a finding).
 *
 * Each target defines LLVMFuzzerTestOneInput. tests/test_hardening.c includes the targets with
 * AS_FUZZ_IN_TESTS defined and LLVMFuzzerTestOneInput renamed, to replay fuzz/regressions/ in
 * the normal test suite: there the scratch directory is the test's own and a broken contract is
 * a test failure instead of an abort. */
#ifndef AS_FUZZ_UTIL_H
#define AS_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef AS_FUZZ_IN_TESTS
#include "tests/lib/harness.h"

static inline const char *fz_dir(void) { return as_test_tmpdir(); }

#define FZ_ASSERT(cond, ...)                                                   \
    do {                                                                       \
        if (!(cond)) {                                                         \
            as_test_fail(__FILE__, __LINE__, __VA_ARGS__);                     \
            as_test_abort();                                                   \
        }                                                                      \
    } while (0)
#else
/* One directory per process (libFuzzer -jobs runs several), under $TMPDIR, removed at exit. */
static char fz_dir_buf[256];

static void fz_cleanup(void)
{
    if (!fz_dir_buf[0])
        return;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fz_dir_buf);
    if (system(cmd) != 0)
        fprintf(stderr, "fuzz: could not remove %s\n", fz_dir_buf);
}

static inline const char *fz_dir(void)
{
    if (!fz_dir_buf[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(fz_dir_buf, sizeof fz_dir_buf, "%s/attnscope-fuzz-XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(fz_dir_buf)) {
            perror("fuzz: mkdtemp");
            abort();
        }
        atexit(fz_cleanup);
    }
    return fz_dir_buf;
}

/* A parser broke its own contract: say why and abort (libFuzzer keeps the input). */
#define FZ_ASSERT(cond, ...)                                                   \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz: %s:%d: ", __FILE__, __LINE__);              \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
            abort();                                                           \
        }                                                                      \
    } while (0)
#endif

/* Writes data to fz_dir()/name; returns the path (static storage, four slots in turn). */
static inline const char *fz_write(const char *name, const void *data, size_t size)
{
    static char paths[4][512];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, sizeof paths[0], "%s/%s", fz_dir(), name);
    FILE *f = fopen(p, "wb");
    int ok = f && (!size || fwrite(data, 1, size, f) == size);
    ok = (f && fclose(f) == 0) && ok;
    FZ_ASSERT(ok, "cannot write %s", p);
    return p;
}

/* A message fit for a terminal: non-empty, no control character (C0, DEL, C1 as UTF-8). */
static inline int fz_printable(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    if (!*p)
        return 0;
    for (; *p; p++)
        if (*p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] < 0xa0))
            return 0;
    return 1;
}

/* An error is AS_EBADINPUT or AS_ERUNTIME with a message of one printable line. */
#define FZ_CHECK_ERR(rc, err)                                                                            \
    FZ_ASSERT(((rc) == 2 || (rc) == 3) && fz_printable((err).msg),                                       \
              "error code %d, message '%s' (want 2 or 3 and one printable line)", (rc), (err).msg)

#endif
