#!/usr/bin/env bash
# spec_server.sh - speculative decoding in `r1infer serve` (--lookup N,
# --draft MODEL): for a tiny synthetic model (drafted by itself and by
# another tiny model of the same vocabulary) and, when present, the default
# model (models/, R1_TEST_MODEL; drafted by lookup and by itself), a plain
# server and speculating servers side by side, each --parallel 3
# --batch-tokens 16 (steps of <= 16 rows: every row bit for bit one decode
# step); tests/spec_server_test.py checks that greedy text is the plain
# server's, sampling requests are well formed, usage and /metrics count the
# drafts. Also: a draft model of another vocabulary, and two draft sources,
# are refused at start with a message. R1_BIN may be an ASan build.
# Last line: "spec_server: P passed, F failed".
set -u
BIN=${R1_BIN:-build/r1infer}
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d)
PIDS=()
pass=0 fail=0
cleanup() {
    for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT
check() { # what, command...
    local what=$1; shift
    if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $what" >&2; fi
}
finish() { echo "spec_server: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }

# start NAME ARGS...: a server in the background; sets PORT_NAME
start() {
    local name=$1; shift
    "$BIN" serve --host 127.0.0.1 --port 0 --parallel 3 --batch-tokens 16 --ctx 1024 --seed 1 -t 1 "$@" \
        >"$TMP/$name.log" 2>&1 &
    local pid=$!
    PIDS+=("$pid")
    eval "PID_$name=$pid"
}
wait_port() { # NAME: the port, once listening
    local name=$1 port=
    for _ in $(seq 600); do
        port=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$TMP/$name.log" | head -n 1)
        [ -n "$port" ] && { echo "$port"; return 0; }
        sleep 0.1
    done
    echo "spec_server.sh: server $name did not start:" >&2
    tail -n 5 "$TMP/$name.log" >&2
    return 1
}
stop_all() { # SIGTERM each server: a clean exit (ASan: no leaks)
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do
        wait "$p"
        check "server $p exits cleanly (status $?)" test $? -eq 0
    done
    check "no sanitizer report" bash -c "! grep -l 'ERROR: \(Leak\|Address\)Sanitizer' $TMP/*.log"
    PIDS=()
}
# run_group TAG PLAIN_NAME SPEC_NAMES... -- extra test arguments
run_group() {
    local tag=$1 plain=$2; shift 2
    local args=() p
    p=$(wait_port "$plain") || { fail=$((fail + 1)); return; }
    args+=(--plain "http://127.0.0.1:$p")
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        p=$(wait_port "$1") || { fail=$((fail + 1)); return; }
        args+=(--spec "$1=http://127.0.0.1:$p")
        shift
    done
    [ $# -gt 0 ] && shift
    local out
    out=$(timeout 900 python3 "$HERE/spec_server_test.py" --tag "$tag" "${args[@]}" "$@" 2>"$TMP/$tag.err")
    cat "$TMP/$tag.err" >&2
    local line
    line=$(printf '%s\n' "$out" | tail -n 1)
    if [[ "$line" =~ :\ ([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
        pass=$((pass + BASH_REMATCH[1])); fail=$((fail + BASH_REMATCH[2]))
    else
        fail=$((fail + 1)); echo "FAIL $tag: no result line" >&2
    fi
}

"$BIN" synth --config tiny -o "$TMP/tiny" --seed 5 >/dev/null 2>&1 || { echo "synth failed" >&2; fail=1; finish; }
"$BIN" synth --config tiny -o "$TMP/tiny_b" --seed 6 >/dev/null 2>&1
"$BIN" synth --config tiny -o "$TMP/tiny_l3" --seed 6 --tokenizer tests/fixtures/tok_llama3 >/dev/null 2>&1

# refused at start: another vocabulary, by name; two draft sources
"$BIN" serve -m "$TMP/tiny" --draft "$TMP/tiny_l3" --port 0 >"$TMP/bad.out" 2>"$TMP/bad.err"
rc=$?
check "a draft of another vocabulary: exit 1 (got $rc)" test "$rc" -eq 1
check "... and the message says why" grep -q "draft.*vocabulary" "$TMP/bad.err"
check "... before listening" bash -c "! grep -q listening $TMP/bad.err"
"$BIN" serve -m "$TMP/tiny" --draft "$TMP/tiny_b" --lookup 2 --port 0 >/dev/null 2>"$TMP/two.err"
rc=$?
check "two draft sources: exit 2 (got $rc)" test "$rc" -eq 2
check "... and the message says so" grep -q "one draft source" "$TMP/two.err"

# the tiny model: plain, lookup (verifications cut to the step's budget),
# itself as its draft, another draft
start tplain -m "$TMP/tiny"
start tlookup -m "$TMP/tiny" --lookup 2 --batch-tokens 5 # 3 slots verifying: a step holds a share of each
# R1_SPEC_FIXED_K: every step drafts --draft-n (no adaptation), so every step verifies
R1_SPEC_FIXED_K=1 start tself -m "$TMP/tiny" --draft "$TMP/tiny" --draft-n 4 --batch-tokens 8
R1_SPEC_FIXED_K=1 start tother -m "$TMP/tiny" --draft "$TMP/tiny_b" --draft-n 3
run_group tiny tplain tlookup tself tother -- --max-tokens 40
stop_all

MODEL=${R1_TEST_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
if [ -f "$MODEL" ] && ldd "$BIN" 2>/dev/null | grep -q libasan; then
    # under ASan (~8x slower): lookup only, two prompts (9 minutes otherwise)
    start rplain -m "$MODEL"
    start rlookup -m "$MODEL" --lookup 3
    run_group default rplain rlookup -- --max-tokens 24 --quote data/spec/fix_typos_email.txt \
        --prompts data/spec/fix_typos_email.txt data/spec/list_reorder.txt
    stop_all
elif [ -f "$MODEL" ]; then
    start rplain -m "$MODEL"
    start rlookup -m "$MODEL" --lookup 3
    R1_SPEC_FIXED_K=1 start rself -m "$MODEL" --draft "$MODEL" --draft-n 4
    # two of data/spec's prompts (an edit with a quote, a code rename): the
    # paths the other two take too, in half the time
    run_group default rplain rlookup rself -- --max-tokens 32 --quote data/spec/fix_typos_email.txt \
        --prompts data/spec/fix_typos_email.txt data/spec/code_rename.txt
    stop_all
else
    echo "spec_server.sh: no default model at $MODEL (scripts/get-model.sh): its part skipped" >&2
fi
finish
