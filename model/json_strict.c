#include "model/json_strict.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Depth by a scan of the brackets outside strings, before cJSON recurses into them. */
static int check_depth(const char *t, size_t len, AsError *err)
{
    int depth = 0;
    bool in_str = false;
    for (size_t i = 0; i < len && t[i]; i++) {
        char c = t[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = false;
        } else if (c == '"') {
            in_str = true;
        } else if (c == '[' || c == '{') {
            if (++depth > AS_JSON_MAX_DEPTH)
                return as_err(err, AS_EBADINPUT, "nested deeper than %d levels (at byte %zu)", AS_JSON_MAX_DEPTH, i);
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return AS_OK;
}

static int key_cmp(const void *a, const void *b)
{
    return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

/* where: the key path of v, for the message. */
static int check_dups(const cJSON *v, char *where, size_t cap, AsError *err)
{
    if (!cJSON_IsObject(v) && !cJSON_IsArray(v))
        return AS_OK;
    size_t n = 0;
    for (const cJSON *c = v->child; c; c = c->next)
        n++;
    if (cJSON_IsObject(v) && n > 1) {
        const cJSON **k = malloc(n * sizeof *k);
        if (!k)
            return as_err(err, AS_ERUNTIME, "out of memory");
        size_t i = 0;
        for (const cJSON *c = v->child; c; c = c->next)
            k[i++] = c;
        qsort(k, n, sizeof *k, key_cmp);
        for (i = 1; i < n; i++)
            if (!strcmp(k[i]->string, k[i - 1]->string)) {
                int rc = as_err(err, AS_EBADINPUT, "key \"%.80s\" appears twice in the object at %s", k[i]->string,
                                where[0] ? where : "the top level");
                free(k);
                return rc;
            }
        free(k);
    }
    size_t base = strlen(where), i = 0;
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        if (!cJSON_IsObject(c) && !cJSON_IsArray(c))
            continue;
        if (cJSON_IsObject(v))
            snprintf(where + base, cap - base, "%s%.60s", base ? "." : "", c->string);
        else
            snprintf(where + base, cap - base, "[%zu]", i);
        int rc = check_dups(c, where, cap, err);
        where[base] = '\0';
        if (rc)
            return rc;
    }
    return AS_OK;
}

int as_json_parse_strict(const char *text, size_t len, cJSON **out, AsError *err)
{
    *out = NULL;
    int rc = check_depth(text, len, err);
    if (rc)
        return rc;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        const char *e = cJSON_GetErrorPtr();
        long off = e && e >= text && e <= text + len ? (long)(e - text) : end ? (long)(end - text) : -1;
        return as_err(err, AS_EBADINPUT, "not valid JSON (near byte %ld)", off);
    }
    for (const char *p = end; p && p < text + len; p++)
        if (*p != ' ' && *p != '\n' && *p != '\t' && *p != '\r') {
            cJSON_Delete(root); /* a NUL byte too: every caller's length excludes the terminator */
            return as_err(err, AS_EBADINPUT, "bytes after the JSON value (offset %ld)", (long)(p - text));
        }
    char where[512] = "";
    if ((rc = check_dups(root, where, sizeof where, err))) {
        cJSON_Delete(root);
        return rc;
    }
    *out = root;
    return AS_OK;
}
