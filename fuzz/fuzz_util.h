/* Shared by the libFuzzer targets (fuzz/README.md): a scratch directory for the parsers that
 * take a path, files written into it, and checks that stop on a broken contract (a finding).
 *
 * Each target defines LLVMFuzzerTestOneInput. tests/test_hardening.c includes the targets with
 * AS_FUZZ_IN_TESTS defined and LLVMFuzzerTestOneInput renamed, to replay fuzz/regressions/ in
 * the normal test suite: there the scratch directory is the test's own and a broken contract is
 * a test failure instead of an abort. */
#ifndef AS_FUZZ_UTIL_H
#define AS_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef AS_FUZZ_IN_TESTS
#include "tests/lib/harness.h"

static inline const char *fz_dir(void) { return as_test_tmpdir(); }

#define FZ_ASSERT(cond, ...)                                                   \
    do {                                                                       \
        if (!(cond)) {                                                         \
            as_test_fail(__FILE__, __LINE__, __VA_ARGS__);                     \
            as_test_abort();                                                   \
        }                                                                      \
    } while (0)
#else
/* One directory per process (libFuzzer -jobs runs several), under $TMPDIR, removed at exit. */
static char fz_dir_buf[256];

static void fz_cleanup(void)
{
    if (!fz_dir_buf[0])
        return;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fz_dir_buf);
    if (system(cmd) != 0)
        fprintf(stderr, "fuzz: could not remove %s\n", fz_dir_buf);
}

static inline const char *fz_dir(void)
{
    if (!fz_dir_buf[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(fz_dir_buf, sizeof fz_dir_buf, "%s/attnscope-fuzz-XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(fz_dir_buf)) {
            perror("fuzz: mkdtemp");
            abort();
        }
        atexit(fz_cleanup);
    }
    return fz_dir_buf;
}

/* A parser broke its own contract: say why and abort (libFuzzer keeps the input). */
#define FZ_ASSERT(cond, ...)                                                   \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz: %s:%d: ", __FILE__, __LINE__);              \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
            abort();                                                           \
        }                                                                      \
    } while (0)
#endif

/* The micro geometry of the seed corpus (fuzz/corpus/micro_config.json): 3 layers of ratios 0, 1, 2,
 * dim 32. */
static inline const char *fz_micro_config(void)
{
    return "{\"hidden_size\": 32, \"num_hidden_layers\": 3, \"num_attention_heads\": 2, \"head_dim\": 32,"
           " \"qk_rope_head_dim\": 8, \"q_lora_rank\": 32, \"o_lora_rank\": 32, \"o_groups\": 2,"
           " \"sliding_window\": 4, \"rms_norm_eps\": 1e-6, \"compress_ratios\": [0, 1, 2],"
           " \"kv_source_layer_ids\": [1, 2], \"index_source_layer_ids\": [1, 2], \"candidate_topk_blocks\": 2,"
           " \"candidate_block_size\": 2, \"index_n_heads\": 2, \"index_head_dim\": 32, \"index_topk\": 4,"
           " \"rope_theta\": 10000, \"compress_rope_theta\": 160000, \"rope_scaling\": {\"factor\": 4,"
           " \"original_max_position_embeddings\": 64, \"beta_fast\": 32, \"beta_slow\": 1}, \"max_seq_len\": 64}";
}

/* Writes data to fz_dir()/name; returns the path (static storage, four slots in turn). */
static inline const char *fz_write(const char *name, const void *data, size_t size)
{
    static char paths[4][512];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, sizeof paths[0], "%s/%s", fz_dir(), name);
    FILE *f = fopen(p, "wb");
    int ok = f && (!size || fwrite(data, 1, size, f) == size);
    ok = (f && fclose(f) == 0) && ok;
    FZ_ASSERT(ok, "cannot write %s", p);
    return p;
}

/* A message fit for a terminal: non-empty, no control character (C0, DEL, C1 as UTF-8). */
static inline int fz_printable(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    if (!*p)
        return 0;
    for (; *p; p++)
        if (*p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] < 0xa0))
            return 0;
    return 1;
}

/* An error is AS_EBADINPUT or AS_ERUNTIME with a message of one printable line. */
#define FZ_CHECK_ERR(rc, err)                                                                            \
    FZ_ASSERT(((rc) == 2 || (rc) == 3) && fz_printable((err).msg),                                       \
              "error code %d, message '%s' (want 2 or 3 and one printable line)", (rc), (err).msg)

#endif
