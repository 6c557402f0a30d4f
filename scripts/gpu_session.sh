#!/bin/bash
# One device run of attnscope on a GPU machine (no package registry there): unpacks the
# relocatable bundle made here (`make bundle-tar` -> dist/attnscope.tar.xz, carried), then runs
# the phases named on the command line, each bounded in time, and leaves the logs in $OUT.
#
#   bash scripts/gpu_session.sh [PHASE ...]
#     info      nvidia-smi, attnscope devices / --version / info on tiny
#     tests     every GPU test at tiny (kernel twins, engine vs reference, faults) + examples with the engine
#     flash     generate the flash model there, engine vs reference at flash (prefill 512 + 64 decode),
#               then the decode graph against the uncaptured decode at flash (bit for bit, 64 steps)
#               in both precisions (the fp8 model as released, and its bf16 precision)
#     fixtures  torch's values for the reference's numerics (tests/torch/make_fixtures.py): $OUT/torch_kernels.json
#     benchprec bench-engine at flash in each precision (fp8 model) and, with AS_BIN_B (another build's binary,
#               run with this bundle's libraries), this build against it on a bf16 flash model, alternated
#     flashscript  examples/gpu_flash_prefill512_decode64.json with the engine
#     bench     bench-engine at flash (decode at 4K context, prefill 4096), with its chart
#     benchdecode  bench-engine's decode half alone (quick A/B of a switch)
#     fusebisect  bench-engine's decode under each ATTNSCOPE_DECODE_FUSE fusion alone, all, none, with the
#               resident GEMV grid (full, capped at 2 blocks an SM) and without (bench/RESULTS.md: the
#               four together measured slower)
#     topkrows  the prefill's selection under each block size of many-row top-k launches (an A/B)
#     topkrow   the decode under each block size of one-row top-k launches (envab below)
#     warprange the decode under each ATTNSCOPE_TOPK_WARP_RANGE (the longest range introselect leaves to one
#               warp, at most 128; envab below)
#     bundleab  the decode with this bundle against AS_BUNDLE_B's (a branch's, carried too), alternated
#     ab        the decode under the variants in AS_AB, separated by '|' (each as envab takes them; AS_BUNDLE_B,
#               when set, is unpacked in /tmp/as-b for variants naming AS_BIN=/tmp/as-b/attnscope/attnscope)
#     cfgab     the decode with pick_config's measured (R, W) for wo_b and indexer.wq_b (the default) against
#               the rule's for those shapes (ATTNSCOPE_GEMV_CFG), each and both
#     aheadab   the decode with the attention combine's partials loaded 32 splits ahead (the default) against 8
#     graphflash  flash's second half alone: the decode graph against the uncaptured decode, bit for bit
#     earlyab   the decode with the one-query attention's rows staged before its PDL wait (the default), in the
#               reuse layers only, and after it (ATTNSCOPE_ATTN_EARLY=reuse, 0)
#     selroom   the tiny engine / graph tests under ATTNSCOPE_SEL_ROOM=0, then the decode under the default, 0, 198, 330
#     selroomflash  the flash engine and graph tests under selroom's fastest value (0 when selroom did not run)
#     indexchain  next/index-chain's kernels (the top-k's load, emission and idx, the one-query index scores): their
#               GPU tests, then the decode against ATTNSCOPE_ISCORE_ROW=0 and, with AS_BUNDLE_B (main's
#               bundle), against main, alternated
#     splitab   the decode with the one-query attention's split on tensor cores (the default, 8 heads a block), on CUDA cores, and
#               on tensor cores with 4 heads a block
#     splittests  the kernel and tiny graph tests under each of those two other split kernels
#     fuseab    the default against the default without kvsel, and with the GEMV grid capped at 2 an SM
#               (envab below)
#     fusesan   memcheck and racecheck on a tiny graph with every fusion
#     graphlayers  bench-engine --graph-layers: the graph's own time per layer kind (decode only)
#     trace     bench-engine --trace: one decode step kernel by kernel on the device's timeline (CUPTI), per
#               layer kind and for one layer of each kind; $OUT/decode_trace.json.xz (a Chrome trace)
#     tracesw   the same trace under each of AS_TRACE_SW's switch settings ('|' separated): $OUT/trace_N.json.xz
#     benchhost the same with the selection on the host (--host-select)
#     benchref  bench-ref at flash (the CPU reference on that host's cores)
#     sanitize  compute-sanitizer memcheck / racecheck / initcheck on the GPU tests (small cases)
#     race      racecheck alone, on the kernels that share memory (small cases)
#     q2kflash  flash as a Q2_K GGUF: convert, engine vs reference (prefill 512 + 16 decode), bench-engine
#     nsys      Nsight Systems over bench-engine's decode: the kernels' time summary (kern_sum.csv)
#     newsan    memcheck, racecheck, initcheck on the selection and one-query attention kernels alone
#     decsan    memcheck, racecheck, initcheck on the decode-path kernels (GEMV epilogues, o_back, RoPE, a graph)
#     selsan    memcheck, racecheck, initcheck on the selection kernels and the engine paths using them
#     h5py      open a dump written with the engine on (examples/out/03_tiny.h5, from 'tests') with h5py
#     boundary  what a dependency between two stages costs: graph edges with and without PDL, a grid barrier and
#               a flag in one persistent kernel (bench/boundary_bench.cu)
#     kbench    the kernel micro-benchmark (bench/KERNELS.md)
#     attn      the sparse-attention tests alone (every path, the wgmma kernel included), then the
#               micro-benchmark's attention part (kbench --attn)
#     attnsan   memcheck, racecheck, initcheck on the sparse-attention tests (small cases)
#     ncudecode Nsight Compute over one decode step at 4K (each kernel alone, the graph's nodes too): ncu_decode.csv.xz
#     decprof   Nsight Compute's stall reasons for the decode's latency-bound kernels (attention, top-k, rmsnorm)
#     topkprof  Nsight Compute's source counters for the decode's top-k (one launch): topk_source.csv.xz
#     attnprof  Nsight Compute on one wgmma attention launch (s = 512): stall reasons, instructions,
#               tensor-pipe activity (the figures bench/RESULTS.md quotes)
#     tui       the TUI on flash with the engine, screens captured through tmux
#     enginesan memcheck, racecheck, initcheck over a whole engine run (tiny: prefill 16 / 8, decode 4)
# AS_BUNDLE (default dist/attnscope.tar.xz) and AS_DIR (default /tmp/as) pick another bundle, so one
# device call can run two builds (main and a branch); AS_TAG suffixes their phase names; the flash
# model is shared (AS_FLASH, default /tmp/as-flash).
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
# envab NAME VARIANT...: the decode through the graph (bench-engine --prefill 0) under each VARIANT, a
# space-separated list of VAR=value assignments ("" for the defaults; AS_BIN=path runs that attnscope
# instead of this bundle's), alternated, AS_ROUNDS rounds (3 unless set), each graph line with the
# index layers' rows of the profile; the variant with the lowest median graph time goes to
# $OUT/NAME_best (to run more under it: env $(cat $OUT/NAME_best) ...)
envab() {
    local name=$1 r v i g best bin
    shift
    need_flash
    : >"$LOGS/${name}_times"
    for r in $(seq "${AS_ROUNDS:-3}"); do
        i=0
        for v in "$@"; do
            i=$((i + 1))
            bin=$B/attnscope
            case " $v " in *" AS_BIN="*) bin=${v#*AS_BIN=} && bin=${bin%% *} ;; esac
            # shellcheck disable=SC2086 # v: a list of assignments, one word each
            phase "${name}_${i}_$r" 120 env $v "$bin" bench-engine "$FLASH" --context 4096 --steps 20 --prefill 0
            g=$(grep -E '\*\*graph\*\*' "$(logf "${name}_${i}_$r")")
            say "$name [${v:-defaults}] $g"
            grep -E "^\| (r2 kv idx|r1 idx) " "$(logf "${name}_${i}_$r")" | tee -a "$SUM"
            echo "$i $(echo "$g" | awk -F'|' '{gsub(/[* ]/, "", $3); print $3}')" >>"$LOGS/${name}_times"
        done
    done
    best=$(sort -k1,1n -k2,2g "$LOGS/${name}_times" | awk '{a[$1] = a[$1] " " $2; n[$1]++} END {for (t in a) {
        split(substr(a[t], 2), v, " "); print v[int((n[t] + 1) / 2)], t}}' | sort -g | head -1 | cut -d' ' -f2)
    shift $((${best:-1} - 1))
    echo "$1" >"$OUT/${name}_best"
    say "$name: fastest [${1:-defaults}]"
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
        phase gpu_tests 240 "$B/attnscope_tests" 'gpu_*' 'hardening_gpu_*'
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
    benchprec)
        need_flash
        for prec in fp8 bf16; do
            phase "bench_$prec" 180 "$B/attnscope" bench-engine "$FLASH" --precision "$prec" --context 4096 --steps 20 \
                --prefill 4096 --json "$OUT/bench_$prec.json"
            grep -E "all 40 layers|\*\*graph\*\*|^\| \*\*all\*\*" "$(logf "bench_$prec")" | tee -a "$SUM"
        done
        if [ -n "${AS_BIN_B:-}" ]; then
            FLASH_BF16=${FLASH}-bf16
            [ -f "$FLASH_BF16/model.safetensors" ] ||
                phase gen_flash_bf16 200 "$B/attnscope" gen --preset flash --precision bf16 --seed 1 -o "$FLASH_BF16"
            for run in a1 b1 a2 b2; do
                bin=$B/attnscope
                case $run in b*) bin="env LD_LIBRARY_PATH=$B/lib $ROOT/$AS_BIN_B" ;; esac
                phase "benchab_$run" 180 $bin bench-engine "$FLASH_BF16" --context 4096 --steps 20 --prefill 4096
                grep -E "all 40 layers|\*\*graph\*\*|^\| \*\*all\*\*" "$(logf "benchab_$run")" | tee -a "$SUM"
            done
        fi ;;
    flashscript)
        need_flash
        mkdir -p models && ln -sfn "$FLASH" models/flash   # the example names ../models/flash
        phase example_gpu_flash 240 "$B/attnscope" run -q examples/gpu_flash_prefill512_decode64.json \
            --report-json "$OUT/gpu_flash_report.json" ;;
    bench)
        need_flash
        phase bench_engine 180 "$B/attnscope" bench-engine "$FLASH" --context 4096 --steps 20 --prefill 4096 \
            --json "$OUT/bench_engine.json" --svg "$OUT/bench_engine.svg"
        cat "$(logf bench_engine)" ;;
    benchdecode)
        # the decode half alone (an A/B of one switch, e.g. ATTNSCOPE_PDL=0, in seconds)
        need_flash
        phase bench_decode 120 "$B/attnscope" bench-engine "$FLASH" --context 4096 --steps 20 --prefill 0
        grep -E "all 40 layers|\*\*graph\*\*|uncaptured" "$(logf bench_decode)" | tee -a "$SUM" ;;
    fusebisect)
        # the decode fusions one by one against none, with the resident GEMV grid (full, or capped at 2
        # blocks an SM to leave room for the kv branch) and without, the variants alternated in one
        # call (calls land on different H200s: compare within one only)
        need_flash
        for grid in full 2 off; do
            for fz in 0 residual rope oback kvidx all 0; do
                res=1 cap=
                case $grid in off) res=0 ;; 2) cap=2 ;; esac
                ATTNSCOPE_GEMV_RESIDENT=$res ATTNSCOPE_GEMV_BLOCKS_PER_SM=$cap ATTNSCOPE_DECODE_FUSE=$fz \
                    phase "fuse_${fz}_grid_$grid" 120 "$B/attnscope" bench-engine "$FLASH" --context 4096 --steps 20 \
                    --prefill 0
                say "$(grep -E '\*\*graph\*\*' "$(logf "fuse_${fz}_grid_$grid")")"
            done
        done ;;
    fuseab) envab fuseab "" ATTNSCOPE_DECODE_FUSE=residual,rope,oback,kvidx,norm ATTNSCOPE_GEMV_BLOCKS_PER_SM=2 ;;
    fusesan)
        for tool in memcheck racecheck; do
            ATTNSCOPE_DECODE_FUSE=all AS_KTEST_SMALL=1 phase "fusesan_graph_$tool" 150 compute-sanitizer --tool "$tool" \
                --error-exitcode 9 "$B/attnscope_tests" 'gpu_graph_tiny_mixed*'
        done ;;
    graphlayers)
        need_flash
        phase graphlayers 120 "$B/attnscope" bench-engine "$FLASH" --context 4096 --steps 20 --prefill 0 --graph-layers
        cat "$(logf graphlayers)" ;;
    trace)
        # one decode step on the device's timeline (bench-engine --trace: CUPTI, every kernel named by its
        # launch), with --graph-layers beside it; the trace's own GPU test first
        need_flash
        phase trace_test 120 "$B/attnscope_tests" 'gpu_trace*'
        phase trace 180 "$B/attnscope" bench-engine "$FLASH" --context 4096 --steps 20 --prefill 0 --graph-layers \
            --trace "$OUT/decode_trace.json"
        xz -6 "$OUT/decode_trace.json" 2>/dev/null
        cat "$(logf trace)" ;;
    tracesw)
        # the decode's timeline under switches that move the GEMVs' ramps (one trace each, AS_TRACE_SW: '|'
        # separated assignments, "" the defaults): $OUT/trace_N.json.xz
        need_flash
        IFS='|' read -r -a tsw <<<"${AS_TRACE_SW:-}"
        i=0
        for v in "" "${tsw[@]}"; do
            i=$((i + 1))
            say "tracesw $i: ${v:-defaults}"
            phase "tracesw_$i" 120 env ${v:+"$v"} "$B/attnscope" bench-engine "$FLASH" --context 4096 --steps 10 \
                --prefill 0 --trace "$OUT/trace_$i.json"
            xz -6 "$OUT/trace_$i.json" 2>/dev/null
            grep -E "\*\*graph\*\*|The last replay" "$(logf "tracesw_$i")" | tee -a "$SUM"
        done ;;
    topkrow) envab topkrow "" ATTNSCOPE_TOPK_THREADS_ROW=128 ATTNSCOPE_TOPK_THREADS_ROW=64 ;;
    warprange) envab warprange "" ATTNSCOPE_TOPK_WARP_RANGE=0 ATTNSCOPE_TOPK_WARP_RANGE=32 ATTNSCOPE_TOPK_WARP_RANGE=64 ;;
    aheadab) envab aheadab "" ATTNSCOPE_ATTN_COMBINE_AHEAD=8 ;;
    earlyab) envab earlyab "" ATTNSCOPE_ATTN_EARLY=reuse ATTNSCOPE_ATTN_EARLY=0 ;;
    graphflash)
        need_flash
        ATTNSCOPE_FLASH_MODEL=$FLASH phase gpu_graph_flash 240 "$B/attnscope_tests" 'gpu_graph_flash*' ;;
    selroom)
        # ATTNSCOPE_SEL_ROOM (docs/ENGINE.md; the default leaves wq_b one block an SM, 'tests' runs it): the
        # tiny engine and graph tests with it off (0: the selection after wq_b's grid), then the decode under
        # the default, off, 1.5 blocks an SM and a half (2026-11-30 06:19: 3.563, 3.637, 3.59, 3.70 ms)
        need_flash
        ATTNSCOPE_SEL_ROOM=0 phase selroom_tests 240 "$B/attnscope_tests" 'gpu_engine_tiny*' 'gpu_graph_tiny*'
        envab selroom "" ATTNSCOPE_SEL_ROOM=0 ATTNSCOPE_SEL_ROOM=198 ATTNSCOPE_SEL_ROOM=330 ;;
    selroomflash)
        # the flash engine against the reference and the flash graph bit for bit, under the value
        # selroom found fastest ($OUT/selroom_best; 0 when selroom did not run)
        need_flash
        v=$(cat "$OUT/selroom_best" 2>/dev/null)
        v=${v:-ATTNSCOPE_SEL_ROOM=0}
        say "selroomflash under [$v]"
        # shellcheck disable=SC2086 # v: one assignment
        ATTNSCOPE_FLASH_MODEL=$FLASH phase selroom_flash 300 env $v "$B/attnscope_tests" 'gpu_engine_flash*' \
            'gpu_graph_flash*' ;;
    indexchain)
        # next/index-chain (prepared 2026-11-30, not GPU-run): the selection's kernels on the chain of an
        # index layer; the tests first (the sets and scores against their CPU twins), then the A/B
        phase indexchain_tests 300 "$B/attnscope_tests" 'gpu_topk*' 'gpu_index_scores*' 'gpu_decode_kernels_index_scores' \
            'gpu_build_idx*' 'gpu_decode_kernels_build_idx' 'gpu_engine_tiny*' 'gpu_graph_tiny*'
        ab_main=""
        if [ -n "${AS_BUNDLE_B:-}" ]; then
            unpack "$AS_BUNDLE_B" /tmp/as-b && ab_main=AS_BIN=/tmp/as-b/attnscope/attnscope
        fi
        envab indexchain "" ATTNSCOPE_ISCORE_ROW=0 ${ab_main:+"$ab_main"} ;;
    splitab) envab splitab "" ATTNSCOPE_ATTN_SPLIT=fma ATTNSCOPE_ATTN_MMA_HEADS=4 ;;
    splittests)
        # the one-query attention's other split kernels through the kernel and graph tests (the default
        # runs in 'tests')
        for v in ATTNSCOPE_ATTN_SPLIT=fma ATTNSCOPE_ATTN_MMA_HEADS=4; do
            phase "splittests_${v##*=}" 180 env "$v" "$B/attnscope_tests" 'gpu_decode*' 'gpu_sparse*' \
                'gpu_graph_tiny_300*'
        done ;;
    cfgab)
        # pick_config's measured exceptions (the default: wo_b R4 W8, indexer.wq_b R2 W1) against the
        # rule's configurations for those shapes (wo_b R4 W4, indexer.wq_b R1 W2), each and both
        # (2026-11-30 02:49: 3.640 ms, 3.656 with wo_b on the rule, 3.675 with both)
        envab cfgab "" ATTNSCOPE_GEMV_CFG=5120x8192:4,4 ATTNSCOPE_GEMV_CFG=4096x1280:1,2 \
            "ATTNSCOPE_GEMV_CFG=5120x8192:4,4;4096x1280:1,2" ;;
    ab)
        [ -z "${AS_BUNDLE_B:-}" ] || unpack "$AS_BUNDLE_B" /tmp/as-b || say "ab: cannot unpack $AS_BUNDLE_B"
        IFS='|' read -r -a abv <<<"${AS_AB:-}"
        envab ab "${abv[@]}" ;;
    bundleab)
        # this bundle against AS_BUNDLE_B's (a branch built beside it, carried too; unpacked in /tmp/as-b)
        if unpack "${AS_BUNDLE_B:-}" /tmp/as-b; then
            envab bundleab "" AS_BIN=/tmp/as-b/attnscope/attnscope
        else
            say "bundleab: no second bundle (AS_BUNDLE_B=${AS_BUNDLE_B:-})"
        fi ;;
    topkrows)
        # the prefill's selection with each block size for many-row top-k launches (ATTNSCOPE_TOPK_THREADS_ROWS;
        # the decode's single rows keep 256): the prefill table's select column, alternated
        need_flash
        for t in 256 64 128 32 256 64; do
            ATTNSCOPE_TOPK_THREADS_ROWS=$t phase "topkrows_$t" 120 "$B/attnscope" bench-engine "$FLASH" --context 4096 \
                --steps 2 --prefill 4096
            grep -E "^\| \*\*all\*\* \| 40 " "$(logf "topkrows_$t")" | tee -a "$SUM"
        done ;;
    benchhost)
        # the same benchmark with the selection on the host (the reference's code): the before / after
        need_flash
        phase bench_engine_host 180 "$B/attnscope" bench-engine "$FLASH" --context 4096 --steps 20 --prefill 4096 \
            --host-select --json "$OUT/bench_engine_host.json"
        cat "$(logf bench_engine_host)" ;;
    benchref)
        need_flash
        phase bench_ref 540 "$B/attnscope" bench-ref "$FLASH" --context 4096 --steps 3 --prefill 512
        cat "$(logf bench_ref)" ;;
    sanitize)
        sanitized sanitize 150 'gpu_*kernels*' 'gpu_rmsnorm*' 'gpu_rope*' 'gpu_quant*' 'gpu_window*' \
            'gpu_compress*' 'gpu_gemv*' 'gpu_index*' 'gpu_sparse*' 'gpu_engine_tiny_prefill*' 'gpu_engine_faults*' \
            'gpu_row_pipe*' 'gpu_decode_*' 'gpu_graph_tiny_mixed*' 'gpu_q2k*' 'gpu_build_idx*' 'gpu_convert*' \
            'gpu_topk*' ;;
    race)
        # racecheck on the kernels that share memory between threads (small cases), one group a phase
        # so that a slow group's time bound does not cost the others their result
        export AS_KTEST_SMALL=1
        set -f # the test patterns are the harness's globs, not the shell's
        for grp in "attn:gpu_sparse* gpu_decode_kernels_sparse_attn" "scores:gpu_index* gpu_decode_kernels_index_scores" \
            "gemv:gpu_gemv_flash* gpu_rmsnorm_flash*" "rows:gpu_row_pipe* gpu_compress* gpu_build_idx*" \
            "q2k:gpu_q2k_mmq* gpu_q2k_odd*" "topk:gpu_topk*"; do
            # shellcheck disable=SC2086
            phase "racecheck_${grp%%:*}" 120 compute-sanitizer --tool racecheck --error-exitcode 9 \
                "$B/attnscope_tests" ${grp#*:}
        done
        set +f
        unset AS_KTEST_SMALL ;;
    q2kflash)
        # issue 7 at the flash geometry: the flash preset converted to a Q2_K GGUF, the engine against
        # the reference (quantised tolerance), then its decode / prefill benchmark (bf16: the bench phase)
        need_flash
        Q2K=${FLASH}-q2k.gguf
        [ -f "$Q2K" ] || phase convert_q2k 300 "$B/attnscope" convert --to gguf --quant q2_k "$FLASH" "$Q2K"
        ATTNSCOPE_FLASH_Q2K=$Q2K phase gpu_q2k_flash 300 "$B/attnscope_tests" 'gpu_q2k_engine_flash*'
        phase bench_engine_q2k 180 "$B/attnscope" bench-engine "$Q2K" --context 4096 --steps 20 --prefill 4096 \
            --json "$OUT/bench_engine_q2k.json" --svg "$OUT/bench_engine_q2k.svg"
        cat "$(logf bench_engine_q2k)" ;;
    nsys)
        # where a decode step's device time goes, per kernel (Nsight Systems, when the machine has it)
        need_flash
        NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys \
            /usr/local/cuda/nsight-systems*/bin/nsys 2>/dev/null | head -1)
        if [ -n "$NSYS" ]; then
            # --cuda-graph-trace node: each kernel of a replayed graph on the timeline, so the gaps
            # between them (launch latency, tails) can be summed against the kernels' own time
            phase nsys 150 "$NSYS" profile -o /tmp/as-prof --force-overwrite true --trace cuda \
                --cuda-graph-trace node --sample none --cpuctxsw none \
                "$B/attnscope" bench-engine "$FLASH" --context 4096 --steps 10 --prefill 0
            "$NSYS" stats --report cuda_gpu_kern_sum --format csv /tmp/as-prof.nsys-rep >"$OUT/kern_sum.csv" 2>&1
            "$NSYS" stats --report cuda_gpu_trace --format csv /tmp/as-prof.nsys-rep 2>&1 | xz -6 >"$OUT/gpu_trace.csv.xz"
            head -40 "$OUT/kern_sum.csv" | tee -a "$SUM"
        else
            say "nsys: not on this machine"
        fi ;;
    newsan)
        # the kernels new in this round alone (selection, one-query attention, row RMSNorm)
        sanitized newsan 100 'gpu_topk*' 'gpu_decode_kernels_sparse_attn' 'gpu_rmsnorm*' ;;
    decsan)
        # the decode-path kernels of the latest round: the GEMV (resident grid, early weights, residual and
        # RoPE in the store), the one-query attention with o_back, the row pipeline, RoPE, a tiny graph
        sanitized decsan 150 'gpu_gemv_residual' 'gpu_gemv_rope' 'gpu_gemv_tiny*' 'gpu_gemv_every*' 'gpu_decode_*' \
            'gpu_rope*' 'gpu_row_pipe*'
        # a graph run too, with the fusions on; not under initcheck: its 9-token prefill reads cuBLAS
        # outputs, which initcheck flags (see enginesan)
        for tool in memcheck racecheck; do
            ATTNSCOPE_DECODE_FUSE=1 AS_KTEST_SMALL=1 phase "decsan_graph_$tool" 150 compute-sanitizer --tool "$tool" \
                --error-exitcode 9 "$B/attnscope_tests" 'gpu_graph_tiny_mixed*'
        done ;;
    selsan)
        # the selection kernels and the engine / graph paths that launch them
        sanitized selsan 150 'gpu_topk*' 'gpu_engine_tiny_prefill*' 'gpu_graph_tiny_mixed*' ;;
    graphdiag)
        # the CUDA-graph decode's own tests alone (also part of 'tests'), for their diagnostics
        phase graph_diag 60 "$B/attnscope_tests" 'gpu_graph_tiny*' ;;
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
    boundary)
        LD_LIBRARY_PATH=/usr/local/cuda/lib64 phase boundary 120 "$B/bin/attnscope_boundary"
        grep -E '^\|' "$(logf boundary)" | tee -a "$SUM" ;;
    kbench)
        LD_LIBRARY_PATH=/usr/local/cuda/lib64 phase kbench 150 "$B/bin/attnscope_kbench"
        sed -n '/== summary/,$p' "$(logf kbench)" | tee -a "$SUM" ;;
    attn)
        phase gpu_attn 120 "$B/attnscope_tests" 'gpu_sparse*' 'gpu_decode_kernels_sparse_attn'
        grep -E "worst max-err|wgmma" "$(logf gpu_attn)" | head -20 | tee -a "$SUM"
        LD_LIBRARY_PATH=/usr/local/cuda/lib64 phase kbench_attn 120 "$B/bin/attnscope_kbench" --attn
        sed -n '/== summary/,$p' "$(logf kbench_attn)" | tee -a "$SUM" ;;
    attnsan)
        sanitized attnsan 120 'gpu_sparse*' ;;
    ncudecode)
        # each kernel of a decode step at 4K, the graph's nodes included, timed alone by Nsight Compute
        # (warm caches, boost clocks): the sum against the graph's time is what the launches' gaps cost
        need_flash
        if command -v ncu >/dev/null 2>&1; then
            LD_LIBRARY_PATH=/usr/local/cuda/lib64 phase ncudecode 300 ncu --graph-profiling node --cache-control none \
                --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv --print-units base \
                --log-file "$OUT/ncu_decode.csv" "$B/attnscope" bench-engine "$FLASH" --context 4096 --steps 1 --prefill 0
            xz -6 "$OUT/ncu_decode.csv"
        else
            say "ncudecode: ncu is not on this machine"
        fi ;;
    decprof)
        # Nsight Compute's stall reasons for the decode's latency-bound kernels (one launch each, at 4K)
        need_flash
        if command -v ncu >/dev/null 2>&1; then
            for k in split_mma_kernel combine_kernel index_topk_kernel rmsnorm_kernel; do
                LD_LIBRARY_PATH=/usr/local/cuda/lib64 phase "decprof_$k" 120 ncu --kernel-name "regex:$k" --launch-skip 20 \
                    --launch-count 1 --clock-control none --section SpeedOfLight --section WarpStateStats \
                    --section SchedulerStats --section LaunchStats --section Occupancy --section InstructionStats \
                    "$B/attnscope" bench-engine "$FLASH" --context 4096 --steps 1 --prefill 0
            done
        else
            say "decprof: ncu is not on this machine"
        fi ;;
    topkprof)
        # where the decode's exact top-k spends its time (index_topk_kernel, ~28 us a launch alone at
        # 02:36 on 2026-11-30; one launch of a decode step at 4K): Nsight Compute's source counters, per
        # SASS instruction beside its CUDA line (the build carries -lineinfo), as CSV in $OUT; warp
        # states sampled every 32 cycles (--warp-sampling-interval 0: the default interval caught 28 samples of
        # a 28 us launch at 03:36). AS_PROF_BIN profiles another build's attnscope (a branch's bundle).
        # Read it with: python3 scripts/ncu_source_table.py topk_source*.csv.xz
        need_flash
        if command -v ncu >/dev/null 2>&1; then
            LD_LIBRARY_PATH=/usr/local/cuda/lib64 phase topkprof 150 ncu --kernel-name regex:index_topk_kernel \
                --launch-skip 20 --launch-count 1 --clock-control none --section SourceCounters \
                --section WarpStateStats --section InstructionStats --warp-sampling-interval 0 --import-source yes \
                -f -o "$LOGS/topkprof${AS_TAG:+_$AS_TAG}" \
                "${AS_PROF_BIN:-$B/attnscope}" bench-engine "$FLASH" --context 4096 --steps 1 --prefill 0
            LD_LIBRARY_PATH=/usr/local/cuda/lib64 ncu -i "$LOGS/topkprof${AS_TAG:+_$AS_TAG}.ncu-rep" --page source \
                --csv --print-source cuda,sass >"$OUT/topk_source${AS_TAG:+_$AS_TAG}.csv" 2>&1 ||
                say "topkprof: no source page"
            xz -6 -f "$OUT/topk_source${AS_TAG:+_$AS_TAG}.csv"
        else
            say "topkprof: ncu is not on this machine"
        fi ;;
    attnprof)
        if command -v ncu >/dev/null 2>&1; then
            LD_LIBRARY_PATH=/usr/local/cuda/lib64 phase attnprof 120 ncu --kernel-name regex:wgmma --launch-skip 5 \
                --launch-count 1 --section SpeedOfLight --metrics \
                regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio,smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active \
                "$B/bin/attnscope_kbench" --attn
            grep -E "stalled|inst_executed|hmma|Duration" "$(logf attnprof)" | awk '$NF+0 > 0.1 || /inst_exec|hmma|Duration/' |
                tee -a "$SUM"
        else
            say "attnprof: ncu is not on this machine"
        fi ;;
    tui)
        # the CI script with the engine on (tiny), then every view at flash (screens in the log)
        phase tui_tiny 240 sh "$ROOT/tests/tui_tmux.sh" "$B/attnscope"
        need_flash
        phase tui_flash 300 sh "$ROOT/tests/tui_tmux.sh" "$B/attnscope" --flash "$FLASH" ;;
    enginesan)
        # a whole engine run (every kernel, the selection, prefill and decode) under each tool: memcheck
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
    *) say "unknown phase $p" ;;
    esac
done
# every phase log of the call so far in one file: the device tool brings back only a few files from
# $OUT (more are left out whole), so the logs travel packed
tar -C "$LOGS" -cJf "$OUT/phase_logs.tar.xz" . 2>/dev/null || say "packing the phase logs failed"
exit 0
