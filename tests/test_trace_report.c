/* engine/trace_report.c: the launch descriptions parsed, kernel names shortened, a step's figures per
 * layer (span and idle, hand-computed), the layer table and the Chrome trace file. */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/stats.h"
#include "engine/trace_report.h"
#include "tests/lib/cli_util.h"
#include "tests/lib/harness.h"

TEST(trace_report_stage_of_launch_descriptions)
{
    const struct {
        const char *launch;
        int layer;
        const char *stage;
    } cases[] = {
        {"layer 3 wq_b + rope(q): gemv 8192x1024 + rope (64 heads x 128, rd 64, pos 9), 1 rows, 264 blocks left free",
         3, "wq_b + rope"},
        {"layer 12: kv rmsnorm + rope + fp8 quant + ring store 1x512 (pos 40)", 12, "kv rmsnorm + rope + fp8 quant + ring store"},
        {"layer 0 wq_a: gemv 1024x4096 + rmsnorm, 1 row", 0, "wq_a"},
        {"layer 39: window select s=1", 39, "window select"},
        {"layer 5: top-512 of 1x4096 index scores", 5, "top-512"},
        {"layer 6: wkv", 6, "wkv"},
        {"decode graph: step parameters", -1, "decode graph"},
        {"layer x: odd", -1, "layer x"},
        {"", -1, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int layer = 7;
        char stage[64];
        as_trace_stage_of(cases[i].launch, &layer, stage, sizeof stage);
        CHECK(layer == cases[i].layer && !strcmp(stage, cases[i].stage), "'%s': layer %d, stage '%s' (want %d, '%s')",
              cases[i].launch, layer, stage, cases[i].layer, cases[i].stage);
    }
    char small[6];
    int layer;
    as_trace_stage_of("layer 1 wq_b + rope(q)", &layer, small, sizeof small);
    CHECK(layer == 1 && !strcmp(small, "wq_b "), "a short buffer: '%s'", small);
    as_trace_stage_of(NULL, &layer, small, sizeof small);
    CHECK(layer == -1 && small[0] == '\0', "NULL: layer %d, '%s'", layer, small);
}

TEST(trace_report_short_kernel_names)
{
    const char *cases[][2] = {
        {"void topk_rows_kernel<256>(float const*, int, int*)", "topk_rows_kernel"},
        {"gemv_bf16_rows(__nv_bfloat16 const*, int)", "gemv_bf16_rows"},
        {"void (anonymous namespace)::attn_split<8, true>(Params)", "attn_split"},
        {"plain_c_kernel", "plain_c_kernel"},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[64];
        as_trace_short_name(cases[i][0], out, sizeof out);
        CHECK(!strcmp(out, cases[i][1]), "'%s' -> '%s' (want '%s')", cases[i][0], out, cases[i][1]);
    }
}

static AsTraceEvent ev_at(uint64_t s, uint64_t e, uint32_t stream, int layer, const char *stage)
{
    AsTraceEvent x = {.start_ns = s, .end_ns = e, .stream = stream, .kind = AS_TRACE_KERNEL, .grid = 132, .block = 256,
                      .layer = layer};
    snprintf(x.stage, sizeof x.stage, "%s", stage);
    snprintf(x.kernel, sizeof x.kernel, "k_%s", stage);
    snprintf(x.launch, sizeof x.launch, "layer %d %s: \"quoted\"\tand tabbed", layer, stage);
    return x;
}

/* Two layers on two streams, in ns:
 *   layer 0: a [1000, 3000) s7; b [2500, 4000) s9; c [5000, 6000) s7      idle in [1000, 7000): 4000-5000, 6000-7000
 *   layer 1: d [7000, 8000) s7; e [7500, 9500) s9; a copy [9800, 9900) (no layer)
 * layer 0 spans to layer 1's first start (6 us, idle 2 us); layer 1 to the step's end 9900 (2.9 us, idle 0.3 us). */
TEST(trace_report_layers_span_and_idle)
{
    AsTraceEvent ev[6] = {ev_at(7500, 9500, 9, 1, "e"), ev_at(1000, 3000, 7, 0, "a"), ev_at(5000, 6000, 7, 0, "c"),
                          ev_at(2500, 4000, 9, 0, "b"), ev_at(7000, 8000, 7, 1, "d"), ev_at(9800, 9900, 7, -1, "")};
    ev[5].kind = AS_TRACE_MEMCPY;
    ev[5].bytes = 4096;
    as_trace_sort(ev, 6);
    for (int i = 1; i < 6; i++)
        CHECK(ev[i].start_ns >= ev[i - 1].start_ns, "not sorted at %d", i);
    AsTraceLayer L[3];
    CHECK(as_trace_layers(ev, 6, 3, L) == 2, "two layers have events");
    CHECK(L[0].span_us == 6.0 && L[0].idle_us == 2.0 && L[0].kernels == 3, "layer 0: span %g, idle %g, %d kernels",
          L[0].span_us, L[0].idle_us, L[0].kernels);
    CHECK(L[1].span_us > 2.8999 && L[1].span_us < 2.9001 && L[1].idle_us > 0.2999 && L[1].idle_us < 0.3001 &&
              L[1].kernels == 2,
          "layer 1: span %g, idle %g, %d kernels", L[1].span_us, L[1].idle_us, L[1].kernels);
    CHECK(L[2].span_us == 0 && L[2].kernels == 0, "layer 2 has no event");

    char *md = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&md, &len);
    REQUIRE(f, "open_memstream");
    as_trace_print_layer(f, ev, 6, 0);
    as_trace_print_layer(f, ev, 6, 2);
    fclose(f);
    CHECK(strstr(md, "| 0.00 | 2.00 | 2.00 | s0 | a | k_a | 132 x 256 |") &&
              strstr(md, "| 1.50 | 3.00 | 1.50 | s1 | b | k_b | 132 x 256 |") &&
              strstr(md, "| 4.00 | 5.00 | 1.00 | s0 | c | k_c | 132 x 256 |") && !strstr(md, "| d |") &&
              strstr(md, "(no event of layer 2)"),
          "the layer table:\n%s", md);
    free(md);

    char path[1100];
    snprintf(path, sizeof path, "%s/trace.json", as_test_tmpdir());
    AsError err = {0};
    REQUIRE(as_trace_chrome_write(path, ev, 6, "a \"title\"", &err) == 0, "write: %s", err.msg);
    char *buf = as_slurp(path, NULL);
    REQUIRE(buf, "%s: not written", path);
    cJSON *j = cJSON_Parse(buf);
    REQUIRE(j, "not JSON:\n%s", buf);
    free(buf);
    const cJSON *te = cJSON_GetObjectItemCaseSensitive(j, "traceEvents");
    CHECK(cJSON_IsArray(te) && cJSON_GetArraySize(te) == 6, "%d events", cJSON_IsArray(te) ? cJSON_GetArraySize(te) : -1);
    const cJSON *first = cJSON_GetArrayItem(te, 0), *args = cJSON_GetObjectItemCaseSensitive(first, "args");
    CHECK(cJSON_GetObjectItemCaseSensitive(first, "ts")->valuedouble == 0 &&
              cJSON_GetObjectItemCaseSensitive(first, "dur")->valuedouble == 2.0 &&
              !strcmp(cJSON_GetObjectItemCaseSensitive(first, "name")->valuestring, "a") &&
              !strcmp(cJSON_GetObjectItemCaseSensitive(args, "launch")->valuestring, "layer 0 a: \"quoted\"\tand tabbed"),
          "the first event: %s", cJSON_PrintUnformatted(first));
    const cJSON *copy = cJSON_GetArrayItem(te, 5);
    CHECK(!strcmp(cJSON_GetObjectItemCaseSensitive(copy, "cat")->valuestring, "memcpy") &&
              !strcmp(cJSON_GetObjectItemCaseSensitive(copy, "name")->valuestring, "memcpy") &&
              cJSON_GetObjectItemCaseSensitive(copy, "tid")->valueint == 0,
          "the copy: %s", cJSON_PrintUnformatted(copy));
    const cJSON *title = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "otherData"), "title");
    CHECK(cJSON_IsString(title) && !strcmp(title->valuestring, "a \"title\""), "the title");
    cJSON_Delete(j);

    snprintf(path, sizeof path, "%s/no/such/dir/trace.json", as_test_tmpdir());
    CHECK(as_trace_chrome_write(path, ev, 6, NULL, &err) != 0 && strstr(err.msg, "no/such/dir"),
          "a path in a missing folder: '%s'", err.msg);
}

/* Two whole layers and a third without its wo_a, in us: layer 0 ends wo_b at 100; layer 1: wq_a 106,
 * wq_b 130 (and a "wq_b + rope" kernel ending 129), the attention's two kernels 138 and 141, wo_a 158,
 * wo_b 183; layer 2 lacks wo_a. Layer 1's chain: 6, 24, 11, 17, 25; layers 0 and 2 have none. Layer 1's
 * other inputs: build idx [120, 133), other [125, 134) and late [131, 135) end before the attention's first
 * kernel (138; late on the attention's stream: streams do not count), wkv [100, 150) and later [131, 170) do
 * not: the last input ends at 135, 5 us after wq_b; the attention's end, 141, is 6 us after it. */
TEST(trace_report_chain_of_hand_made_layers)
{
    AsTraceEvent ev[] = {
        ev_at(0, 5000, 1, 0, "wq_a"),           ev_at(4000, 30000, 1, 0, "wq_b + rope"),
        ev_at(30000, 40000, 1, 0, "sparse attention + o_back"),
        ev_at(35000, 60000, 1, 0, "wo_a"),      ev_at(50000, 100000, 1, 0, "wo_b"),
        ev_at(90000, 106000, 1, 1, "wq_a"),     ev_at(101000, 129000, 1, 1, "wq_b + rope"),
        ev_at(102000, 130000, 1, 1, "wq_b"),    ev_at(100000, 150000, 1, 1, "wkv"),
        ev_at(130500, 138000, 1, 1, "sparse attention"),
        ev_at(131000, 141000, 1, 1, "sparse attention + o_back"), ev_at(135000, 158000, 1, 1, "wo_a"),
        ev_at(140000, 183000, 1, 1, "wo_b"),    ev_at(0, 999000, 1, 1, "wq_bx"),
        ev_at(120000, 133000, 2, 1, "window select + build idx"), ev_at(125000, 134000, 2, 1, "other"),
        ev_at(131000, 170000, 2, 1, "later"),   ev_at(131000, 135000, 1, 1, "late"),
        ev_at(180000, 190000, 1, 2, "wq_a"),    ev_at(185000, 200000, 1, 2, "wq_b"),
        ev_at(200000, 210000, 1, 2, "sparse attention"), ev_at(205000, 230000, 1, 2, "wo_b"),
    };
    const int n = (int)(sizeof ev / sizeof ev[0]);
    as_trace_sort(ev, n);
    AsTraceChain ch[3];
    as_trace_chain(ev, n, 3, ch);
    const double want[AS_TRACE_CHAIN] = {6, 24, 11, 17, 25};
    CHECK(!ch[0].ok && ch[1].ok && !ch[2].ok, "ok flags %d %d %d", ch[0].ok, ch[1].ok, ch[2].ok);
    for (int k = 0; k < AS_TRACE_CHAIN; k++)
        CHECK(ch[1].us[k] > want[k] - 1e-9 && ch[1].us[k] < want[k] + 1e-9, "layer 1, %s: %g us (want %g)",
              as_trace_chain_stage[k], ch[1].us[k], want[k]);
    CHECK(ch[1].branch && fabs(ch[1].branch_us - 5.0) < 1e-9 && fabs(ch[1].attn_us - 6.0) < 1e-9,
          "layer 1's inputs: branch %d, %g us after wq_b (want 5), the attention %g us after them (want 6)",
          ch[1].branch, ch[1].branch_us, ch[1].attn_us);

    /* the table: kind "x" (layer 0, no chain) has no row; kind "y" (layers 1 and 2) one, from layer 1 */
    const char kind[3][48] = {"x", "y", "y"};
    char *md = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&md, &len);
    REQUIRE(f, "open_memstream");
    as_trace_print_chain(f, ev, n, 3, kind);
    fclose(f);
    CHECK(strstr(md, "| wq_a | wq_b | sparse attention | wo_a | wo_b | total | branch - wq_b | attention after its "
                     "inputs |") &&
              strstr(md, "| y | 1 | 6.0 | 24.0 | 11.0 | 17.0 | 25.0 | 83.0 | 5.0 | 6.0 |") && !strstr(md, "| x |"),
          "the chain's table:\n%s", md);
    free(md);
}

TEST(trace_report_median_of_figures)
{
    double odd[] = {3, 1, 2}, even[] = {4, 1, 3, 2}, one[] = {7};
    CHECK(as_median(odd, 3) == 2.0 && as_median(even, 4) == 2.5 && as_median(one, 1) == 7.0 && as_median(NULL, 0) == 0.0,
          "medians %g %g %g %g", as_median(odd, 3), as_median(even, 4), as_median(one, 1), as_median(NULL, 0));
}
