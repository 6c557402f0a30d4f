/* engine/switches.c: the list of the engine's environment switches, and the line a benchmark prints. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/switches.h"
#include "tests/lib/harness.h"

static int listed(const char *name, size_t len)
{
    for (const char *const *p = as_engine_switch_names; *p; p++)
        if (strlen(*p) == len && !strncmp(*p, name, len))
            return 1;
    return 0;
}

static int ends_with(const char *s, const char *suffix)
{
    const size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* Every "ATTNSCOPE_..." string literal of the folder's sources must be a listed switch; returns how
 * many literals were read. */
static int check_folder(const char *dir)
{
    DIR *d = opendir(dir);
    REQUIRE(d, "%s/ not found (run the tests from the repository root)", dir);
    int seen = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!ends_with(e->d_name, ".c") && !ends_with(e->d_name, ".h") && !ends_with(e->d_name, ".cu") &&
            !ends_with(e->d_name, ".cuh"))
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        CHECK(f, "cannot read %s", path);
        if (!f)
            continue;
        char line[4096];
        for (int ln = 1; fgets(line, sizeof line, f); ln++)
            for (const char *p = line; (p = strstr(p, "\"ATTNSCOPE_"));) {
                const char *name = p + 1;
                size_t len = strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
                if (name[len] == '"') {
                    seen++;
                    CHECK(listed(name, len), "%s:%d reads %.*s, which engine/switches.c does not list", path, ln,
                          (int)len, name);
                }
                p = name + len;
            }
        fclose(f);
    }
    closedir(d);
    return seen;
}

TEST(engine_switches_list_matches_sources_and_docs)
{
    int n = 0;
    for (const char *const *p = as_engine_switch_names; *p; p++, n++) {
        CHECK(!strncmp(*p, "ATTNSCOPE_", 10), "%s: not an ATTNSCOPE_ name", *p);
        for (const char *const *q = as_engine_switch_names; q < p; q++)
            CHECK(strcmp(*p, *q), "%s listed twice", *p);
    }
    CHECK(n >= 10, "only %d switches listed", n);
    const int seen = check_folder("engine") + check_folder("kernels");
    CHECK(seen >= n, "the sources spell %d switch names, fewer than the %d listed", seen, n);
    /* and each has its row in docs/ENGINE.md's table */
    FILE *f = fopen("docs/ENGINE.md", "rb");
    REQUIRE(f, "docs/ENGINE.md not found");
    static char doc[1 << 18];
    const size_t len = fread(doc, 1, sizeof doc - 1, f);
    fclose(f);
    doc[len] = '\0';
    for (const char *const *p = as_engine_switch_names; *p; p++) {
        char row[96];
        snprintf(row, sizeof row, "| `%s", *p);
        CHECK(strstr(doc, row), "docs/ENGINE.md has no row for %s", *p);
    }
}

TEST(engine_switches_set_line)
{
    /* the test's own environment: every switch unset, then restored */
    char *saved[64] = {0};
    int n = 0;
    for (const char *const *p = as_engine_switch_names; *p && n < 64; p++, n++) {
        const char *v = getenv(*p);
        saved[n] = v ? strdup(v) : NULL;
        unsetenv(*p);
    }
    char buf[512] = "junk";
    CHECK(as_engine_switches_set(buf, sizeof buf) == 0 && buf[0] == '\0', "none set: '%s'", buf);

    setenv("ATTNSCOPE_TOPK_WARP_RANGE", "128", 1);
    setenv("ATTNSCOPE_PDL", "0", 1);
    CHECK(as_engine_switches_set(buf, sizeof buf) == 2 && !strcmp(buf, "ATTNSCOPE_PDL=0 ATTNSCOPE_TOPK_WARP_RANGE=128"),
          "two set, in the list's order: '%s'", buf);

    setenv("ATTNSCOPE_PDL", "a\"b\\c\nd\x01\xc3\xa9", 1); /* unsafe bytes become '?' */
    CHECK(as_engine_switches_set(buf, sizeof buf) == 2 &&
              !strcmp(buf, "ATTNSCOPE_PDL=a?b?c?d??? ATTNSCOPE_TOPK_WARP_RANGE=128"),
          "sanitised: '%s'", buf);

    char longv[200];
    memset(longv, 'x', sizeof longv - 1);
    longv[sizeof longv - 1] = '\0';
    setenv("ATTNSCOPE_PDL", longv, 1);
    as_engine_switches_set(buf, sizeof buf);
    CHECK(strlen(buf) == strlen("ATTNSCOPE_PDL=") + 48 + strlen(" ATTNSCOPE_TOPK_WARP_RANGE=128"),
          "a value cut to 48 bytes: %zu bytes", strlen(buf));

    char tiny[12];
    CHECK(as_engine_switches_set(tiny, sizeof tiny) == 2 && !strcmp(tiny, "ATTNSCOPE_P"), "cut to the buffer: '%s'",
          tiny);
    CHECK(as_engine_switches_set(NULL, 8) == 0 && as_engine_switches_set(tiny, 0) == 0, "no buffer");

    unsetenv("ATTNSCOPE_PDL");
    unsetenv("ATTNSCOPE_TOPK_WARP_RANGE");
    n = 0;
    for (const char *const *p = as_engine_switch_names; *p && n < 64; p++, n++)
        if (saved[n]) {
            setenv(*p, saved[n], 1);
            free(saved[n]);
        }
}
