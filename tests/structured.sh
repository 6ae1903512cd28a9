#!/usr/bin/env bash
# structured.sh - structured outputs of `r1infer serve` through the openai
# client: json_schema answers validated with jsonschema (on a tiny random
# model, where only the grammar can make them valid, and on the default
# model), json_object, GBNF grammars, logit_bias, and the 400s for what is
# refused. Runs tests/structured_test.py against each server in turn.
# Last line: "structured: P passed, F failed".
set -u
MODEL=${R1_TEST_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
HERE=$(cd "$(dirname "$0")" && pwd)
NAME=structured
. "$HERE/server_common.sh"
python3 -c 'import openai, jsonschema' 2>/dev/null || die "the python packages openai and jsonschema are needed"
[ -f "$MODEL" ] || die "the default model $MODEL is absent (scripts/get-model.sh)"
"$BIN" synth --config tiny -o "$TMP/tiny" >"$TMP/synth.log" 2>&1 || die "synth failed: $(tail -n 3 "$TMP/synth.log")"

P=0 F=0
run() { # label, python args...
    local label=$1; shift
    local out; out=$(timeout 240 python3 "$HERE/structured_test.py" --base "http://127.0.0.1:$PORT" "$@" 2>&1)
    local rc=$?
    printf '%s\n' "$out" | grep -v '^structured: '
    local line; line=$(printf '%s\n' "$out" | grep -E '^structured: [0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    local pp ff
    if [ -n "$line" ]; then
        pp=$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$line"); ff=$(sed -E 's/.*, ([0-9]+) failed/\1/' <<<"$line")
    else pp=0; ff=1; echo "FAIL $label: no result line" >&2; fi
    [ $rc -eq 0 ] || [ "$ff" -gt 0 ] || ff=1
    server_alive || ff=$((ff + 1))
    P=$((P + pp)) F=$((F + ff))
}

start_server 200 -m "$TMP/tiny" --parallel 4 --ctx 1024 --seed 1
wait_health
run tiny --model tiny
stop_server 20

start_server 300 -m "$MODEL" --parallel 4 --ctx 1024 --seed 1
wait_health
run default --model default
echo "structured: $P passed, $F failed"
[ "$F" -eq 0 ]
