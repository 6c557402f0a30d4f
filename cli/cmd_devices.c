/* `attnscope devices`: the CUDA devices this process sees. */
#include <stdio.h>

#include "cli/args.h"
#include "cli/command.h"
#include "engine/engine.h"

static int cmd_devices(int argc, char **argv)
{
    static const AsOpt opts[] = {{0}};
    int rc = as_args_parse("devices", argc, argv, opts, NULL, 0, 0, NULL);
    if (rc)
        return rc == AS_ARGS_HELP ? 0 : rc;
    char buf[8192];
    as_engine_describe_devices(buf, sizeof buf);
    fputs(buf, stdout);
    return 0;
}

AS_COMMAND(devices, cmd_devices, "list the CUDA devices (or say why there are none)",
           "devices\n\n"
           "Lists the CUDA devices attnscope can use, with their compute capability and memory, or one\n"
           "line saying why there is none. Exits 0 either way.\n")
