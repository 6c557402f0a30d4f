#include "tests/lib/model_fixture.h"

#include <stdio.h>
#include <stdlib.h>

#include "model/gen.h"
#include "tests/lib/harness.h"

AsModel *as_test_model(const char *preset, AsConfigTweak tweak, uint64_t seed)
{
    static int counter;
    AsConfig cfg;
    AsError err = {0};
    REQUIRE(as_config_preset(preset, &cfg, &err) == 0, "preset %s: %s", preset, err.msg);
    if (tweak)
        tweak(&cfg);
    REQUIRE(as_config_validate(&cfg, &err) == 0, "config: %s", err.msg);
    char dir[512];
    snprintf(dir, sizeof dir, "%s/model%d", as_test_tmpdir(), counter++);
    REQUIRE(as_gen_model(&cfg, as_config_preset_precision(preset), seed, preset, dir, false, &err) == 0, "gen: %s", err.msg);
    AsModel *m = calloc(1, sizeof *m);
    REQUIRE(m, "out of memory");
    REQUIRE(as_model_load(dir, cfg.max_seq, m, &err) == 0, "load %s: %s", dir, err.msg);
    return m;
}

void as_test_model_free(AsModel *m)
{
    if (m) {
        as_model_free(m);
        free(m);
    }
}
