/* One error type for every layer of attnscope: a code that is also the process exit status
 * (a refused step and a cancel exit 3: the comment's "exit N" is the status; the table in
 * README.md, docs/BATCH.md and docs/SECURITY.md lists them, tests/test_exit_codes.c compares),
 * and a one-line message that names what is wrong. */
#ifndef AS_ERRORS_H
#define AS_ERRORS_H

#include <stdbool.h>
#include <stddef.h>

enum {
    AS_OK = 0,
    AS_EMISMATCH = 1,   /* a comparison out of tolerance (batch mode verdict) */
    AS_EBADINPUT = 2,   /* bad script, config, weights, dump, option or value */
    AS_ERUNTIME = 3,    /* CUDA, memory, I/O failure at run time */
    AS_EREFUSED = 4,    /* the model refuses the step (SPEC 3.6): a layer may not attend; exit 3 */
    AS_ECANCELLED = 5,  /* the user cancelled a long operation; exit 3 */
};

typedef struct {
    int code;
    char msg[512];
} AsError;

/* Sets err (when non-NULL) and returns code: `return as_err(err, AS_EBADINPUT, "...", ...);` */
int as_err(AsError *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Prefixes the message already in err with more context ("loading X: <old message>"). */
int as_err_wrap(AsError *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void as_err_clear(AsError *err);
/* Whether s (n bytes) holds a control character: C0, DEL, or a C1 control encoded in UTF-8.
 * Names a file gives (tensors, dump strings) are refused with one: listings print them. */
bool as_has_control(const char *s, size_t n);

#endif
