/* The batch mode's reports: JSON (every step, layer and tensor with its metrics and verdict),
 * JUnit XML (one test case per step x layer, failures carrying the worst element) and a
 * one-screen human summary. The same run gives the same report: no times, no host names. */
#ifndef AS_REPORT_H
#define AS_REPORT_H

#include <stdio.h>

#include "driver/diagnose.h"
#include "driver/driver.h"
#include "model/text_safe.h" /* as_text_escape */

typedef struct AsReport AsReport;

/* name: the run's label; checked: what was compared against the reference ("engine",
 * "dump:engine", "none"); mode: "teacher", "free", "reference-only"; note: one line on how it ran. */
AsReport *as_report_new(const char *name, const AsModel *m, const char *checked, const char *mode, const char *note);
void as_report_free(AsReport *r);
/* One layer of a step; diff is NULL when nothing was compared (reference only). */
void as_report_layer(AsReport *r, const AsStepInfo *step, int layer, const AsLayerDiff *diff);
void as_report_divergence(AsReport *r, const AsDivergence *dv, bool searched);
/* The quantisation error of the layer just reported (a driver with a bf16 source: d->qerr[layer]):
 * max abs / rel per value tensor and the selection rows that differ, under "quant_error". */
void as_report_quant_error(AsReport *r, int layer, const AsLayerDiff *q);
/* The bf16 source those errors are measured against (its name and digest in the report). */
void as_report_bf16_model(AsReport *r, const AsModel *bf16);
/* The diagnosis (driver/diagnose.h) of the layer just reported: "diagnosis" in its JSON, a line of its
 * JUnit case and of the summary. */
void as_report_diagnosis(AsReport *r, const AsDiagnosis *d);
/* One line on how the run went (a check's model, a missing digest...): "notes" in the JSON, a line of
 * the summary. */
void as_report_note(AsReport *r, const char *line);
/* A failure that stopped the run (refusal, CUDA error...). */
void as_report_error(AsReport *r, const AsError *err);
/* The expectation's outcome (batch scripts that check the checker). */
void as_report_expectation(AsReport *r, bool met, const char *what);

/* The first mismatching layer run (in run order) and its first mismatching tensor in forward
 * order; false when there is none. */
bool as_report_first_mismatch(const AsReport *r, int *step, int *layer, AsTensorId *tensor);
/* The worst verdict over every layer reported. */
AsVerdict as_report_verdict(const AsReport *r);
int as_report_layers(const AsReport *r);

int as_report_write_json(const AsReport *r, const char *path, AsError *err);
int as_report_write_junit(const AsReport *r, const char *path, AsError *err);
void as_report_summary(const AsReport *r, FILE *f);
/* Writes the JSON and JUnit reports that are asked for (NULL: not asked) and prints the summary. */
int as_report_write_all(const AsReport *r, const char *json, const char *junit, FILE *summary, AsError *err);

#endif
