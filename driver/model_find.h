/* Which model replays a dump (`attnscope check` without --model, or with a preset name): a model
 * directory in the preset cache whose weights' digest is the dump's `weights_digest`, else the
 * dump's `weights_name` beside the dump, in the current directory or in the cache. */
#ifndef AS_MODEL_FIND_H
#define AS_MODEL_FIND_H

#include <stdbool.h>
#include <stddef.h>

#include "dumps/dump.h"

/* The preset cache directory: $ATTNSCOPE_CACHE, else $XDG_CACHE_HOME/attnscope, else
 * ~/.cache/attnscope (driver/model_spec.c generates presets there). -1 when the path is too long. */
int as_cache_dir(char *buf, size_t n);

/* dir gets the model for the dump: `model` when given (a directory, file or preset name, resolved as
 * every command does); else a cache entry (config.json + model.safetensors) with the dump's geometry
 * and digest; else the dump's weights name found beside the dump, here, or in the cache. how gets one
 * line saying which ("found by its digest in CACHE"...). AS_EBADINPUT with one line when none is. */
int as_find_dump_model(const char *dump_path, const AsDumpInfo *info, const char *model, bool quiet, char *dir,
                       size_t n, char *how, size_t how_n, AsError *err);

#endif
