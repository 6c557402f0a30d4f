#!/bin/sh
# The TUI under valgrind (memcheck): tmux runs `attnscope tui --model tiny --prefill 3` in an
# 80x24 terminal under valgrind; one decode step, a save, a quit. Passes when the program quits
# with status 0 and valgrind reports no memory error and no definitely or possibly lost block
# from attnscope's own code. What ncurses, libgomp, HDF5, cJSON and the dynamic loader keep or
# do inside themselves is suppressed by tests/valgrind.supp (each entry says why).
#
#   sh tests/tui_valgrind.sh BUILD/attnscope      (make test-tui runs it; skipped without valgrind)
#
# ATTNSCOPE_VALGRIND_TIMEOUT (seconds, default 300) bounds each wait.
set -u

BIN=${1:?usage: tui_valgrind.sh PATH/TO/attnscope}
case "$BIN" in /*) ;; *) BIN="$(pwd)/$BIN" ;; esac
[ -x "$BIN" ] || { echo "tui_valgrind: $BIN is not an executable"; exit 2; }
command -v tmux >/dev/null 2>&1 || { echo "tui_valgrind: tmux is not installed (scripts/deps.sh)"; exit 2; }
if ! command -v valgrind >/dev/null 2>&1; then
    echo "tui_valgrind: SKIP: valgrind is not installed (scripts/deps.sh)"
    exit 0
fi
SUPP="$(cd "$(dirname "$0")" && pwd)/valgrind.supp"
TIMEOUT=${ATTNSCOPE_VALGRIND_TIMEOUT:-300}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/attnscope-vg-XXXXXX")
SOCK="$TMP/tmux.sock"
T=vg
tm() { tmux -S "$SOCK" "$@"; }
cleanup() {
    [ -s "$TMP/pid" ] && kill -KILL "$(cat "$TMP/pid")" 2>/dev/null # valgrind, if a wait gave up on it
    tm kill-server >/dev/null 2>&1
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
screen() { tm capture-pane -p -t "$T"; }
wait_for() { # TEXT: 0 when the screen shows it within TIMEOUT seconds
    wait_re "$(printf '%s' "$1" | sed 's/[]\\.*^$[]/\\&/g')"
}
wait_re() { # REGEX (grep basic): 0 when a screen line matches it within TIMEOUT seconds
    _start=$(date +%s)
    while :; do
        if screen | grep -q -- "$1"; then return 0; fi
        [ $(($(date +%s) - _start)) -ge "$TIMEOUT" ] && return 1
        sleep 0.2
    done
}
fail() {
    echo "FAIL $1"
    echo "---- screen ----"
    screen | sed 's/^/    |/'
    echo "---- valgrind (last 60 lines) ----"
    tail -60 "$TMP"/vg.* 2>/dev/null | sed 's/^/    /'
    exit 1
}

export ATTNSCOPE_CACHE="$TMP/cache"
export LANG=C.UTF-8 LC_ALL=C.UTF-8
# the tiny preset generated outside valgrind (the run under it then only loads it)
printf '{"model": "tiny", "engine": "off", "steps": [{"prefill": 1}]}' >"$TMP/warm.json"
"$BIN" run -q "$TMP/warm.json" >/dev/null 2>&1 || { echo "tui_valgrind: cannot generate the tiny preset"; exit 2; }
tm -f /dev/null new-session -d -s "$T" -x 80 -y 24 "env PS1='vg\$ ' TERM=xterm-256color sh" || {
    echo "tui_valgrind: cannot start tmux"
    exit 2
}
tm set-option -t "$T" status off >/dev/null
wait_for 'vg$' || fail "no shell prompt"
start=$(date +%s)
# --child-silent-after-fork: the HDF5 guard's children (dumps/h5guard.h) leave by _exit
VG="valgrind --leak-check=full --show-leak-kinds=definite,possible --errors-for-leak-kinds=definite,possible \
--child-silent-after-fork=yes --num-callers=30 --suppressions=$SUPP --log-file=$TMP/vg.%p"
tm send-keys -t "$T" -l "cd '$TMP' && sh -c 'echo \$\$ >pid; OMP_NUM_THREADS=2 exec $VG \"$BIN\" tui --model tiny --prefill 3'; echo EXIT=\$?"
tm send-keys -t "$T" Enter
wait_for "prefill of 3 tokens" || fail "the prefill runs under valgrind"
echo "ok   the TUI runs a 3-token prefill under valgrind"
tm send-keys -t "$T" d
wait_for "decode steps" || fail "d asks for the decode count"
tm send-keys -t "$T" -l 1
tm send-keys -t "$T" Enter
wait_for "decode: 1 step" || fail "one decode step"
echo "ok   one decode step"
tm send-keys -t "$T" S
wait_for "attnscope-tiny-run.h5" || fail "S asks for a path"
tm send-keys -t "$T" C-u
tm send-keys -t "$T" -l "$TMP/run.h5"
tm send-keys -t "$T" Enter
wait_for "saved the run" || fail "the run is saved"
echo "ok   the run is saved"
tm send-keys -t "$T" q
wait_re "^EXIT=[0-9]" || fail "q quits" # the status line, not the command line's echo EXIT=$?
rm -f "$TMP/pid" # valgrind has exited
screen | grep -q "^EXIT=0" || fail "q quits with status 0"
echo "ok   q quits with status 0 ($(($(date +%s) - start)) s under valgrind)"
log=$(ls "$TMP"/vg.* 2>/dev/null | head -1)
[ -n "$log" ] || fail "valgrind wrote no log"
errors=$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) errors.*/\1/p' "$log" | tail -1)
definite=$(sed -n 's/.*definitely lost: \([0-9,]*\) bytes.*/\1/p' "$log" | tail -1)
possible=$(sed -n 's/.*possibly lost: \([0-9,]*\) bytes.*/\1/p' "$log" | tail -1)
suppressed=$(sed -n 's/.*ERROR SUMMARY: .*(suppressed: \([0-9]*\) from.*/\1/p' "$log" | tail -1)
echo "     valgrind: ${errors:-?} errors, definitely lost ${definite:-0} bytes, possibly lost ${possible:-0} bytes" \
    "(${suppressed:-0} library errors suppressed by tests/valgrind.supp)"
if [ "${errors:-1}" != "0" ]; then
    echo "FAIL valgrind reports errors or leaks from attnscope's code:"
    grep -E "^==[0-9]+== (Invalid|Conditional|Use of|Syscall|Mismatched|[0-9,]+ bytes in)" -A14 "$log" | head -80 |
        sed 's/^/    /'
    exit 1
fi
echo "ok   no memory error and no leak from attnscope's code"
