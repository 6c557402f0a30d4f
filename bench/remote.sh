#!/bin/sh
# bench/remote.sh: one device run for the heavy kernels (kernels/gemv.cu, index_scores.cu,
# sparse_attn.cu; notes in bench/KERNELS.md): their tests, the same tests under compute-sanitizer
# (memcheck, racecheck; small cases only), the micro-benchmark, and SASS facts.
#
#   sh bench/remote.sh [BUILD]          (on the device machine, in the repository root)
#
# BUILD (default build-gpu) should hold attnscope_tests (built there or bundled) for the tests to
# run; attnscope_kbench needs only nvcc and cuBLAS and is built when missing. Full logs go to $OUT
# (or /tmp/kout); the verdicts and the benchmark's summary table are printed last.
set -u
B=${1:-build-gpu}
O=${OUT:-/tmp/kout}
mkdir -p "$O"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >"$O/gpu.txt" 2>&1

if [ ! -x "$B/attnscope_kbench" ]; then
    make BUILD="$B" -j16 kbench >"$O/build.log" 2>&1 || { echo "kbench build failed:"; tail -30 "$O/build.log"; }
fi

TESTS='gpu_gemv* gpu_index_scores* gpu_sparse_attn*'
if [ -x "$B/attnscope_tests" ]; then
    # shellcheck disable=SC2086
    "./$B/attnscope_tests" $TESTS >"$O/tests.log" 2>&1
    echo "tests rc=$?"
    if command -v compute-sanitizer >/dev/null 2>&1; then
        # shellcheck disable=SC2086
        # bounded: a sanitizer run must not eat the device call (rc 124 = cut by the timeout)
        AS_KTEST_SMALL=1 timeout 200 compute-sanitizer --tool memcheck --leak-check no "./$B/attnscope_tests" \
            $TESTS >"$O/memcheck.log" 2>&1
        echo "memcheck rc=$?"
        AS_KTEST_SMALL=1 timeout 200 compute-sanitizer --tool racecheck "./$B/attnscope_tests" \
            'gpu_sparse_attn_other*' 'gpu_sparse_attn_flash' 'gpu_index_scores*' >"$O/racecheck.log" 2>&1
        echo "racecheck rc=$?"
    fi
else
    echo "no $B/attnscope_tests: tests not run"
fi

if [ -x "$B/attnscope_kbench" ]; then
    "./$B/attnscope_kbench" >"$O/kbench.log" 2>&1
    echo "kbench rc=$?"
fi

# SASS facts per kernel: tensor-core ops, ldmatrix, cp.async, local memory (must be 0), barriers.
if command -v cuobjdump >/dev/null 2>&1; then
    for f in gemv index_scores sparse_attn; do
        cuobjdump --dump-sass "$B/obj/kernels/$f.cu.o" 2>/dev/null
    done >"$O/sass.txt"
    awk '/Function :/ { if (name) printf "%-90.90s HMMA %4d LDSM %4d LDGSTS %4d LDG %4d LDL %3d STL %3d BAR %3d\n", name, h, l, c, g, ll, sl, b;
                        name = $3; h = l = c = g = ll = sl = b = 0 }
         /HMMA/ { h++ } /LDSM/ { l++ } /LDGSTS/ { c++ } /LDG/ { g++ } /LDL/ { ll++ } /STL/ { sl++ } /BAR/ { b++ }
         END { if (name) printf "%-90.90s HMMA %4d LDSM %4d LDGSTS %4d LDG %4d LDL %3d STL %3d BAR %3d\n", name, h, l, c, g, ll, sl, b }' \
        "$O/sass.txt" >"$O/sass_summary.txt"
    gzip -f "$O/sass.txt"
fi

echo "== gpu"; cat "$O/gpu.txt"
[ -f "$O/sass_summary.txt" ] && { echo "== SASS (sm_90a)"; cat "$O/sass_summary.txt"; }
for l in memcheck racecheck; do
    [ -f "$O/$l.log" ] && { echo "== $l"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Error|Hazard|passed" "$O/$l.log" | head -20; }
done
if [ -f "$O/tests.log" ]; then
    echo "== tests"
    grep -E "^(ok|FAIL|skip) |passed,|x tol|worst|differ|bad outputs|outside|race|NaN|refused|must" "$O/tests.log" \
        | grep -vE " 0 bad$" | tail -60
fi
[ -f "$O/kbench.log" ] && { echo "== kbench"; sed -n '/== summary/,$p' "$O/kbench.log"; grep -E "ceilings|sweep|best" "$O/kbench.log"; }
