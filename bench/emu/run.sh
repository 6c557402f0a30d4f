#!/bin/sh
# Runs the tensor-core / GEMV kernels on the CPU emulator (bench/emu/emu.h) against their CPU twins:
# a check of the kernels' own logic (fragment plumbing, swizzles, pipelines, masks, splits, the
# combine, the exact staging of the index scores) on small shapes, without a GPU. Not a check of
# timing, asynchrony or races. Usage: sh bench/emu/run.sh [BUILD]   (objects in BUILD/emu)
set -eu
B=${1:-build}/emu
mkdir -p "$B"
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
CF="-O2 -std=c11 -D_GNU_SOURCE -ffp-contract=off -fopenmp -I."
XF="-std=c++20 -O1 -Wall -Wextra -Werror -Wno-unknown-pragmas -ffp-contract=off -I bench/emu -I . -I $CUDA_HOME/include -DAS_EMU"
for f in attention numerics gemm threads indexer topk candidates quant gemv window; do
    # shellcheck disable=SC2086
    gcc $CF -c "ref/$f.c" -o "$B/ref_$f.o"
done
# shellcheck disable=SC2086
g++ $XF -c bench/emu/emu.cpp -o "$B/emu.o"
for k in attn scores gemv decode decode_attn decode_scores topk attn1; do
    # shellcheck disable=SC2086
    g++ $XF -c "bench/emu/emu_$k.cpp" -o "$B/emu_$k.o"
done
R="$B/ref_numerics.o $B/ref_gemm.o $B/ref_threads.o"
# shellcheck disable=SC2086
g++ -o "$B/emu_attn" "$B/emu_attn.o" "$B/emu.o" "$B/ref_attention.o" $R -lopenblas -pthread -fopenmp
# shellcheck disable=SC2086
g++ -o "$B/emu_scores" "$B/emu_scores.o" "$B/emu.o" "$B/ref_indexer.o" "$B/ref_topk.o" "$B/ref_quant.o" $R \
    -lopenblas -pthread -fopenmp
g++ -o "$B/emu_gemv" "$B/emu_gemv.o" "$B/emu.o" "$B/ref_gemv.o" "$B/ref_numerics.o" -pthread
# the decode graph's kernels (issue 8): row pipeline, window + idx, and the *_decode variants
g++ -o "$B/emu_decode" "$B/emu_decode.o" "$B/emu.o" "$B/ref_quant.o" "$B/ref_window.o" "$B/ref_numerics.o" -pthread
g++ -o "$B/emu_decode_attn" "$B/emu_decode_attn.o" "$B/emu.o" "$B/ref_numerics.o" -pthread
g++ -o "$B/emu_decode_scores" "$B/emu_decode_scores.o" "$B/emu.o" "$B/ref_quant.o" "$B/ref_numerics.o" -pthread
# the selection on the device (issue 8): torch's top-k sets and the candidate blocks
# shellcheck disable=SC2086
g++ -o "$B/emu_topk" "$B/emu_topk.o" "$B/emu.o" "$B/ref_topk.o" "$B/ref_indexer.o" "$B/ref_candidates.o" \
    "$B/ref_quant.o" $R -lopenblas -pthread -fopenmp
# the one-query attention (decode)
# shellcheck disable=SC2086
g++ -o "$B/emu_attn1" "$B/emu_attn1.o" "$B/emu.o" "$B/ref_attention.o" $R -lopenblas -pthread -fopenmp
rc=0
for k in attn scores gemv decode decode_attn decode_scores topk attn1; do
    echo "== emu_$k"
    "$B/emu_$k" || rc=1
done
exit $rc
