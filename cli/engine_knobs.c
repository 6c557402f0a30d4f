#include "cli/engine_knobs.h"

int as_cli_engine_knobs(const char *cmd, const AsKnobFlags *kf, AsEngineKnobs *k)
{
    as_engine_knobs_default(k);
    AsError err = {0};
    int rc = 0;
    if (kf->attn_path)
        rc = as_attn_path_parse(kf->attn_path, &k->attn_path, &err);
    if (!rc && kf->fusions)
        rc = as_decode_fusions(kf->fusions, &k->fusions, &err);
    if (!rc && kf->sel_room)
        rc = as_sel_room(kf->sel_room, &k->sel_room, &err);
    if (rc)
        return as_cli_usage_error(cmd, "%s", err.msg);
    k->pdl = !kf->no_pdl;
    k->kv_fork = !kf->no_kv_fork;
    k->gpu_mem_limit_mb = kf->gpu_mem_limit_mb;
    k->fp8_qdq = kf->fp8_qdq;
    return 0;
}
