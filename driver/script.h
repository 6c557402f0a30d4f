/* Batch scripts (`attnscope run SCRIPT.json`, docs/BATCH.md): what to run, how to judge it, what
 * to dump and where to report. Parsing checks everything up front: a bad script is one line
 * naming the field and exit 2, before anything runs. */
#ifndef AS_SCRIPT_H
#define AS_SCRIPT_H

#include <stdbool.h>
#include <stdint.h>

#include "driver/compare.h"
#include "driver/driver.h"
#include "model/config.h"

#define AS_SCRIPT_MAX_STEPS 256
#define AS_SCRIPT_MAX_LIST 1024

typedef enum { AS_SS_PREFILL, AS_SS_DECODE, AS_SS_FIRST_DIVERGENCE } AsScriptStepKind;

typedef struct {
    AsScriptStepKind kind;
    int n;               /* prefill tokens / decode steps / first-divergence max decode steps */
    int prefill;         /* first-divergence: prefill tokens when nothing has run yet */
} AsScriptStep;

/* A set of small integers (layers or steps): all, or a list. */
typedef struct {
    bool all;
    int n;
    int v[AS_SCRIPT_MAX_LIST];
} AsIntSet;

bool as_intset_has(const AsIntSet *s, int v);

typedef struct {
    bool set;
    AsVerdict verdict;   /* AS_V_MISMATCH or AS_V_PASS */
    int step, layer;     /* -1: any */
    AsTensorId tensor;   /* AS_T_COUNT: any */
    AsConvention diagnosis; /* the convention the first mismatch's diagnosis names alone (AS_CONV_COUNT: any);
                             * set, it turns "diagnose" on */
} AsExpect;

typedef struct {
    char dir[1024];              /* the script's directory: relative paths resolve against it */
    char name[256];              /* "name" field, or the file's base name */
    AsDriverOptions drv;         /* model, seeds, inputs, mode, engine, inject, device, threads */
    char model_buf[1024], inputs_buf[1024], dataset_buf[256], inject_buf[64], bf16_buf[1024];
    int n_steps;
    AsScriptStep steps[AS_SCRIPT_MAX_STEPS];
    AsTolerance tol[AS_T_COUNT];
    /* dumps */
    char dump_path[1024];        /* "" = no dump */
    uint64_t dump_tensors;
    AsIntSet dump_layers, dump_steps;
    /* reports */
    char report_json[1024], report_junit[1024];
    AsExpect expect;
} AsScript;

/* Parses text (the file's contents; path for messages and relative paths). */
int as_script_parse(const char *text, size_t len, const char *path, AsScript *s, AsError *err);
int as_script_load(const char *path, AsScript *s, AsError *err);

#endif
