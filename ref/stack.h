/* The reference stack: every layer's state plus the shared state, stepped by prefill(tokens)
 * and decode(token). The residual stream is attention-only: x_l = rmsnorm(h_l, attn_norm_l),
 * h_{l+1} = bf16(h_l + out_l), h_0 = the step's token inputs. It keeps each layer's input
 * realistic in scale without the MoE/MLP blocks, which attnscope does not model. */
#ifndef AS_REF_STACK_H
#define AS_REF_STACK_H

#include "ref/layer.h"

typedef struct {
    const AsModel *m;
    AsRefModel rm;
    AsRefState st;
    float *h;          /* [s][dim] residual entering next_layer */
    float *x;          /* [s][dim] scratch: the normalised input */
    int h_cap;         /* rows allocated in h and x */
    int s, start_pos;
    int step;          /* 0 = the prefill, then one per decode step */
    int next_layer;    /* n_layers once the step is done */
    bool started;      /* a prefill has run since the last reset */
} AsRefStack;

int as_ref_stack_init(AsRefStack *k, const AsModel *m, AsError *err);
void as_ref_stack_free(AsRefStack *k);
/* Back to the empty state (what a prefill starts from). */
void as_ref_stack_reset(AsRefStack *k);

/* Starts a step: prefill (start_pos 0, resets all state, step 0) or decode (start_pos > 0,
 * s == 1, the next step number). h0: [s][dim] token inputs. */
int as_ref_begin_step(AsRefStack *k, const float *h0, int start_pos, int s, AsError *err);
/* Runs the next layer. x_override ([s][dim]) replaces the layer's own input (teacher mode:
 * the engine's input for that layer); NULL uses rmsnorm(h). The residual advances with the
 * layer's own output either way. */
int as_ref_next_layer(AsRefStack *k, const float *x_override, AsRun *run, AsError *err);
/* Whole steps (every layer, no runs kept). */
int as_ref_prefill(AsRefStack *k, const float *h0, int s, AsError *err);
int as_ref_decode(AsRefStack *k, const float *h0, AsError *err);

#endif
