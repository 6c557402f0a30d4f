/* The reference's state before a step, as a dump's /state_in group holds it (docs/DUMP_FORMAT.md):
 * taken from a reference stack (the TUI saves it with a decode step) and put back into one (check
 * replays a dump that starts mid-run from it). */
#ifndef AS_STATE_IO_H
#define AS_STATE_IO_H

#include "dumps/dump.h"
#include "ref/stack.h"

/* Copies every layer's state (the AS_T_ST_* tensors of its role) of k into layers[0 .. n_layers) and
 * the shared slots' provenance into si (si->step and start_pos: the step k would run next, as given).
 * Returns 0, or -1 when out of memory. */
int as_state_capture(const AsRefStack *k, int step, int start_pos, AsRun *layers, AsDumpStateIn *si);
/* Makes k hold that state, ready for the decode step si->step at si->start_pos (as_ref_begin_step
 * then runs it): each layer's window ring, partial group, caches and their rows; the shared caches
 * as views of their publisher's; no shared selection or mask (each step publishes those before any
 * layer reads them: a geometry where a layer would read one first is refused). AS_EBADINPUT with one
 * line when the state does not fit k's model (rows beyond its capacity, a provenance that names a
 * layer without that cache). */
int as_state_restore(AsRefStack *k, const AsRun *layers, const AsDumpStateIn *si, AsError *err);

#endif
