/* dumps/ for a dump that starts mid-run: the /state_in group written from a reference stack, read
 * back and put into a fresh one (driver/state_io.h) replays the next steps bit for bit; a damaged
 * group is refused with the object named. The layer attributes a writer leaves out take SPEC 3's
 * values, which are the reference's own, layer by layer, in prefill and decode. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/state_io.h"
#include "dumps/dump.h"
#include "dumps/schema.h"
#include "model/inputs.h"
#include "ref/stack.h"
#include "tests/lib/harness.h"
#include "tests/lib/model_fixture.h"

static bool same_tensor(const AsHostTensor *a, const AsHostTensor *b)
{
    if (!a->data || !b->data || a->ndim != b->ndim)
        return a->data == b->data;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return false;
    size_t bytes = (size_t)as_ht_numel(a) * (a->type == AS_VT_U8 ? 1 : 4);
    return !memcmp(a->data, b->data, bytes);
}

/* Runs steps (prefill of lens[0], then decodes) through k; runs[l] gets the last step's layers. */
static void run_steps(AsRefStack *k, const int *lens, int n, int *pos, AsRun *runs)
{
    AsError err = {0};
    const AsConfig *c = &k->m->cfg;
    for (int st = 0; st < n; st++) {
        float *h0 = malloc(sizeof(float) * (size_t)lens[st] * (size_t)c->dim);
        REQUIRE(h0, "memory");
        as_inputs_synthetic(3, *pos, lens[st], c->dim, h0);
        REQUIRE(as_ref_begin_step(k, h0, *pos, lens[st], &err) == 0, "begin: %s", err.msg);
        for (int l = 0; l < c->n_layers; l++)
            REQUIRE(as_ref_next_layer(k, NULL, &runs[l], &err) == 0, "layer %d: %s", l, err.msg);
        *pos += lens[st];
        free(h0);
    }
}

TEST(dump_state_in_round_trip_replays_bit_for_bit)
{
    AsModel *m = as_test_model("tiny", NULL, 4);
    const AsConfig *c = &m->cfg;
    AsError err = {0};
    AsRefStack k;
    REQUIRE(as_ref_stack_init(&k, m, &err) == 0, "%s", err.msg);
    AsRun *runs = calloc((size_t)c->n_layers * 3, sizeof *runs), *state = runs + c->n_layers,
          *back = runs + 2 * c->n_layers;
    REQUIRE(runs, "memory");
    /* 13 tokens, then 4 decode steps: the next is step 5 at position 17 (a ratio-2 group open) */
    int lens[5] = {13, 1, 1, 1, 1}, pos = 0;
    run_steps(&k, lens, 5, &pos, runs);
    AsDumpStateIn si;
    REQUIRE(as_state_capture(&k, 5, pos, state, &si) == 0, "capture");
    CHECK(si.index_k_from.layer >= 0 && si.compress_kv_from.layer >= 0, "the shared caches' publishers: %d, %d",
          si.index_k_from.layer, si.compress_kv_from.layer);
    char path[512];
    snprintf(path, sizeof path, "%s/state.h5", as_test_tmpdir());
    AsDumpMeta meta = {.cfg = c, .mode = "reference-only"};
    AsDumpWriter *w;
    REQUIRE(as_dump_create(path, &meta, &w, &err) == 0, "create: %s", err.msg);
    REQUIRE(as_dump_write_state_in(w, &si, state, &err) == 0, "state_in: %s", err.msg);
    CHECK(as_dump_write_state_in(w, &si, state, &err) == AS_EBADINPUT && strstr(err.msg, "already"),
          "written twice: %s", err.msg);
    REQUIRE(as_dump_commit(w, &err) == 0, "commit: %s", err.msg);

    AsDumpReader *rd;
    REQUIRE(as_dump_open(path, &rd, &err) == 0, "open: %s", err.msg);
    const AsDumpInfo *in = as_dump_info(rd);
    CHECK(in->has_state_in && in->state_in.step == 5 && in->state_in.start_pos == 17 &&
              !strcmp(in->state_in.side, "ref") && in->state_in.index_k_from.layer == si.index_k_from.layer &&
              in->state_in.index_k_from.step == si.index_k_from.step,
          "the attributes read back: step %d pos %d side %s", in->state_in.step, in->state_in.start_pos,
          in->state_in.side);
    REQUIRE(as_dump_read_state_in(rd, back, &err) == 0, "read: %s", err.msg);
    for (int l = 0; l < c->n_layers; l++)
        for (int i = AS_T_FIRST_STATE; i < AS_T_COUNT; i++)
            CHECK(same_tensor(&back[l].t[i], &state[l].t[i]), "layer %d %s read back", l, as_tensor_desc[i].name);
    AsDumpStateIn sin = in->state_in;
    as_dump_close(rd);

    /* a fresh stack from the state runs the next 3 steps exactly as the original goes on */
    AsRefStack k2;
    REQUIRE(as_ref_stack_init(&k2, m, &err) == 0, "%s", err.msg);
    REQUIRE(as_state_restore(&k2, back, &sin, &err) == 0, "restore: %s", err.msg);
    AsRun *a = calloc((size_t)c->n_layers * 2, sizeof *a), *b = a + c->n_layers;
    REQUIRE(a, "memory");
    int more[3] = {1, 1, 1}, p1 = pos, p2 = pos;
    for (int st = 0; st < 3; st++) {
        run_steps(&k, more + st, 1, &p1, a);
        run_steps(&k2, more + st, 1, &p2, b);
        for (int l = 0; l < c->n_layers; l++)
            for (int i = 0; i < AS_T_COUNT; i++)
                CHECK(same_tensor(&a[l].t[i], &b[l].t[i]), "step %d layer %d %s: the replay from the state differs",
                      5 + st, l, as_tensor_desc[i].name);
        CHECK(a[2].keys_from.layer == b[2].keys_from.layer && a[2].keys_from.step == b[2].keys_from.step,
              "step %d: layer 2 scores against the same keys (layer %d step %d vs layer %d step %d)", 5 + st,
              a[2].keys_from.layer, a[2].keys_from.step, b[2].keys_from.layer, b[2].keys_from.step);
    }
    for (int l = 0; l < c->n_layers * 2; l++)
        as_run_free(&a[l]);
    for (int l = 0; l < c->n_layers * 3; l++)
        as_run_free(&runs[l]);
    free(a);
    free(runs);
    as_ref_stack_free(&k2);
    as_ref_stack_free(&k);
    as_test_model_free(m);
}

/* Writes a dump with a state_in group of a tiny run, then applies `damage` to it with HDF5. */
static void damaged(const char *path, void (*damage)(hid_t f))
{
    AsModel *m = as_test_model("tiny", NULL, 4);
    AsError err = {0};
    AsRefStack k;
    REQUIRE(as_ref_stack_init(&k, m, &err) == 0, "%s", err.msg);
    AsRun *runs = calloc((size_t)m->cfg.n_layers * 2, sizeof *runs);
    int lens[2] = {6, 1}, pos = 0;
    run_steps(&k, lens, 2, &pos, runs);
    AsDumpStateIn si;
    REQUIRE(as_state_capture(&k, 2, pos, runs + m->cfg.n_layers, &si) == 0, "capture");
    AsDumpMeta meta = {.cfg = &m->cfg, .mode = "reference-only"};
    AsDumpWriter *w;
    REQUIRE(as_dump_create(path, &meta, &w, &err) == 0 && as_dump_write_state_in(w, &si, runs + m->cfg.n_layers, &err) == 0 &&
                as_dump_commit(w, &err) == 0,
            "write: %s", err.msg);
    for (int l = 0; l < m->cfg.n_layers * 2; l++)
        as_run_free(&runs[l]);
    free(runs);
    as_ref_stack_free(&k);
    as_test_model_free(m);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    REQUIRE(f >= 0, "open");
    damage(f);
    H5Fclose(f);
}

static void drop_layer(hid_t f) { REQUIRE(H5Ldelete(f, "/state_in/layers/07", H5P_DEFAULT) >= 0, "delete"); }
static void drop_ring(hid_t f) { REQUIRE(H5Ldelete(f, "/state_in/layers/03/state.ring", H5P_DEFAULT) >= 0, "delete"); }
static void extra_tensor(hid_t f)
{
    REQUIRE(H5Lcopy(f, "/state_in/layers/01/state.ccache", f, "/state_in/layers/00/state.ccache", H5P_DEFAULT,
                    H5P_DEFAULT) >= 0,
            "copy");
}
static void bad_prov(hid_t f)
{
    hid_t g = H5Gopen2(f, "/state_in", H5P_DEFAULT);
    hid_t a = H5Aopen(g, "index_k_from", H5P_DEFAULT);
    int64_t v[2] = {3, 9};
    REQUIRE(a >= 0 && H5Awrite(a, H5T_NATIVE_INT64, v) >= 0, "write");
    H5Aclose(a), H5Gclose(g);
}
static void bad_ring_shape(hid_t f)
{
    REQUIRE(H5Ldelete(f, "/state_in/layers/02/state.ring", H5P_DEFAULT) >= 0, "delete");
    hsize_t dims[2] = {3, 64};
    hid_t sp = H5Screate_simple(2, dims, NULL);
    hid_t d = H5Dcreate2(f, "/state_in/layers/02/state.ring", H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(d >= 0, "create");
    H5Dclose(d), H5Sclose(sp);
}

TEST(dump_state_in_damaged_refused)
{
    static const struct {
        const char *name;
        void (*damage)(hid_t);
        const char *says;
    } cases[] = {
        {"a layer missing", drop_layer, "/state_in/layers: layer 7 is missing"},
        {"a tensor of the role missing", drop_ring, "/state_in/layers/03: state.ring is missing"},
        {"a tensor the role has not", extra_tensor, "/state_in/layers/00: state.ccache is stored"},
        {"a provenance from a later step", bad_prov, "not a layer of the model in an earlier step"},
        {"a ring of the wrong shape", bad_ring_shape, "/state_in/layers/02/state.ring: shape [3, 64]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/damaged-%zu.h5", as_test_tmpdir(), i);
        damaged(path, cases[i].damage);
        AsDumpReader *rd = NULL;
        AsError err = {0};
        int rc = as_dump_open(path, &rd, &err);
        CHECK(rc == AS_EBADINPUT && strstr(err.msg, cases[i].says), "%s: rc %d, %s", cases[i].name, rc, err.msg);
        as_dump_close(rd);
    }
}

/* SPEC 3's layer attributes (what a writer that leaves them out gets) are the reference's own. */
TEST(dump_state_rule_attrs_are_the_references)
{
    AsModel *m = as_test_model("tiny", NULL, 4);
    const AsConfig *c = &m->cfg;
    AsError err = {0};
    AsRefStack k;
    REQUIRE(as_ref_stack_init(&k, m, &err) == 0, "%s", err.msg);
    AsRun run;
    as_run_init(&run);
    int lens[] = {1, 1, 1, 1, 1, 1}, pos = 0, checked = 0;
    for (int pre = 1; pre <= 21; pre += 4) { /* prefills of 1 .. 21 tokens, each with decode steps */
        lens[0] = pre;
        pos = 0;
        for (int st = 0; st < 6; st++) {
            float *h0 = malloc(sizeof(float) * (size_t)lens[st] * (size_t)c->dim);
            REQUIRE(h0, "memory");
            as_inputs_synthetic(3, pos, lens[st], c->dim, h0);
            REQUIRE(as_ref_begin_step(&k, h0, pos, lens[st], &err) == 0, "begin: %s", err.msg);
            for (int l = 0; l < c->n_layers; l++) {
                REQUIRE(as_ref_next_layer(&k, NULL, &run, &err) == 0, "layer %d: %s", l, err.msg);
                AsRun rule;
                as_run_init(&rule);
                as_dump_rule_attrs(c, l, pos, lens[st], &rule);
                for (int a = 0; a < AS_LA_COUNT; a++) {
                    int want = as_dump_layer_attr_get(&run, (AsLayerAttr)a), got = as_dump_layer_attr_get(&rule, (AsLayerAttr)a);
                    CHECK(want == got, "prefill %d, step %d, layer %d: %s = %d by the rule, %d by the reference", pre, st,
                          l, as_dump_layer_attr_name[a], got, want);
                }
                checked++;
            }
            pos += lens[st];
            free(h0);
        }
    }
    as_test_note("%d layer runs: the rule's attributes are the reference's", checked);
    as_run_free(&run);
    as_ref_stack_free(&k);
    as_test_model_free(m);
}
