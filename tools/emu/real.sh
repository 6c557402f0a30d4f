#!/bin/sh
# The sparse-attention kernel on the CPU emulator with a real layer's operands (not part of
# `make emu`: it needs a model). Dumps layer LAYER of a prefill of S tokens (reference, THREADS
# threads) once, then runs the tensor-core and warp kernels for the chosen queries against the
# reference o.
#   sh tools/emu/real.sh BUILD MODEL_DIR [S=512] [LAYER=0] [t ...]
#   env: EMU_SPLIT=n (splits of the tensor-core kernel), THREADS (reference threads, default 2),
#        DUMP (dump file, default BUILD/emu/attn_S_LAYER.bin; reused when present)
# BUILD is a build directory (make BUILD=... NO_CUDA=1 builds one without the engine).
set -eu
BUILD=${1:?BUILD}
MODEL=${2:?MODEL_DIR}
S=${3:-512}
L=${4:-0}
shift 2
[ $# -gt 0 ] && shift
[ $# -gt 0 ] && shift
DUMP=${DUMP:-$BUILD/emu/attn_${S}_$L.bin}
make --no-print-directory BUILD="$BUILD" NO_CUDA=1 "$BUILD/emu/dump_attn" "$BUILD/emu/emu_attn_real"
[ -f "$DUMP" ] || "$BUILD/emu/dump_attn" "$MODEL" "$DUMP" "$S" "$L" 1 "${THREADS:-2}"
"$BUILD/emu/emu_attn_real" "$DUMP" "$@"
