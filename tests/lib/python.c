#include "tests/lib/python.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/lib/cli_util.h"
#include "tests/lib/harness.h"

const char *as_test_python(void)
{
    static char found[512];
    const char *env = getenv("ATTNSCOPE_PYTHON");
    const char *cands[3] = {env && *env ? env : NULL, "/usr/bin/python3", "python3"};
    for (int i = 0; i < 3; i++) {
        if (!cands[i] || (cands[i][0] == '/' && access(cands[i], X_OK)))
            continue;
        char cmd[700];
        snprintf(cmd, sizeof cmd, "'%s' -c 'import h5py, numpy' >/dev/null 2>&1", cands[i]);
        if (system(cmd) == 0) {
            snprintf(found, sizeof found, "%s", cands[i]);
            return found;
        }
    }
    as_test_skip("no python3 with h5py and numpy (scripts/deps.sh installs python3-h5py, python3-numpy)");
    return NULL;
}

void as_test_faithful_dump(char *src, size_t n)
{
    setenv("ATTNSCOPE_CACHE", as_test_tmpdir(), 1);
    char script[600];
    snprintf(script, sizeof script, "%s/src.json", as_test_tmpdir());
    snprintf(src, n, "%s/src.h5", as_test_tmpdir());
    FILE *f = fopen(script, "w");
    REQUIRE(f, "script");
    fprintf(f, "{\"model\": \"tiny\", \"inject\": \"none\", \"steps\": [{\"prefill\": 9}, {\"decode\": 3}], "
               "\"dump\": {\"path\": \"%s\", \"layers\": \"all\", \"steps\": \"all\"}}", src);
    fclose(f);
    AsCliResult *r = malloc(sizeof *r);
    REQUIRE(r, "alloc");
    as_cli_run(r, AS_ARGS("run", "-q", script));
    REQUIRE(r->status == 0, "run: exit %d %s", r->status, r->err);
    free(r);
}
