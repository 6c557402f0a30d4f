#!/bin/bash
# One device run of attnscope on a GPU machine (no package registry there): unpacks the
# relocatable bundle made here (`make bundle-tar` -> dist/attnscope.tar.xz, carried), then runs
# the phases named on the command line, each bounded in time, and leaves the logs in $OUT.
#
#   bash scripts/gpu_session.sh [PHASE ...]
#     info      nvidia-smi, attnscope devices / --version / info on tiny
#     tests     every GPU test at tiny (kernel twins, engine vs reference, faults) + examples with the engine
#               (AS_TESTS_TIMEOUT: seconds for the tests, default 240)
#     flash     generate the flash model there, engine vs reference at flash (prefill 512 + 64 decode),
#               then the decode graph against the uncaptured decode at flash (bit for bit, 64 steps)
#               in both precisions (the fp8 model as released, and its bf16 precision)
#     fixtures  torch's values for the reference's numerics (tests/torch/make_fixtures.py): $OUT/torch_kernels.json
#     bench     bench-engine at flash (decode at 4K context, prefill 4096), with its chart and JSON
#     benchprec bench-engine at flash in each precision (fp8 model; AS_BENCH_ARGS: more knobs, AS_TAG names
#               the run) and, with AS_BIN_B (another build's binary,
#               run with this bundle's libraries), this build against it on a bf16 flash model, alternated
#               (a before / after in one call: calls land on different H200s)
#     trace     bench-engine --trace: one decode step kernel by kernel on the device's timeline (CUPTI), per
#               layer kind and for one layer of each kind; $OUT/decode_trace.json.xz (a Chrome trace)
#     sanitize  compute-sanitizer memcheck / racecheck / initcheck on the GPU tests (small cases; AS_SAN_TESTS: other patterns), then
#               on a whole tiny engine run
#     q2kflash  flash as a Q2_K GGUF: convert, engine vs reference (prefill 512 + 16 decode), bench-engine
#     tui       the TUI on flash with the engine, screens captured through tmux
#     tuilat    the TUI's latency (scripts/tui_latency.sh), tiny at 80x24; its screens travel in
#               phase_logs.tar.xz (tui_screens_tiny/) for docs/screens
#     tuilatflash  the same on flash with the engine and a 4096-token start-up prefill at 200x60: redraw a
#               key, cancel a prefill (tui_screens_flash/); a call of its own (AS_TUILAT_SECS, default 500)
#     hostref   the CPU reference on the GPU host: bench-ref of a 5-layer flash cut (bench/flash_cut5.json) at 1, 4
#               and all threads (prefill 1024), then `run` of a 2048-token prefill without and with the engine
#               (what the explanation of the engine's flips costs)
#     h5py      open a dump written with the engine on (examples/out/03_tiny.h5, from 'tests') with h5py
#     kbench    the kernel micro-benchmark (bench/README.md)
#     boundary  what a dependency between two stages costs: graph edges with and without PDL, a grid barrier and
#               a flag in one persistent kernel (bench/boundary_bench.cu)
# AS_BUNDLE (default dist/attnscope.tar.xz) and AS_DIR (default /tmp/as) pick another bundle, so one
# device call can run two builds; AS_TAG suffixes their phase names; the flash model is shared
# (AS_FLASH, default /tmp/as-flash).
# The summary goes to stdout and $OUT/summary.txt; every phase's whole log streams into $OUT/full.log,
# and all of them, one file a phase, are packed into $OUT/phase_logs.tar.xz at the end (a call brings
# back only a few files from $OUT: copy nothing else there).
set -u
OUT=${OUT:-/tmp/as-out}
mkdir -p "$OUT"
ROOT=$(pwd)
AS=${AS_DIR:-/tmp/as}
BUNDLE=${AS_BUNDLE:-dist/attnscope.tar.xz}
# unpack BUNDLE DIR: DIR/attnscope from BUNDLE, again whenever the bundle differs from the one unpacked
# there (a machine kept warm between calls still holds the previous call's)
unpack() {
    local sha
    sha=$(sha256sum "$1" 2>/dev/null | cut -c1-64)
    [ -n "$sha" ] || return 1
    if [ ! -x "$2/attnscope/attnscope" ] || [ "$(cat "$2/.bundle_sha" 2>/dev/null)" != "$sha" ]; then
        rm -rf "$2/attnscope"
        { mkdir -p "$2" && tar -C "$2" -xJf "$1"; } || return 1
        echo "$sha" >"$2/.bundle_sha"
    fi
}
if ! unpack "$BUNDLE" "$AS"; then
    echo "no bundle ($BUNDLE)"
    exit 3
fi
B=$AS/attnscope
export ATTNSCOPE_CACHE=$AS/cache ATTNSCOPE_GPU_CACHE=$AS/cache ATTNSCOPE_BIN=$B/attnscope
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
# the torch fixtures (tests/gpu_topk.c), copied from ../shared/fixtures into the carried gpu/fixtures
export ATTNSCOPE_FIXTURES=${ATTNSCOPE_FIXTURES:-$ROOT/gpu/fixtures}
FLASH=${AS_FLASH:-/tmp/as-flash}
SUM=$OUT/summary.txt
touch "$SUM"   # appended to: several invocations in one call share it
say() { echo "$*" | tee -a "$SUM"; }
LOGS=/tmp/as-logs
mkdir -p "$LOGS"
phase() {  # phase NAME SECONDS COMMAND...: runs with a time bound; its log is appended to $OUT/full.log
    local name=$1${AS_TAG:+_$AS_TAG} secs=$2
    shift 2
    local t0
    t0=$(date +%s)
    # streamed into full.log as it runs: a call cut short still brings back what ran
    echo "######## $name" >>"$OUT/full.log"
    timeout "$secs" "$@" 2>&1 | tee "$LOGS/$name.log" >>"$OUT/full.log"
    local rc=${PIPESTATUS[0]}
    echo "######## $name: exit $rc" >>"$OUT/full.log"
    say "== $name: exit $rc in $(($(date +%s) - t0)) s"
    grep -E "passed, .* failed|^FAIL|ERROR SUMMARY|RACECHECK SUMMARY|verdict:|caught at|mismatch|layer runs" "$LOGS/$name.log" | head -40 | tee -a "$SUM"
    return "$rc"
}
logf() { echo "$LOGS/$1${AS_TAG:+_$AS_TAG}.log"; }  # a phase's log, by its untagged name
# sanitized NAME SECONDS PATTERN...: the GPU tests matching the patterns (small cases) under memcheck,
# racecheck and initcheck, one phase a tool (NAME_TOOL)
sanitized() {
    local name=$1 secs=$2 tool
    shift 2
    for tool in memcheck racecheck initcheck; do
        AS_KTEST_SMALL=1 phase "${name}_$tool" "$secs" compute-sanitizer --tool "$tool" --error-exitcode 9 \
            "$B/attnscope_tests" "$@"
    done
}
need_flash() {
    [ -f "$FLASH/model.safetensors" ] || phase gen_flash 150 "$B/attnscope" gen --preset flash --seed 1 -o "$FLASH"
}

for p in "$@"; do
    case $p in
    info)
        phase info 60 sh -c "nvidia-smi; '$B/attnscope' --version; '$B/attnscope' devices; '$B/attnscope' gen --preset tiny -o $AS/tiny >/dev/null; '$B/attnscope' info $AS/tiny"
        grep -E "H200|CUDA|attnscope |Driver" "$(logf info)" | head -8 | tee -a "$SUM" ;;
    tests)
        phase gpu_tests "${AS_TESTS_TIMEOUT:-240}" "$B/attnscope_tests" 'gpu_*' 'hardening_gpu_*'
        for f in examples/0*.json; do
            phase "example_$(basename "$f" .json)" 40 "$B/attnscope" run -q "$f"
        done ;;
    flash)
        need_flash
        export ATTNSCOPE_FLASH_MODEL=$FLASH
        phase gpu_flash 420 "$B/attnscope_tests" 'gpu_engine_flash*'
        phase gpu_graph_flash 300 "$B/attnscope_tests" 'gpu_graph_flash*' ;;
    fixtures)
        phase fixtures 120 python3 tests/torch/make_fixtures.py "$OUT/torch_kernels.json" ;;
    bench)
        need_flash
        phase bench_engine 180 "$B/attnscope" bench-engine "$FLASH" --context 4096 --steps 20 --prefill 4096 \
            --json "$OUT/bench_engine.json" --svg "$OUT/bench_engine.svg"
        cat "$(logf bench_engine)" ;;
    benchprec)
        need_flash
        # fp8 twice: its weights as e4m3 codes (the default) and as the bf16 upload (--fp8-qdq: the same bits);
        # AS_BENCH_PRECS picks some of them
        for prec in ${AS_BENCH_PRECS:-fp8 fp8qdq bf16}; do
            more=()
            [ "$prec" = fp8qdq ] && more=(--fp8-qdq)
            # shellcheck disable=SC2086  # AS_BENCH_ARGS: more knobs (e.g. --fusions all), words split
            phase "bench_$prec" 180 "$B/attnscope" bench-engine "$FLASH" --precision "${prec%qdq}" --context 4096 \
                --steps 20 --prefill 4096 --json "$OUT/bench_$prec${AS_TAG:+_$AS_TAG}.json" "${more[@]}" \
                ${AS_BENCH_ARGS:-}
            grep -E "all 40 layers|\*\*graph\*\*|^\| \*\*all\*\*|fp8 projections alone" "$(logf "bench_$prec")" | tee -a "$SUM"
        done
        if [ -n "${AS_BIN_B:-}" ]; then
            FLASH_BF16=${FLASH}-bf16
            [ -f "$FLASH_BF16/model.safetensors" ] ||
                phase gen_flash_bf16 200 "$B/attnscope" gen --preset flash --precision bf16 --seed 1 -o "$FLASH_BF16"
            for run in a1 b1 a2 b2; do
                bin=("$B/attnscope")
                case $run in b*) bin=(env "LD_LIBRARY_PATH=$B/lib" "$ROOT/$AS_BIN_B") ;; esac
                phase "benchab_$run" 180 "${bin[@]}" bench-engine "$FLASH_BF16" --context 4096 --steps 20 --prefill 4096
                grep -E "all 40 layers|\*\*graph\*\*|^\| \*\*all\*\*" "$(logf "benchab_$run")" | tee -a "$SUM"
            done
        fi ;;
    trace)
        # one decode step on the device's timeline (bench-engine --trace: CUPTI, every kernel named by its
        # launch), with --graph-layers beside it; the trace's own GPU test first
        need_flash
        phase trace_test 120 "$B/attnscope_tests" 'gpu_trace*'
        phase trace 180 "$B/attnscope" bench-engine "$FLASH" --context 4096 --steps 20 --prefill 0 --graph-layers \
            --trace "$OUT/decode_trace.json"
        xz -6 "$OUT/decode_trace.json" 2>/dev/null
        cat "$(logf trace)" ;;
    sanitize)
        # AS_SAN_TESTS: other GPU test patterns (e.g. the kernels a change touched); the engine runs after them
        if [ -n "${AS_SAN_TESTS:-}" ]; then
            # shellcheck disable=SC2086
            sanitized sanitize 150 $AS_SAN_TESTS
        else
            sanitized sanitize 150 'gpu_*kernels*' 'gpu_rmsnorm*' 'gpu_rope*' 'gpu_quant*' 'gpu_window*' \
                'gpu_compress*' 'gpu_gemv*' 'gpu_index*' 'gpu_sparse*' 'gpu_engine_tiny_prefill*' 'gpu_engine_faults*' \
                'gpu_row_pipe*' 'gpu_decode_*' 'gpu_graph_tiny_mixed*' 'gpu_q2k*' 'gpu_build_idx*' 'gpu_convert*' \
                'gpu_topk*' 'gpu_fp8*'
        fi
        # then a whole engine run (every kernel, the selection, prefill and decode) under each tool: memcheck
        # and racecheck with a 16-token prefill (cuBLAS GEMMs included), initcheck with an 8-token one
        # (every projection through attnscope's own GEMV); then initcheck at 16 tokens again, reported
        # per reading kernel, not failing the phase: it flags reads of cuBLAS's outputs
        for n in 16 8; do
            cat >/tmp/as-enginesan-$n.json <<JSON
{"name": "enginesan: tiny, prefill $n, decode 4", "model": "tiny", "inputs": {"seed": 1},
 "mode": "teacher", "steps": [{"prefill": $n}, {"decode": 4}]}
JSON
        done
        for tool in memcheck racecheck; do
            phase "enginesan_$tool" 150 compute-sanitizer --tool "$tool" --error-exitcode 9 \
                "$B/attnscope" run -q /tmp/as-enginesan-16.json
        done
        phase enginesan_initcheck 150 compute-sanitizer --tool initcheck --error-exitcode 9 \
            "$B/attnscope" run -q /tmp/as-enginesan-8.json
        phase enginesan_initcheck_gemm 150 compute-sanitizer --tool initcheck --print-limit 2000 \
            "$B/attnscope" run -q /tmp/as-enginesan-16.json
        { echo "initcheck, prefill 16: reads flagged, by reading kernel and by the engine call that launched it";
          grep "Device Frame" "$(logf enginesan_initcheck_gemm)" | sed 's/.*Device Frame: //; s/+0x[0-9a-f]*//' | sort | uniq -c;
          grep -E "Host Frame: [a-z_]+ in (forward|gemm)\.c" "$(logf enginesan_initcheck_gemm)" |
              sed 's/.*Host Frame: //; s/ \[0x[0-9a-f]*\]//' | sort | uniq -c; } | tee -a "$SUM" ;;
    q2kflash)
        # Q2_K weights at the flash geometry: the flash preset converted to a Q2_K GGUF, the engine against
        # the reference (quantised tolerance), then its decode / prefill benchmark (bf16: the bench phase)
        need_flash
        Q2K=${FLASH}-q2k.gguf
        [ -f "$Q2K" ] || phase convert_q2k 300 "$B/attnscope" convert --to gguf --quant q2_k "$FLASH" "$Q2K"
        ATTNSCOPE_FLASH_Q2K=$Q2K phase gpu_q2k_flash 300 "$B/attnscope_tests" 'gpu_q2k_engine_flash*'
        phase bench_engine_q2k 180 "$B/attnscope" bench-engine "$Q2K" --context 4096 --steps 20 --prefill 4096 \
            --json "$OUT/bench_engine_q2k.json" --svg "$OUT/bench_engine_q2k.svg"
        cat "$(logf bench_engine_q2k)" ;;
    tui)
        # the CI script with the engine on (tiny), then every view at flash (screens in the log)
        phase tui_tiny 240 sh "$ROOT/tests/tui_tmux.sh" "$B/attnscope"
        need_flash
        phase tui_flash 300 sh "$ROOT/tests/tui_tmux.sh" "$B/attnscope" --flash "$FLASH" ;;
    tuilat)
        # redraw a key (target 50 ms) and the screens, tiny at 80x24
        phase tui_latency_tiny 120 bash "$ROOT/scripts/tui_latency.sh" "$B/attnscope" tiny 64 80x24 "$LOGS/tui_screens_tiny"
        grep -hE "median|start-up|prefill of|open q|go to|stopped|did not finish|cancel" "$(logf tui_latency_tiny)" | tee -a "$SUM" ;;
    tuilatflash)
        # flash with the engine and a 4096-token start-up prefill at 200x60: redraw a key (target
        # 50 ms), cancel a prefill (target 200 ms); AS_TUILAT_SECS bounds it (default 500)
        need_flash
        secs=${AS_TUILAT_SECS:-500}
        # a start-up prefill still running 180 s before the end is cancelled: the rest is measured on its layers
        TUI_LATENCY_TIMEOUT=$((secs - 60)) TUI_LATENCY_PREFILL_SECS=$((secs - 180)) phase tui_latency_flash "$secs" bash "$ROOT/scripts/tui_latency.sh" "$B/attnscope" \
            "$FLASH" 4096 200x60 "$LOGS/tui_screens_flash"
        grep -hE "median|start-up|prefill of|open q|go to|stopped|did not finish|cancel" "$(logf tui_latency_flash)" | tee -a "$SUM" ;;
    hostref)
        F5=$AS/flash5
        [ -f "$F5/model.safetensors" ] ||
            phase gen_flash5 60 "$B/attnscope" gen --config bench/flash_cut5.json --seed 1 -o "$F5"
        for th in 1 4 "$(nproc)"; do
            phase "benchref_t$th" 150 "$B/attnscope" bench-ref "$F5" --context 1024 --steps 1 --prefill 1024 \
                --threads "$th"
            grep -E "OpenBLAS|prefill 1024" "$(logf "benchref_t$th")" | tee -a "$SUM"
        done
        printf '{"model": "%s", "steps": [{"prefill": 2048}]}\n' "$F5" >"$AS/f5_2048.json"
        phase run_f5_noengine 200 bash -c "time '$B/attnscope' run '$AS/f5_2048.json' --no-engine -q"
        phase run_f5_engine 300 bash -c "time '$B/attnscope' run '$AS/f5_2048.json' -q"
        grep -hE "^real|layer runs" "$(logf run_f5_noengine)" "$(logf run_f5_engine)" | tee -a "$SUM" ;;
    h5py)
        # a dump written with the engine on, opened with h5py (the dump format's promise)
        phase h5py 60 python3 -c "
import h5py, numpy as np
f = h5py.File('examples/out/03_tiny.h5', 'r')
print('root attributes:', {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items() if k != 'config_json'})
print('inputs/h0', f['inputs/h0'].shape, f['inputs/h0'].dtype)
steps = sorted(f['steps'].keys()); print('steps', steps)
lay = f['steps/0000/layers/05']
print('layer 5 sides', sorted(k for k in lay.keys()))
for side in ('engine', 'ref'):
    print(side, 'q', lay[side]['q'].shape, 'csel', lay[side]['csel'].shape, lay[side]['csel'][0, :8])
e, r = lay['engine']['o'][()], lay['ref']['o'][()]
print('o max |engine - ref| =', float(np.max(np.abs(e - r))), ' verdict:', lay['diff/o'].attrs['verdict'])
"
        cat "$(logf h5py)" ;;
    kbench)
        # AS_KBENCH_ARGS: e.g. --fp8 (the ceilings and the fp8 projections only)
        # shellcheck disable=SC2086
        LD_LIBRARY_PATH=/usr/local/cuda/lib64 phase kbench 150 "$B/bin/attnscope_kbench" ${AS_KBENCH_ARGS:-}
        sed -n '/== summary/,$p' "$(logf kbench)" | tee -a "$SUM" ;;
    boundary)
        LD_LIBRARY_PATH=/usr/local/cuda/lib64 phase boundary 120 "$B/bin/attnscope_boundary"
        grep -E '^\|' "$(logf boundary)" | tee -a "$SUM" ;;
    *) say "unknown phase $p" ;;
    esac
done
# every phase log of the call so far in one file: the device tool brings back only a few files from
# $OUT (more are left out whole), so the logs travel packed
tar -C "$LOGS" -cJf "$OUT/phase_logs.tar.xz" . 2>/dev/null || say "packing the phase logs failed"
exit 0
