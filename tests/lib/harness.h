/* A small test harness: TEST(name) registers a test; CHECK records a failure with its location
 * and a message and carries on; REQUIRE ends the test. The runner prints one line per test and
 * closes with "N passed, N failed, N skipped". */
#ifndef AS_HARNESS_H
#define AS_HARNESS_H

#include <stdbool.h>
#include <stdio.h>

typedef void (*as_test_fn)(void);
/* file: the registering source (__FILE__), for the naming rule below. */
void as_test_register(const char *name, as_test_fn fn, bool gpu, const char *file);
void as_test_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void as_test_skip(const char *why, ...) __attribute__((format(printf, 1, 2)));
void as_test_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void as_test_abort(void);
bool as_test_failed(void);
/* Directory of the shared fixtures: $ATTNSCOPE_FIXTURES, else ../shared/fixtures. */
const char *as_fixtures_dir(void);
/* A fresh temporary directory for this test (removed by the runner after the test). */
const char *as_test_tmpdir(void);
/* true when a CUDA device is usable (GPU tests skip otherwise). */
bool as_test_have_gpu(void);
/* The naming rule: a test's name is its file's stem (the file name without "test_" and ".c")
 * followed by '_', so that the glob 'stem_*' runs the whole file. */
bool as_test_name_fits_file(const char *name, const char *file);
/* The registered tests, in registration order: their number, and the name and file of the i-th. */
int as_test_count(void);
void as_test_at(int i, const char **name, const char **file);

#define AS_TEST_REG(name, gpu)                                                     \
    static void name(void);                                                        \
    __attribute__((constructor)) static void as_reg_##name(void)                  \
    {                                                                              \
        as_test_register(#name, name, gpu, __FILE__);                              \
    }                                                                              \
    static void name(void)
#define TEST(name) AS_TEST_REG(name, false)
/* Skipped with one clear line where no CUDA device is visible. */
#define GPU_TEST(name) AS_TEST_REG(name, true)

#define CHECK(cond, ...)                                                           \
    do {                                                                           \
        if (!(cond))                                                               \
            as_test_fail(__FILE__, __LINE__, __VA_ARGS__);                         \
    } while (0)
#define REQUIRE(cond, ...)                                                         \
    do {                                                                           \
        if (!(cond)) {                                                             \
            as_test_fail(__FILE__, __LINE__, __VA_ARGS__);                         \
            as_test_abort();                                                       \
        }                                                                          \
    } while (0)

#endif
