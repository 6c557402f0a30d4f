/* Loading the torch fixtures with cJSON. Every field is checked for type and length, so a
 * damaged file fails with a message naming the case and field instead of crashing. */
#include "tests/lib/fixtures.h"

#include <cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/numerics.h"
#include "tests/lib/harness.h"

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* Reads and parses <fixtures dir>/<name>. */
static cJSON *load_json(const char *name, char *path, size_t pathlen, char *err, size_t errlen)
{
    snprintf(path, pathlen, "%s/%s", as_fixtures_dir(), name);
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fail(err, errlen, "%s: cannot open (set ATTNSCOPE_FIXTURES to the fixtures directory)", path);
        return NULL;
    }
    char *text = NULL;
    long len = -1;
    if (fseek(fp, 0, SEEK_END) == 0 && (len = ftell(fp)) >= 0 && fseek(fp, 0, SEEK_SET) == 0 &&
        (text = malloc((size_t)len + 1)) && fread(text, 1, (size_t)len, fp) == (size_t)len) {
        text[len] = '\0';
    } else {
        free(text);
        text = NULL;
    }
    fclose(fp);
    if (!text) {
        fail(err, errlen, "%s: cannot read", path);
        return NULL;
    }
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!root)
        fail(err, errlen, "%s: not valid JSON", path);
    return root;
}

static void copy_string(char *dst, size_t n, const cJSON *item)
{
    snprintf(dst, n, "%s", cJSON_IsString(item) ? item->valuestring : "");
}

/* An array of integers into int64 (exact: every value here fits a double's 53 bits). */
static int64_t *int_array(const cJSON *arr, int64_t *count)
{
    if (!cJSON_IsArray(arr))
        return NULL;
    int64_t n = cJSON_GetArraySize(arr);
    int64_t *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v)
        return NULL;
    int64_t i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) {
        if (!cJSON_IsNumber(e)) {
            free(v);
            return NULL;
        }
        v[i++] = (int64_t)e->valuedouble;
    }
    *count = n;
    return v;
}

static int32_t *i32_array(const cJSON *arr, int64_t want)
{
    int64_t n = -1;
    int64_t *v = int_array(arr, &n);
    if (!v || n != want) {
        free(v);
        return NULL;
    }
    int32_t *out = malloc((size_t)(n > 0 ? n : 1) * sizeof *out);
    if (out)
        for (int64_t i = 0; i < n; i++)
            out[i] = (int32_t)v[i];
    free(v);
    return out;
}

int as_fixture_load_topk(AsTopkFixture *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    char path[1024];
    cJSON *root = load_json("topk_torch_cpu.json", path, sizeof path, err, errlen);
    if (!root)
        return -1;
    copy_string(f->source, sizeof f->source, cJSON_GetObjectItemCaseSensitive(root, "source"));
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases");
    int rc = 0;
    if (!cJSON_IsArray(cases)) {
        rc = fail(err, errlen, "%s: no \"cases\" array", path);
        goto out;
    }
    f->cases = calloc((size_t)cJSON_GetArraySize(cases) + 1, sizeof *f->cases);
    if (!f->cases) {
        rc = fail(err, errlen, "%s: out of memory", path);
        goto out;
    }
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        AsTopkCase *tc = &f->cases[f->n_cases++];
        copy_string(tc->note, sizeof tc->note, cJSON_GetObjectItemCaseSensitive(c, "note"));
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(c, "n"), *k = cJSON_GetObjectItemCaseSensitive(c, "k");
        const cJSON *branch = cJSON_GetObjectItemCaseSensitive(c, "branch");
        if (!cJSON_IsNumber(n) || !cJSON_IsNumber(k) || !cJSON_IsString(branch)) {
            rc = fail(err, errlen, "%s: case %d: missing n, k or branch", path, f->n_cases - 1);
            goto out;
        }
        tc->n = (int64_t)n->valuedouble;
        tc->k = (int64_t)k->valuedouble;
        tc->partial_sort = strcmp(branch->valuestring, "partial_sort") == 0;
        int64_t nb = -1;
        int64_t *bits = int_array(cJSON_GetObjectItemCaseSensitive(c, "bits"), &nb);
        if (bits && nb == tc->n && (tc->values = malloc((size_t)(nb > 0 ? nb : 1) * sizeof *tc->values)))
            for (int64_t i = 0; i < nb; i++)
                tc->values[i] = as_bf16_to_f32((uint16_t)bits[i]);
        free(bits);
        tc->set = i32_array(cJSON_GetObjectItemCaseSensitive(c, "set"), tc->k);
        tc->unsorted_order = i32_array(cJSON_GetObjectItemCaseSensitive(c, "unsorted_order"), tc->k);
        if (!tc->values || !tc->set || !tc->unsorted_order) {
            rc = fail(err, errlen, "%s: case %d (%s): bits, set or unsorted_order missing or of the wrong length",
                      path, f->n_cases - 1, tc->note);
            goto out;
        }
    }
out:
    cJSON_Delete(root);
    if (rc)
        as_fixture_free_topk(f);
    return rc;
}

void as_fixture_free_topk(AsTopkFixture *f)
{
    for (int i = 0; i < f->n_cases; i++) {
        free(f->cases[i].values);
        free(f->cases[i].set);
        free(f->cases[i].unsorted_order);
    }
    free(f->cases);
    memset(f, 0, sizeof *f);
}

int as_fixture_load_rounding(AsRoundingFixture *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    char path[1024];
    cJSON *root = load_json("rounding_torch.json", path, sizeof path, err, errlen);
    if (!root)
        return -1;
    copy_string(f->source, sizeof f->source, cJSON_GetObjectItemCaseSensitive(root, "source"));
    static const char *names[4] = {"f32_bits", "bf16_bits", "clamped_f32_bits", "e4m3_bits"};
    int64_t *arr[4] = {0}, len[4] = {-1, -1, -1, -1};
    int rc = 0;
    for (int a = 0; a < 4; a++) {
        arr[a] = int_array(cJSON_GetObjectItemCaseSensitive(root, names[a]), &len[a]);
        if (!arr[a] || len[a] != len[0]) {
            rc = fail(err, errlen, "%s: \"%s\" missing or not as long as f32_bits", path, names[a]);
            goto out;
        }
    }
    f->n = len[0];
    size_t n = (size_t)(f->n > 0 ? f->n : 1);
    f->f32_bits = malloc(n * sizeof *f->f32_bits);
    f->bf16_bits = malloc(n * sizeof *f->bf16_bits);
    f->clamped_f32_bits = malloc(n * sizeof *f->clamped_f32_bits);
    f->e4m3_bits = malloc(n * sizeof *f->e4m3_bits);
    if (!f->f32_bits || !f->bf16_bits || !f->clamped_f32_bits || !f->e4m3_bits) {
        rc = fail(err, errlen, "%s: out of memory", path);
        goto out;
    }
    for (int64_t i = 0; i < f->n; i++) {
        f->f32_bits[i] = (uint32_t)(int32_t)arr[0][i]; /* stored as signed int32 */
        f->bf16_bits[i] = (uint16_t)arr[1][i];
        f->clamped_f32_bits[i] = (uint32_t)(int32_t)arr[2][i];
        f->e4m3_bits[i] = (uint8_t)arr[3][i];
    }
out:
    for (int a = 0; a < 4; a++)
        free(arr[a]);
    cJSON_Delete(root);
    if (rc)
        as_fixture_free_rounding(f);
    return rc;
}

void as_fixture_free_rounding(AsRoundingFixture *f)
{
    free(f->f32_bits);
    free(f->bf16_bits);
    free(f->clamped_f32_bits);
    free(f->e4m3_bits);
    memset(f, 0, sizeof *f);
}
