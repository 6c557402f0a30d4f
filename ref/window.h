/* The sliding window of raw KV rows (SPEC 3 step 3): the ring update and the window selection. */
#ifndef AS_WINDOW_H
#define AS_WINDOW_H

#include <stdbool.h>
#include <stdint.h>

/* Prefill: the last min(s, win) rows of kv go into the ring, token p into slot p % win. */
void as_window_store_prefill(float *ring, int win, int hd, const float *kv, int s);
/* Decode: slot start_pos % win takes the token's row. */
void as_window_store_decode(float *ring, int win, int hd, const float *kv, int start_pos);
/* Prefill selection, cols = min(s, win): query t lists j = max(0, t-win+1) + c, -1 where j > t. */
int as_window_select_prefill(int32_t *widx, int s, int win);
/* Decode selection, cols = win: slots oldest first, (start_pos%win + 1 + c) % win, -1 when the
 * slot number exceeds start_pos (ring not yet full). */
int as_window_select_decode(int32_t *widx, int win, int start_pos);
/* The two selections with each -1 slot replaced by the slot it stands for (a prefill's later token, a
 * decode's unfilled ring slot): an engine that attends what it must skip (ref/convention.h). false gives
 * exactly the two above. */
int as_window_select_prefill_in(int32_t *widx, int s, int win, bool minus1_attended);
int as_window_select_decode_in(int32_t *widx, int win, int start_pos, bool minus1_attended);

#endif
