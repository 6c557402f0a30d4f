#!/bin/sh
# Runs libFuzzer targets (fuzz/README.md): for each, the regression inputs kept under
# fuzz/regressions/TARGET/ first (each must pass), then SECONDS of fuzzing from the seed corpus
# fuzz/corpus/TARGET/ (read only) plus BUILD/corpus/TARGET/ (new inputs land there). A crash,
# a leak, a broken contract, an input over the memory limit or one running longer than 10 s
# stops the run with its input saved under BUILD/findings/ and a non-zero exit.
#
#   sh fuzz/run.sh BUILD SECONDS TARGET...
set -u
BUILD=${1:?usage: run.sh BUILD SECONDS TARGET...}
SECONDS_EACH=${2:?usage: run.sh BUILD SECONDS TARGET...}
shift 2
cd "$(dirname "$0")/.." || exit 2
mkdir -p "$BUILD/findings"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$(pwd)/fuzz/lsan.supp:print_suppressions=0}"
failed=""
for t in "$@"; do
    bin="$BUILD/fuzz/$t"
    [ -x "$bin" ] || { echo "fuzz: $bin is not built (make fuzz)"; exit 2; }
    dict=""
    [ -f "fuzz/dict/$t.dict" ] && dict="-dict=fuzz/dict/$t.dict"
    if ls "fuzz/regressions/$t/"* >/dev/null 2>&1; then
        n=$(ls "fuzz/regressions/$t/" | wc -l)
        if ! "$bin" -rss_limit_mb=2048 -timeout=10 "fuzz/regressions/$t/"* >"$BUILD/findings/$t.replay.log" 2>&1; then
            echo "fuzz $t: a regression input fails again:"
            tail -30 "$BUILD/findings/$t.replay.log"
            failed="$failed $t"
            continue
        fi
        echo "fuzz $t: $n regression inputs pass"
    fi
    mkdir -p "$BUILD/corpus/$t"
    start=$(date +%s)
    "$bin" -max_total_time="$SECONDS_EACH" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$BUILD/findings/$t-" $dict "$BUILD/corpus/$t" "fuzz/corpus/$t" \
        >"$BUILD/findings/$t.log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$BUILD/findings/$t.log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$BUILD/findings/$t.log" | tail -1)
    if [ "$rc" -ne 0 ]; then
        echo "fuzz $t: FINDING after $(($(date +%s) - start)) s (exit $rc); input in $BUILD/findings/:"
        grep -E "ERROR|fuzz:|runtime error|SUMMARY|Test unit written" "$BUILD/findings/$t.log" | head -20
        failed="$failed $t"
    else
        echo "fuzz $t: ${runs:-?} inputs in $(($(date +%s) - start)) s, $cov, no finding"
    fi
done
if [ -n "$failed" ]; then
    echo "fuzz: findings in:$failed (logs in $BUILD/findings/)"
    exit 1
fi
