/* Cancelling the reference inside a layer: the driver points the watch at its cancel flag while
 * a layer runs; the long loops (the GEMM tiles, the linear and fp8 panels and their K blocks,
 * act_quant's rows, the index scores, the attention's queries) poll as_ref_cancelled() once an
 * iteration and, once it is set, write zeros for what is left of their stage (so it ends on finite
 * values, quickly); the layer stops at that stage's end (ref/layer.c), and as_ref_cancel_cut() tells
 * the driver so: it throws the layer away and refuses to go on with the step (its state is half
 * written) until a new prefill. One watch per process: the thread that runs a layer sets it. */
#ifndef AS_REF_CANCEL_H
#define AS_REF_CANCEL_H

#include <stdatomic.h>
#include <stdbool.h>

/* Watches flag (NULL: nothing) and clears the cut. */
void as_ref_cancel_watch(const atomic_int *flag);
/* true when the watched flag is set (and then records the cut); for the loops. */
bool as_ref_cancelled(void);
/* Whether a loop skipped work since the watch was set. */
bool as_ref_cancel_cut(void);

#endif
