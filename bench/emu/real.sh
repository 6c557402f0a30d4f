#!/bin/sh
# The sparse-attention kernel on the CPU emulator with a real layer's operands (not part of run.sh:
# it needs a model). Dumps layer LAYER of a prefill of S tokens (reference, THREADS threads) once,
# then runs the tensor-core and warp kernels for the chosen queries against the reference o.
#   sh bench/emu/real.sh BUILD MODEL_DIR [S=512] [LAYER=0] [t ...]
#   env: EMU_SPLIT=n (splits of the tensor-core kernel), THREADS (reference threads, default 2),
#        DUMP (dump file, default BUILD/emu/attn_S_LAYER.bin; reused when present)
# BUILD must hold a host build (make BUILD=... BUILD/attnscope) for libattnscope.a.
set -eu
BUILD=${1:?BUILD}
MODEL=${2:?MODEL_DIR}
S=${3:-512}
L=${4:-0}
shift 2
[ $# -gt 0 ] && shift
[ $# -gt 0 ] && shift
B=$BUILD/emu
mkdir -p "$B"
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
DUMP=${DUMP:-$B/attn_${S}_$L.bin}
XF="-std=c++20 -O1 -Wall -Wextra -Werror -Wno-unknown-pragmas -ffp-contract=off -I bench/emu -I . -I $CUDA_HOME/include -DAS_EMU"
if [ ! -f "$DUMP" ]; then
    LIBS=$(pkg-config --libs hdf5 ncursesw libcjson 2>/dev/null ||
        echo "-L/usr/lib/x86_64-linux-gnu/hdf5/serial -lhdf5 -lncursesw -ltinfo -lcjson")
    gcc -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -I. -c bench/emu/dump_attn.c -o "$B/dump_attn.o"
    # shellcheck disable=SC2086
    gcc -o "$B/dump_attn" "$B/dump_attn.o" "$BUILD/libattnscope.a" $LIBS -lopenblas -fopenmp -lm -lpthread
    "$B/dump_attn" "$MODEL" "$DUMP" "$S" "$L" 1 "${THREADS:-2}"
fi
# shellcheck disable=SC2086
g++ $XF -c bench/emu/emu.cpp -o "$B/emu.o"
# shellcheck disable=SC2086
g++ $XF -c bench/emu/emu_attn_real.cpp -o "$B/emu_attn_real.o"
gcc -O2 -std=c11 -ffp-contract=off -I. -c ref/quant.c -o "$B/ref_quant.o"
gcc -O2 -std=c11 -ffp-contract=off -I. -c ref/numerics.c -o "$B/ref_numerics.o"
g++ -o "$B/emu_attn_real" "$B/emu_attn_real.o" "$B/emu.o" "$B/ref_quant.o" "$B/ref_numerics.o" -pthread
"$B/emu_attn_real" "$DUMP" "$@"
