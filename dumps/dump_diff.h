/* The `diff` group of a dump layer: an AsLayerDiff as attributes (one subgroup per compared
 * tensor) plus the selection differences as a small compound dataset. */
#ifndef AS_DUMP_DIFF_H
#define AS_DUMP_DIFF_H

#include "driver/compare.h"
#include "dumps/h5io.h"

/* Writes layer_group/diff. */
int as_dump_diff_put(hid_t layer_group, const AsLayerDiff *d, const char *got_side, const char *want_side,
                     AsH5At at, AsError *err);
/* Reads a diff group whole (validating every attribute); got/want side names may be NULL. */
int as_dump_diff_get(hid_t diff_group, AsLayerDiff *d, char got_side[64], char want_side[64], AsH5At at,
                     AsError *err);
/* The layer verdict and worst tensor only (for the index built at open). */
int as_dump_diff_peek(hid_t diff_group, AsVerdict *v, AsTensorId *worst, AsH5At at, AsError *err);

AsVerdict as_verdict_by_name(const char *name);   /* AS_V_COUNT when unknown */

#endif
