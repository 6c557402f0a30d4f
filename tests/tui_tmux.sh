#!/bin/sh
# The TUI driven through a real terminal: tmux runs `attnscope tui --model tiny` (reference
# only: CI has no GPU) in a detached 80x24 session; keys go in with send-keys, the screen comes
# back with capture-pane, and each view's content is checked. Waits poll the screen (the busy
# indicator, an expected line) rather than sleeping a fixed time.
#
#   sh tests/tui_tmux.sh BUILD/attnscope
#   sh tests/tui_tmux.sh BUILD/attnscope --flash DIR    (a GPU host: flash with the engine)
#   ATTNSCOPE_TUI_WRAP='valgrind --leak-check=full --errors-for-leak-kinds=definite \
#       --error-exitcode=9 --log-file=/tmp/vg.%p' sh tests/tui_tmux.sh build/attnscope
#
# ATTNSCOPE_TUI_WRAP prefixes every run of the program (valgrind, strace...); its messages
# must go to a file, not to the terminal being checked. ATTNSCOPE_TUI_TIMEOUT (seconds, default
# 60, 600 under a wrapper) bounds each wait.
set -u

BIN=${1:?usage: tui_tmux.sh PATH/TO/attnscope}
case "$BIN" in /*) ;; *) BIN="$(pwd)/$BIN" ;; esac
[ -x "$BIN" ] || { echo "tui_tmux: $BIN is not an executable"; exit 2; }
command -v tmux >/dev/null 2>&1 || { echo "tui_tmux: tmux is not installed (scripts/deps.sh)"; exit 2; }

WRAP=${ATTNSCOPE_TUI_WRAP:-}
if [ -n "$WRAP" ]; then TIMEOUT=${ATTNSCOPE_TUI_TIMEOUT:-600}; else TIMEOUT=${ATTNSCOPE_TUI_TIMEOUT:-60}; fi
TMP=$(mktemp -d "${TMPDIR:-/tmp}/attnscope-tui-XXXXXX")
SOCK="$TMP/tmux.sock"
T="tui"
PASS=0
FAIL=0

tm() { tmux -S "$SOCK" "$@"; }
cleanup() {
    tm kill-server >/dev/null 2>&1
    rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

screen() { tm capture-pane -p -t "$T"; }
line() { screen | sed -n "${1}p"; }
keys() { tm send-keys -t "$T" "$@"; }
# literal text (no key-name lookup)
type_text() { tm send-keys -t "$T" -l "$1"; }

ok() {
    PASS=$((PASS + 1))
    echo "ok   $1"
}
bad() {
    FAIL=$((FAIL + 1))
    echo "FAIL $1"
    echo "---- screen ----"
    screen | sed 's/^/    |/'
    echo "----------------"
}

# wait_for TEXT [SECONDS]: polls the screen until it shows TEXT; 0 when it did.
wait_for() {
    _limit=${2:-$TIMEOUT}
    _start=$(date +%s%N)
    while :; do
        if screen | grep -qF -- "$1"; then return 0; fi
        [ $(( ($(date +%s%N) - _start) / 1000000 )) -ge $((_limit * 1000)) ] && return 1
        sleep 0.1
    done
}
# wait_drawn MS: polls until the program holds the alternate screen and has drawn its status line (the
# echoed command line does not count), in whole milliseconds; 0 when it did within MS of the call.
wait_drawn() {
    _t0=$(date +%s%N)
    while :; do
        if [ "$(tm display-message -p -t "$T" '#{alternate_on}')" = "1" ] && line 1 | grep -q '[^[:space:]]'; then
            return 0
        fi
        [ $(( ($(date +%s%N) - _t0) / 1000000 )) -ge "$1" ] && return 1
        sleep 0.02
    done
}
# wait_line2 REGEX [SECONDS]: polls until the message line (line 2) matches REGEX (the model's opening is
# busy too: one capture must show both)
wait_line2() {
    _limit=${2:-$TIMEOUT}
    _start=$(date +%s%N)
    while :; do
        if line 2 | grep -qE -- "$1"; then return 0; fi
        [ $(( ($(date +%s%N) - _start) / 1000000 )) -ge $((_limit * 1000)) ] && return 1
        sleep 0.02
    done
}
# wait_idle: the message line (line 2) no longer says busy
wait_idle() {
    _start=$(date +%s)
    while :; do
        if ! line 2 | grep -q '^busy'; then return 0; fi
        [ $(($(date +%s) - _start)) -ge "$TIMEOUT" ] && return 1
        sleep 0.1
    done
}
# expect DESCRIPTION TEXT: the screen shows TEXT (waiting for it)
expect() {
    if wait_for "$2"; then ok "$1"; else bad "$1 (expected '$2')"; fi
}
expect_not() {
    if screen | grep -qF -- "$2"; then bad "$1 (did not expect '$2')"; else ok "$1"; fi
}

# start CMD...: a fresh program in the shell of the session
start() {
    keys "clear" Enter
    type_text "cd '$TMP' && $WRAP $* ; echo EXIT=\$?"
    keys Enter
}

export ATTNSCOPE_CACHE="$TMP/cache"
export LANG=C.UTF-8 LC_ALL=C.UTF-8
unset ATTNSCOPE_TUI_ASCII
tm -f /dev/null new-session -d -s "$T" -x 80 -y 24 "env PS1='tui-test\$ ' TERM=xterm-256color sh" || {
    echo "tui_tmux: cannot start tmux"
    exit 2
}
tm set-option -t "$T" status off >/dev/null
tm set-window-option -t "$T" window-size manual >/dev/null 2>&1
wait_for 'tui-test$' 10 || { echo "tui_tmux: no shell prompt"; screen; exit 2; }

# --flash DIR (scripts/gpu_session.sh, on a GPU host): the same program on a flash model with
# the engine, in a 250x70 terminal; each view's screen is printed for the record.
if [ "${2:-}" = "--flash" ]; then
    FLASH_DIR=${3:?--flash needs the model directory}
    [ -n "${ATTNSCOPE_TUI_TIMEOUT:-}" ] || TIMEOUT=600
    tm resize-window -t "$T" -x 250 -y 70
    start "'$BIN' tui --model '$FLASH_DIR' --prefill ${ATTNSCOPE_TUI_FLASH_PREFILL:-64}"
    expect "flash: the prefill runs with the engine" "prefill of ${ATTNSCOPE_TUI_FLASH_PREFILL:-64} tokens"
    keys d
    expect "flash: d asks for the decode count" "decode steps"
    type_text 2
    keys Enter
    wait_idle
    expect "flash: two decode steps" "decode: 2 steps run"
    for v in 1 3 4 5 6; do
        keys "$v"
        sleep 0.5
        echo "---- view $v at 250x70 ----"
        screen
    done
    keys 1 g
    type_text 20
    keys Enter
    keys 6
    sleep 0.5
    echo "---- top-k, layer 20 ----"
    screen
    keys T
    type_text o
    keys Enter
    sleep 0.5
    echo "---- tensor o, layer 20 ----"
    screen
    keys s
    expect "flash: s asks for the step's path" "save the step to"
    keys C-u
    type_text "$TMP/flash-step.h5"
    keys Enter
    wait_idle
    expect "flash: the step is saved" "saved step"
    if "$BIN" dump-info "$TMP/flash-step.h5" >/dev/null 2>&1; then ok "flash: dump-info reads it"; else bad "flash: dump-info reads it"; fi
    keys q
    expect "flash: q quits with 0" "EXIT=0"
    echo "$PASS passed, $FAIL failed"
    [ "$FAIL" -eq 0 ]
    exit $?
fi

# On a GPU host the same script runs with the engine on (ENG=1): the checks that name the engine
# column expect it filled (verdicts pass, the engine's top-k set, |diff| heatmaps) instead of absent.
echo "== start: $BIN tui --model tiny in 80x24"
start "'$BIN' tui --model tiny"
ENG=0
if wait_for "no step yet" && screen | grep -qF "engine on CUDA device"; then
    ENG=1
    echo "   (a CUDA device: the engine is on; engine-side checks replace the reference-only ones)"
    ok "the interface opens (tiny generated on first use) and says it runs the engine"
else
    expect "the interface opens (tiny generated on first use) and says how it runs" "reference only: no CUDA device"
fi
expect "the status line names the model, its precision, and says nothing ran yet" "attnscope  tiny fp8  no step yet"
if line 24 | grep -q "q Quit" && line 24 | grep -q "? Help"; then
    ok "the last line is the key line (q Quit, ? Help)"
else
    bad "the last line is the key line"
fi
expect "layer 5's role line: kv idx cand-src, reads its own cache, keys and selection" "5  r1  kv idx cand-src rows_b<-5  keys<-5  sel<-5"

keys n
expect "n before any prefill says what to do (no prompt)" "nothing has run yet: p prefills first"
expect_not "and opens no prompt" "Enter OK"
echo "== prefill 5, decode 6"
keys p
expect "p asks for the prefill size" "prefill tokens"
type_text 5
keys Enter
wait_idle
expect "prefill 5 runs every layer" "prefill of 5 tokens: 10 layers run"
if [ $ENG = 1 ]; then
    expect "status: step 0 prefill, start_pos 0, 5 tokens, teacher, engine" "step 0 prefill  start_pos 0  tokens 5  teacher  engine"
else
    expect "status: step 0 prefill, start_pos 0, 5 tokens, teacher, no engine" "step 0 prefill  start_pos 0  tokens 5  teacher  no engine"
fi
keys d
expect "d asks for the decode count" "decode steps"
type_text 6
keys Enter
wait_idle
expect "decode 6 runs steps 1..6" "decode: 6 steps run (steps 1..6), next position 11"
expect "status: step 6 decode at start_pos 10, one token" "step 6 decode  start_pos 10  tokens 1"
if [ $ENG = 1 ]; then
    if [ "$(screen | grep -cE ' r[012] .* pass +│')" -eq 10 ]; then
        ok "all 10 layers' verdicts say pass (engine against reference)"
    else
        bad "all 10 layers' verdicts say pass"
    fi
    expect_not "with the engine no layer says ref only" "ref only"
else
    if [ "$(screen | grep -c 'ref only')" -eq 10 ]; then
        ok "all 10 layers' verdicts say ref only"
    else
        bad "all 10 layers' verdicts say ref only"
    fi
    expect_not "without an engine no layer claims a pass" " pass "
fi

echo "== views"
keys 3
expect "ring view: the decode at position 10 wrote slot 2" "decode at position 10 wrote slot 2"
expect "ring view: slots 0..7 hold positions 8 9 10 3 4 5 6 7" "pos       8    9   10    3    4    5    6    7"
expect "ring view: the query attends all 8 slots, positions 3..10" "query 0 (position 10) attends 8 slots, positions 3..10"
keys 4
expect "caches view: the aliasing quirk shown (layer 1 read layer 5's keys of step 5)" "layer 1 scored against layer 5's keys (step 5)"
expect "caches view: layer 1's ratio-2 group waits for position 11" "1 of 2 waiting (pos 10)"
keys g
expect "g asks for a layer" "jump to layer"
type_text 5
keys Enter
keys 6
expect "top-k view: layer 5's own scores, the cut is the 8th largest" "cut (8th largest) = -0.99609"
expect "top-k view: reference picks position 7" "|     7     0.81641"
expect "top-k view: reference picks position 9" "|     9   0.0031738"
expect_not "top-k view: position 6 is not picked" "|     6 "
if [ $ENG = 1 ]; then
    expect "top-k view: the engine column holds the engine's 8" "engine: 8 picked"
    expect "top-k view: the engine's set is the reference's" "query 0: the sets agree"
else
    expect "top-k view: the engine column says no engine" "no engine"
fi
keys 5
expect "candidates view: layer 5's block grid for query 0" "candidate blocks: layer 5 (source), query 0 (position 10)"
expect "candidates view: the newest block is pinned" "pinned (newest visible, kept)"
keys T
expect "T asks for a tensor" "tensor name"
type_text q
keys Enter
if [ $ENG = 1 ]; then
    expect "tensor view: |diff| heatmap of q, a row per token and head" "|diff| q, layer 5, 4 heads per token"
    expect "tensor view: the inspector shows the diff at the cursor" " diff       "
    expect_not "tensor view: the inspector's engine column is filled" "engine     no engine"
    # the cursor opens on the largest |diff|, which depends on the GPU: move away from it, whichever head
    CUR=$(screen | grep -o 'cursor     token 0, head [0-9]*' | head -1)
    case "$CUR" in *" head 0") K='>' ;; *) K='<' ;; esac
    keys "$K"
    sleep 0.3
    if [ -n "$CUR" ] && ! screen | grep -qF "$CUR," && screen | grep -q 'cursor     token 0, head'; then
        ok "$K moves the cursor to another head (from '$CUR')"
    else
        bad "$K moves the cursor to another head (from '$CUR')"
    fi
else
    expect "tensor view: |ref| heatmap of q without an engine, a row per token and head" "|ref| q, layer 5, 4 heads per token"
    expect "tensor view: the inspector's engine column says no engine" "engine     no engine"
    expect "the cursor opens on the largest |ref| (head 1, channel 46)" "cursor     token 0, head 1, channel 46"
    keys '>'
    expect "> moves the cursor to the next head" "cursor     token 0, head 2, channel 46"
fi
keys Escape
expect "Esc returns to the layers view" "layers (10): step 6 decode, 10 of 10 run"
keys '?'
expect "? opens the help" "run the next layer"
keys x
expect "any key closes the help" "layers (10): step 6 decode"
expect "at 80x24 the tensor table shows 5 of layer 5's 28 tensors" "1-5 of 28"

echo "== resize"
tm resize-window -t "$T" -x 120 -y 40
sleep 0.3
if wait_for "1-21 of 28" && [ "$(screen | wc -l)" -eq 40 ] && screen | sed -n 40p | grep -q "q Quit"; then
    ok "resized to 120x40: 40 rows, key line last, the tensor table grows to 21 rows"
else
    bad "resized to 120x40"
fi
if [ "$(line 3 | awk '{ print length($0) }')" -ge 118 ]; then ok "the panels span 120 columns"; else bad "the panels span 120 columns"; fi
tm resize-window -t "$T" -x 60 -y 15
expect "below 80x24 a message replaces the views" "smaller than 80x24"
tm resize-window -t "$T" -x 80 -y 24
expect "back at 80x24 the views return" "layers (10): step 6 decode"

echo "== save"
keys S
expect "S asks for a path with a default" "attnscope-tiny-run.h5"
keys C-u
type_text "$TMP/run.h5"
keys Enter
wait_idle
expect "the run is saved" "saved the run: 7 steps"
if "$BIN" dump-info "$TMP/run.h5" >"$TMP/info.txt" 2>&1 && grep -q "steps      7" "$TMP/info.txt"; then
    ok "dump-info reads the saved run: 7 steps"
else
    bad "dump-info reads the saved run"; sed 's/^/    /' "$TMP/info.txt"
fi
keys s
expect "s asks for the step's path" "attnscope-tiny-step6.h5"
keys Enter
wait_idle
expect "the step is saved under the default name" "saved step 6 (decode, 10 layers)"
if "$BIN" dump-info "$TMP/attnscope-tiny-step6.h5" >"$TMP/info2.txt" 2>&1; then
    ok "dump-info reads the saved step"
else
    bad "dump-info reads the saved step"; sed 's/^/    /' "$TMP/info2.txt"
fi
if ls -a "$TMP" | grep -q '\.tmp-'; then bad "no temporary left behind"; else ok "no temporary left behind"; fi

echo "== quit"
keys q
expect "q quits with exit status 0" "EXIT=0"
if [ "$(tm display-message -p -t "$T" '#{alternate_on}')" = "0" ]; then
    ok "the terminal is restored (alternate screen off)"
else
    bad "the terminal is restored"
fi
if screen | grep -A1 "EXIT=0" | tail -1 | grep -qF 'tui-test$'; then
    ok "the pane returns to the shell prompt"
else
    bad "the pane returns to the shell prompt"
fi

echo "== a model that cannot be opened"
start "'$BIN' tui --model '$TMP/no-such-model'"
expect "the program ends with exit 2 once the model fails to open" "EXIT=2"
expect "and names the model, the terminal restored" "no-such-model: no such model directory"
if [ "$(tm display-message -p -t "$T" '#{alternate_on}')" = "0" ]; then
    ok "the terminal is restored after the failed open"
else
    bad "the terminal is restored after the failed open"
fi

echo "== the start-up prefill on the worker, prompts, zoom, go-to, the message log (80x24, then 200x60)"
# the screen is drawn at once: the model opens and the prefill runs on the worker, keys work meanwhile
# (under a wrapper such as valgrind the start is slow: the 1 s bound holds for the program alone)
if [ -n "$WRAP" ]; then FIRST=$TIMEOUT; SOON=$TIMEOUT; else FIRST=1; SOON=5; fi
# a prefill that outlasts a key: tiny's geometry with room for 3000 tokens (about a second)
"$BIN" gen --preset tiny -o "$TMP/tiny-long" >/dev/null &&
    sed -i 's/"max_seq_len":[[:space:]]*512/"max_seq_len": 4096/' "$TMP/tiny-long/config.json"
start "'$BIN' tui --model '$TMP/tiny-long' --prefill 3000"
T0=$(date +%s%N)
if wait_drawn $((FIRST * 1000)); then
    ok "the screen is not blank within $FIRST s of the start ($(( ($(date +%s%N) - T0) / 1000000 )) ms)"
else
    bad "the screen is not blank within $FIRST s of the start"
fi
if wait_line2 "busy.*prefill" "$SOON"; then
    ok "the start-up prefill shows its progress line"
    keys '?'
    if wait_for "run the next layer" "$SOON" && line 2 | grep -q "busy"; then
        ok "keys work during the start-up prefill (the help opens while it runs)"
    else
        bad "keys work during the start-up prefill"
    fi
    keys x
else
    bad "the start-up prefill shows its progress line"
fi
keys q
expect "q during the start-up prefill cancels it and quits" "EXIT=0"
start "'$BIN' tui --model tiny --prefill 500"
wait_idle
expect "the start-up prefill ends" "prefill of 500 tokens: 10 layers run"
keys p
expect "p opens its prompt" "prefill tokens"
keys x
expect "a number prompt refuses letters, as typed" "digits only"
keys Escape
keys L
expect "L shows the message log" "messages: the last"
if screen | grep -qE '^.[ ]+[0-9]{2}:[0-9]{2}:[0-9]{2}  prefill of 500 tokens'; then
    ok "the log gives each message its time"
else
    bad "the log gives each message its time"
fi
keys x
heat_checks() { # SIZE: the tensor view of q, layer 0, 500 tokens x 4 heads
    keys g
    type_text 0
    keys Enter
    keys T
    keys C-u
    type_text q
    keys Enter
    expect "$1: q opens in the tensor view at zoom 0" "zoom 0/"
    keys +
    expect "$1: + zooms in" "zoom 1/"
    keys -
    expect "$1: - zooms out" "zoom 0/"
    keys G
    expect "$1: G asks for coordinates" "go to: token"
    keys C-u
    type_text "token 12 head 3 channel 50"
    expect "$1: the go-to prompt checks as typed" "goes to token 12, head 3, channel 50"
    keys Enter
    expect "$1: the cursor goes there" "cursor     token 12, head 3, channel 50"
    expect "$1: one element a cell there" "(1 a cell) x channel"
    keys G
    keys C-u
    type_text "row 3"
    expect "$1: a dimension q does not have is named" "is not a dimension of q"
    keys Escape
    keys w
    sleep 0.3
    if [ $ENG = 1 ]; then
        # with the engine the worst is the comparison's: the diff line names it
        WORST=$(screen | grep -o ' at token [0-9]*, head [0-9]*, channel [0-9]*' | head -1 | sed 's/^ at //')
    else
        WORST=$(screen | grep -o 'largest |ref| at token [0-9]*, head [0-9]*, channel [0-9]*' | head -1 | sed 's/.* at //')
    fi
    if [ -n "$WORST" ]; then
        expect "$1: w puts the cursor on the worst element ($WORST)" "cursor     $WORST"
    else
        expect "$1: w puts the cursor back (q identical on both sides: no worst element named)" "cursor     token"
    fi
    keys Escape
}
heat_checks 80x24
tm resize-window -t "$T" -x 200 -y 60
sleep 0.3
heat_checks 200x60
keys L
expect "200x60: L shows the log" "messages: the last"
keys x
tm resize-window -t "$T" -x 80 -y 24
keys q
expect "and quits with 0" "EXIT=0"

echo "== signals"
# an interactive shell drops the rest of the line when its job dies of SIGINT: a small sh
# with a trap reports the status instead
keys "clear" Enter
type_text "cd '$TMP' && sh -c 'trap true INT; $WRAP \"$BIN\" tui --model tiny --prefill 3; echo EXIT=\$?'"
keys Enter
expect "--prefill 3 runs at start" "prefill of 3 tokens: 10 layers run"
keys C-c
expect "Ctrl-C (SIGINT) ends it with status 130" "EXIT=130"
if [ "$(tm display-message -p -t "$T" '#{alternate_on}')" = "0" ]; then
    ok "after SIGINT the terminal is restored"
else
    bad "after SIGINT the terminal is restored"
fi
expect "after SIGINT it says so" "interrupted: the terminal is restored"
keys "clear" Enter
type_text "cd '$TMP' && sh -c 'echo \$\$ > $TMP/pid; exec $WRAP \"$BIN\" tui --model tiny' ; echo EXIT=\$?"
keys Enter
expect "started again" "no step yet"
PID=$(cat "$TMP/pid" 2>/dev/null)
if [ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null && wait_for "EXIT=143"; then
    ok "SIGTERM ends it with status 143"
else
    bad "SIGTERM ends it with status 143"
fi
if [ "$(tm display-message -p -t "$T" '#{alternate_on}')" = "0" ]; then
    ok "after SIGTERM the terminal is restored"
else
    bad "after SIGTERM the terminal is restored"
fi

echo "== ASCII and monochrome terminals"
start "env LC_ALL=C LANG=C '$BIN' tui --model tiny --prefill 4"
expect "a C locale runs" "prefill of 4 tokens"
if line 3 | grep -q '^+- layers' && ! screen | LC_ALL=C grep -q "$(printf '\342')"; then
    ok "without UTF-8 the borders and glyphs are ASCII"
else
    bad "without UTF-8 the borders and glyphs are ASCII"
fi
keys q
expect "and quits with 0" "EXIT=0"
start "env TERM=vt100 '$BIN' tui --model tiny --prefill 2"
expect "a terminal without colours (vt100) runs" "prefill of 2 tokens"
keys q
expect "and quits with 0" "EXIT=0"

echo "== the released checkpoint's layout (shards, index, text_config, F8_E8M0 scales)"
if "$BIN" gen --preset tiny --layout released -o "$TMP/released" >/dev/null 2>&1; then
    start "'$BIN' tui --model '$TMP/released' --prefill 3"
    expect "a model in the released layout opens and runs" "prefill of 3 tokens"
    expect "its status line says fp8" "released fp8"
    keys q
    expect "and quits with 0" "EXIT=0"
    start "'$BIN' tui --model '$TMP/released' --precision bf16 --prefill 3"
    expect "--precision bf16 runs it in bf16" "released bf16"
    keys q
    expect "and quits with 0" "EXIT=0"
else
    bad "gen --layout released"
fi

echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
