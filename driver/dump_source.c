#include "driver/dump_source.h"

int as_check_open_input(const AsCheckOptions *o, AsDumpReader **out, AsError *err)
{
    return as_dump_open(o->dump, out, err);
}
