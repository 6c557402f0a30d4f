/* RoPE of SPEC section 2 on the LAST rd channels of a row: pairs (2k, 2k+1) times
 * (cos a, +-sin a), a = pos * f[k] in f32, each result rounded to bf16. */
#ifndef AS_ROPE_H
#define AS_ROPE_H

#include <stdbool.h>
#include <stdint.h>

#include "model/config.h"

typedef struct {
    int rd, max_seq;
    float *freq;          /* [rd/2] f[k] */
    float *cos, *sin;     /* [max_seq][rd/2] */
} AsRopeTable;

/* Plain: f[k] = 1 / base^(2k/rd). YaRN (yarn = true): the ramp of SPEC 2 with factor,
 * original_seq_len, beta_fast, beta_slow. Returns 0, or -1 when out of memory. */
int as_rope_init(AsRopeTable *t, int rd, int max_seq, double base, bool yarn, double factor,
                 int original_seq_len, double beta_fast, double beta_slow);
/* The table a layer of ratio `ratio` uses (ratio 0: plain rope_theta; else YaRN on compress_rope_theta). */
int as_rope_init_for_ratio(AsRopeTable *t, const AsConfig *cfg, int ratio);
/* A table on the config's compress_rope_theta (else rope_theta), with or without the config's YaRN, for
 * max_seq positions (0: the frequencies alone, every angle computed on the fly, to the same values):
 * what a layer rotates with under the RoPE frequency conventions of ref/convention.h. */
int as_rope_init_kind(AsRopeTable *t, const AsConfig *cfg, int max_seq, bool compress_theta, bool yarn);
void as_rope_free(AsRopeTable *t);

/* Which channels rotate together. DeepSeek's: pairs (2k, 2k+1) of the last rd channels. The others are
 * conventions engines get wrong (ref/convention.h): halves (k, k + rd/2) of the last rd channels, as
 * NeoX / GPT-J-style "rotate_half" RoPE does; pairs of the first rd channels; no rotation at all. */
typedef enum { AS_ROPE_PAIRS, AS_ROPE_HALVES, AS_ROPE_FIRST_PAIRS, AS_ROPE_NONE } AsRopeLayout;

/* Rotates rows of width `width` (rope on the last t->rd channels); row r is at x + r * stride and
 * has position pos[r]. Sub-rows (heads) are expressed as rows with their own stride. */
void as_rope_rows(float *x, int64_t rows, int64_t stride, int width, const int *pos,
                  const AsRopeTable *t, bool inverse);
/* Same for rows x[t][h][width], position of token t = pos0 + t. */
void as_rope_heads(float *x, int64_t s, int heads, int width, int pos0, const AsRopeTable *t, bool inverse);
/* The same two in a given layout (AS_ROPE_PAIRS: exactly the functions above). */
void as_rope_rows_in(float *x, int64_t rows, int64_t stride, int width, const int *pos, const AsRopeTable *t,
                     bool inverse, AsRopeLayout layout);
void as_rope_heads_in(float *x, int64_t s, int heads, int width, int pos0, const AsRopeTable *t, bool inverse,
                      AsRopeLayout layout);

#endif
