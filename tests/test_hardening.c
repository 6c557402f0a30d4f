/* Hardening (docs/SECURITY.md): the fuzz targets' regression inputs and seed corpora replayed
 * through the same code the fuzzers run (fuzz/), messages that stay one printable line, size
 * limits (geometry, text files, HDF5 storage), and faults through the binary: a full disk and a
 * read-only target while dumping or writing a model, SIGINT / SIGTERM mid-run and mid-write,
 * missing and unreadable inputs for every command that reads one. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <hdf5.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "driver/inputs_file.h"
#include "dumps/dump.h"
#include "dumps/h5io.h"
#include "model/config.h"
#include "model/errors.h"
#include "model/safetensors.h"
#include "model/textfile.h"
#include "tests/lib/cli_util.h"
#include "tests/lib/harness.h"

/* ---- the fuzz targets, compiled into the test binary ---------------------------------- */

#define AS_FUZZ_IN_TESTS
#define LLVMFuzzerTestOneInput fuzz_one_safetensors
#include "fuzz/fuzz_safetensors.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_one_st_index
#include "fuzz/fuzz_st_index.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_one_gguf
#include "fuzz/fuzz_gguf.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_one_config
#include "fuzz/fuzz_config.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_one_script
#include "fuzz/fuzz_script.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_one_dump
#include "fuzz/fuzz_dump.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_one_npy
#include "fuzz/fuzz_npy.c"
#undef LLVMFuzzerTestOneInput

static const struct {
    const char *name;
    int (*fn)(const uint8_t *, size_t);
} targets[] = {
    {"safetensors", fuzz_one_safetensors}, {"st_index", fuzz_one_st_index}, {"gguf", fuzz_one_gguf},
    {"config", fuzz_one_config},           {"script", fuzz_one_script},     {"dump", fuzz_one_dump},
    {"npy", fuzz_one_npy},
};

/* Every file of dir through fn; returns how many ran. */
static int replay_dir(const char *dir, int (*fn)(const uint8_t *, size_t))
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char path[700];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len = 0;
        char *data = as_slurp(path, &len);
        REQUIRE(data, "cannot read %s", path);
        fn((const uint8_t *)data, len);
        free(data);
        n++;
    }
    closedir(d);
    return n;
}

/* Each finding of the fuzzers is kept under fuzz/regressions/TARGET/ once fixed, and replayed
 * here with the seeds of fuzz/corpus/TARGET/ (what every fuzzing run starts from), each target
 * in its own test directory. */
static void replay_target(int i)
{
    if (access("fuzz/corpus", F_OK) != 0)
        as_test_skip("run from the repository root (fuzz/corpus not found)");
    setenv("ATTNSCOPE_CACHE", as_test_tmpdir(), 1);
    char dir[256];
    snprintf(dir, sizeof dir, "fuzz/regressions/%s", targets[i].name);
    int regressions = replay_dir(dir, targets[i].fn);
    snprintf(dir, sizeof dir, "fuzz/corpus/%s", targets[i].name);
    int seeds = replay_dir(dir, targets[i].fn);
    CHECK(seeds > 0, "fuzz/corpus/%s has no seed", targets[i].name);
    as_test_note("%s: %d regression inputs and %d seeds replayed", targets[i].name, regressions, seeds);
}

TEST(hardening_fuzz_replay_safetensors) { replay_target(0); }
TEST(hardening_fuzz_replay_st_index) { replay_target(1); }
TEST(hardening_fuzz_replay_gguf) { replay_target(2); }
TEST(hardening_fuzz_replay_config) { replay_target(3); }
TEST(hardening_fuzz_replay_script) { replay_target(4); }
TEST(hardening_fuzz_replay_dump) { replay_target(5); }
TEST(hardening_fuzz_replay_npy) { replay_target(6); }

/* ---- messages ------------------------------------------------------------------------ */

/* A message quotes what a file says: control characters, C1 controls and broken UTF-8 become
 * '?' so that it stays one line and cannot drive the terminal. */
TEST(hardening_messages_are_one_printable_line)
{
    AsError err = {0};
    as_err(&err, AS_EBADINPUT, "tensor '%s'", "a\nb\033[2Jc\x7f\xc2\x9b" "d\xff\xc3\xa9\xe2\x82\xac");
    CHECK(!strcmp(err.msg, "tensor 'a?b?[2Jc???d?\xc3\xa9\xe2\x82\xac'"), "sanitised: '%s'", err.msg);
    as_err_wrap(&err, "file %s", "x\ty");
    CHECK(!strncmp(err.msg, "file x?y: tensor", 16), "the wrapped prefix too: '%s'", err.msg);
    /* cut in the middle of a multi-byte character: the stray lead byte goes too */
    char big[600];
    memset(big, 'a', sizeof big);
    memcpy(big + 509, "\xe2\x82\xac\xe2\x82\xac", 6);
    big[sizeof big - 1] = '\0';
    as_err(&err, AS_EBADINPUT, "%s", big);
    for (const unsigned char *p = (const unsigned char *)err.msg; *p; p++)
        CHECK(*p >= 0x20 && *p != 0x7f, "byte %d is a control character", (int)(p - (const unsigned char *)err.msg));
}

static void make_tiny_dump(char *path, size_t n, int prefill);

/* Names that listings print (info, dump-info) may not hold terminal escapes: a tensor name in a
 * safetensors header or a GGUF, a dump's string attributes. */
TEST(hardening_names_with_control_characters_refused)
{
    char path[700];
    snprintf(path, sizeof path, "%s/esc.safetensors", as_test_tmpdir());
    const char *hdr = "{\"a\\u001b]0;pwned\\u0007\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}";
    FILE *f = fopen(path, "wb");
    REQUIRE(f, "create");
    uint64_t n = strlen(hdr);
    fwrite(&n, 8, 1, f);
    fputs(hdr, f);
    fwrite("\0\0\0\0", 1, 4, f);
    fclose(f);
    AsWeightFile *wf = NULL;
    AsWTensor *ts = NULL;
    int nt = 0, cap = 0;
    AsError err = {0};
    int rc = as_st_open(path, &wf, &ts, &nt, &cap, &err);
    CHECK(rc == AS_EBADINPUT && strstr(err.msg, "control character") && !strchr(err.msg, 0x1b),
          "an escape in a tensor name: rc %d, %s", rc, err.msg);
    as_st_close(wf);
    free(ts);

    char dump[700], bad[800];
    make_tiny_dump(dump, sizeof dump, 2);
    snprintf(bad, sizeof bad, "%s/esc.h5", as_test_tmpdir());
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", dump, bad);
    REQUIRE(system(cmd) == 0, "cp");
    as_h5_init();
    hid_t h = H5Fopen(bad, H5F_ACC_RDWR, H5P_DEFAULT);
    REQUIRE(h >= 0 && H5Adelete(h, "weights_name") >= 0, "delete weights_name");
    AsH5At at = {bad, "/"};
    REQUIRE(as_h5_put_str(h, "weights_name", "tiny\x1b]0;pwned\x07", at, &err) == 0, "put: %s", err.msg);
    H5Fclose(h);
    AsDumpReader *r = NULL;
    rc = as_dump_open(bad, &r, &err);
    CHECK(rc == AS_EBADINPUT && strstr(err.msg, "weights_name") && strstr(err.msg, "control character"),
          "an escape in weights_name: rc %d, %s", rc, err.msg);
    as_dump_close(r);
}

/* ---- size limits ---------------------------------------------------------------------- */

static int parse_validate(const char *json, AsConfig *c, AsError *err)
{
    int rc = as_config_parse_json(json, strlen(json), c, err);
    return rc ? rc : as_config_validate(c, err);
}

/* A config whose weights fit in a few kilobytes but whose caches would take terabytes is
 * refused before anything is allocated; the released geometry at the largest max_seq is not. */
TEST(hardening_absurd_geometry_refused)
{
    char json[4096];
    int k = snprintf(json, sizeof json,
                     "{\"hidden_size\": 1, \"num_hidden_layers\": 256, \"num_attention_heads\": 1, \"head_dim\": 4096,"
                     " \"qk_rope_head_dim\": 2, \"q_lora_rank\": 1, \"o_lora_rank\": 1, \"o_groups\": 1,"
                     " \"sliding_window\": 65536, \"rms_norm_eps\": 1e-6, \"candidate_topk_blocks\": 1,"
                     " \"candidate_block_size\": 1, \"index_n_heads\": 1, \"index_head_dim\": 4096, \"index_topk\": 1,"
                     " \"rope_theta\": 10000, \"compress_rope_theta\": 10000, \"rope_scaling\": {\"factor\": 1,"
                     " \"original_max_position_embeddings\": 1, \"beta_fast\": 1, \"beta_slow\": 1},"
                     " \"max_seq_len\": 1048576, \"compress_ratios\": [");
    for (int l = 0; l < 256; l++)
        k += snprintf(json + k, sizeof json - (size_t)k, "%s1", l ? "," : "");
    k += snprintf(json + k, sizeof json - (size_t)k, "], \"kv_source_layer_ids\": [0], \"index_source_layer_ids\": [0]}");
    REQUIRE(k < (int)sizeof json, "json fits");
    AsConfig *c = malloc(sizeof *c);
    REQUIRE(c, "memory");
    AsError err = {0};
    int rc = parse_validate(json, c, &err);
    CHECK(rc == AS_EBADINPUT && strstr(err.msg, "GiB at max_seq 1048576") && strstr(err.msg, "lower max_seq_len"),
          "256 layers of 2^20-row caches refused: rc %d, %s", rc, err.msg);
    as_test_note("refused: %s", err.msg);
    REQUIRE(as_config_preset("flash", c, &err) == 0, "flash: %s", err.msg);
    c->max_seq = AS_LIMIT_MAX_SEQ;
    CHECK(as_config_validate(c, &err) == 0, "flash at max_seq 2^20 is allowed: %s", err.msg);
    as_test_note("flash at max_seq %d: %.2f GiB of run state (limit %lld GiB)", c->max_seq,
                 (double)as_config_state_bytes(c) / (1 << 30), (long long)(AS_LIMIT_STATE_BYTES >> 30));
    free(c);
}

/* Text files (configs, scripts, indexes) are read into a buffer the size of the file, refused
 * past their limit; an empty file is fine, a pipe or a directory is refused, named, before any read. */
TEST(hardening_text_files_read_to_their_size)
{
    char path[600];
    snprintf(path, sizeof path, "%s/t.json", as_test_tmpdir());
    FILE *f = fopen(path, "w");
    REQUIRE(f, "create");
    for (int i = 0; i < 3000; i++)
        fputc('a' + i % 26, f);
    fclose(f);
    char *buf = NULL;
    size_t len = 0;
    AsError err = {0};
    CHECK(as_read_text_file(path, 3000, "config", &buf, &len, &err) == 0 && len == 3000 && buf[2999] == 'a' + 2999 % 26 &&
              buf[3000] == '\0',
          "exactly at the limit: %s", err.msg);
    free(buf);
    CHECK(as_read_text_file(path, 2999, "config", &buf, &len, &err) == AS_EBADINPUT && !buf &&
              strstr(err.msg, "not a config") && strstr(err.msg, path),
          "one byte past the limit: %s", err.msg);
    int fds[2];
    REQUIRE(pipe(fds) == 0, "pipe");
    char *big = malloc(100000);
    REQUIRE(big, "memory");
    memset(big, 'x', 100000);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
        close(fds[0]);
        ssize_t w = write(fds[1], big, 100000);
        _exit(w == 100000 ? 0 : 1);
    }
    close(fds[1]);
    char fdpath[64];
    snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", fds[0]);
    /* an input is a regular file: a pipe is refused at once, never read (it could block forever) */
    CHECK(as_read_text_file(fdpath, 1 << 20, "script", &buf, &len, &err) == AS_EBADINPUT && !buf &&
              strstr(err.msg, "not a regular file (a FIFO)"),
          "a pipe refused: %s", err.msg);
    free(buf);
    close(fds[0]);
    waitpid(pid, NULL, 0);
    free(big);
    CHECK(as_read_text_file(as_test_tmpdir(), 1 << 20, "script", &buf, &len, &err) == AS_EBADINPUT &&
              strstr(err.msg, "not a regular file (a directory)") && strstr(err.msg, as_test_tmpdir()),
          "a directory: %s", err.msg);
}

/* ---- HDF5 storage: a dump or inputs file is read only from its own bytes ------------- */

/* Copies a dump and replaces its /inputs/h0 by a dataset of the same shape stored as `how`:
 * "external" (its data in another file), "unwritten" (declared [rows][dim], nothing stored),
 * "plugin-filter" (an optional filter HDF5 does not have). */
static void forge_h0(const char *src, const char *dst, const char *how, hsize_t rows, hsize_t dim)
{
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", src, dst);
    REQUIRE(system(cmd) == 0, "cp");
    hid_t f = H5Fopen(dst, H5F_ACC_RDWR, H5P_DEFAULT);
    REQUIRE(f >= 0, "open %s", dst);
    hid_t g = H5Gopen2(f, "inputs", H5P_DEFAULT);
    REQUIRE(g >= 0 && H5Ldelete(g, "h0", H5P_DEFAULT) >= 0, "delete h0");
    hsize_t dims[2] = {rows, dim}, chunk[2] = {1, dim};
    hid_t sp = H5Screate_simple(2, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (!strcmp(how, "external")) {
        char ext[700];
        snprintf(ext, sizeof ext, "%s/secret.bin", as_test_tmpdir());
        FILE *e = fopen(ext, "wb");
        REQUIRE(e, "secret");
        for (hsize_t i = 0; i < rows * dim * 4; i++)
            fputc('S', e);
        fclose(e);
        REQUIRE(H5Pset_external(dcpl, ext, 0, rows * dim * 4) >= 0, "external");
    } else if (!strcmp(how, "plugin-filter")) {
        REQUIRE(H5Pset_chunk(dcpl, 2, chunk) >= 0 && H5Pset_filter(dcpl, 32001, H5Z_FLAG_OPTIONAL, 0, NULL) >= 0,
                "filter");
    } else {
        REQUIRE(H5Pset_chunk(dcpl, 2, chunk) >= 0, "chunk");
    }
    hid_t ds = H5Dcreate2(g, "h0", H5T_IEEE_F32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    REQUIRE(ds >= 0, "create h0 (%s)", how);
    if (strcmp(how, "unwritten")) {
        float *v = calloc(rows * dim, sizeof *v);
        REQUIRE(v, "memory");
        H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
        free(v);
    }
    hid_t as = H5Screate(H5S_SCALAR), a = H5Acreate2(ds, "first_pos", H5T_STD_I64LE, as, H5P_DEFAULT, H5P_DEFAULT);
    int64_t zero = 0;
    H5Awrite(a, H5T_NATIVE_INT64, &zero);
    H5Aclose(a), H5Sclose(as), H5Dclose(ds), H5Pclose(dcpl), H5Sclose(sp), H5Gclose(g), H5Fclose(f);
}

static void make_tiny_dump(char *path, size_t n, int prefill)
{
    setenv("ATTNSCOPE_CACHE", as_test_tmpdir(), 1);
    char script[700];
    snprintf(script, sizeof script, "%s/d.json", as_test_tmpdir());
    snprintf(path, n, "%s/tiny.h5", as_test_tmpdir());
    FILE *f = fopen(script, "w");
    REQUIRE(f, "script");
    fprintf(f, "{\"model\": \"tiny\", \"engine\": \"off\", \"steps\": [{\"prefill\": %d}], \"dump\": {\"path\": \"%s\", "
               "\"layers\": [0], \"tensors\": \"q\"}}", prefill, path);
    fclose(f);
    AsCliResult *r = malloc(sizeof *r);
    REQUIRE(r, "memory");
    as_cli_run(r, AS_ARGS("run", "-q", script));
    REQUIRE(r->status == 0, "run with a dump: exit %d: %s", r->status, r->err);
    free(r);
}

TEST(hardening_hdf5_storage_from_elsewhere_refused)
{
    char dump[700], bad[700];
    make_tiny_dump(dump, sizeof dump, 4);
    as_h5_init();
    static const struct {
        const char *how;
        hsize_t rows;
        const char *says;
    } cases[] = {
        {"external", 4, "its data lies in external files"},
        {"unwritten", 4096, "bytes of data from 0 stored"},
        {"plugin-filter", 4, "filter 32001"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(bad, sizeof bad, "%s/%s.h5", as_test_tmpdir(), cases[i].how);
        forge_h0(dump, bad, cases[i].how, cases[i].rows, 64);
        AsDumpReader *r = NULL;
        AsError err = {0};
        int rc = as_dump_open(bad, &r, &err);
        CHECK(rc == AS_EBADINPUT && strstr(err.msg, "/inputs/h0") && strstr(err.msg, cases[i].says),
              "dump with %s h0: rc %d, %s", cases[i].how, rc, err.msg);
        as_dump_close(r);
        float *h = NULL;
        int tokens = 0;
        err = (AsError){0};
        rc = as_inputs_file_load(bad, NULL, 64, 1 << 20, &h, &tokens, &err);
        CHECK(rc == AS_EBADINPUT && strstr(err.msg, cases[i].says) && !h,
              "inputs file with %s h0: rc %d, %s", cases[i].how, rc, err.msg);
        free(h);
        as_test_note("%-13s %s", cases[i].how, err.msg);
    }
    /* an inputs file whose dataset is reached through an external link to another file */
    snprintf(bad, sizeof bad, "%s/link.h5", as_test_tmpdir());
    hid_t f = H5Fcreate(bad, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(f >= 0 && H5Lcreate_external(dump, "/inputs/h0", f, "stolen", H5P_DEFAULT, H5P_DEFAULT) >= 0,
            "external link");
    H5Fclose(f);
    float *h = NULL;
    int tokens = 0;
    AsError err = {0};
    int rc = as_inputs_file_load(bad, "stolen", 64, 1 << 20, &h, &tokens, &err);
    CHECK(rc == AS_EBADINPUT && strstr(err.msg, "soft or external link"), "explicit name through a link: %s",
          err.msg);
    free(h);
    rc = as_inputs_file_load(bad, NULL, 64, 1 << 20, &h, &tokens, &err);
    CHECK(rc == AS_EBADINPUT && !h, "no dataset found through links either: %s", err.msg);
    free(h);
    rc = as_inputs_file_load(dump, NULL, 64, 1 << 20, &h, &tokens, &err);
    CHECK(rc == 0 && tokens == 4, "the dump itself still reads: %s", err.msg);
    free(h);
}

/* ---- the binary under faults ------------------------------------------------------------ */

typedef struct {
    long fsize;         /* RLIMIT_FSIZE in bytes (0: none), SIGXFSZ ignored: writes fail EFBIG */
    bool nobody;        /* as root: run as uid/gid 65534 so that file modes apply */
} Spawn;

static pid_t spawn(const Spawn *o, const char *const *args, const char *out, const char *errp)
{
    const char *argv[40] = {as_cli_bin()};
    int n = 1;
    for (; args[n - 1] && n < 39; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
        int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0)
            _exit(127);
        if (o && o->fsize) {
            struct rlimit rl = {(rlim_t)o->fsize, (rlim_t)o->fsize};
            signal(SIGXFSZ, SIG_IGN); /* inherited through exec: write(2) then fails with EFBIG */
            if (setrlimit(RLIMIT_FSIZE, &rl))
                _exit(127);
        }
        if (o && o->nobody && getuid() == 0 && (setgroups(0, NULL) || setgid(65534) || setuid(65534)))
            _exit(127);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static int wait_status(pid_t pid)
{
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid, "waitpid");
    int status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    REQUIRE(status != 127, "cannot run %s (set ATTNSCOPE_BIN)", as_cli_bin());
    return status;
}

typedef struct {
    int status;
    char err[4096];
} Res;

static void run_bin(Res *r, const Spawn *o, const char *const *args)
{
    char out[700], errp[700];
    snprintf(out, sizeof out, "%s/h.stdout", as_test_tmpdir());
    snprintf(errp, sizeof errp, "%s/h.stderr", as_test_tmpdir());
    r->status = wait_status(spawn(o, args, out, errp));
    char *e = as_slurp(errp, NULL);
    snprintf(r->err, sizeof r->err, "%s", e ? e : "");
    free(e);
}

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* Entries of dir other than . and .. (names into buf when given). */
static int entries(const char *dir, char *buf, size_t n)
{
    DIR *d = opendir(dir);
    int k = 0;
    if (buf && n)
        buf[0] = '\0';
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        k++;
        if (buf && strlen(buf) + strlen(e->d_name) + 2 < n)
            strcat(strcat(buf, " "), e->d_name);
    }
    if (d)
        closedir(d);
    return k;
}

static void write_text(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void write_text(const char *path, const char *fmt, ...)
{
    FILE *f = fopen(path, "w");
    REQUIRE(f, "create %s", path);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fclose(f);
}

/* The tiny preset generated into the test's cache (so that later runs only run). */
static void warm_tiny(void)
{
    setenv("ATTNSCOPE_CACHE", as_test_tmpdir(), 1);
    char script[700];
    snprintf(script, sizeof script, "%s/warm.json", as_test_tmpdir());
    write_text(script, "{\"model\": \"tiny\", \"engine\": \"off\", \"steps\": [{\"prefill\": 1}]}");
    Res r;
    run_bin(&r, NULL, AS_ARGS("run", "-q", script));
    REQUIRE(r.status == 0, "warm-up run: exit %d: %s", r.status, r.err);
}

/* A full disk while dumping: writes fail (RLIMIT_FSIZE with SIGXFSZ ignored stands for ENOSPC:
 * same failing write(2), no root or tmpfs needed), exit 3 with one line naming the dump, no
 * file under its name, no temporary left. The same for gen (safetensors) and convert (GGUF). */
TEST(hardening_disk_full_while_writing_exit_3_nothing_left)
{
    warm_tiny();
    char out[700], script[700], dump[800], left[512];
    snprintf(out, sizeof out, "%s/out", as_test_tmpdir());
    REQUIRE(mkdir(out, 0755) == 0, "mkdir");
    snprintf(script, sizeof script, "%s/full.json", as_test_tmpdir());
    snprintf(dump, sizeof dump, "%s/run.h5", out);
    write_text(script, "{\"model\": \"tiny\", \"engine\": \"off\", \"steps\": [{\"prefill\": 6}, {\"decode\": 3}], "
                       "\"dump\": {\"path\": \"%s\"}}", dump);
    Res r;
    Spawn full = {.fsize = 64 << 10};
    run_bin(&r, &full, AS_ARGS("run", "-q", script));
    CHECK(r.status == 3 && strstr(r.err, dump) && strstr(r.err, "File too large") && lines(r.err) >= 1,
          "run --dump on a full disk: exit %d (want 3), stderr: %s", r.status, r.err);
    CHECK(access(dump, F_OK) != 0, "no dump under its name");
    CHECK(entries(out, left, sizeof left) == 0, "nothing left in the dump's directory:%s", left);
    as_test_note("run --dump, 64 KiB of disk: exit %d", r.status);

    /* gen: model.safetensors of the tiny preset (~1 MiB) into 64 KiB */
    char gdir[700];
    snprintf(gdir, sizeof gdir, "%s/gen", as_test_tmpdir());
    run_bin(&r, &full, AS_ARGS("gen", "--preset", "tiny", "-o", gdir));
    CHECK(r.status == 3 && lines(r.err) == 1 && strstr(r.err, "model.safetensors") && strstr(r.err, "File too large"),
          "gen on a full disk: exit %d (want 3): %s", r.status, r.err);
    int n = entries(gdir, left, sizeof left);
    CHECK(n == 1 && strstr(left, "config.json"), "only the complete config.json left:%s", left);

    /* convert: a GGUF of the tiny preset into 64 KiB */
    char model[700], gguf[800];
    snprintf(model, sizeof model, "%s/tiny", as_test_tmpdir());
    run_bin(&r, NULL, AS_ARGS("gen", "--preset", "tiny", "-o", model));
    REQUIRE(r.status == 0, "gen: %s", r.err);
    snprintf(gguf, sizeof gguf, "%s/tiny.gguf", out);
    run_bin(&r, &full, AS_ARGS("convert", "--to", "gguf", "--quant", "q8_0", model, gguf));
    CHECK(r.status == 3 && lines(r.err) == 1 && strstr(r.err, gguf), "convert on a full disk: exit %d (want 3): %s",
          r.status, r.err);
    CHECK(entries(out, left, sizeof left) == 0, "nothing left beside the GGUF:%s", left);
}

/* A directory attnscope may not write: a dump, a generated model and a GGUF are each refused
 * with exit 3 and nothing left (as root, whom modes do not stop, through uid 65534). */
TEST(hardening_read_only_target_exit_3_nothing_left)
{
    warm_tiny();
    const char *tmp = as_test_tmpdir();
    REQUIRE(chmod(tmp, 0755) == 0, "chmod");
    char ro[700], script[700], dump[800], model[700], left[256];
    snprintf(ro, sizeof ro, "%s/ro", tmp);
    REQUIRE(mkdir(ro, 0555) == 0 && chmod(ro, 0555) == 0, "mkdir");
    snprintf(model, sizeof model, "%s/tiny", tmp);
    Res r;
    run_bin(&r, NULL, AS_ARGS("gen", "--preset", "tiny", "-o", model));
    REQUIRE(r.status == 0, "gen: %s", r.err);
    /* uid 65534 must read the model and the cache */
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "chmod -R a+rX '%s'", tmp);
    REQUIRE(system(cmd) == 0, "chmod -R");
    snprintf(script, sizeof script, "%s/ro.json", tmp);
    snprintf(dump, sizeof dump, "%s/run.h5", ro);
    write_text(script, "{\"model\": \"%s\", \"engine\": \"off\", \"steps\": [{\"prefill\": 2}], \"dump\": {\"path\": \"%s\"}}",
               model, dump);
    chmod(script, 0644);
    Spawn nobody = {.nobody = true};
    run_bin(&r, &nobody, AS_ARGS("run", "-q", script));
    CHECK(r.status == 3 && strstr(r.err, dump), "dump into a read-only directory: exit %d (want 3): %s", r.status, r.err);
    char gdir[800];
    snprintf(gdir, sizeof gdir, "%s", ro);
    run_bin(&r, &nobody, AS_ARGS("gen", "--preset", "tiny", "-o", gdir));
    CHECK(r.status == 3 && lines(r.err) == 1 && strstr(r.err, ro), "gen into a read-only directory: exit %d (want 3): %s",
          r.status, r.err);
    char gguf[800];
    snprintf(gguf, sizeof gguf, "%s/t.gguf", ro);
    run_bin(&r, &nobody, AS_ARGS("convert", "--to", "gguf", "--quant", "q8_0", model, gguf));
    CHECK(r.status == 3 && lines(r.err) == 1 && strstr(r.err, gguf), "convert into a read-only directory: exit %d: %s",
          r.status, r.err);
    CHECK(entries(ro, left, sizeof left) == 0, "nothing left in the read-only directory:%s", left);
    chmod(ro, 0755);
}

/* Waits until dir holds a name containing part (a writer's temporary); false after 60 s. */
static bool wait_for_entry(const char *dir, const char *part, pid_t pid)
{
    struct timespec ts = {0, 2 * 1000 * 1000};
    for (int i = 0; i < 30000; i++) {
        char names[1024];
        entries(dir, names, sizeof names);
        if (strstr(names, part))
            return true;
        if (waitpid(pid, NULL, WNOHANG) == pid)
            return false;
        nanosleep(&ts, NULL);
    }
    return false;
}

/* SIGINT and SIGTERM while a run writes its dump: the process dies of the signal (status 130,
 * 143), nothing is left under the dump's name or as a temporary, no report is written. */
TEST(hardening_signal_mid_dump_dies_of_it_nothing_left)
{
    warm_tiny();
    const int sigs[] = {SIGINT, SIGTERM};
    for (int i = 0; i < 2; i++) {
        char out[700], script[700], dump[800], report[800], left[512];
        snprintf(out, sizeof out, "%s/out%d", as_test_tmpdir(), i);
        REQUIRE(mkdir(out, 0755) == 0, "mkdir");
        snprintf(script, sizeof script, "%s/long%d.json", as_test_tmpdir(), i);
        snprintf(dump, sizeof dump, "%s/run.h5", out);
        snprintf(report, sizeof report, "%s/report.json", out);
        write_text(script, "{\"model\": \"tiny\", \"engine\": \"off\", \"max_seq\": 8192, \"steps\": [{\"prefill\": 8}, {\"decode\": 4000}], "
                           "\"dump\": {\"path\": \"%s\"}, \"report\": {\"json\": \"%s\"}}", dump, report);
        char o[700], e[700];
        snprintf(o, sizeof o, "%s/sig.stdout", as_test_tmpdir());
        snprintf(e, sizeof e, "%s/sig.stderr", as_test_tmpdir());
        pid_t pid = spawn(NULL, AS_ARGS("run", "-q", script), o, e);
        bool seen = wait_for_entry(out, ".tmp-", pid);
        CHECK(seen, "the dump's temporary appeared while the run went on");
        struct timespec ts = {0, 200 * 1000 * 1000}; /* a few decode steps into the dump */
        nanosleep(&ts, NULL);
        kill(pid, sigs[i]);
        int st = wait_status(pid);
        CHECK(st == 128 + sigs[i], "%s mid-dump: status %d (want %d)", strsignal(sigs[i]), st, 128 + sigs[i]);
        CHECK(entries(out, left, sizeof left) == 0, "%s: nothing left (no dump, temporary or report):%s",
              strsignal(sigs[i]), left);
        as_test_note("%s mid-dump: status %d, %s empty", strsignal(sigs[i]), st, out);
    }
}

/* SIGINT while gen writes a model (a 1-layer geometry of ~300 MiB): no half-written
 * model.safetensors.tmp-* is left behind (the model writers register their temporaries with the
 * signal handler, as dumps do). */
TEST(hardening_signal_mid_model_write_nothing_left)
{
    char cfg[700], dir[700], left[512];
    snprintf(cfg, sizeof cfg, "%s/big.json", as_test_tmpdir());
    snprintf(dir, sizeof dir, "%s/big", as_test_tmpdir());
    write_text(cfg, "{\"hidden_size\": 16384, \"num_hidden_layers\": 1, \"num_attention_heads\": 1, \"head_dim\": 32,"
                    " \"qk_rope_head_dim\": 8, \"q_lora_rank\": 4096, \"o_lora_rank\": 4096, \"o_groups\": 1,"
                    " \"sliding_window\": 4, \"rms_norm_eps\": 1e-6, \"compress_ratios\": [0],"
                    " \"kv_source_layer_ids\": [], \"index_source_layer_ids\": [], \"candidate_topk_blocks\": 1,"
                    " \"candidate_block_size\": 1, \"index_n_heads\": 1, \"index_head_dim\": 32, \"index_topk\": 1,"
                    " \"rope_theta\": 10000, \"compress_rope_theta\": 10000, \"rope_scaling\": {\"factor\": 1,"
                    " \"original_max_position_embeddings\": 1, \"beta_fast\": 1, \"beta_slow\": 1}}");
    REQUIRE(mkdir(dir, 0755) == 0, "mkdir");
    char o[700], e[700];
    snprintf(o, sizeof o, "%s/gen.stdout", as_test_tmpdir());
    snprintf(e, sizeof e, "%s/gen.stderr", as_test_tmpdir());
    pid_t pid = spawn(NULL, AS_ARGS("gen", "--config", cfg, "-o", dir), o, e);
    bool seen = wait_for_entry(dir, "model.safetensors.tmp-", pid);
    CHECK(seen, "the model's temporary appeared");
    kill(pid, SIGINT);
    int st = wait_status(pid);
    CHECK(st == 130, "SIGINT mid-write: status %d (want 130)", st);
    entries(dir, left, sizeof left);
    CHECK(!strstr(left, "model.safetensors"), "no model.safetensors or temporary left:%s", left);
    as_test_note("gen interrupted: status %d, left:%s", st, left);
}

/* Every command that reads a file: missing, or unreadable (mode 000; as root through uid
 * 65534), is exit 2 with one line naming the path. */
TEST(hardening_missing_or_unreadable_input_exit_2_names_it)
{
    warm_tiny();
    const char *tmp = as_test_tmpdir();
    REQUIRE(chmod(tmp, 0755) == 0, "chmod");
    char dump[700], model[700], script[700], conf[800];
    make_tiny_dump(dump, sizeof dump, 2);
    snprintf(model, sizeof model, "%s/m", tmp);
    Res r;
    run_bin(&r, NULL, AS_ARGS("gen", "--preset", "tiny", "-o", model));
    REQUIRE(r.status == 0, "gen: %s", r.err);
    snprintf(script, sizeof script, "%s/s.json", tmp);
    write_text(script, "{\"model\": \"%s\", \"engine\": \"off\", \"steps\": [{\"prefill\": 1}]}", model);
    snprintf(conf, sizeof conf, "%s/config.json", model);
    char weights[800];
    snprintf(weights, sizeof weights, "%s/model.safetensors", model);
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "chmod -R a+rX '%s'", tmp);
    REQUIRE(system(cmd) == 0, "chmod -R");
    char missing[700];
    snprintf(missing, sizeof missing, "%s/no/such/file", tmp);
    struct {
        const char *what;
        const char *args[8];
        const char *names; /* the path the message must name */
        const char *unreadable; /* chmod 000 before the unreadable run */
    } cases[] = {
        {"info (config)", {"info", model}, conf, conf},
        {"info (weights)", {"info", model}, weights, weights},
        {"run", {"run", "-q", script}, script, script},
        {"dump-info", {"dump-info", dump}, dump, dump},
        {"diff", {"diff", dump, dump}, dump, dump},
        {"check", {"check", dump, "--model", model}, dump, dump},
        {"convert", {"convert", "--to", "gguf", "--quant", "q8_0", model, "/nonexistent-dir/x.gguf"}, weights, weights},
        {"gen --config", {"gen", "--config", conf, "-o", "/nonexistent-dir/g"}, conf, conf},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* missing: the path replaced by one that does not exist */
        const char *args[9];
        int n = 0;
        bool replaced = false;
        for (; cases[i].args[n]; n++) {
            const char *a = cases[i].args[n];
            bool is_input = !replaced && (!strcmp(a, cases[i].names) || (!strcmp(a, model) && strstr(cases[i].names, model)));
            args[n] = is_input ? missing : a;
            replaced |= is_input;
        }
        args[n] = NULL;
        run_bin(&r, NULL, args);
        CHECK(r.status == 2 && lines(r.err) == 1 && strstr(r.err, missing), "%s, missing: exit %d, stderr: %s",
              cases[i].what, r.status, r.err);
        /* unreadable */
        REQUIRE(chmod(cases[i].unreadable, 0) == 0, "chmod 000 %s", cases[i].unreadable);
        Spawn nobody = {.nobody = true};
        run_bin(&r, &nobody, cases[i].args);
        chmod(cases[i].unreadable, 0644);
        CHECK(r.status == 2 && lines(r.err) == 1 && strstr(r.err, cases[i].names) && strstr(r.err, "Permission denied"),
              "%s, unreadable: exit %d, stderr: %s", cases[i].what, r.status, r.err);
        r.err[strcspn(r.err, "\n")] = '\0';
        as_test_note("%-15s %s", cases[i].what, r.err);
    }
}
