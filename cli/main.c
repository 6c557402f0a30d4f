#include <stdio.h>
#include "engine/engine.h"
int main(void)
{
    char buf[4096];
    as_engine_describe_devices(buf, sizeof buf);
    fputs(buf, stdout);
    return 0;
}
