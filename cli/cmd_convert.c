/* `attnscope convert`: a model (directory or file) to a GGUF file, projections quantised with
 * ggml's own algorithms (docs/GGUF.md). */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/signals.h"
#include "model/gguf.h"
#include "model/safetensors.h"
#include "model/weights.h"

static int cmd_convert(int argc, char **argv)
{
    const char *to = NULL, *quant = NULL, *names = "llama";
    const AsOpt opts[] = {
        {"--to", NULL, AS_OPT_STR, &to, 0, 0},
        {"--quant", NULL, AS_OPT_STR, &quant, 0, 0},
        {"--names", NULL, AS_OPT_STR, &names, 0, 0},
        {0},
    };
    const char *pos[2];
    int np = 0;
    int rc = as_args_parse("convert", argc, argv, opts, pos, 2, 2, &np);
    if (rc)
        return rc == AS_ARGS_HELP ? 0 : rc;
    if (!to || strcasecmp(to, "gguf"))
        return as_cli_usage_error("convert", "--to gguf is the one target (got %s)", to ? to : "none");
    AsGgufConvertOptions o = {.progress = isatty(2)};
    if (!quant)
        return as_cli_usage_error("convert", "missing --quant q2_k|q8_0|bf16");
    if (!strcasecmp(quant, "q2_k"))
        o.quant = AS_DT_Q2_K;
    else if (!strcasecmp(quant, "q8_0"))
        o.quant = AS_DT_Q8_0;
    else if (!strcasecmp(quant, "bf16"))
        o.quant = AS_DT_BF16;
    else
        return as_cli_usage_error("convert", "--quant: '%s' is not q2_k, q8_0 or bf16", quant);
    if (!strcmp(names, "llama"))
        o.names = AS_GGUF_NAMES_LLAMA;
    else if (!strcmp(names, "deepseek"))
        o.names = AS_GGUF_NAMES_DEEPSEEK;
    else
        return as_cli_usage_error("convert", "--names: '%s' is not llama or deepseek", names);
    size_t ol = strlen(pos[1]);
    if (ol < 5 || strcmp(pos[1] + ol - 5, ".gguf"))
        return as_cli_usage_error("convert", "the output '%s' must end in .gguf", pos[1]);
    AsModel m;
    AsError err = {0};
    as_cli_install_abort_handlers(NULL); /* Ctrl-C leaves no half-written OUT.gguf.tmp-* */
    if ((rc = as_model_load(pos[0], 0, &m, &err)))
        return as_cli_fail("convert", &err);
    if ((rc = as_atomic_check(pos[1], &err))) { /* before the conversion: a directory there fails now */
        as_model_free(&m);
        return as_cli_fail("convert", &err);
    }
    o.source = m.weights_name;
    rc = as_gguf_convert(&m, &o, pos[1], &err);
    as_model_free(&m);
    if (rc)
        return as_cli_fail("convert", &err);
    struct stat st;
    printf("wrote %s (%.2f MiB): projections %s, norms/sinks/ratio-2 compressor F32, %s tensor names\n", pos[1],
           stat(pos[1], &st) ? 0.0 : (double)st.st_size / (1 << 20), as_dtype_name(o.quant),
           o.names == AS_GGUF_NAMES_LLAMA ? "llama.cpp (blk.*)" : "DeepSeek (layers.*)");
    return 0;
}

AS_COMMAND(convert, cmd_convert, "convert a model to GGUF (projections Q2_K, Q8_0 or BF16)",
           "convert --to gguf --quant q2_k|q8_0|bf16 [--names llama|deepseek] IN OUT.gguf\n\n"
           "Writes the attention tensors of IN (anything `attnscope info` loads) to OUT.gguf, replaced\n"
           "atomically: projections quantised with ggml's own quantize_row_q2_K_ref /\n"
           "quantize_row_q8_0_ref (bit-identical to ggml) or kept BF16; norms, sinks and the ratio-2\n"
           "compressor weights F32; the geometry as metadata (docs/GGUF.md). Q2_K needs projection\n"
           "inputs that are multiples of 256 values (the flash geometry; `gen --preset tiny-q`), Q8_0\n"
           "multiples of 32: other projections are refused by name.\n\n"
           "options:\n"
           "  --to gguf        the output format\n"
           "  --quant Q        q2_k, q8_0 or bf16: the projections' type\n"
           "  --names S        llama (blk.{l}.attn_q_a.weight ..., default) or deepseek\n"
           "                   (layers.{l}.attn.wq_a.weight ...): both read back the same\n")
