/* tests/lib/kernel_shapes.h: the flash shapes are the flash preset's (its geometry and the
 * loader's tensor table), and the small projections reach each path they are there for. */
#include <string.h>

#include "model/config.h"
#include "model/errors.h"
#include "model/model_load.h"
#include "tests/lib/harness.h"
#include "tests/lib/kernel_shapes.h"

TEST(kernel_shapes_flash_geometry_is_the_preset)
{
    AsConfig c;
    AsError err = {0};
    REQUIRE(as_config_preset("flash", &c, &err) == 0 && as_config_validate(&c, &err) == 0, "flash: %s", err.msg);
    const struct {
        const char *what;
        int table, preset;
    } g[] = {
        {"dim", AS_FLASH_DIM, c.dim},
        {"n_heads", AS_FLASH_HEADS, c.n_heads},
        {"head_dim", AS_FLASH_HEAD_DIM, c.head_dim},
        {"rope_head_dim", AS_FLASH_ROPE_DIM, c.rope_head_dim},
        {"q_lora_rank", AS_FLASH_Q_LORA, c.q_lora_rank},
        {"o_groups", AS_FLASH_O_GROUPS, c.o_groups},
        {"o_lora_rank", AS_FLASH_O_LORA, c.o_lora_rank},
        {"window", AS_FLASH_WINDOW, c.window},
        {"index_n_heads", AS_FLASH_INDEX_HEADS, c.index_n_heads},
        {"index_head_dim", AS_FLASH_INDEX_HEAD_DIM, c.index_head_dim},
        {"index_topk", AS_FLASH_INDEX_TOPK, c.index_topk},
        {"max_seq", AS_FLASH_MAX_SEQ, c.max_seq},
        {"gw", AS_FLASH_GW, c.gw},
    };
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++)
        CHECK(g[i].table == g[i].preset, "%s: %d in kernel_shapes.h, %d in the preset", g[i].what, g[i].table,
              g[i].preset);
    CHECK(AS_FLASH_CONTEXT <= c.max_seq, "the decode context %d past max_seq %d", AS_FLASH_CONTEXT, c.max_seq);
}

/* Each flash projection is a tensor some flash layer needs, [groups * n_out][n_in], f32 exactly
 * where the loader wants f32. */
TEST(kernel_shapes_flash_projections_are_the_layer_tensors)
{
    AsConfig c;
    AsError err = {0};
    REQUIRE(as_config_preset("flash", &c, &err) == 0 && as_config_validate(&c, &err) == 0, "flash: %s", err.msg);
    for (int i = 0; i < AS_N_FLASH_PROJECTIONS; i++) {
        const AsProjShape *s = &as_flash_projections[i];
        REQUIRE(s->tensor != NULL, "%s: no tensor named", s->name);
        int found = 0;
        for (int l = 0; l < c.n_layers && !found; l++) {
            AsLayerTensor t[AS_LAYER_MAX_TENSORS];
            const int n = as_layer_tensors(&c, l, t);
            for (int j = 0; j < n && !found; j++) {
                const char *dot = strchr(strchr(t[j].name, '.') + 1, '.'); /* past "layers.{l}" */
                if (strcmp(dot + 1, s->tensor) || (t[j].kind == AS_WK_F32) != (s->f32_weights != 0))
                    continue;
                found = 1;
                CHECK(t[j].ndim == 2 && t[j].shape[0] == (int64_t)s->groups * s->n_out && t[j].shape[1] == s->n_in,
                      "%s: %s is [%lld][%lld], the table says %d x [%d][%d]", s->name, t[j].name,
                      (long long)t[j].shape[0], (long long)t[j].shape[1], s->groups, s->n_out, s->n_in);
            }
        }
        CHECK(found, "%s: no flash layer has %s%s", s->name, s->tensor, s->f32_weights ? " in f32" : "");
        CHECK(s->ldw == s->n_in && s->ldx == s->groups * s->n_in && s->x_off == 0,
              "%s: the engine's layout is unpadded rows, x of groups * n_in (ldw %d, ldx %d)", s->name, s->ldw, s->ldx);
    }
}

/* The vector kernel needs 16-byte aligned rows and x; the rest runs scalar (kernels/gemv.cu). */
static int takes_vector_kernel(const AsProjShape *s) { return s->ldw % 8 == 0 && s->ldx % 8 == 0 && s->x_off % 8 == 0; }

TEST(kernel_shapes_small_projections_reach_every_path)
{
    int tail = 0, scalar_rows = 0, misaligned = 0, short_rows = 0, grouped = 0, f32w = 0;
    for (int i = 0; i < AS_N_SMALL_PROJECTIONS; i++) {
        const AsProjShape *s = &as_small_projections[i];
        CHECK(s->n_out > 0 && s->n_in > 0 && s->ldw >= s->n_in && s->ldx >= s->n_in && s->groups >= 1 && s->x_off >= 0,
              "%s: not a layout (%d x %d, ldw %d, ldx %d, %d groups)", s->name, s->n_out, s->n_in, s->ldw, s->ldx,
              s->groups);
        CHECK(!s->f32_weights || s->groups == 1, "%s: the f32-weight GEMV takes no groups", s->name);
        for (int j = 0; j < i; j++)
            CHECK(strcmp(s->name, as_small_projections[j].name), "%s: named twice", s->name);
        tail += takes_vector_kernel(s) && s->n_in % 8 != 0;
        scalar_rows += s->ldw % 8 != 0;
        misaligned += s->x_off % 8 != 0;
        short_rows += s->n_in < 8;
        grouped += s->groups > 1;
        f32w += s->f32_weights && !takes_vector_kernel(s);
    }
    CHECK(tail && scalar_rows && misaligned && short_rows && grouped && f32w,
          "paths reached: vector with a tail %d, unpadded rows %d, misaligned x %d, n_in < 8 %d, groups %d, "
          "scalar f32 weights %d",
          tail, scalar_rows, misaligned, short_rows, grouped, f32w);
    const AsProjShape *e = &as_every_config_projection;
    CHECK(e->n_out % 4 && e->n_out % 2 && e->n_in % 8 && takes_vector_kernel(e) && e->groups > 1,
          "every config: %d x %d must leave row and input tails on the vector kernel, grouped", e->n_out, e->n_in);
}
