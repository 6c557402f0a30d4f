#!/bin/bash
# How fast the TUI answers, measured the way a user meets it: the real program in a tmux
# terminal, keys sent with send-keys, the time until the screen shows their effect (the pane is
# polled until it changes). Measures the start-up (first frame, the layer list's keys while the
# --prefill runs, its progress every 30 s, its end), the redraw of
# each kind of key (layer list, the tensor view's cursor and zoom on q, view switches; target
# 50 ms a key), the cancel of a running prefill (Esc until "cancelled"; target 200 ms), and
# saves every view's screen. A benchmark, not a test: it prints numbers and always exits 0 once
# the program ran.
#
#   bash scripts/tui_latency.sh BIN [MODEL] [PREFILL] [COLSxROWS] [OUTDIR]
#     BIN       the attnscope binary
#     MODEL     tiny (default), flash, or a model directory
#     PREFILL   the start-up prefill (default 64)
#     COLSxROWS the terminal (default 200x60)
#     OUTDIR    where latency.txt and screen_*.txt go (default ./tui_latency)
#   TUI_LATENCY_REPS   key presses a kind (default 10); TUI_LATENCY_CANCELS cancels (default 3)
#   TUI_LATENCY_CANCEL_PREFILL  the prefill that is cancelled (default PREFILL; it must outlast 0.2 s)
#   TUI_LATENCY_ARGS   more options for `attnscope tui` (e.g. --no-engine)
#   TUI_LATENCY_TIMEOUT seconds a wait may take (default 900: a flash prefill on a CPU is slow)
#   TUI_LATENCY_PREFILL_SECS  seconds the start-up prefill may run (default TUI_LATENCY_TIMEOUT); past them
#                      it is cancelled (that cancel is timed too) and the rest is measured on the layers it ran
set -u
BIN=${1:?usage: tui_latency.sh BIN [MODEL] [PREFILL] [COLSxROWS] [OUTDIR]}
MODEL=${2:-tiny}
PREFILL=${3:-64}
SIZE=${4:-200x60}
OUTDIR=${5:-tui_latency}
REPS=${TUI_LATENCY_REPS:-10}
CANCELS=${TUI_LATENCY_CANCELS:-3}
CANCEL_PREFILL=${TUI_LATENCY_CANCEL_PREFILL:-$PREFILL}
TIMEOUT=${TUI_LATENCY_TIMEOUT:-900}
PREFILL_SECS=${TUI_LATENCY_PREFILL_SECS:-$TIMEOUT}
COLS=${SIZE%x*}
ROWS=${SIZE#*x}
case "$BIN" in /*) ;; *) BIN="$(pwd)/$BIN" ;; esac
[ -x "$BIN" ] || { echo "tui_latency: $BIN is not an executable"; exit 2; }
command -v tmux >/dev/null 2>&1 || { echo "tui_latency: tmux is not installed"; exit 2; }
mkdir -p "$OUTDIR" || exit 2
OUTDIR=$(cd "$OUTDIR" && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/attnscope-lat-XXXXXX")
SOCK="$TMP/tmux.sock"
T=lat
REPORT="$OUTDIR/latency.txt"
: >"$REPORT"

tm() { tmux -S "$SOCK" "$@"; }
# shellcheck disable=SC2317  # run by the trap
cleanup() {
    tm kill-server >/dev/null 2>&1
    rm -rf "$TMP"
}
trap cleanup EXIT INT TERM
screen() { tm capture-pane -p -t "$T"; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
say() { echo "$*" | tee -a "$REPORT"; }

# wait_for TEXT [SECONDS]: 0 once the screen shows TEXT
wait_for() {
    local limit=${2:-$TIMEOUT} start
    start=$(date +%s)
    while :; do
        screen | grep -qF -- "$1" && return 0
        [ $(($(date +%s) - start)) -ge "$limit" ] && return 1
        sleep 0.02
    done
}
# wait_drawn SECONDS: 0 once the program holds the alternate screen and has drawn its status line (the
# command line echoed by the shell before it does not count)
wait_drawn() {
    local start
    start=$(date +%s%N)
    while :; do
        [ "$(tm display-message -p -t "$T" '#{alternate_on}')" = "1" ] && screen | sed -n 1p | grep -q '[^[:space:]]' &&
            return 0
        [ $((($(date +%s%N) - start) / 1000000000)) -ge "$1" ] && return 1
        sleep 0.005
    done
}
# wait_idle: the message line (line 2) no longer says busy
wait_idle() {
    local start
    start=$(date +%s)
    while screen | sed -n 2p | grep -q 'busy'; do
        [ $(($(date +%s) - start)) -ge "$TIMEOUT" ] && return 1
        sleep 0.05
    done
}
# wait_either A B [SECONDS]: 1 once the screen shows A, 2 for B, 0 on the timeout
wait_either() {
    local limit=${3:-$TIMEOUT} start s
    start=$(date +%s)
    while :; do
        s=$(screen)
        echo "$s" | grep -qF -- "$1" && return 1
        echo "$s" | grep -qF -- "$2" && return 2
        [ $(($(date +%s) - start)) -ge "$limit" ] && return 0
        sleep 0.005
    done
}
# press KEY...: sends the keys, prints the milliseconds until the screen differs from before
# (-1 after 5 s: the key changed nothing visible)
press() {
    local before t0 t
    before=$(screen | md5sum)
    t0=$(date +%s%N)
    tm send-keys -t "$T" "$@"
    while :; do
        [ "$(screen | md5sum)" != "$before" ] && break
        t=$((($(date +%s%N) - t0) / 1000000))
        [ "$t" -ge 5000 ] && { echo -1; return; }
    done
    echo $((($(date +%s%N) - t0) / 1000000))
}
# stats NAME VALUES...: median, 90th percentile, maximum
stats() {
    local name=$1
    shift
    local sorted n
    sorted=$(printf '%s\n' "$@" | sort -n)
    n=$#
    local med p90 max
    med=$(echo "$sorted" | sed -n "$(((n + 1) / 2))p")
    p90=$(echo "$sorted" | sed -n "$(((n * 9 + 9) / 10))p")
    max=$(echo "$sorted" | tail -1)
    say "$(printf '%-34s n %3d   median %5s ms   p90 %5s ms   max %5s ms' "$name" "$n" "$med" "$p90" "$max")"
}
# updown NAME: REPS times down and up in the layer list (a list of a few layers ends soon)
updown() {
    local v=()
    for _ in $(seq "$REPS"); do
        v+=("$(press j)")
        v+=("$(press k)")
    done
    stats "$1" "${v[@]}"
}
# keyrun NAME KEY...: REPS presses of the key sequence, one measurement each
keyrun() {
    local name=$1 v=()
    shift
    for _ in $(seq "$REPS"); do v+=("$(press "$@")"); done
    stats "$name" "${v[@]}"
}

export LANG=C.UTF-8 LC_ALL=C.UTF-8
tm -f /dev/null new-session -d -s "$T" -x "$COLS" -y "$ROWS" "env PS1='lat\$ ' TERM=xterm-256color sh" || exit 2
tm set-option -t "$T" status off >/dev/null
tm set-window-option -t "$T" window-size manual >/dev/null 2>&1
wait_for 'lat$' 10 || { echo "tui_latency: no shell prompt"; exit 2; }

# what a measurement costs by itself: one capture of the pane (the polls are this far apart)
c0=$(date +%s%N)
for _ in 1 2 3 4 5 6 7 8 9 10; do screen | md5sum >/dev/null; done
POLL_MS=$((($(date +%s%N) - c0) / 10000000))
say "tui_latency: $BIN tui --model $MODEL --prefill $PREFILL ${TUI_LATENCY_ARGS:-} at ${COLS}x${ROWS}, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
say "(one poll of the screen takes $POLL_MS ms: each time below is the key's effect plus up to that)"
tm send-keys -t "$T" "clear" Enter
t0=$(now_ms)
tm send-keys -t "$T" -l "$BIN tui --model '$MODEL' --prefill $PREFILL ${TUI_LATENCY_ARGS:-} ; echo EXIT=\$?"
tm send-keys -t "$T" Enter
if wait_drawn 30; then
    say "start-up: first frame after $(($(now_ms) - t0)) ms"
else
    say "start-up: no frame within 30 s"
fi
# while the start-up prefill runs: the layer list's keys (they work meanwhile), then the progress line
# and screen every 30 s (a run cut short still shows how far it got)
screen | grep -qF "prefill of $PREFILL tokens" || updown "layers: down / up during the prefill"
t_wait=$(date +%s)
next=0
until screen | grep -qF "prefill of $PREFILL tokens"; do
    el=$(($(date +%s) - t_wait))
    if [ "$el" -ge "$next" ]; then
        say "start-up: $(($(now_ms) - t0)) ms in: $(screen | sed -n 2p | tr -s ' ')"
        screen >"$OUTDIR/screen_startup.txt"
        next=$((next + 30))
    fi
    if [ "$el" -ge 2 ] && ! screen | sed -n 2p | grep -q 'busy' && ! screen | grep -qF "prefill of $PREFILL tokens"; then
        say "the start-up prefill stopped: $(screen | sed -n 2p | tr -s ' ')"
        screen >"$OUTDIR/screen_failed.txt"
        exit 1
    fi
    if [ "$el" -ge "$PREFILL_SECS" ]; then
        # past its time: cancelled (a cancel at the geometry measured), the rest on the layers it ran
        say "start-up: $(screen | sed -n 2p | tr -s ' ') after $el s: cancelled (TUI_LATENCY_PREFILL_SECS=$PREFILL_SECS)"
        c0=$(date +%s%N)
        tm send-keys -t "$T" Escape
        wait_either "cancelled" "prefill of $PREFILL tokens" 120
        case $? in
        1) START_CANCEL=$((($(date +%s%N) - c0) / 1000000))
           say "start-up: cancel of the prefill after $START_CANCEL ms: $(screen | sed -n 2p | tr -s ' ')" ;;
        2) say "start-up: the prefill ended before the cancel" ;;
        *) say "start-up: no 'cancelled' within 120 s"; screen >"$OUTDIR/screen_failed.txt"; exit 1 ;;
        esac
        wait_idle
        break
    fi
    sleep 0.2
done
if screen | grep -qF "prefill of $PREFILL tokens"; then
    say "start-up: prefill of $PREFILL tokens done after $(($(now_ms) - t0)) ms ($(screen | sed -n 2p | grep -o '([0-9.]* s)'))"
fi
screen | sed -n 1p | tee -a "$REPORT"

# the views' screens, for docs/screens
for v in 1 3 4 5 6; do
    tm send-keys -t "$T" "$v"
    sleep 0.5
    screen >"$OUTDIR/screen_view$v.txt"
done
tm send-keys -t "$T" 1

# redraw: a key in each place, time to the changed screen
updown "layers: down / up (layer list)"
# switch VIEW: REPS times into the view and back to the layers, the way into it measured
switch() {
    local v=()
    for _ in $(seq "$REPS"); do
        v+=("$(press "$1")")
        press 1 >/dev/null
    done
    stats "views: $1 ($2)" "${v[@]}"
}
switch 3 ring
switch 4 caches
switch 5 candidates
switch 6 top-k
# the tensor view on q (the largest tensor of the step) of the last layer run: the latest layers keep
# their tensors (ATTNSCOPE_RUN_BUDGET_MB), the layer list's title says how many ran
ran=$(screen | grep -o '[0-9]* of [0-9]* run' | head -1 | cut -d' ' -f1)
LAST=$(( ${ran:-1} > 0 ? ${ran:-1} - 1 : 0 ))
say "tensor view: layer $LAST, the last of the $ran run"
tm send-keys -t "$T" g
tm send-keys -t "$T" -l "$LAST"
tm send-keys -t "$T" Enter T C-u
tm send-keys -t "$T" -l "q"
t_open0=$(date +%s%N)
tm send-keys -t "$T" Enter
wait_for "zoom 0/" 60
say "$(printf '%-34s %s ms' "tensor view: open q (first scan)" $((($(date +%s%N) - t_open0) / 1000000)))"
screen >"$OUTDIR/screen_view2.txt"
keyrun "tensor: cursor right (zoom 0)" Right
keyrun "tensor: cursor down (zoom 0)" Down
v=()
for _ in $(seq "$REPS"); do
    v+=("$(press +)")
    v+=("$(press -)")
done
stats "tensor: zoom in / out" "${v[@]}"
tm send-keys -t "$T" G C-u
tm send-keys -t "$T" -l "token 1 head 1 channel 1"
t1=$(date +%s%N)
tm send-keys -t "$T" Enter
wait_for "cursor     token 1, head 1, channel 1" 30
say "$(printf '%-34s %s ms' "tensor: go to (deepest zoom)" $((($(date +%s%N) - t1) / 1000000)))"
screen >"$OUTDIR/screen_view2_goto.txt"
keyrun "tensor: cursor right (one element)" Right
v=()
for _ in $(seq "$REPS"); do
    press Right >/dev/null
    v+=("$(press w)")
done
stats "tensor: w (back to the worst)" "${v[@]}"
tm send-keys -t "$T" Escape

# cancel: a prefill started with p, cancelled once a layer is running
v=()
[ -n "${START_CANCEL:-}" ] && v+=("$START_CANCEL")
for _ in $(seq "$CANCELS"); do
    tm send-keys -t "$T" p C-u
    tm send-keys -t "$T" -l "$CANCEL_PREFILL"
    tm send-keys -t "$T" Enter
    wait_for "busy" 30 || break
    sleep 0.2
    t0=$(date +%s%N)
    tm send-keys -t "$T" Escape
    wait_either "cancelled" "prefill of $CANCEL_PREFILL tokens" 120
    case $? in
    1) v+=($((($(date +%s%N) - t0) / 1000000)))
       say "cancel: $(screen | sed -n 2p | tr -s ' ')" ;;
    2) say "cancel: the prefill of $CANCEL_PREFILL tokens ended before the cancel (a longer one: TUI_LATENCY_CANCEL_PREFILL)"
       screen >"$OUTDIR/screen_cancel_missed.txt" ;;
    *) say "cancel: no 'cancelled' within 120 s" ;;
    esac
    wait_idle
done
[ ${#v[@]} -gt 0 ] && stats "cancel: Esc during a prefill" "${v[@]}"
screen >"$OUTDIR/screen_cancelled.txt"
tm send-keys -t "$T" L
sleep 0.5
screen >"$OUTDIR/screen_log.txt"
tm send-keys -t "$T" x q
start=$(date +%s)
until screen | grep -qE 'EXIT=[0-9]+'; do
    [ $(($(date +%s) - start)) -ge 60 ] && break
    sleep 0.1
done
say "quit: $(screen | grep -oE 'EXIT=[0-9]+' | tail -1)"
# every screen in one file, each under its name (for docs/screens)
for f in "$OUTDIR"/screen_*.txt; do
    echo "---- $(basename "$f" .txt) (${COLS}x${ROWS}) ----"
    cat "$f"
done >"$OUTDIR/screens.txt"
say "screens: $OUTDIR/screens.txt (and screen_*.txt)"
exit 0
