/* engine/knobs.c and cli/engine_knobs.c: the knobs' defaults, the flags' values and the one-line refusal
 * of anything else (exit 2 from every command that takes them), the flags that reproduce a setting, and
 * that no engine or kernel source reads the environment for a knob any more. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/knobs.h"
#include "tests/lib/cli_util.h"
#include "tests/lib/harness.h"

TEST(engine_knobs_defaults_are_the_winners)
{
    AsEngineKnobs k;
    memset(&k, 0x5a, sizeof k);
    as_engine_knobs_default(&k);
    CHECK(k.attn_path == AS_ATTN_AUTO && k.pdl && k.kv_fork && k.fusions == AS_FUSE_ALL &&
              k.sel_room == AS_SEL_ROOM_AUTO && k.gpu_mem_limit_mb == 0 && !k.fp8_qdq,
          "defaults: path %d pdl %d fork %d fusions %#x room %d limit %d", (int)k.attn_path, k.pdl, k.kv_fork,
          k.fusions, k.sel_room, k.gpu_mem_limit_mb);
    char buf[256] = "junk";
    as_engine_knobs_flags(&k, buf, sizeof buf);
    CHECK(buf[0] == '\0', "the defaults need no flag: '%s'", buf);
}

TEST(engine_knobs_attn_path_values)
{
    static const struct {
        const char *v;
        AsAttnPath want;
    } ok[] = {{"auto", AS_ATTN_AUTO}, {"warp", AS_ATTN_WARP}, {"mma", AS_ATTN_MMA}, {"wgmma", AS_ATTN_WGMMA}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        AsError err = {0};
        AsAttnPath got = AS_ATTN_WGMMA;
        CHECK(as_attn_path_parse(ok[i].v, &got, &err) == 0 && got == ok[i].want && !strcmp(as_attn_path_name(got), ok[i].v),
              "'%s': %d (%s)", ok[i].v, (int)got, err.msg);
    }
    static const char *bad[] = {"", "Auto", "mma ", "tensor", "1", "warp,mma"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        AsError err = {0};
        AsAttnPath got = AS_ATTN_MMA;
        int rc = as_attn_path_parse(bad[i], &got, &err);
        CHECK(rc == AS_EBADINPUT && got == AS_ATTN_AUTO && strstr(err.msg, "--attn-path") && !strchr(err.msg, '\n'),
              "'%s': rc %d, path %d, '%s' (want AS_EBADINPUT, one line naming the flag, auto)", bad[i], rc, (int)got,
              err.msg);
    }
}

TEST(engine_knobs_fusion_values)
{
    static const struct {
        const char *v;
        unsigned want;
    } cases[] = {
        {"all", AS_FUSE_ALL},
        {"none", 0},
        {"residual", AS_FUSE_RESIDUAL},
        {"rope,oback", AS_FUSE_ROPE | AS_FUSE_OBACK},
        {"kvidx,residual,rope,oback", AS_FUSE_KV_IDX | AS_FUSE_RESIDUAL | AS_FUSE_ROPE | AS_FUSE_OBACK},
        {"norm", AS_FUSE_NORM},
        {"kvsel", AS_FUSE_KV_SEL},
        {"kvidx,residual,rope,oback,norm,kvsel", AS_FUSE_ALL},
        {"rope,rope", AS_FUSE_ROPE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        AsError err = {0};
        unsigned got = 99;
        int rc = as_decode_fusions(cases[i].v, &got, &err);
        CHECK(rc == 0 && got == cases[i].want, "'%s': rc %d, fusions %#x (want %#x)", cases[i].v, rc, got,
              cases[i].want);
    }
    static const char *bad[] = {"", "0", "1", "2", "yes", "rope,", ",rope", "rope,,oback", "Rope", "residual,bogus",
                                "ropeoback", "none,rope", "norms"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        AsError err = {0};
        unsigned got = 99;
        int rc = as_decode_fusions(bad[i], &got, &err);
        CHECK(rc == AS_EBADINPUT && strstr(err.msg, "--fusions: unknown fusion") && !strchr(err.msg, '\n') &&
                  got == AS_FUSE_ALL,
              "'%s': rc %d, fusions %#x, '%s' (want AS_EBADINPUT, one line naming the flag, the default left)", bad[i],
              rc, got, err.msg);
    }
}

TEST(engine_knobs_sel_room_values)
{
    static const struct {
        const char *v;
        int want;
    } ok[] = {{"auto", AS_SEL_ROOM_AUTO}, {"0", 0}, {"48", 48}, {"1048576", 1 << 20}, {"007", 7}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        AsError err = {0};
        int got = -7;
        int rc = as_sel_room(ok[i].v, &got, &err);
        CHECK(rc == 0 && got == ok[i].want, "'%s': rc %d, room %d (want %d)", ok[i].v, rc, got, ok[i].want);
    }
    static const char *bad[] = {"", "-1", "+4", " 4", "4 ", "4x", "x", "1048577", "99999999999999999999", "0x10",
                                "Auto", "auto "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        AsError err = {0};
        int got = 5;
        int rc = as_sel_room(bad[i], &got, &err);
        CHECK(rc == AS_EBADINPUT && strstr(err.msg, "--sel-room") && !strchr(err.msg, '\n') && got == AS_SEL_ROOM_AUTO,
              "'%s': rc %d, room %d, '%s' (want AS_EBADINPUT, one line naming the flag, auto)", bad[i], rc, got,
              err.msg);
    }
}

TEST(engine_knobs_sel_room_default_keeps_wq_b_one_block_an_sm)
{
    static const struct {
        int64_t resident;
        int sms, want;
    } c[] = {
        {396, 132, 264},                        /* H200: 3 blocks an SM, wq_b keeps 132 */
        {264, 132, 132},                        /* 2 an SM */
        {132, 132, 0},                          /* 1 an SM: nothing to leave */
        {0, 132, 0},                            /* no one-wave grid */
        {48, 16, 32},                           /* a small GPU */
        {(int64_t)1 << 40, 1, AS_SEL_ROOM_MAX}, /* clamped */
        {10, 0, 0},                             /* an unknown SM count: no room */
        {10, -3, 0},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        const int got = as_sel_room_default(c[i].resident, c[i].sms);
        CHECK(got == c[i].want, "resident %lld, %d SMs: room %d (want %d)", (long long)c[i].resident, c[i].sms, got,
              c[i].want);
    }
}

/* The flags that reproduce a setting, in the struct's order; cut to the buffer. */
TEST(engine_knobs_flags_reproduce_a_setting)
{
    AsEngineKnobs k;
    as_engine_knobs_default(&k);
    k.attn_path = AS_ATTN_WARP;
    k.pdl = false;
    k.kv_fork = false;
    k.fusions = AS_FUSE_ROPE | AS_FUSE_NORM;
    k.sel_room = 0;
    k.gpu_mem_limit_mb = 512;
    k.fp8_qdq = true;
    char buf[256];
    as_engine_knobs_flags(&k, buf, sizeof buf);
    CHECK(!strcmp(buf, "--attn-path warp --no-pdl --no-kv-fork --fusions rope,norm --sel-room 0 --gpu-mem-limit 512 "
                       "--fp8-qdq"),
          "every knob set: '%s'", buf);
    as_engine_knobs_default(&k);
    k.fusions = 0;
    as_engine_knobs_flags(&k, buf, sizeof buf);
    CHECK(!strcmp(buf, "--fusions none"), "no fusion: '%s'", buf);
    /* and each parses back to the setting */
    unsigned f = 0;
    AsError err = {0};
    CHECK(as_decode_fusions("none", &f, &err) == 0 && f == 0, "none parses back");
    k.fusions = AS_FUSE_ALL;
    k.pdl = false;
    char tiny[6];
    as_engine_knobs_flags(&k, tiny, sizeof tiny);
    CHECK(!strcmp(tiny, "--no-"), "cut to the buffer: '%s'", tiny);
}

/* Every command that takes the flags refuses a bad value with one line and exit 2, before any work
 * (bench-engine without a device, run before its script runs, tui before it takes the terminal). */
TEST(engine_knobs_bad_flag_values_exit_2_everywhere)
{
    static const char *const cmds[] = {"bench-engine", "run", "tui"};
    static const struct {
        const char *flag, *value, *says;
    } bad[] = {{"--attn-path", "tensor", "--attn-path: 'tensor' is not auto, warp, mma or wgmma"},
               {"--fusions", "rope,bogus", "--fusions: unknown fusion 'bogus'"},
               {"--sel-room", "-2", "--sel-room: '-2' is not 'auto' or a count of blocks"},
               {"--gpu-mem-limit", "-1", "--gpu-mem-limit: '-1' is not an integer"}};
    AsCliResult *r = malloc(sizeof *r);
    REQUIRE(r, "memory");
    char script[600];
    snprintf(script, sizeof script, "%s/s.json", as_test_tmpdir());
    FILE *f = fopen(script, "w");
    REQUIRE(f, "create %s", script);
    fputs("{\"model\": \"tiny\", \"steps\": [{\"prefill\": 2}]}", f);
    fclose(f);
    for (size_t c = 0; c < sizeof cmds / sizeof cmds[0]; c++)
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            if (!strcmp(cmds[c], "run"))
                as_cli_run(r, AS_ARGS("run", script, bad[i].flag, bad[i].value));
            else
                as_cli_run(r, AS_ARGS(cmds[c], bad[i].flag, bad[i].value));
            const char *nl = strchr(r->err, '\n');
            CHECK(r->status == 2 && strstr(r->err, bad[i].says) && nl && !nl[1],
                  "%s %s %s: exit %d (want 2), stderr '%s' (want one line with '%s')", cmds[c], bad[i].flag,
                  bad[i].value, r->status, r->err, bad[i].says);
        }
    free(r);
}

static int ends_with(const char *s, const char *suffix)
{
    const size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* The knobs are options, not the environment: no "ATTNSCOPE_..." literal in engine/ or kernels/ (a test
 * process can then run an engine per setting); returns the sources read. */
static int check_no_env_names(const char *dir)
{
    DIR *d = opendir(dir);
    REQUIRE(d, "%s/ not found (run the tests from the repository root)", dir);
    int files = 0;
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
        files++;
        char line[4096];
        for (int ln = 1; fgets(line, sizeof line, f); ln++) {
            CHECK(!strstr(line, "\"ATTNSCOPE_"), "%s:%d names an environment switch: %s", path, ln, line);
            if (!strcmp(dir, "kernels"))
                CHECK(!strstr(line, "getenv("), "%s:%d: a kernel reads the environment: %s", path, ln, line);
        }
        fclose(f);
    }
    closedir(d);
    return files;
}

TEST(engine_knobs_not_read_from_the_environment)
{
    const int n = check_no_env_names("engine") + check_no_env_names("kernels");
    CHECK(n >= 40, "only %d engine and kernel sources read", n);
}
