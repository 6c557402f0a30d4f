/* The environment switches that change what the engine runs or how fast it runs (docs/ENGINE.md,
 * "Switches"): a benchmark names the ones set, so that its figures say how they were made. Host code,
 * in every build. */
#pragma once

#include <stddef.h>

/* Every switch the engine and its kernels read, NULL-terminated (tests/test_engine_switches.c checks
 * it against the names the sources spell and the docs' table). */
extern const char *const as_engine_switch_names[];

/* "NAME=value NAME=value" for the switches set, in the list's order, each value cut to 48 bytes and
 * any byte outside printable ASCII, a quote or a backslash written as '?' (the line goes into Markdown,
 * JSON and SVG); "" when none is set. Returns how many are set; buf is always terminated (n > 0), cut
 * to n - 1 bytes at most. */
int as_engine_switches_set(char *buf, size_t n);
