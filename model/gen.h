/* Synthetic models with deterministic weights (`attnscope gen`), and the counter-based generator
 * behind them and behind the synthetic token inputs (model/inputs.h).
 *
 * Element i of a tensor named T under seed S is a function of hash(key(S, fnv1a(T)), i) alone: any
 * chunk is computed independently (in parallel), and the bytes are the same on every machine
 * (integer hashing, IEEE arithmetic only: no libm transcendentals, no FMA contraction). The
 * distributions are documented in docs/MODEL_FILES.md. */
#ifndef AS_GEN_H
#define AS_GEN_H

#include <stdbool.h>
#include <stdint.h>

#include "model/config.h"
#include "model/errors.h"

uint64_t as_gen_fnv1a(const char *s);
/* The per-tensor key of a seed and a stream (a tensor name's fnv1a). */
uint64_t as_gen_key(uint64_t seed, uint64_t stream);
/* The 64-bit hash of element i under key. */
uint64_t as_gen_hash(uint64_t key, uint64_t i);
/* Irwin-Hall of the hash's four 16-bit fields, centred and scaled to unit variance: a normal-ish
 * value bounded at +-2*sqrt(3). */
double as_gen_normal(uint64_t h);
/* The hash's top 53 bits as a uniform value in [-1, 1). */
double as_gen_uniform(uint64_t h);

/* Writes dir/config.json (Hugging Face spelling) and dir/model.safetensors for a validated
 * config, creating dir (and its parents) when missing. Both files are written atomically.
 * label names the source in the file's metadata ("tiny", "config"); progress draws a progress
 * line on stderr. */
int as_gen_model(const AsConfig *cfg, uint64_t seed, const char *label, const char *dir, bool progress,
                 AsError *err);

#endif
