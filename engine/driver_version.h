/* The NVIDIA kernel driver's version (the "580.159.04" nvidia-smi shows), for the benchmark's report and
 * chart: read from /proc/driver/nvidia/version, without NVML. Host code only, in every build. */
#pragma once

#include <stddef.h>

/* The version in the text of /proc/driver/nvidia/version ("NVRM version: NVIDIA UNIX ... Kernel Module
 * 580.159.04 ..."): the first token of digits and dots with at least one dot after "NVRM version:".
 * Returns 1 and the version in out (NUL-terminated, cut to n - 1), or 0 and "" when there is none. */
int as_nvidia_driver_version_parse(const char *text, char *out, size_t n);

/* The same from the file; 0 and "" where it cannot be read (no NVIDIA driver, not Linux). */
int as_nvidia_driver_version(char *out, size_t n);
