/* Which precision a model runs in (SPEC sections 1-2) and what that means for each projection.
 * In fp8 precision the five fp8 projections (wq_a, wq_b, wkv, wo_b, indexer.wq_b) run as
 * act_quant + fp8 GEMM over their e4m3 weights and e8m0 block scales; every other weight, and
 * every weight in bf16 precision, runs as the bf16 linear (fp8 weights dequantised,
 * bf16(fp8 * scale), exactly). The reference and the engine both decide through this file. */
#ifndef AS_PRECISION_H
#define AS_PRECISION_H

#include <stdbool.h>

#include "model/weights.h"

const char *as_precision_name(AsPrecision p); /* "auto", "bf16", "fp8" */
/* "bf16" / "fp8" (and "auto" when allow_auto); 0, or -1 for anything else. */
int as_precision_parse(const char *s, bool allow_auto, AsPrecision *p);

/* An F8_E4M3 weight with its block scale. */
bool as_wt_is_fp8(const AsWTensor *t);

/* The projections model.py stores in fp8 (Linear with the default dtype), of layer l: up to 5,
 * NULL where the role has none; returns how many it wrote. names[i] is the short name ("wq_a"). */
int as_fp8_projections(const AsModel *m, int l, const AsWTensor *out[5], const char *names[5]);

/* Sets m->precision. want AS_PREC_AUTO follows the config's dtype when it has one, else the
 * weights: fp8 when every fp8 projection of every layer is stored as e4m3 with its scale. fp8
 * (asked or from the config) needs exactly that, and each such projection's input width a
 * multiple of 32 (act_quant's blocks): otherwise AS_EBADINPUT naming the tensor. */
int as_model_set_precision(AsModel *m, AsPrecision want, AsError *err);

/* Whether projection w of m runs as the fp8 linear: fp8 precision and an fp8 weight. Only for the
 * five projections as_fp8_projections lists. */
static inline bool as_proj_fp8(const AsModel *m, const AsWTensor *w)
{
    return m->precision == AS_PREC_FP8 && as_wt_is_fp8(w);
}

/* A norm weight as model.py holds it: a bf16 parameter, so an f32 (or f16) weight is rounded to
 * bf16 once, here (as loading it into the parameter does). A new f32 array; NULL when out of memory. */
float *as_wt_norm_f32(const AsWTensor *t);
/* Whether t's stored values are not all bf16 values already (info reports the rounding). */
bool as_wt_norm_rounds(const AsWTensor *t);

#endif
