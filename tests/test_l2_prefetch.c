/* engine/l2_plan.c (ATTNSCOPE_L2_PREFETCH's parser, a prefetch's byte ranges) and the CPU twin of
 * kernels/l2_prefetch.cu: the items it issues cover the planned segments byte for byte, nothing outside. */
#include <stdlib.h>
#include <string.h>

#include "engine/l2_plan.h"
#include "kernels/l2_prefetch_item.h"
#include "tests/harness.h"

TEST(l2_prefetch_parse_values)
{
    static const struct {
        const char *v;
        double woa, wqb, wqa;
        int chunk;
    } cases[] = {
        {"0", 0, 0, 0, 16},
        {"off", 0, 0, 0, 16},
        {"woa:32", 32, -1, -1, 16},
        {"woa:24,wqb:8,wqa:13", 24, 8, 13, 16},
        {"wqa:0.5,chunk:4", -1, -1, 0.5, 4},
        {"chunk:1024,woa:1024", 1024, -1, -1, 1024},
        {"woa:0", 0, -1, -1, 16},
        {"mode:ld,woa:8", 8, -1, -1, 16},
        {"woa:8,mode:bulk", 8, -1, -1, 16},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        AsError err = {0};
        AsL2Prefetch p;
        int rc = as_l2_prefetch_parse(cases[i].v, &p, &err);
        /* -1: the default's value */
        double woa = cases[i].woa < 0 ? as_l2_prefetch_default.wo_a_mb : cases[i].woa;
        double wqb = cases[i].wqb < 0 ? as_l2_prefetch_default.wq_b_mb : cases[i].wqb;
        double wqa = cases[i].wqa < 0 ? as_l2_prefetch_default.wq_a_mb : cases[i].wqa;
        CHECK(rc == 0 && p.wo_a_mb == woa && p.wq_b_mb == wqb && p.wq_a_mb == wqa && p.chunk_kb == cases[i].chunk,
              "'%s': rc %d, woa %g wqb %g wqa %g chunk %d", cases[i].v, rc, p.wo_a_mb, p.wq_b_mb, p.wq_a_mb, p.chunk_kb);
        CHECK(p.by_loads == (strstr(cases[i].v, "mode:ld") != NULL), "'%s': by_loads %d", cases[i].v, p.by_loads);
    }
    AsError err = {0};
    AsL2Prefetch p;
    const AsL2Prefetch *d = &as_l2_prefetch_default;
    for (int k = 0; k < 2; k++) {
        CHECK(as_l2_prefetch_parse(k ? "" : NULL, &p, &err) == 0 && p.wo_a_mb == d->wo_a_mb && p.wq_b_mb == d->wq_b_mb &&
                  p.wq_a_mb == d->wq_a_mb && p.chunk_kb == d->chunk_kb,
              "%s: the default", k ? "''" : "unset");
    }
}

TEST(l2_prefetch_parse_refuses)
{
    static const char *bad[] = {"1",        "on",        "woa",      "woa:",        "woa:x",      "woa:-1",
                                "woa:1025", "woa:nan",   "woa:inf",  "wob:4",       "woa:4,",     ",woa:4",
                                "chunk:3",  "chunk:0",   "chunk:2048", "chunk:16.5", "woa:4;wqb:2", "WOA:4",
                                "woa:1:2",  "woa:12345678901234567890123456789012345", "mode:", "mode:lds", "mode:1", "mode"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        AsError err = {0};
        AsL2Prefetch p;
        int rc = as_l2_prefetch_parse(bad[i], &p, &err);
        CHECK(rc == AS_EBADINPUT && strstr(err.msg, "ATTNSCOPE_L2_PREFETCH:") && !strchr(err.msg, '\n'),
              "'%s': rc %d, '%s' (want AS_EBADINPUT, one line naming the variable)", bad[i], rc, err.msg);
    }
}

TEST(l2_prefetch_ranges)
{
    const int64_t MB = 1048576;
    /* flash's wo_a: 8 groups of 1024 x 4096 bf16 (8 MB each); 32 MB asked: the first 4 MB of each */
    AsL2Ranges r = as_l2_prefetch_ranges(67108864, 8, 32);
    CHECK(r.n_seg == 8 && r.stride == 8 * MB && r.seg_bytes == 4 * MB, "wo_a 32 MB: %lld x %lld, %lld apart",
          (long long)r.n_seg, (long long)r.seg_bytes, (long long)r.stride);
    /* more than the weight: all of it */
    r = as_l2_prefetch_ranges(13107200, 1, 64);
    CHECK(r.n_seg == 1 && r.seg_bytes == 13107200, "wq_a 64 MB asked: %lld bytes", (long long)r.seg_bytes);
    /* rounded down to 16 bytes */
    r = as_l2_prefetch_ranges(1 << 20, 4, 0.0001); /* 26.2 bytes a group */
    CHECK(r.n_seg == 4 && r.stride == 262144 && r.seg_bytes == 16, "0.0001 MB in 4: %lld",
          (long long)r.seg_bytes);
    /* nothing */
    CHECK(as_l2_prefetch_ranges(1 << 20, 1, 0).seg_bytes == 0, "0 MB");
    CHECK(as_l2_prefetch_ranges(1 << 20, 1, 1e-6).seg_bytes == 0, "under 16 bytes");
    CHECK(as_l2_prefetch_ranges(1000, 3, 1).seg_bytes == 0, "groups not dividing the bytes");
    CHECK(as_l2_prefetch_ranges(0, 1, 1).seg_bytes == 0 && as_l2_prefetch_ranges(1 << 20, 0, 1).seg_bytes == 0,
          "no bytes, no groups");
}

/* Marks every byte the items name; each item within its segment, 16-byte multiple, at most a chunk. */
static int cover(int64_t n_seg, int64_t stride, int64_t seg, int64_t chunk, unsigned char *hit, int64_t span)
{
    const int64_t items = n_seg * as_l2_prefetch_chunks(seg, chunk);
    for (int64_t i = 0; i < items; i++) {
        int64_t off, len;
        as_l2_prefetch_item(i, n_seg, stride, seg, chunk, &off, &len);
        if (len <= 0 || len > chunk || len % 16 || off % 16 || off < 0 || off + len > span ||
            (off % stride) + len > seg)
            return 0;
        for (int64_t b = off; b < off + len; b++)
            hit[b]++;
    }
    return 1;
}

TEST(l2_prefetch_items_cover_the_segments)
{
    static const struct {
        int64_t n_seg, stride, seg, chunk;
    } cases[] = {
        {1, 4096, 4096, 1024},  {1, 4096, 16, 1024},     {1, 5000, 4992, 1024}, {3, 4096, 1040, 256},
        {8, 8192, 8192, 16384}, {8, 8192, 4096 + 16, 64}, {5, 160, 160, 16},    {2, 1 << 16, 48000, 4096},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const int64_t span = cases[k].n_seg * cases[k].stride;
        unsigned char *hit = calloc((size_t)span, 1);
        CHECK(hit != NULL, "allocation");
        if (!hit)
            return;
        int ok = cover(cases[k].n_seg, cases[k].stride, cases[k].seg, cases[k].chunk, hit, span);
        CHECK(ok, "case %zu: an item outside its segment or misaligned", k);
        int64_t wrong = 0;
        for (int64_t b = 0; ok && b < span; b++)
            wrong += hit[b] != ((b % cases[k].stride) < cases[k].seg);
        CHECK(wrong == 0, "case %zu: %lld bytes covered other than once-inside / never-outside", k, (long long)wrong);
        free(hit);
    }
    /* the first n_seg items: the start of every segment (what the GEMV blocks read first) */
    for (int64_t i = 0; i < 8; i++) {
        int64_t off, len;
        as_l2_prefetch_item(i, 8, 8192, 4096, 1024, &off, &len);
        CHECK(off == i * 8192 && len == 1024, "item %lld: %lld + %lld", (long long)i, (long long)off, (long long)len);
    }
}
