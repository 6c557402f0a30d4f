/* engine/fusions.c: ATTNSCOPE_DECODE_FUSE's and ATTNSCOPE_L2_PREFETCH's values, and the one-line refusal of
 * anything else. */
#include <string.h>

#include "engine/fusions.h"
#include "tests/harness.h"

TEST(decode_fusions_values)
{
    static const struct {
        const char *v;
        unsigned want;
    } cases[] = {
        {NULL, AS_FUSE_RESIDUAL | AS_FUSE_ROPE | AS_FUSE_OBACK | AS_FUSE_KV_IDX},
        {"", AS_FUSE_RESIDUAL | AS_FUSE_ROPE | AS_FUSE_OBACK | AS_FUSE_KV_IDX},
        {"0", 0},
        {"none", 0},
        {"1", AS_FUSE_ALL},
        {"all", AS_FUSE_ALL},
        {"residual", AS_FUSE_RESIDUAL},
        {"rope,oback", AS_FUSE_ROPE | AS_FUSE_OBACK},
        {"kvidx,residual,rope,oback", AS_FUSE_ALL},
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
    static const char *bad[] = {"2", "yes", "rope,", ",rope", "rope,,oback", "Rope", "residual,bogus", "ropeoback", "none,rope"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        AsError err = {0};
        unsigned got = 99;
        int rc = as_decode_fusions(bad[i], &got, &err);
        CHECK(rc == AS_EBADINPUT && strstr(err.msg, "ATTNSCOPE_DECODE_FUSE: unknown fusion") && !strchr(err.msg, '\n'),
              "'%s': rc %d, '%s' (want AS_EBADINPUT, one line naming the variable)", bad[i], rc, err.msg);
        CHECK(got == 0, "'%s': fusions %#x left set on a refusal", bad[i], got);
    }
}

TEST(l2_prefetch_sizes_values)
{
    static const struct {
        const char *v;
        int wqb, woa;
    } cases[] = {
        {NULL, AS_L2_PREFETCH_WQB_MB, AS_L2_PREFETCH_WOA_MB},
        {"", AS_L2_PREFETCH_WQB_MB, AS_L2_PREFETCH_WOA_MB},
        {"0", 0, 0},
        {"none", 0, 0},
        {"16,24", 16, 24},
        {"0,32", 0, 32},
        {"64,0", 64, 0},
        {"007,8", 7, 8},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        AsError err = {0};
        int mb[2] = {-1, -1};
        int rc = as_l2_prefetch_sizes(cases[i].v, mb, &err);
        CHECK(rc == 0 && mb[0] == cases[i].wqb && mb[1] == cases[i].woa, "'%s': rc %d, %d,%d (want %d,%d)",
              cases[i].v ? cases[i].v : "(unset)", rc, mb[0], mb[1], cases[i].wqb, cases[i].woa);
    }
}

TEST(l2_prefetch_sizes_refuses_the_rest)
{
    static const char *bad[] = {"1", "16", "16,", ",16", "16,24,8", "65,0", "0,65", "-1,4", "4,-1", "a,b",
                                "16 ,24", "16,24 ", "99999999999,1", "all"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        AsError err = {0};
        int mb[2] = {-1, -1};
        int rc = as_l2_prefetch_sizes(bad[i], mb, &err);
        CHECK(rc == AS_EBADINPUT && strstr(err.msg, "ATTNSCOPE_L2_PREFETCH") && !strchr(err.msg, '\n'),
              "'%s': rc %d, '%s' (want AS_EBADINPUT, one line naming the variable)", bad[i], rc, err.msg);
        CHECK(mb[0] == 0 && mb[1] == 0, "'%s': %d,%d left set on a refusal", bad[i], mb[0], mb[1]);
    }
}
