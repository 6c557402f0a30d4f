/* libFuzzer target: model.safetensors.index.json (as_st_read_index). Contract beyond "no crash":
 * an error is code 2 or 3 with one line; an accepted index lists at least one shard, each a plain
 * file name (no path separator, not . or ..), unique and sorted. */
#include <stdint.h>
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "model/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fz_write("model.safetensors.index.json", data, size);
    AsStIndex ix;
    AsError err = {0};
    int rc = as_st_read_index(path, &ix, &err);
    if (rc) {
        FZ_CHECK_ERR(rc, err);
        FZ_ASSERT(ix.n_shards == 0 && !ix.shards, "a refused index left %d shards", ix.n_shards);
        return 0;
    }
    FZ_ASSERT(ix.n_shards > 0, "an accepted index with no shard");
    for (int i = 0; i < ix.n_shards; i++) {
        const char *s = ix.shards[i];
        FZ_ASSERT(s[0] && !strchr(s, '/') && !strchr(s, '\\') && strcmp(s, ".") && strcmp(s, ".."),
                  "shard '%s' is not a plain file name", s);
        FZ_ASSERT(i == 0 || strcmp(ix.shards[i - 1], s) < 0, "shards not unique and sorted at %d", i);
    }
    as_st_index_free(&ix);
    return 0;
}
