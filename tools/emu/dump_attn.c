/* Dumps the sparse-attention operands of one reference layer (q, rows_a + rows_b, idx, sink and the
 * reference o) of a prefill, for tools/emu/emu_attn_real (the kernel on the emulator with real data).
 *   dump_attn MODEL_DIR OUT_FILE [S=512] [LAYER=0] [INPUT_SEED=1] [THREADS=2]
 * File: int32 s, nh, hd, nrows, topk, na; f32 sink[nh], q[s][nh][hd], rows[nrows][hd], o[s][nh][hd];
 * int32 idx[s][topk]; then, when the layer has them, int32 1 and f32 kv_pre[s][hd] (the window rows before
 * the fp8 quantiser, for the flip analysis of emu_attn_real). Built by tools/emu/real.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/inputs.h"
#include "ref/linear.h"
#include "ref/stack.h"

static void wr(FILE *f, const void *p, size_t n)
{
    if (fwrite(p, 1, n, f) != n) {
        perror("write");
        exit(3);
    }
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL_DIR OUT_FILE [S] [LAYER] [INPUT_SEED] [THREADS]\n", argv[0]);
        return 2;
    }
    const int s = argc > 3 ? atoi(argv[3]) : 512, layer = argc > 4 ? atoi(argv[4]) : 0;
    const unsigned long long seed = argc > 5 ? strtoull(argv[5], NULL, 10) : 1;
    as_ref_set_threads(argc > 6 ? atoi(argv[6]) : 2);
    AsError err = {0};
    AsModel m;
    memset(&m, 0, sizeof m);
    if (as_model_load(argv[1], 0, &m, &err)) {
        fprintf(stderr, "load: %s\n", err.msg);
        return 1;
    }
    AsRefStack k;
    if (as_ref_stack_init(&k, &m, &err)) {
        fprintf(stderr, "stack: %s\n", err.msg);
        return 1;
    }
    const int dim = m.cfg.dim;
    float *h0 = malloc(sizeof(float) * (size_t)s * dim);
    as_inputs_synthetic(seed, 0, s, dim, h0);
    if (as_ref_begin_step(&k, h0, 0, s, &err)) {
        fprintf(stderr, "begin: %s\n", err.msg);
        return 1;
    }
    AsRun run;
    as_run_init(&run);
    for (int l = 0; l <= layer; l++)
        if (as_ref_next_layer(&k, NULL, &run, &err)) {
            fprintf(stderr, "layer %d: %s\n", l, err.msg);
            return 1;
        }
    const int nh = m.cfg.n_heads, hd = m.cfg.head_dim, na = run.rows_a_len, nb = run.rows_b_len, topk = run.topk;
    const int nrows = na + nb;
    FILE *f = fopen(argv[2], "wb");
    if (!f) {
        perror(argv[2]);
        return 1;
    }
    const int32_t hdr[6] = {s, nh, hd, nrows, topk, na};
    wr(f, hdr, sizeof hdr);
    wr(f, k.rm.sink[layer], sizeof(float) * (size_t)nh);
    wr(f, run.t[AS_T_Q].data, sizeof(float) * (size_t)s * nh * hd);
    wr(f, run.t[AS_T_ROWS_A].data, sizeof(float) * (size_t)na * hd);
    if (nb)
        wr(f, run.t[AS_T_ROWS_B].data, sizeof(float) * (size_t)nb * hd);
    wr(f, run.t[AS_T_O].data, sizeof(float) * (size_t)s * nh * hd);
    wr(f, run.t[AS_T_IDX].data, sizeof(int32_t) * (size_t)s * topk);
    if (run.t[AS_T_KV_PRE].data && run.t[AS_T_KV_PRE].shape[0] == s) {
        const int32_t one = 1;
        wr(f, &one, sizeof one);
        wr(f, run.t[AS_T_KV_PRE].data, sizeof(float) * (size_t)s * hd);
    }
    fclose(f);
    printf("layer %d (ratio %d): s %d nh %d hd %d rows %d+%d topk %d -> %s\n", layer, run.ratio, s, nh, hd, na, nb,
           topk, argv[2]);
    as_run_free(&run);
    as_ref_stack_free(&k);
    as_model_free(&m);
    free(h0);
    return 0;
}
