/* tests/lib/harness.c: the naming rule that lets TESTS='stem_*' run one file's tests. */
#include "tests/lib/harness.h"

TEST(harness_name_fits_file_cases)
{
    static const struct {
        const char *name, *file;
        bool fits;
    } cases[] = {
        {"ref_layer_decode_wraps", "tests/test_ref_layer.c", true},
        {"ref_decode_wraps", "tests/test_ref_layer.c", false}, /* a shorter stem's prefix */
        {"ref_layer", "tests/test_ref_layer.c", false},        /* the stem alone: no '_' after it */
        {"ref_layerx_a", "tests/test_ref_layer.c", false},
        {"gpu_gemv_flash_shapes", "tests/gpu_gemv.c", true},   /* gpu_ files keep their prefix */
        {"gemv_flash_shapes", "tests/gpu_gemv.c", false},
        {"gen_seeded", "test_gen.c", true},                    /* no directory */
        {"gen_seeded", "/abs/path/tests/test_gen.c", true},
        {"test_gen_seeded", "tests/test_gen.c", false},        /* "test_" is not part of the stem */
        {"gen_seeded", "tests/test_.c", false},                /* an empty stem fits nothing */
        {"", "tests/test_gen.c", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(as_test_name_fits_file(cases[i].name, cases[i].file) == cases[i].fits, "'%s' in %s: want %s",
              cases[i].name, cases[i].file, cases[i].fits ? "fits" : "does not fit");
}

TEST(harness_every_test_name_starts_with_its_file_stem)
{
    const int n = as_test_count();
    REQUIRE(n > 1, "only %d tests registered", n);
    for (int i = 0; i < n; i++) {
        const char *name, *file;
        as_test_at(i, &name, &file);
        CHECK(as_test_name_fits_file(name, file), "%s (in %s): rename it to start with the file's stem", name, file);
    }
}
