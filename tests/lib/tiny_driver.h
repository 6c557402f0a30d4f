/* The driver on the tiny preset for tests: reference only (no engine even where a device is),
 * or with a named fault in a reference twin; the preset generated into the test's temporary
 * directory on first use. Fails the test (REQUIRE) when it cannot open. */
#ifndef AS_TEST_TINY_DRIVER_H
#define AS_TEST_TINY_DRIVER_H

#include "driver/driver.h"

/* inject: a fault name (a twin carries it) or NULL. Close with as_driver_close. */
AsDriver *as_test_tiny_driver(const char *inject);

#endif
