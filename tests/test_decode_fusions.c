/* engine/fusions.c: ATTNSCOPE_DECODE_FUSE's and ATTNSCOPE_SEL_ROOM's values, and the one-line refusal of
 * anything else. */
#include <string.h>

#include "engine/fusions.h"
#include "tests/lib/harness.h"

TEST(decode_fusions_values)
{
    static const struct {
        const char *v;
        unsigned want;
    } cases[] = {
        {NULL, AS_FUSE_RESIDUAL | AS_FUSE_ROPE | AS_FUSE_OBACK | AS_FUSE_KV_IDX | AS_FUSE_NORM | AS_FUSE_KV_SEL},
        {"", AS_FUSE_RESIDUAL | AS_FUSE_ROPE | AS_FUSE_OBACK | AS_FUSE_KV_IDX | AS_FUSE_NORM | AS_FUSE_KV_SEL},
        {"0", 0},
        {"none", 0},
        {"1", AS_FUSE_ALL},
        {"all", AS_FUSE_ALL},
        {"residual", AS_FUSE_RESIDUAL},
        {"rope,oback", AS_FUSE_ROPE | AS_FUSE_OBACK},
        {"kvidx,residual,rope,oback", AS_FUSE_KV_IDX | AS_FUSE_RESIDUAL | AS_FUSE_ROPE | AS_FUSE_OBACK},
        {"norm", AS_FUSE_NORM},
        {"kvidx,residual,rope,oback,norm", AS_FUSE_RESIDUAL | AS_FUSE_ROPE | AS_FUSE_OBACK | AS_FUSE_KV_IDX | AS_FUSE_NORM},
        {"kvsel", AS_FUSE_KV_SEL},
        {"kvidx,residual,rope,oback,norm,kvsel", AS_FUSE_ALL},
        {"kvsel,kvidx,residual,rope,oback,norm", AS_FUSE_DEFAULT},
        {"rope,rope", AS_FUSE_ROPE},
        {"residual,rope,kvidx", AS_FUSE_RESIDUAL | AS_FUSE_ROPE | AS_FUSE_KV_IDX},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        AsError err = {0};
        unsigned got = 99;
        int rc = as_decode_fusions(cases[i].v, &got, &err);
        CHECK(rc == 0 && got == cases[i].want, "'%s': rc %d, fusions %#x (want %#x)", cases[i].v ? cases[i].v : "(unset)",
              rc, got, cases[i].want);
    }
}

TEST(decode_fusions_refuses_unknown_names)
{
    static const char *bad[] = {"2", "yes", "rope,", ",rope", "rope,,oback", "Rope", "residual,bogus", "ropeoback", "none,rope", "norms"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        AsError err = {0};
        unsigned got = 99;
        int rc = as_decode_fusions(bad[i], &got, &err);
        CHECK(rc == AS_EBADINPUT && strstr(err.msg, "ATTNSCOPE_DECODE_FUSE: unknown fusion") && !strchr(err.msg, '\n'),
              "'%s': rc %d, '%s' (want AS_EBADINPUT, one line naming the variable)", bad[i], rc, err.msg);
        CHECK(got == 0, "'%s': fusions %#x left set on a refusal", bad[i], got);
    }
}

TEST(decode_fusions_sel_room_values_and_refusals)
{
    static const struct {
        const char *v;
        int want;
    } ok[] = {{NULL, AS_SEL_ROOM_AUTO}, {"", AS_SEL_ROOM_AUTO}, {"auto", AS_SEL_ROOM_AUTO}, {"0", 0},
               {"48", 48},           {"1048576", 1 << 20},       {"007", 7}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        AsError err = {0};
        int got = -1;
        int rc = as_sel_room(ok[i].v, &got, &err);
        CHECK(rc == 0 && got == ok[i].want, "'%s': rc %d, room %d (want %d)", ok[i].v ? ok[i].v : "(unset)", rc, got,
              ok[i].want);
    }
    static const char *bad[] = {"-1", "+4", " 4", "4 ", "4x", "x", "1048577", "99999999999999999999", "0x10", "Auto", "auto "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        AsError err = {0};
        int got = -1;
        int rc = as_sel_room(bad[i], &got, &err);
        CHECK(rc == AS_EBADINPUT && strstr(err.msg, "ATTNSCOPE_SEL_ROOM") && !strchr(err.msg, '\n') && got == 0,
              "'%s': rc %d, room %d, '%s' (want AS_EBADINPUT, one line naming the variable, room 0)", bad[i], rc, got,
              err.msg);
    }
}

TEST(decode_fusions_attn_early_values_and_refusals)
{
    static const struct {
        const char *v;
        int want;
    } ok[] = {{NULL, AS_EARLY_ALL}, {"", AS_EARLY_ALL}, {"1", AS_EARLY_ALL}, {"reuse", AS_EARLY_REUSE}, {"0", AS_EARLY_OFF}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        AsError err = {0};
        int got = -1;
        int rc = as_attn_early(ok[i].v, &got, &err);
        CHECK(rc == 0 && got == ok[i].want, "'%s': rc %d, %d (want %d)", ok[i].v ? ok[i].v : "(unset)", rc, got,
              ok[i].want);
    }
    static const char *bad[] = {"2", "00", "Reuse", "reuse ", " 1", "all", "-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        AsError err = {0};
        int got = -1;
        int rc = as_attn_early(bad[i], &got, &err);
        CHECK(rc == AS_EBADINPUT && strstr(err.msg, "ATTNSCOPE_ATTN_EARLY") && !strchr(err.msg, '\n') &&
                  got == AS_EARLY_OFF,
              "'%s': rc %d, %d, '%s' (want AS_EBADINPUT, one line naming the variable, off)", bad[i], rc, got, err.msg);
    }
}

TEST(decode_fusions_sel_room_default_keeps_wq_b_one_block_an_sm)
{
    static const struct {
        int64_t resident;
        int sms, want;
    } c[] = {
        {396, 132, 264},                        /* H200: 3 blocks an SM, wq_b keeps 132 */
        {264, 132, 132},                        /* 2 an SM */
        {132, 132, 0},                          /* 1 an SM: nothing to leave */
        {0, 132, 0},                            /* ATTNSCOPE_GEMV_RESIDENT=0: no one-wave grid */
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
