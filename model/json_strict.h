/* The one JSON parse for inputs (config.json, scripts, safetensors indexes and headers): one
 * value and nothing but whitespace after it, no key twice in an object, nesting bounded. */
#ifndef AS_JSON_STRICT_H
#define AS_JSON_STRICT_H

#include <stddef.h>

#include <cJSON.h>

#include "model/errors.h"

#define AS_JSON_MAX_DEPTH 64

/* *out: the tree (caller cJSON_Deletes) or NULL. Errors (AS_EBADINPUT, no path: callers add it):
 * "not valid JSON (near byte N)", "bytes after the JSON value (offset N)", "nested deeper than 64
 * levels (at byte N)", "key \"K\" appears twice in the object at PATH" (PATH: "the top level" or
 * a key path such as weight_map or steps[2]). */
int as_json_parse_strict(const char *text, size_t len, cJSON **out, AsError *err);

#endif
