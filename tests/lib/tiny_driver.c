#include "tests/lib/tiny_driver.h"

#include <stdlib.h>

#include "tests/lib/harness.h"

AsDriver *as_test_tiny_driver(const char *inject)
{
    setenv("ATTNSCOPE_CACHE", as_test_tmpdir(), 1);
    AsDriverOptions o;
    as_driver_options_default(&o);
    o.quiet = true;
    o.no_engine = true;
    o.inject = inject;
    AsDriver *d = NULL;
    AsError err = {0};
    REQUIRE(as_driver_open(&o, &d, &err) == 0, "open tiny%s%s: %s", inject ? " with " : "", inject ? inject : "",
            err.msg);
    return d;
}
