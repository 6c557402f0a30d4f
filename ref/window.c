#include "ref/window.h"

#include <string.h>

void as_window_store_prefill(float *ring, int win, int hd, const float *kv, int s)
{
    int first = s > win ? s - win : 0;
    for (int p = first; p < s; p++)
        memcpy(ring + (size_t)(p % win) * hd, kv + (size_t)p * hd, sizeof(float) * (size_t)hd);
}

void as_window_store_decode(float *ring, int win, int hd, const float *kv, int start_pos)
{
    memcpy(ring + (size_t)(start_pos % win) * hd, kv, sizeof(float) * (size_t)hd);
}

int as_window_select_prefill(int32_t *widx, int s, int win) { return as_window_select_prefill_in(widx, s, win, false); }

int as_window_select_decode(int32_t *widx, int win, int start_pos)
{
    return as_window_select_decode_in(widx, win, start_pos, false);
}

int as_window_select_prefill_in(int32_t *widx, int s, int win, bool minus1_attended)
{
    int cols = s < win ? s : win;
    for (int t = 0; t < s; t++) {
        int first = t - win + 1 > 0 ? t - win + 1 : 0;
        for (int c = 0; c < cols; c++) {
            int j = first + c;
            widx[(size_t)t * cols + c] = j > t && !minus1_attended ? -1 : j;
        }
    }
    return cols;
}

int as_window_select_decode_in(int32_t *widx, int win, int start_pos, bool minus1_attended)
{
    int newest = start_pos % win;
    for (int c = 0; c < win; c++) {
        int slot = (newest + 1 + c) % win;
        widx[c] = slot > start_pos && !minus1_attended ? -1 : slot;
    }
    return win;
}
