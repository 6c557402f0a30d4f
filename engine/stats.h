/* The benchmarks' statistics: host code in every build (bench.c's figures, the trace report's tables). */
#pragma once

/* The median of v[0 .. n) (sorted in place); 0 when n <= 0. */
double as_median(double *v, int n);
