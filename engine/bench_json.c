#include "engine/bench_json.h"

#include <stdio.h>

int as_bench_json_write(const char *path, const AsBenchFigures *f, const char *switches, AsError *err)
{
    char tmp[1100];
    if (!path || snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return as_err(err, AS_EBADINPUT, "the JSON path is missing or too long");
    FILE *j = fopen(tmp, "w");
    int bad = !j;
    if (j) {
        bad = fprintf(j,
                      "{\"copy_gbs\": %.1f, \"gemm_tflops\": %.1f, \"decode_ms\": %.4f, \"decode_wall_ms\": %.4f, "
                      "\"decode_floor_ms\": %.4f, \"decode_graph_ms\": %.4f, \"decode_graph_wall_ms\": %.4f, "
                      "\"graph_nodes\": %d, \"graph_kernels\": %d, \"graph_host_nodes\": %d, "
                      "\"prefill_ms\": %.3f, \"proj_tflops\": %.1f, \"proj_alone_tflops\": %.1f, "
                      "\"attn_tflops\": %.1f, \"iscore_tflops\": %.1f, \"switches\": \"%s\"}\n",
                      f->copy_gbs, f->gemm_tflops, f->decode_ms, f->decode_wall_ms, f->decode_floor_ms,
                      f->decode_graph_ms, f->decode_graph_wall_ms, f->graph_nodes, f->graph_kernels,
                      f->graph_host_nodes, f->prefill_ms, f->proj_tflops, f->proj_alone_tflops, f->attn_tflops,
                      f->iscore_tflops, switches ? switches : "") < 0;
        if (fclose(j))
            bad = 1;
    }
    if (bad || rename(tmp, path)) {
        remove(tmp);
        return as_err(err, AS_ERUNTIME, "cannot write the JSON %s", path);
    }
    return 0;
}
