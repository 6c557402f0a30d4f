/* `attnscope import`: tensors another engine dumped from its forward hooks (safetensors, .npy, .npz
 * named by docs/IMPORT.md's scheme) written as a dump that check, diff and dump-info read. */
#include <stdio.h>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/signals.h"
#include "driver/dump_source.h"
#include "dumps/import.h"
#include "model/safetensors.h"
#include "model/text_safe.h"

#define AS_IMPORT_MAX_INPUTS 4096

static int cmd_import(int argc, char **argv)
{
    const char *model = NULL, *output = NULL, *side = NULL;
    bool quiet = false;
    const AsOpt opts[] = {
        {"--model", NULL, AS_OPT_STR, &model, 0, 0},
        {"--output", "-o", AS_OPT_STR, &output, 0, 0},
        {"--side", NULL, AS_OPT_STR, &side, 0, 0},
        {"--quiet", "-q", AS_OPT_FLAG, &quiet, 0, 0},
        {NULL, NULL, 0, NULL, 0, 0},
    };
    const char *pos[AS_IMPORT_MAX_INPUTS + 1];
    int n_pos = 0;
    int rc = as_args_parse("import", argc, argv, opts, pos, 1, AS_IMPORT_MAX_INPUTS + 1, &n_pos);
    if (rc)
        return rc == AS_ARGS_HELP ? 0 : rc;
    if (!output)
        return as_cli_usage_error("import", "-o OUT.h5: name the dump to write");
    const char *const *paths = pos;
    int n = n_pos;
    if (!model) {
        if (n_pos < 2)
            return as_cli_usage_error("import", "name the model and what to import: import MODEL INPUT... -o OUT.h5");
        model = pos[0];
        paths++, n--;
    }
    AsError err = {0};
    as_cli_install_abort_handlers(NULL); /* Ctrl-C leaves no half-written .OUT.tmp-* */
    if (as_atomic_check(output, &err)) /* a directory or socket there fails before anything is read */
        return as_cli_fail("import", &err);
    AsImport *imp;
    if ((rc = as_load_import(paths, n, model, side, quiet, &imp, &err)))
        return as_cli_fail("import", &err);
    rc = as_import_write(imp, output, &err);
    if (!rc && !quiet) {
        int steps, layers, tensors;
        as_import_counts(imp, &steps, &layers, &tensors);
        char shown[2048];
        as_text_escape(output, shown, sizeof shown);
        printf("wrote %s: %d steps, %d layer runs, %d tensors (side %s)\n", shown, steps, layers, tensors,
               as_import_side(imp));
    }
    as_import_free(imp);
    return rc ? as_cli_fail("import", &err) : 0;
}

AS_COMMAND(import, cmd_import, "write another engine's safetensors / .npy / .npz tensors as a dump",
           "import MODEL INPUT... -o OUT.h5 [--side NAME] [--quiet]   (or import INPUT... --model MODEL -o ...)\n\n"
           "Reads what an engine's forward hooks saved (docs/IMPORT.md): safetensors files, .npy files and\n"
           ".npz archives whose tensors are named step{S}/layer{L}/{tensor} (the dump format's tensor names;\n"
           "step{S}/h0 or h0 for the token inputs), with each step's start_pos and tokens in the metadata\n"
           "(safetensors __metadata__, or a .json file among the inputs), and directories of them. Every\n"
           "name, dtype and shape is checked against MODEL's geometry as a dump's would be (one line, exit 2),\n"
           "then OUT.h5 is written (docs/DUMP_FORMAT.md; replaced atomically). `attnscope check MODEL INPUT...`\n"
           "checks the same inputs without writing anything.\n\n"
           "options:\n"
           "  -o, --output F   the dump to write\n"
           "  --model M        the model whose geometry the tensors have (else the first positional)\n"
           "  --side NAME      the side's name in the dump (default: the metadata's \"side\", else import)\n"
           "  -q, --quiet      no summary line\n")
