#include "engine/bench_json.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "model/safetensors.h"

int as_bench_json_write(const char *path, const AsBenchFigures *f, const char *knob_flags, AsError *err)
{
    if (!path)
        return as_err(err, AS_EBADINPUT, "no path for the JSON");
    char tmp[AS_ATOMIC_TMP_MAX];
    FILE *j;
    int rc = as_atomic_create(path, tmp, sizeof tmp, &j, err);
    if (rc)
        return rc;
    if (fprintf(j,
                "{\"copy_gbs\": %.1f, \"gemm_tflops\": %.1f, \"decode_ms\": %.4f, \"decode_wall_ms\": %.4f, "
                "\"decode_floor_ms\": %.4f, \"decode_graph_ms\": %.4f, \"decode_graph_wall_ms\": %.4f, "
                "\"graph_nodes\": %d, \"graph_kernels\": %d, \"graph_host_nodes\": %d, "
                "\"prefill_ms\": %.3f, \"proj_tflops\": %.1f, \"proj_alone_tflops\": %.1f, "
                "\"attn_tflops\": %.1f, \"iscore_tflops\": %.1f, \"knobs\": \"%s\"}\n",
                f->copy_gbs, f->gemm_tflops, f->decode_ms, f->decode_wall_ms, f->decode_floor_ms, f->decode_graph_ms,
                f->decode_graph_wall_ms, f->graph_nodes, f->graph_kernels, f->graph_host_nodes, f->prefill_ms,
                f->proj_tflops, f->proj_alone_tflops, f->attn_tflops, f->iscore_tflops, knob_flags ? knob_flags : "") < 0) {
        rc = as_err(err, AS_ERUNTIME, "%s: write failed (%s)", path, strerror(errno));
        as_atomic_abort(j, tmp);
        return rc;
    }
    return as_atomic_commit(j, tmp, path, err);
}
