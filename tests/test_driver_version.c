/* engine/driver_version.c: the NVIDIA driver's version out of /proc/driver/nvidia/version's text. */
#include <string.h>

#include "engine/driver_version.h"
#include "tests/lib/harness.h"

TEST(driver_version_nvidia_parse)
{
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
         "(dvs-builder@U22-I3-AM05-26-1)  Thu Sep 18 20:06:52 UTC 2025\nGCC version:  gcc version 12.3.0\n",
         "580.159.04"},
        {"NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n", "535.104.05"},
        {"NVRM version: NVIDIA UNIX aarch64 Kernel Module  580.95\n", "580.95"},
        {"NVRM version: NVIDIA UNIX Kernel Module 1.2.\n", ""},       /* a trailing dot: not a version */
        {"NVRM version: NVIDIA UNIX x86_64 Kernel Module\nGCC version: 12.3.0\n", ""}, /* none on its line */
        {"GCC version:  gcc version 12.3.0\n", ""},                     /* no NVRM line */
        {"", ""},
        {"NVRM version:", ""},
        {"NVRM version: 7 x86_64 .5 12..", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[32] = "junk";
        const int got = as_nvidia_driver_version_parse(cases[i].text, out, sizeof out);
        CHECK(got == (cases[i].want[0] != '\0') && !strcmp(out, cases[i].want), "case %zu: %d '%s' (want '%s')", i,
              got, out, cases[i].want);
    }
    char tiny[4] = "xx";
    CHECK(as_nvidia_driver_version_parse(cases[1].text, tiny, sizeof tiny) == 1 && !strcmp(tiny, "535"),
          "cut to the buffer: '%s'", tiny);
    CHECK(as_nvidia_driver_version_parse(NULL, tiny, sizeof tiny) == 0 && tiny[0] == '\0', "NULL text");
    char drv[32];
    const int have = as_nvidia_driver_version(drv, sizeof drv);
    CHECK(have == (drv[0] != '\0'), "the file: %d, '%s'", have, drv);
}
