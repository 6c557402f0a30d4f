/* Model loading: paths, roles bound to tensors, every missing / misshapen / mistyped tensor
 * refused by name, fp8 weights wired to their block scales, sharded models. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/gen.h"
#include "model/model_load.h"
#include "model/safetensors.h"
#include "model/weights.h"
#include "ref/numerics.h"
#include "tests/lib/cli_util.h"
#include "tests/lib/harness.h"

static void path_in(char *buf, size_t n, const char *rel) { snprintf(buf, n, "%s/%s", as_test_tmpdir(), rel); }

static void gen_tiny_as(const char *dir, uint64_t seed, AsPrecision prec)
{
    AsConfig c;
    AsError err = {0};
    REQUIRE(as_config_preset("tiny", &c, &err) == AS_OK, "tiny: %s", err.msg);
    REQUIRE(as_gen_model(&c, prec, seed, "tiny", dir, false, &err) == AS_OK, "gen: %s", err.msg);
}

/* The bf16 tiny: the edits below replace its BF16 projections with fp8 ones of their own. */
static void gen_tiny(const char *dir, uint64_t seed) { gen_tiny_as(dir, seed, AS_PREC_BF16); }

/* A model's tensors as write specs (data pointing into m's mapping), with room for more. */
typedef struct {
    AsStTensorSpec s[512];
    int n;
} Specs;

static void specs_from(const AsModel *m, Specs *sp)
{
    REQUIRE(m->n_tensors < 500, "tiny has fewer than 500 tensors");
    sp->n = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const AsWTensor *t = &m->tensors[i];
        AsStTensorSpec *s = &sp->s[sp->n++];
        memset(s, 0, sizeof *s);
        memcpy(s->name, t->name, sizeof s->name);
        s->dtype = t->dtype;
        s->ndim = t->ndim;
        memcpy(s->shape, t->shape, sizeof s->shape);
        s->data = t->data;
    }
}

static AsStTensorSpec *spec(Specs *sp, const char *name)
{
    for (int i = 0; i < sp->n; i++)
        if (!strcmp(sp->s[i].name, name))
            return &sp->s[i];
    REQUIRE(false, "spec %s exists", name);
    return NULL;
}

static void drop(Specs *sp, const char *name)
{
    AsStTensorSpec *s = spec(sp, name);
    *s = sp->s[--sp->n];
}

static AsStTensorSpec *add(Specs *sp, const char *name, AsDType dt, int64_t d0, int64_t d1, const void *data)
{
    AsStTensorSpec *s = &sp->s[sp->n++];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->dtype = dt;
    s->ndim = d1 ? 2 : 1;
    s->shape[0] = d0;
    s->shape[1] = d1;
    s->data = data;
    return s;
}

static void write_config(const char *dir)
{
    AsConfig c;
    AsError err = {0};
    REQUIRE(as_config_preset("tiny", &c, &err) == AS_OK, "tiny");
    char path[600], *json = as_config_to_json(&c);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    REQUIRE(f && json, "write %s", path);
    fputs(json, f);
    fclose(f);
    free(json);
}

/* Writes specs as dir/model.safetensors beside tiny's config.json. */
static void write_model(const char *dir, const Specs *sp)
{
    AsError err = {0};
    char path[600];
    snprintf(path, sizeof path, "mkdir -p '%s'", dir);
    REQUIRE(system(path) == 0, "mkdir %s", dir);
    write_config(dir);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    REQUIRE(as_st_write(path, sp->s, sp->n, NULL, &err) == AS_OK, "write %s: %s", path, err.msg);
}

/* Loads the generated tiny model, lets edit change its tensors, writes it to a new directory and
 * loads that: returns the code, with the message in err. */
typedef void (*Edit)(Specs *);
static int load_edited(Edit edit, AsModel *out, AsError *err)
{
    char base[512], dir[512];
    path_in(base, sizeof base, "base");
    path_in(dir, sizeof dir, "edited");
    AsModel m;
    if (access(base, F_OK))
        gen_tiny(base, 1);
    REQUIRE(as_model_load(base, 0, &m, err) == AS_OK, "base model: %s", err->msg);
    static Specs sp;
    specs_from(&m, &sp);
    edit(&sp);
    write_model(dir, &sp);
    as_model_free(&m);
    AsModel tmp, *mm = out ? out : &tmp;
    int rc = as_model_load(dir, 0, mm, err);
    if (!out && rc == AS_OK)
        as_model_free(mm);
    return rc;
}

TEST(model_load_binds_every_role_tensor)
{
    char dir[512];
    path_in(dir, sizeof dir, "tiny");
    gen_tiny(dir, 3);
    AsModel m;
    AsError err = {0};
    REQUIRE(as_model_load(dir, 0, &m, &err) == AS_OK, "load tiny: %s", err.msg);
    CHECK(m.cfg.n_layers == 10 && m.cfg.max_seq == 512, "tiny's config loaded");
    CHECK(strlen(m.digest) == 64 && strspn(m.digest, "0123456789abcdef") == 64, "digest is 64 hex digits: %s",
          m.digest);
    CHECK(!strcmp(m.weights_name, "tiny/model.safetensors"), "weights name '%s'", m.weights_name);
    int expected = 0;
    for (int l = 0; l < m.cfg.n_layers; l++) {
        const AsLayerRole *r = &m.cfg.role[l];
        const AsLayerWeights *w = &m.layer[l];
        CHECK(w->attn_norm && w->wq_a && w->q_norm && w->wq_b && w->wkv && w->kv_norm && w->wo_a && w->wo_b &&
                  w->attn_sink,
              "layer %d: the nine tensors of every layer bound", l);
        CHECK(!!w->c_wkv == r->kv_source && !!w->c_norm == r->kv_source, "layer %d: compressor iff kv source", l);
        CHECK(!!w->c_wgate == (r->kv_source && r->ratio == 2), "layer %d: wgate iff ratio-2 kv source", l);
        CHECK(!!w->i_wq_b == r->index_source && !!w->i_weights_proj == r->index_source,
              "layer %d: indexer iff index source", l);
        CHECK(!!w->i_wk == r->key_owner && !!w->i_k_norm == r->key_owner, "layer %d: index keys iff key owner", l);
        if (w->c_wkv)
            CHECK(w->c_wkv->dtype == (r->ratio == 2 ? AS_DT_F32 : AS_DT_BF16), "layer %d: compressor wkv dtype", l);
        AsLayerTensor lt[AS_LAYER_MAX_TENSORS];
        expected += as_layer_tensors(&m.cfg, l, lt);
    }
    CHECK(m.n_tensors == expected, "exactly the tensors the roles need: %d, want %d", m.n_tensors, expected);
    CHECK(m.layer[4].wq_b == as_model_find(&m, "layers.4.attn.wq_b.weight"), "as_model_find agrees with the binding");
    CHECK(!as_model_find(&m, "layers.4.attn.nope"), "as_model_find: unknown name gives NULL");
    for (int i = 0; i < m.n_tensors; i++)
        CHECK(as_model_find(&m, m.tensors[i].name) == &m.tensors[i], "as_model_find finds %s", m.tensors[i].name);
    /* the same files give the same digest */
    AsModel again;
    REQUIRE(as_model_load(dir, 0, &again, &err) == AS_OK, "reload: %s", err.msg);
    CHECK(!strcmp(m.digest, again.digest), "the digest is stable across loads");
    as_model_free(&again);
    as_model_free(&m);
}

TEST(model_load_paths_and_max_seq)
{
    char dir[512], file[600], p[600], cmd[700];
    path_in(dir, sizeof dir, "tiny");
    gen_tiny(dir, 3);
    snprintf(file, sizeof file, "%s/model.safetensors", dir);
    AsModel m;
    AsError err = {0};
    REQUIRE(as_model_load(file, 64, &m, &err) == AS_OK, "load by file: %s", err.msg);
    CHECK(m.cfg.max_seq == 64, "max_seq argument overrides the config: %d", m.cfg.max_seq);
    as_model_free(&m);
    CHECK(as_model_load(dir, 63, &m, &err) == AS_EBADINPUT && strstr(err.msg, "max_seq 63") &&
              strstr(err.msg, "max_seq_len = 63 must be a multiple of 2"),
          "odd max_seq refused: %s", err.msg);
    path_in(p, sizeof p, "nothing/here");
    CHECK(as_model_load(p, 0, &m, &err) == AS_EBADINPUT && strstr(err.msg, p), "missing path named: %s", err.msg);
    path_in(p, sizeof p, "empty");
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", p);
    REQUIRE(system(cmd) == 0, "mkdir");
    CHECK(as_model_load(p, 0, &m, &err) == AS_EBADINPUT && strstr(err.msg, "no model.safetensors"),
          "directory without weights: %s", err.msg);
    path_in(p, sizeof p, "model.gguf");
    CHECK(as_model_load(p, 0, &m, &err) == AS_EBADINPUT && strstr(err.msg, p),
          "missing GGUF file named (GGUF loading: tests/test_gguf*.c): %s", err.msg);
    snprintf(p, sizeof p, "%s/config.json", dir);
    CHECK(as_model_load(p, 0, &m, &err) == AS_EBADINPUT && strstr(err.msg, "not a model directory"),
          "a config.json is not a model: %s", err.msg);
    REQUIRE(unlink(p) == 0, "remove config");
    CHECK(as_model_load(dir, 0, &m, &err) == AS_EBADINPUT && strstr(err.msg, p), "missing config.json named: %s",
          err.msg);
}

static void e_missing(Specs *sp) { drop(sp, "layers.3.attn.indexer.wq_b.weight"); }
static void e_missing_gate(Specs *sp) { drop(sp, "layers.4.attn.compressor.wgate.weight"); }
static void e_shape(Specs *sp) { spec(sp, "layers.3.attn.wq_b.weight")->shape[1] = 31; }
static void e_ndim(Specs *sp) { spec(sp, "layers.2.attn.q_norm.weight")->ndim = 2, spec(sp, "layers.2.attn.q_norm.weight")->shape[1] = 1; }
static void e_gate_bf16(Specs *sp) { spec(sp, "layers.1.attn.compressor.wgate.weight")->dtype = AS_DT_BF16; }
static void e_proj_e8m0(Specs *sp) { spec(sp, "layers.0.attn.wq_a.weight")->dtype = AS_DT_F8_E8M0; }
static void e_sink_fp8(Specs *sp) { spec(sp, "layers.0.attn.attn_sink")->dtype = AS_DT_F8_E4M3; }

TEST(model_load_refuses_missing_misshapen_mistyped_tensors)
{
    static const struct {
        const char *what;
        Edit edit;
        const char *says;
    } cases[] = {
        {"missing indexer tensor", e_missing,
         "layers.3.attn.indexer.wq_b.weight: missing (layer 3 needs it: it is an index source)"},
        {"missing ratio-2 gate", e_missing_gate, "layers.4.attn.compressor.wgate.weight: missing"},
        {"wrong shape", e_shape, "layers.3.attn.wq_b.weight: shape [256, 31] but the config needs [256, 32]"},
        {"wrong rank", e_ndim, "layers.2.attn.q_norm.weight: shape [32, 1] but the config needs [32]"},
        {"bf16 gate", e_gate_bf16, "layers.1.attn.compressor.wgate.weight: dtype BF16 but the ratio-2 compressor needs F32"},
        {"e8m0 projection", e_proj_e8m0, "layers.0.attn.wq_a.weight: dtype F8_E8M0 but a projection"},
        {"fp8 sink", e_sink_fp8, "layers.0.attn.attn_sink: dtype F8_E4M3 but a norm weight or sink"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        AsError err = {0};
        int rc = load_edited(cases[i].edit, NULL, &err);
        CHECK(rc == AS_EBADINPUT && strstr(err.msg, cases[i].says), "%s: refused with '%s' (rc %d: %s)",
              cases[i].what, cases[i].says, rc, err.msg);
    }
}

/* fp8 wq_b of layer 0 ([256, 32]) with per-block scales; codes cycle 0..125. With 128 x 128 blocks
 * the scale is [2, 1] (0.5, 4); with 32 x 32 blocks [8, 1] (2^-1, 2^-2, ..., 2^-8). */
static uint8_t fp8_codes[256 * 32];
static float scale_f32[2] = {0.5f, 4.0f};
static uint16_t scale_bf16[2] = {0x3f00 /* 0.5 */, 0x4080 /* 4.0 */};
static uint8_t scale_e8m0[2] = {126 /* 0.5 */, 129 /* 4.0 */};
static uint8_t scale_e8m0_32[8] = {126, 125, 124, 123, 122, 121, 120, 119};

static void put_fp8(Specs *sp, AsDType scale_dt, const char *scale_suffix, int64_t s0)
{
    for (int i = 0; i < 256 * 32; i++)
        fp8_codes[i] = (uint8_t)(i % 126);
    AsStTensorSpec *w = spec(sp, "layers.0.attn.wq_b.weight");
    w->dtype = AS_DT_F8_E4M3;
    w->data = fp8_codes;
    if (!scale_suffix)
        return;
    char name[192];
    snprintf(name, sizeof name, "layers.0.attn.wq_b.%s", scale_suffix);
    const void *data = scale_dt == AS_DT_F32       ? (const void *)scale_f32
                       : scale_dt == AS_DT_F8_E8M0 ? (s0 == 8 ? (const void *)scale_e8m0_32 : (const void *)scale_e8m0)
                                                   : (const void *)scale_bf16;
    add(sp, name, scale_dt, s0, 1, data);
}
static void e_fp8_f32(Specs *sp) { put_fp8(sp, AS_DT_F32, "scale", 2); }
static void e_fp8_bf16_inv(Specs *sp) { put_fp8(sp, AS_DT_BF16, "weight_scale_inv", 2); }
static void e_fp8_e8m0(Specs *sp) { put_fp8(sp, AS_DT_F8_E8M0, "scale", 2); }
static void e_fp8_e8m0_32(Specs *sp) { put_fp8(sp, AS_DT_F8_E8M0, "scale", 8); }
static void e_fp8_noscale(Specs *sp) { put_fp8(sp, AS_DT_F32, NULL, 0); }
static void e_fp8_badshape(Specs *sp) { put_fp8(sp, AS_DT_F32, "scale", 1); }
static void e_fp8_f16scale(Specs *sp) { put_fp8(sp, AS_DT_F16, "scale", 2); }

TEST(model_load_wires_fp8_block_scales)
{
    static const struct {
        const char *what;
        Edit edit;
        AsDType scale_dt;
        int block;
    } ok[] = {
        {"F32 .scale, 128-blocks", e_fp8_f32, AS_DT_F32, 128},
        {"BF16 .weight_scale_inv, 128-blocks", e_fp8_bf16_inv, AS_DT_BF16, 128},
        {"F8_E8M0 .scale, 128-blocks", e_fp8_e8m0, AS_DT_F8_E8M0, 128},
        {"F8_E8M0 .scale, 32-blocks", e_fp8_e8m0_32, AS_DT_F8_E8M0, 32},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        AsModel m;
        AsError err = {0};
        int rc = load_edited(ok[i].edit, &m, &err);
        CHECK(rc == AS_OK, "%s: fp8 wq_b loads: %s", ok[i].what, err.msg);
        if (rc)
            continue;
        const AsWTensor *w = m.layer[0].wq_b;
        int64_t rows = ok[i].block == 32 ? 8 : 2;
        CHECK(w->dtype == AS_DT_F8_E4M3 && w->scale && w->scale->dtype == ok[i].scale_dt &&
                  w->scale->shape[0] == rows && w->scale->shape[1] == 1 && w->block == ok[i].block,
              "%s: layer 0 wq_b wired to its [%lld, 1] scale, block %d (got %d)", ok[i].what, (long long)rows,
              ok[i].block, w->block);
        /* rows 5, 100 and 200: row blocks 0, 0, 1 of 128 (0.5, 0.5, 4); 0, 3, 6 of 32 (2^-1, 2^-4, 2^-7) */
        float row[32];
        static const int rs[3] = {5, 100, 200};
        for (int k = 0; w->scale && k < 3; k++) {
            int r = rs[k];
            as_wt_rows_f32(w, r, 1, row);
            float s = ok[i].block == 32 ? ldexpf(1.0f, -1 - r / 32) : r < 128 ? 0.5f : 4.0f;
            int bad = -1;
            for (int c = 0; c < 32 && bad < 0; c++)
                if (row[c] != as_bf16(as_e4m3_from_bits(fp8_codes[r * 32 + c]) * s))
                    bad = c;
            CHECK(bad < 0, "%s: row %d dequantises to bf16(fp8 * %g) (first bad column %d)", ok[i].what, r,
                  (double)s, bad);
        }
        as_model_free(&m);
    }
    static const struct {
        const char *what;
        Edit edit;
        const char *says;
    } bad[] = {
        {"no scale", e_fp8_noscale,
         "layers.0.attn.wq_b.weight: F8_E4M3 without its block scale (layers.0.attn.wq_b.scale or "
         "layers.0.attn.wq_b.weight_scale_inv)"},
        {"scale of neither block shape", e_fp8_badshape,
         "layers.0.attn.wq_b.scale: shape [1, 1] but the F8_E4M3 weight layers.0.attn.wq_b.weight needs [8, 1] (one "
         "scale per 32x32 block) or [2, 1] (per 128x128 block)"},
        {"F16 scale", e_fp8_f16scale, "layers.0.attn.wq_b.scale: dtype F16 but a block scale"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        AsError err = {0};
        int rc = load_edited(bad[i].edit, NULL, &err);
        CHECK(rc == AS_EBADINPUT && strstr(err.msg, bad[i].says) && !strchr(err.msg, '\n'),
              "%s: refused in one line with '%s' (rc %d: %s)", bad[i].what, bad[i].says, rc, err.msg);
    }
}

/* gen's fp8 tiny: every fp8 projection bound with its 32 x 32 e8m0 scale, nothing else fp8. */
TEST(model_load_fp8_tiny_binds_32_block_scales)
{
    char dir[512];
    path_in(dir, sizeof dir, "tiny8");
    gen_tiny_as(dir, 3, AS_PREC_FP8);
    AsModel m;
    AsError err = {0};
    REQUIRE(as_model_load(dir, 0, &m, &err) == AS_OK, "load fp8 tiny: %s", err.msg);
    CHECK(m.precision == AS_PREC_FP8, "runs in fp8 (the weights say so): %d", (int)m.precision);
    int expected = 0, fp8 = 0;
    for (int l = 0; l < m.cfg.n_layers; l++) {
        const AsLayerWeights *w = &m.layer[l];
        const AsWTensor *proj[5] = {w->wq_a, w->wq_b, w->wkv, w->wo_b, w->i_wq_b};
        for (int k = 0; k < 5; k++) {
            if (!proj[k])
                continue;
            const AsWTensor *t = proj[k], *sc = t->scale;
            CHECK(t->dtype == AS_DT_F8_E4M3 && sc && sc->dtype == AS_DT_F8_E8M0 && t->block == 32 &&
                      sc->shape[0] == (t->shape[0] + 31) / 32 && sc->shape[1] == (t->shape[1] + 31) / 32,
                  "%s: F8_E4M3 with an F8_E8M0 scale per 32x32 block", t->name);
            fp8++;
        }
        const AsWTensor *other[4] = {w->wo_a, w->i_weights_proj, w->i_wk, w->c_wkv};
        for (int k = 0; k < 4; k++)
            CHECK(!other[k] || other[k]->dtype != AS_DT_F8_E4M3, "%s is not fp8", other[k] ? other[k]->name : "-");
        AsLayerTensor lt[AS_LAYER_MAX_TENSORS];
        expected += as_layer_tensors(&m.cfg, l, lt);
    }
    CHECK(m.n_tensors == expected + fp8, "the role tensors and one scale per fp8 projection: %d, want %d + %d",
          m.n_tensors, expected, fp8);
    as_model_free(&m);
}

static uint16_t junk[4];
static void e_extra(Specs *sp)
{
    add(sp, "layers.0.ffn.experts.0.w1.weight", AS_DT_BF16, 2, 2, junk);
    add(sp, "layers.3.hc_attn_fn", AS_DT_F32, 2, 1, junk);
    add(sp, "layers.10.attn.wq_a.weight", AS_DT_BF16, 2, 2, junk); /* an MTP layer after the backbone */
    add(sp, "mtp.0.attn.wkv.weight", AS_DT_F8_E4M3, 4, 2, junk);   /* fp8 without a scale: never looked at */
    add(sp, "embed.weight", AS_DT_BF16, 4, 0, junk);
}

TEST(model_load_ignores_tensors_it_does_not_need)
{
    AsModel m, base;
    AsError err = {0};
    REQUIRE(load_edited(e_extra, &m, &err) == AS_OK, "model with MoE, hc, MTP and embedding tensors: %s", err.msg);
    char dir[512];
    path_in(dir, sizeof dir, "base");
    REQUIRE(as_model_load(dir, 0, &base, &err) == AS_OK, "base: %s", err.msg);
    CHECK(!as_model_find(&m, "embed.weight") && !as_model_find(&m, "layers.0.ffn.experts.0.w1.weight") &&
              !as_model_find(&m, "mtp.0.attn.wkv.weight") && !as_model_find(&m, "layers.10.attn.wq_a.weight"),
          "tensors the attention does not read are not listed");
    CHECK(m.n_tensors == base.n_tensors && m.files[0]->n_unused == 5, "the same %d tensors as without them (%d), "
          "5 counted unused (%d)", base.n_tensors, m.n_tensors, m.files[0]->n_unused);
    CHECK(!strcmp(m.digest, base.digest), "the digest reads only the bound tensors: %s vs %s", m.digest, base.digest);
    as_model_free(&base);
    as_model_free(&m);
}

/* Splits tiny into two shards by layer (< 5 and >= 5), with an index. */
static void write_sharded(const char *dir, bool dup, bool index_names_missing_shard)
{
    char base[512];
    path_in(base, sizeof base, "base");
    if (access(base, F_OK))
        gen_tiny(base, 1);
    AsModel m;
    AsError err = {0};
    REQUIRE(as_model_load(base, 0, &m, &err) == AS_OK, "base: %s", err.msg);
    static Specs all, a, b;
    specs_from(&m, &all);
    a.n = b.n = 0;
    char cmd[700];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    REQUIRE(system(cmd) == 0, "mkdir");
    write_config(dir);
    snprintf(cmd, sizeof cmd, "%s/model.safetensors.index.json", dir);
    FILE *ix = fopen(cmd, "w");
    REQUIRE(ix, "index");
    fputs("{\"metadata\": {}, \"weight_map\": {", ix);
    for (int i = 0; i < all.n; i++) {
        int layer = atoi(all.s[i].name + strlen("layers."));
        bool first = layer < 5;
        (first ? &a : &b)->s[(first ? &a : &b)->n++] = all.s[i];
        fprintf(ix, "%s\"%s\": \"%s\"", i ? ", " : "", all.s[i].name,
                first ? "model-00001-of-00002.safetensors"
                      : index_names_missing_shard ? "model-00003-of-00002.safetensors"
                                                  : "model-00002-of-00002.safetensors");
    }
    fputs("}}\n", ix);
    fclose(ix);
    if (dup)
        b.s[b.n++] = a.s[0];
    snprintf(cmd, sizeof cmd, "%s/model-00001-of-00002.safetensors", dir);
    REQUIRE(as_st_write(cmd, a.s, a.n, NULL, &err) == AS_OK, "shard 1: %s", err.msg);
    snprintf(cmd, sizeof cmd, "%s/model-00002-of-00002.safetensors", dir);
    REQUIRE(as_st_write(cmd, b.s, b.n, NULL, &err) == AS_OK, "shard 2: %s", err.msg);
    as_model_free(&m);
}

TEST(model_load_sharded_model)
{
    char dir[512];
    path_in(dir, sizeof dir, "sharded");
    write_sharded(dir, false, false);
    AsModel m, single;
    AsError err = {0};
    REQUIRE(as_model_load(dir, 0, &m, &err) == AS_OK, "sharded tiny: %s", err.msg);
    char base[512];
    path_in(base, sizeof base, "base");
    REQUIRE(as_model_load(base, 0, &single, &err) == AS_OK, "single: %s", err.msg);
    CHECK(m.n_files == 2 && m.n_tensors == single.n_tensors, "2 shards hold all %d tensors (%d)", single.n_tensors,
          m.n_tensors);
    bool same = true;
    for (int i = 0; i < m.n_tensors && same; i++)
        same = !strcmp(m.tensors[i].name, single.tensors[i].name) && m.tensors[i].nbytes == single.tensors[i].nbytes &&
               !memcmp(m.tensors[i].data, single.tensors[i].data, (size_t)m.tensors[i].nbytes);
    CHECK(same, "every tensor of the shards equals the single file's");
    CHECK(m.layer[9].wo_b && m.layer[0].wo_b, "layers of both shards bound");
    CHECK(strstr(m.weights_name, "model.safetensors.index.json") != NULL, "weights name '%s'", m.weights_name);
    as_model_free(&single);
    as_model_free(&m);

    path_in(dir, sizeof dir, "dup");
    write_sharded(dir, true, false);
    CHECK(as_model_load(dir, 0, &m, &err) == AS_EBADINPUT && strstr(err.msg, "appears twice"),
          "a tensor in two shards refused: %s", err.msg);
    path_in(dir, sizeof dir, "lost");
    write_sharded(dir, false, true);
    CHECK(as_model_load(dir, 0, &m, &err) == AS_EBADINPUT && strstr(err.msg, "model-00003-of-00002.safetensors"),
          "a shard named by the index but absent is named: %s", err.msg);
}

static void gen_released(const char *dir, uint64_t seed, AsPrecision prec, int shards)
{
    AsConfig c;
    AsError err = {0};
    REQUIRE(as_config_preset("tiny", &c, &err) == AS_OK, "tiny: %s", err.msg);
    AsGenOptions o = {.precision = prec, .layout = AS_GEN_LAYOUT_RELEASED, .shards = shards, .seed = seed,
                      .label = "tiny"};
    REQUIRE(as_gen_model_opts(&c, &o, dir, &err) == AS_OK, "gen released: %s", err.msg);
}

/* The released layout: the geometry in text_config, several shards and their index, tensors the
 * attention does not read beside the attention's (and a shard of nothing else, never opened). */
TEST(model_load_released_layout_reads_only_the_attention)
{
    char dir[512], single[512], path[700];
    path_in(dir, sizeof dir, "released");
    path_in(single, sizeof single, "single");
    gen_released(dir, 4, AS_PREC_FP8, 5);
    gen_tiny_as(single, 4, AS_PREC_FP8);
    AsModel m, s;
    AsError err = {0};
    REQUIRE(as_model_load(dir, 0, &m, &err) == AS_OK, "released layout: %s", err.msg);
    REQUIRE(as_model_load(single, 0, &s, &err) == AS_OK, "single file: %s", err.msg);
    AsConfig want;
    REQUIRE(as_config_preset("tiny", &want, &err) == AS_OK, "tiny");
    CHECK(!memcmp(&m.cfg, &want, sizeof want), "the text_config geometry is tiny's, field for field");
    CHECK(m.n_files == 4 && strstr(m.weights_name, "model.safetensors.index.json"),
          "4 of the 5 shards opened (the last holds no attention tensor): %d files, %s", m.n_files, m.weights_name);
    int unused = 0;
    for (int i = 0; i < m.n_files; i++)
        unused += m.files[i]->n_unused;
    CHECK(unused == 10 * 6, "each layer's stand-ins (norm, hc, router, expert and its scale) skipped: %d", unused);
    CHECK(!as_model_find(&m, "layers.3.ffn_norm.weight") && !as_model_find(&m, "layers.3.ffn.experts.0.w1.scale") &&
              !as_model_find(&m, "embed.weight") && !as_model_find(&m, "mtp.0.attn.wq_a.weight"),
          "no tensor the attention does not read is listed");
    CHECK(m.n_tensors == s.n_tensors && m.precision == AS_PREC_FP8, "the single file's %d tensors (%d), fp8",
          s.n_tensors, m.n_tensors);
    bool same = m.n_tensors == s.n_tensors;
    for (int i = 0; i < m.n_tensors && same; i++)
        same = !strcmp(m.tensors[i].name, s.tensors[i].name) && m.tensors[i].nbytes == s.tensors[i].nbytes &&
               m.tensors[i].block == s.tensors[i].block &&
               !memcmp(m.tensors[i].data, s.tensors[i].data, (size_t)m.tensors[i].nbytes);
    CHECK(same, "every tensor as the single file holds it, byte for byte");
    CHECK(m.layer[0].wq_a && m.layer[9].wo_b && m.layer[9].i_wq_b && m.layer[9].i_wq_b->scale,
          "layers of the first and the last shard bound");
    CHECK(!strcmp(m.digest, s.digest), "the same digest as the single file (%s, %s)", m.digest, s.digest);
    as_model_free(&m);

    /* the last shard is never opened: garbage there, or none at all, changes nothing */
    snprintf(path, sizeof path, "%s/model-00005-of-00005.safetensors", dir);
    FILE *f = fopen(path, "wb");
    REQUIRE(f, "overwrite %s", path);
    fputs("not a safetensors file", f);
    fclose(f);
    REQUIRE(as_model_load(dir, 0, &m, &err) == AS_OK, "with the extras shard garbage: %s", err.msg);
    CHECK(!strcmp(m.digest, s.digest), "the same model");
    as_model_free(&m);
    REQUIRE(unlink(path) == 0, "remove %s", path);
    REQUIRE(as_model_load(dir, 0, &m, &err) == AS_OK, "with the extras shard gone: %s", err.msg);
    as_model_free(&m);
    /* a shard holding attention tensors is opened and checked as ever */
    snprintf(path, sizeof path, "%s/model-00002-of-00005.safetensors", dir);
    REQUIRE(truncate(path, 16) == 0, "truncate %s", path);
    CHECK(as_model_load(dir, 0, &m, &err) == AS_EBADINPUT && strstr(err.msg, "model-00002-of-00005"),
          "a broken shard of layers is refused naming it: %s", err.msg);
    as_model_free(&s);
}

TEST(model_load_released_layout_in_bf16)
{
    char dir[512];
    path_in(dir, sizeof dir, "released16");
    gen_released(dir, 4, AS_PREC_BF16, 0);
    AsModel m;
    AsError err = {0};
    REQUIRE(as_model_load(dir, 0, &m, &err) == AS_OK, "released layout in bf16: %s", err.msg);
    CHECK(m.n_files == 3 && m.precision == AS_PREC_BF16 && m.layer[0].wq_a->dtype == AS_DT_BF16,
          "the default 4 shards, 3 opened; bf16 projections (%d files, precision %d)", m.n_files, (int)m.precision);
    as_model_free(&m);
}

/* A flat config's dtype decides the precision: bf16 over fp8 weights runs them dequantised. */
TEST(model_load_config_dtype_sets_the_precision)
{
    char dir[512], path[700];
    path_in(dir, sizeof dir, "tiny8");
    gen_tiny_as(dir, 2, AS_PREC_FP8);
    AsConfig c;
    AsError err = {0};
    REQUIRE(as_config_preset("tiny", &c, &err) == AS_OK, "tiny");
    c.dtype = AS_PREC_BF16;
    char *json = as_config_to_json_as(&c, AS_CONFIG_DS);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    REQUIRE(f && json, "write %s", path);
    fputs(json, f);
    fclose(f);
    free(json);
    AsModel m;
    REQUIRE(as_model_load(dir, 0, &m, &err) == AS_OK, "fp8 weights, dtype bf16: %s", err.msg);
    CHECK(m.cfg.dtype == AS_PREC_BF16 && m.precision == AS_PREC_BF16 && m.layer[0].wq_a->dtype == AS_DT_F8_E4M3,
          "dtype bf16 read, the fp8 weights run in bf16 (precision %d)", (int)m.precision);
    as_model_free(&m);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    REQUIRE(f, "create %s", path);
    fputs(text, f);
    fclose(f);
}

/* Runs info and convert on dir: both exit 2 with one line naming what, and convert writes nothing. */
static void cli_refuses(const char *dir, const char *what, const char *says)
{
    AsCliResult *r = malloc(sizeof *r);
    REQUIRE(r, "alloc");
    char out[700];
    snprintf(out, sizeof out, "%s/out.gguf", as_test_tmpdir());
    as_cli_run(r, AS_ARGS("info", dir));
    int lines = 0;
    for (const char *p = r->err; *p; p++)
        lines += *p == '\n';
    CHECK(r->status == 2 && lines == 1 && strstr(r->err, says), "%s: info exits 2 with one line naming '%s' "
          "(exit %d: %s)", what, says, r->status, r->err);
    as_cli_run(r, AS_ARGS("convert", "--to", "gguf", "--quant", "bf16", dir, out));
    CHECK(r->status == 2 && strstr(r->err, says) && access(out, F_OK) != 0,
          "%s: convert exits 2 naming '%s', writes nothing (exit %d: %s)", what, says, r->status, r->err);
    free(r);
}

TEST(model_load_bad_fp8_and_config_refused_by_the_cli)
{
    AsError err = {0};
    char dir[512], path[700];
    path_in(dir, sizeof dir, "edited");
    CHECK(load_edited(e_fp8_badshape, NULL, &err) == AS_EBADINPUT, "bad scale shape");
    cli_refuses(dir, "a scale of neither block shape", "layers.0.attn.wq_b.scale: shape [1, 1]");
    CHECK(load_edited(e_fp8_noscale, NULL, &err) == AS_EBADINPUT, "no scale");
    cli_refuses(dir, "an fp8 weight without its scale", "layers.0.attn.wq_b.weight: F8_E4M3 without its block scale");

    /* the configs: a dtype other than fp8 / bf16, a text_config that is not an object */
    path_in(dir, sizeof dir, "cfg");
    gen_tiny_as(dir, 1, AS_PREC_FP8);
    AsConfig c;
    REQUIRE(as_config_preset("tiny", &c, &err) == AS_OK, "tiny");
    char *json = as_config_to_json_as(&c, AS_CONFIG_DS);
    REQUIRE(json, "json");
    char *brace = strrchr(json, '}');
    REQUIRE(brace, "object");
    *brace = '\0';
    char text[8192];
    snprintf(path, sizeof path, "%s/config.json", dir);
    snprintf(text, sizeof text, "%s, \"dtype\": \"fp16\"}", json);
    write_file(path, text);
    cli_refuses(dir, "dtype fp16", "'dtype' = \"fp16\"");
    write_file(path, "{\"text_config\": [1, 2], \"hidden_size\": 64}");
    cli_refuses(dir, "text_config an array", "'text_config' must be an object, got an array");
    free(json);
}
