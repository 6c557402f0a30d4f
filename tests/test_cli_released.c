/* The released checkpoint's layout (several shards, model.safetensors.index.json, a Hugging Face
 * config.json with text_config, F8_E4M3 weights with F8_E8M0 32x32 scales, tensors the attention
 * does not read) through the commands people run on it: info, run, check (the TUI: tests/tui_tmux.sh).
 * Also the precision through them: a script's "precision", the report and the dump recording it,
 * check following it. */
#include <cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/cli_util.h"
#include "tests/lib/harness.h"

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    REQUIRE(f && fputs(text, f) >= 0 && fclose(f) == 0, "cannot write %s", path);
}

TEST(cli_released_info_run_check)
{
    static AsCliResult r;
    const char *tmp = as_test_tmpdir();
    char dir[512], script[600], dump[600], report[600], text[2048];
    snprintf(dir, sizeof dir, "%s/released", tmp);
    as_cli_run(&r, AS_ARGS("gen", "--preset", "tiny", "--layout", "released", "-o", dir));
    REQUIRE(r.status == 0, "gen --layout released: status %d, %s", r.status, r.err);

    as_cli_run(&r, AS_ARGS("info", dir));
    CHECK(r.status == 0, "info: status %d, %s", r.status, r.err);
    CHECK(strstr(r.out, "precision  fp8") && strstr(r.out, "F8_E4M3 32x32 scales (F8_E8M0), fp8 linear") &&
              strstr(r.out, "skipped unread"),
          "info: fp8 precision, 32x32 e8m0 scales, the unused tensors skipped:\n%s", r.out);

    /* run in each precision, dumping every tensor of the reference */
    const char *precs[2] = {"fp8", "bf16"};
    for (int i = 0; i < 2; i++) {
        snprintf(script, sizeof script, "%s/run_%s.json", tmp, precs[i]);
        snprintf(dump, sizeof dump, "%s/run_%s.h5", tmp, precs[i]);
        snprintf(report, sizeof report, "%s/run_%s_report.json", tmp, precs[i]);
        snprintf(text, sizeof text,
                 "{\"name\": \"released %s\", \"model\": \"%s\", \"engine\": \"off\", \"precision\": \"%s\",\n"
                 " \"steps\": [{\"prefill\": 6}, {\"decode\": 3}],\n"
                 " \"dump\": {\"path\": \"%s\", \"tensors\": \"all\"}, \"report\": {\"json\": \"%s\"}}\n",
                 precs[i], dir, precs[i], dump, report);
        write_file(script, text);
        as_cli_run(&r, AS_ARGS("run", "-q", script));
        CHECK(r.status == 0, "run (%s): status %d, %s", precs[i], r.status, r.err);
        size_t n = 0;
        char *rep = as_slurp(report, &n);
        cJSON *j = rep ? cJSON_Parse(rep) : NULL;
        const cJSON *model = j ? cJSON_GetObjectItem(j, "model") : NULL;
        const cJSON *p = model ? cJSON_GetObjectItem(model, "precision") : NULL;
        CHECK(cJSON_IsString(p) && !strcmp(p->valuestring, precs[i]), "the report records precision %s", precs[i]);
        cJSON_Delete(j);
        free(rep);
        as_cli_run(&r, AS_ARGS("dump-info", dump));
        CHECK(r.status == 0, "dump-info (%s): status %d, %s", precs[i], r.status, r.err);
        /* the reference replayed over its own dump: it follows the dump's precision, so every layer passes */
        as_cli_run(&r, AS_ARGS("check", dump, "--model", dir, "--side", "ref", "-q"));
        CHECK(r.status == 0, "check --side ref (%s): status %d\n%s%s", precs[i], r.status, r.out, r.err);
    }
    /* replayed in the other precision, the dump's values are not the reference's */
    snprintf(dump, sizeof dump, "%s/run_fp8.h5", tmp);
    as_cli_run(&r, AS_ARGS("check", dump, "--model", dir, "--side", "ref", "--precision", "bf16", "-q"));
    CHECK(r.status == 1, "check of the fp8 dump in bf16 precision: status %d (want 1, a mismatch)", r.status);
}

/* Exactly one line of text. */
static bool one_line(const char *s)
{
    const char *nl = strchr(s, '\n');
    return nl && nl[1] == 0;
}

/* fp8 precision asked of bf16 weights: one line naming the tensor, exit 2, nothing written. */
TEST(cli_released_fp8_on_bf16_refused)
{
    static AsCliResult r;
    const char *tmp = as_test_tmpdir();
    char dir[512], script[600], dump[600], report[600], text[2048];
    snprintf(dir, sizeof dir, "%s/bf16", tmp);
    as_cli_run(&r, AS_ARGS("gen", "--preset", "tiny", "--precision", "bf16", "-o", dir));
    REQUIRE(r.status == 0, "gen --precision bf16: status %d, %s", r.status, r.err);
    const char *const cmds[][4] = {{"info", dir, "--precision", "fp8"}, {"bench-ref", dir, "--precision", "fp8"}};
    for (int i = 0; i < 2; i++) {
        as_cli_run(&r, AS_ARGS(cmds[i][0], cmds[i][1], cmds[i][2], cmds[i][3]));
        CHECK(r.status == 2 && strstr(r.err, "wq_a.weight is not stored as F8_E4M3") && one_line(r.err),
              "%s --precision fp8 on bf16 weights: status %d, stderr %s", cmds[i][0], r.status, r.err);
    }
    snprintf(script, sizeof script, "%s/fp8.json", tmp);
    snprintf(dump, sizeof dump, "%s/fp8.h5", tmp);
    snprintf(report, sizeof report, "%s/fp8_report.json", tmp);
    snprintf(text, sizeof text,
             "{\"model\": \"%s\", \"engine\": \"off\", \"precision\": \"fp8\", \"steps\": [{\"prefill\": 4}],\n"
             " \"dump\": {\"path\": \"%s\"}, \"report\": {\"json\": \"%s\"}}\n", dir, dump, report);
    write_file(script, text);
    as_cli_run(&r, AS_ARGS("run", "-q", script));
    CHECK(r.status == 2 && strstr(r.err, "F8_E4M3"), "run with precision fp8 on bf16 weights: status %d, %s", r.status,
          r.err);
    CHECK(!as_slurp(dump, NULL) && !as_slurp(report, NULL), "nothing written (dump, report)");
    as_cli_run(&r, AS_ARGS("tui", "--model", dir, "--precision", "sideways"));
    CHECK(r.status == 2 && strstr(r.err, "--precision: fp8, bf16 or auto"), "--precision sideways: status %d, %s",
          r.status, r.err);
}
