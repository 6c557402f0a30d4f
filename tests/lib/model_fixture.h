/* Synthetic models for tests: a preset (or a preset tweaked by a callback) generated into the
 * test's temporary directory and loaded through the normal path. */
#ifndef AS_TEST_MODEL_FIXTURE_H
#define AS_TEST_MODEL_FIXTURE_H

#include "model/weights.h"

typedef void (*AsConfigTweak)(AsConfig *cfg);

/* Generates and loads; fails the test (REQUIRE) on any error. Free with as_test_model_free. */
AsModel *as_test_model(const char *preset, AsConfigTweak tweak, uint64_t seed);
void as_test_model_free(AsModel *m);

#endif
