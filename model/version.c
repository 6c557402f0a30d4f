/* The version string lives in one object that depends on a generated header which the Makefile
 * rewrites only when `git describe` changes, so a commit never leaves a stale version behind in
 * objects that were not recompiled. */
#include "model/version.h"

#include "as_version_gen.h"

const char *as_version(void) { return AS_VERSION; }
