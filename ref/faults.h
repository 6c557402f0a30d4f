/* Deliberate, named engine bugs (`--inject NAME`) for checking the checker. The GPU engine
 * implements each; the reference implements the same ones so that a reference-only run (no
 * CUDA device) can stand a faulty twin against the faithful reference and prove, in CI, that
 * the comparison catches each fault at the right layer and tensor. */
#ifndef AS_FAULTS_H
#define AS_FAULTS_H

#include "ref/run.h"

typedef enum {
    AS_FAULT_NONE = 0,
    AS_FAULT_RING_SLOT,      /* decode writes the window row one slot too far */
    AS_FAULT_ROPE_BACKWARDS, /* queries rotated by -angle (the inverse rotation) */
    AS_FAULT_SINK_IGNORED,   /* attention without the sink in the denominator */
    AS_FAULT_CAND_MASK_OFF,  /* candidate users score without the candidate mask */
    AS_FAULT_FP4_SCALE,      /* compressed-cache rows written with twice their fp4 scale */
    AS_FAULT_NO_OFFSET,      /* compressed picks not offset by the window rows */
    AS_FAULT_STALE_KEYS,     /* in decode, key owners do not write their new index keys */
    AS_FAULT_COUNT
} AsFault;

typedef struct {
    const char *name;
    const char *what;
    AsTensorId first_tensor;  /* the first tensor in forward order where it must show */
    const char *where;        /* which layers / steps show it first */
} AsFaultDesc;

extern const AsFaultDesc as_fault_desc[AS_FAULT_COUNT];
/* AS_FAULT_COUNT when unknown. */
AsFault as_fault_by_name(const char *name);
/* The faults' names, ", " between them ("none" left out), for a message that lists them. */
void as_fault_names(char *buf, size_t n);

#endif
