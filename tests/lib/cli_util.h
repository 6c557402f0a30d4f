/* Running the attnscope binary from tests ($ATTNSCOPE_BIN, else ./build/attnscope) with its
 * output captured, optionally in the background to signal it. */
#ifndef AS_TEST_CLI_UTIL_H
#define AS_TEST_CLI_UTIL_H

#include <sys/types.h>

typedef struct {
    int status;              /* exit status, or 128 + signal */
    char out[1 << 16], err[8192];
} AsCliResult;

const char *as_cli_bin(void);
/* Runs the binary with args (NULL-terminated), waits, captures stdout and stderr. */
void as_cli_run(AsCliResult *r, const char *const *args);
/* Starts it in the background (output to files in the test's tmpdir); returns the pid. */
pid_t as_cli_spawn(const char *const *args);
/* Waits for a spawned run; returns its status as as_cli_run does. */
int as_cli_wait(pid_t pid);
/* Reads a whole (small) file into a new string; NULL when missing. */
char *as_slurp(const char *path, size_t *len);

#define AS_ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

#endif
