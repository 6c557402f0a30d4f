/* ATTNSCOPE_L2_PREFETCH's parser and the byte ranges of one prefetch (engine/l2_plan.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/l2_plan.h"

/* off: every amount tried measured slower through the graph (bench/RESULTS.md, 2026-11-30 03:30) */
const AsL2Prefetch as_l2_prefetch_default = {.wo_a_mb = 0, .wq_b_mb = 0, .wq_a_mb = 0, .chunk_kb = 16, .by_loads = 0};

static int bad(AsError *err, const char *p, size_t n, const char *why)
{
    return as_err(err, AS_EBADINPUT,
                  "ATTNSCOPE_L2_PREFETCH: '%.*s' %s (0, off, or a comma list of woa:MB, wqb:MB, wqa:MB, chunk:KB, mode:bulk|ld)",
                  (int)(n < 40 ? n : 40), p, why);
}

int as_l2_prefetch_parse(const char *v, AsL2Prefetch *out, AsError *err)
{
    *out = as_l2_prefetch_default;
    if (!v || !*v)
        return 0;
    if (!strcmp(v, "0") || !strcmp(v, "off")) {
        out->wo_a_mb = out->wq_b_mb = out->wq_a_mb = 0;
        return 0;
    }
    for (const char *p = v;;) {
        const size_t n = strcspn(p, ","), name = strcspn(p, ":,");
        if (name == n)
            return bad(err, p, n, "has no ':'");
        char num[32];
        const size_t nl = n - name - 1;
        if (name == 4 && !strncmp(p, "mode", 4)) {
            if (nl == 2 && !strncmp(p + name + 1, "ld", 2))
                out->by_loads = 1;
            else if (nl == 4 && !strncmp(p + name + 1, "bulk", 4))
                out->by_loads = 0;
            else
                return bad(err, p, n, "is not mode:bulk or mode:ld");
            if (!p[n])
                break;
            p += n + 1;
            continue;
        }
        if (!nl || nl >= sizeof num)
            return bad(err, p, n, "has no number");
        memcpy(num, p + name + 1, nl);
        num[nl] = '\0';
        char *end = NULL;
        errno = 0;
        const double x = strtod(num, &end);
        if (errno || *end || !isfinite(x))
            return bad(err, p, n, "is not a number");
        double *mb = !strncmp(p, "woa", name) && name == 3   ? &out->wo_a_mb
                     : !strncmp(p, "wqb", name) && name == 3 ? &out->wq_b_mb
                     : !strncmp(p, "wqa", name) && name == 3 ? &out->wq_a_mb
                                                             : NULL;
        if (mb) {
            if (!(x >= 0 && x <= 1024))
                return bad(err, p, n, "is outside 0..1024 MB");
            *mb = x;
        } else if (name == 5 && !strncmp(p, "chunk", 5)) {
            if (!(x >= 1 && x <= 1024 && x == floor(x) && ((int)x & ((int)x - 1)) == 0))
                return bad(err, p, n, "is not a power of two in 1..1024 KB");
            out->chunk_kb = (int)x;
        } else
            return bad(err, p, n, "names nothing known");
        if (!p[n])
            break;
        p += n + 1;
    }
    return 0;
}

AsL2Ranges as_l2_prefetch_ranges(int64_t bytes, int groups, double mb)
{
    AsL2Ranges r = {0, 0, 0};
    if (bytes <= 0 || groups <= 0 || bytes % groups || !(mb > 0))
        return r;
    const int64_t block = bytes / groups;
    const double want = mb * 1048576.0 / groups;
    int64_t seg = want >= (double)block ? block : (int64_t)want;
    seg &= ~(int64_t)15;
    if (seg <= 0)
        return r;
    r.n_seg = groups;
    r.stride = block;
    r.seg_bytes = seg;
    return r;
}
