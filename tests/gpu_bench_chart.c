/* engine/bench_chart.c (the benchmark's SVG; built with the engine, runs without a device): a
 * well-formed document with one decode bar and one floor tick per layer, the prefill stacks, titles
 * escaped, and no chart for an empty model. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/bench_chart.h"
#include "tests/lib/harness.h"

static int count(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

TEST(gpu_bench_chart_svg)
{
    AsBenchChart c;
    memset(&c, 0, sizeof c);
    c.title = "bench <flash> & co";
    c.n_layers = 4;
    const char *kinds[4] = {"r0", "r2 kv idx", "r2 reuse", "r1 reuse"};
    for (int l = 0; l < 4; l++) {
        c.kind[l] = kinds[l];
        c.decode_ms[l] = 0.1 * (l + 1);
        c.decode_floor_ms[l] = 0.05 * (l + 1);
        c.prefill_ms[l][AS_OP_LAYER] = 2.0 + l;
        c.prefill_ms[l][AS_OP_PROJ] = 1.0;
        c.prefill_ms[l][AS_OP_ATTN] = 0.5;
    }
    c.have_prefill = 1;
    c.prefill_tokens = 4096;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    REQUIRE(f, "open_memstream");
    CHECK(as_bench_chart_svg(&c, f) == 0, "chart written");
    fclose(f);
    CHECK(!strncmp(buf, "<svg ", 5) && strstr(buf, "</svg>\n"), "an svg document");
    CHECK(strstr(buf, "bench &lt;flash&gt; &amp; co") != NULL, "the title escaped");
    CHECK(count(buf, "floor 0.") == 4, "one decode bar per layer: %d", count(buf, "floor 0."));
    CHECK(count(buf, "stroke-width=\"2\"") == 4, "one floor tick per layer");
    CHECK(count(buf, "rest (norms") == 4, "the prefill's rest per layer: %d", count(buf, "rest (norms"));
    CHECK(strstr(buf, "Prefill, 4096 tokens") != NULL, "the prefill panel");
    CHECK(count(buf, "<text") == count(buf, "</text>"), "balanced text elements");
    free(buf);
    c.n_layers = 0;
    f = open_memstream(&buf, &len);
    REQUIRE(f, "open_memstream");
    CHECK(as_bench_chart_svg(&c, f) == -1, "no layers: no chart");
    fclose(f);
    free(buf);
}
