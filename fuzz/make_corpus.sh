#!/bin/sh
# Regenerates the seed corpora under fuzz/corpus/ with attnscope itself: the micro model
# (fuzz/corpus/micro_config.json) written by `gen`, converted by `convert`, run by `run` into
# dumps (and h5repack'd into the old HDF5 format); configs as `gen` writes them; the example
# scripts. A few near-valid inputs are written by hand (printf) where attnscope writes none:
# safetensors dtypes it never writes, sharded indexes, scripts using every field; numpy writes
# the .npy and .npz seeds.
#
#   sh fuzz/make_corpus.sh BUILD/attnscope
set -eu
BIN=${1:?usage: make_corpus.sh PATH/TO/attnscope}
case "$BIN" in /*) ;; *) BIN="$(pwd)/$BIN" ;; esac
cd "$(dirname "$0")/.."
C=fuzz/corpus
TMP=$(mktemp -d "${TMPDIR:-/tmp}/attnscope-corpus-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
export ATTNSCOPE_CACHE="$TMP/cache"
for t in safetensors st_index gguf config script dump npy; do
    rm -rf "${C:?}/$t"
    mkdir -p "$C/$t"
done

# ---- the micro model and what attnscope makes of it
"$BIN" gen --config $C/micro_config.json -o "$TMP/micro" >/dev/null
cp "$TMP/micro/model.safetensors" $C/safetensors/micro.safetensors
"$BIN" convert --to gguf --quant q8_0 "$TMP/micro" $C/gguf/micro-q8_0-llama.gguf >/dev/null
"$BIN" convert --to gguf --quant bf16 --names deepseek "$TMP/micro" $C/gguf/micro-bf16-deepseek.gguf >/dev/null
cat >"$TMP/s.json" <<EOF
{"model": "$TMP/micro", "inject": "sink-ignored", "steps": [{"prefill": 1}],
 "dump": {"path": "$TMP/d.h5", "layers": [0], "tensors": "q,o"}}
EOF
"$BIN" run -q "$TMP/s.json" >/dev/null || [ $? -eq 1 ] # the fault is a mismatch: exit 1
cp "$TMP/d.h5" $C/dump/micro-1.10.h5
h5repack "$TMP/d.h5" $C/dump/micro-old-format.h5
cat >"$TMP/s.json" <<EOF
{"model": "$TMP/micro", "engine": "off", "steps": [{"prefill": 2}, {"decode": 1}],
 "dump": {"path": "$TMP/d2.h5", "layers": [2], "steps": [1], "tensors": "state"}}
EOF
"$BIN" run -q "$TMP/s.json" >/dev/null
cp "$TMP/d2.h5" $C/dump/micro-state-ref-only.h5

# ---- configs: as gen writes them (Hugging Face spelling), and by hand in DeepSeek's spelling
cp $C/micro_config.json $C/config/micro.json
for p in tiny tiny-q; do
    "$BIN" gen --preset $p -o "$TMP/$p" >/dev/null
    cp "$TMP/$p/config.json" $C/config/$p.json
done
# the released DeepSeek-V4.1-Flash config.json (attention fields) in both spellings
cat >$C/config/flash-hf.json <<'EOF'
{"architectures": ["DeepseekV4ForCausalLM"], "vocab_size": 129280, "hidden_size": 5120,
 "num_hidden_layers": 40, "num_attention_heads": 64, "head_dim": 512, "qk_rope_head_dim": 64,
 "q_lora_rank": 1280, "o_lora_rank": 1024, "o_groups": 8, "sliding_window": 128, "rms_norm_eps": 1e-20,
 "compress_ratios": [0,0,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],
 "kv_source_layer_ids": [2, 8, 14, 20], "index_source_layer_ids": [2, 8, 14, 20, 24, 28, 32, 36],
 "candidate_source_layer_id": 20, "candidate_topk_blocks": 2048, "candidate_block_size": 8,
 "index_n_heads": 32, "index_head_dim": 128, "index_topk": 512, "rope_theta": 10000,
 "compress_rope_theta": 160000, "rope_scaling": {"type": "yarn", "factor": 16,
 "original_max_position_embeddings": 65536, "beta_fast": 32, "beta_slow": 1, "mscale": 1.0}}
EOF
cat >$C/config/flash-ds.json <<'EOF'
{"vocab_size": 129280, "dim": 5120, "n_layers": 40, "n_heads": 64, "head_dim": 512, "rope_head_dim": 64,
 "q_lora_rank": 1280, "o_lora_rank": 1024, "o_groups": 8, "window_size": 128, "norm_eps": 1e-20,
 "compress_ratios": [0,0,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],
 "kv_source_layers": [2, 8, 14, 20], "index_source_layers": [2, 8, 14, 20, 24, 28, 32, 36],
 "candidate_source_layer": 20, "candidate_topk_blocks": 2048, "candidate_block_size": 8,
 "index_n_heads": 32, "index_head_dim": 128, "index_topk": 512, "rope_theta": 10000,
 "compress_rope_theta": 160000, "rope_factor": 16, "original_seq_len": 65536,
 "beta_fast": 32, "beta_slow": 1, "max_seq_len": 8192}
EOF

# ---- scripts: the examples, and one using every field
for f in examples/0*.json; do cp "$f" $C/script/; done
cat >$C/script/every-field.json <<'EOF'
{"name": "all", "model": {"preset": "tiny", "seed": 3}, "max_seq": 64, "inputs": {"file": "in.h5", "dataset": "h0"},
 "mode": "free", "engine": "off", "inject": "ring-slot", "device": 0, "threads": 2, "bf16_model": "tiny",
 "steps": [{"prefill": 4}, {"decode": 2}, {"first_divergence": {"max_decode": 3}}],
 "tolerances": {"default": {"rel": 0.01, "abs": 0.001}, "q": {"rel": 0.1}, "state.ring": {"abs": 1}},
 "dump": {"path": "out/d.h5", "layers": [0, 5], "steps": "all", "tensors": "q,kv,state"},
 "report": {"json": "r.json", "junit": "r.xml"}, "expect": {"verdict": "mismatch", "step": 1, "layer": 0, "tensor": "rows_a"},
 "comment": "every field"}
EOF
printf '{"model": "flash", "steps": [{"first_divergence": {"prefill": 8, "max_decode": 2}}], "expect": {"verdict": "pass"}}' \
    >$C/script/first-divergence.json

# ---- safetensors written by hand: 8-byte little-endian header length, the JSON, the data
le64() { # the 8 bytes of $1, little-endian
    _n=$1
    for _i in 1 2 3 4 5 6 7 8; do
        printf "\\$(printf %03o $((_n % 256)))"
        _n=$((_n / 256))
    done
}
st() { # st FILE JSON DATA_BYTES
    { le64 ${#2}; printf '%s' "$2"; head -c "$3" /dev/zero | tr '\0' '\101'; } >"$1"
}
st $C/safetensors/empty.safetensors '{}' 0
st $C/safetensors/metadata.safetensors '{"__metadata__": {"format": "pt"}}   ' 0
st $C/safetensors/every-read-dtype.safetensors '{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F16", "shape": [2, 1], "data_offsets": [8, 12]}, "c": {"dtype": "BF16", "shape": [1, 1, 2], "data_offsets": [12, 16]}, "d": {"dtype": "F8_E4M3", "shape": [2, 2], "data_offsets": [16, 20]}, "e": {"dtype": "F8_E8M0", "shape": [1, 1], "data_offsets": [20, 21]}, "f": {"dtype": "F8_E4M3FN", "shape": [], "data_offsets": [21, 22]}}' 22
st $C/safetensors/skipped-dtypes.safetensors '{"i": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}, "u": {"dtype": "U8", "shape": [3], "data_offsets": [8, 11]}, "f4": {"dtype": "F4", "shape": [2, 1, 1, 1, 1, 2], "data_offsets": [11, 13]}, "b": {"dtype": "BOOL", "shape": [0], "data_offsets": [13, 13]}}' 13
# an fp8 projection with its block scale, as the released checkpoint stores them
st $C/safetensors/fp8-scale.safetensors '{"layers.0.attn.wkv.weight": {"dtype": "F8_E4M3", "shape": [32, 32], "data_offsets": [0, 1024]}, "layers.0.attn.wkv.scale": {"dtype": "F8_E8M0", "shape": [1, 1], "data_offsets": [1024, 1025]}, "layers.0.attn.wq_a.weight": {"dtype": "F8_E4M3", "shape": [32, 32], "data_offsets": [1025, 2049]}, "layers.0.attn.wq_a.weight_scale_inv": {"dtype": "F32", "shape": [1, 1], "data_offsets": [2049, 2053]}}' 2053

# ---- indexes: the sharded layout of the released checkpoint, and near-valid ones
cat >$C/st_index/sharded.json <<'EOF'
{"metadata": {"total_size": 77368}, "weight_map": {"layers.0.attn.wq_a.weight": "model-00001-of-00002.safetensors",
 "layers.0.attn.wkv.weight": "model-00001-of-00002.safetensors", "layers.1.attn.wq_a.weight": "model-00002-of-00002.safetensors"}}
EOF
printf '{"weight_map": {"a": "model.safetensors"}}' >$C/st_index/one-shard.json
printf '{"weight_map": {"a": "../outside.safetensors"}}' >$C/st_index/path-escape.json
printf '{"weight_map": {}}' >$C/st_index/empty.json

# ---- .npy and .npz as numpy writes them (python3-numpy, scripts/deps.sh): the micro geometry's
# x, q, out, h0 and a state tensor named by docs/IMPORT.md's scheme; other dtypes, byte orders,
# format versions; stored and deflated archives, an empty one
python3 - $C/npy <<'EOF'
import sys
import numpy as np
out = sys.argv[1]
x = (np.arange(64, dtype=np.float32) / 8).reshape(2, 32)
q = (np.arange(128, dtype=np.float32) / 16 - 4).reshape(2, 2, 32)
np.save(f"{out}/x-f4.npy", x)
np.save(f"{out}/x-batch-be-f4.npy", x.reshape(1, 2, 32).astype(">f4"))
np.save(f"{out}/x-f2.npy", x.astype(np.float16))
with open(f"{out}/x-v2.npy", "wb") as f:
    np.lib.format.write_array(f, x.astype(np.float64), version=(2, 0))
with open(f"{out}/x-v3.npy", "wb") as f:
    np.lib.format.write_array(f, x, version=(3, 0))
np.save(f"{out}/idx-i8.npy", np.array([[0, 1, -1, -1], [0, 1, 0, -1]], dtype=np.int64))
np.save(f"{out}/mask-bool.npy", np.array([[True, False], [True, True]]))
tensors = {"step0/h0": x, "step0/layer0/x": x, "step0/layer1/q": q, "step0/layer2/out": x,
           "step0/layer1/state_ring": np.zeros((4, 32), np.float32)}
np.savez(f"{out}/layers-stored.npz", **tensors)
np.savez_compressed(f"{out}/layers-deflated.npz", **tensors)
np.savez(f"{out}/empty.npz")
EOF

for t in safetensors st_index gguf config script dump npy; do
    printf '%-12s %3d files, %6d bytes\n' "$t" "$(ls $C/$t | wc -l)" "$(cat $C/$t/* | wc -c)"
done
