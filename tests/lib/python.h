/* For the tests that run python with h5py and numpy (dumps written or read by another engine's
 * code): the interpreter, and the run whose values they start from. */
#ifndef AS_TEST_PYTHON_H
#define AS_TEST_PYTHON_H

#include <stddef.h>

/* The interpreter that has h5py and numpy: $ATTNSCOPE_PYTHON, else the system's python3 (the
 * Debian packages install there), else python3 on the PATH. Skips the test when none has them
 * (scripts/deps.sh installs python3-h5py and python3-numpy). */
const char *as_test_python(void);
/* What attnscope computed, as a dump in the test's directory (src gets its path): a faithful twin
 * of tiny (`run` with the fault "none", side "engine"), every layer and tensor, a prefill of 9 and 3
 * decode steps. The preset cache is the test's directory. */
void as_test_faithful_dump(char *src, size_t n);

#endif
