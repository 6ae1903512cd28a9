#!/usr/bin/env bash
# kv_pool.sh - the server's shared, paged KV pool end to end
# (tests/kv_pool_test.py): a 1,500-token prefix shared with a slot that is
# still generating (a tiny synthetic model), then a pool far too small for
# its clients (the default model, --kv-budget 12M): every request ends with
# an answer or a clear 503, resident memory within the budget.
# Last line: "kv_pool: P passed, F failed".
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
NAME=kv_pool
. "$HERE/server_common.sh"
MODEL=${R1_TEST_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
[ -f "$MODEL" ] || die "no default model at $MODEL (scripts/get-model.sh)"
pass=0 fail=0
tally() { # the last line of a python run: "name: P passed, F failed"
    local p f
    read -r p f < <(tail -n 1 "$1" | sed -n 's/.*: \([0-9]*\) passed, \([0-9]*\) failed/\1 \2/p')
    pass=$((pass + ${p:-0})) fail=$((fail + ${f:-1}))
    cat "$1"
}

"$BIN" synth --config tiny -o "$TMP/tiny" >"$TMP/synth.log" 2>&1 || die "synth failed: $(tail -n 3 "$TMP/synth.log")"
start_server 200 -m "$TMP/tiny" --parallel 4 --batch-tokens 16 --ctx 4096 --seed 1 -t 2
wait_health
timeout 300 python3 "$HERE/kv_pool_test.py" --base "http://127.0.0.1:$PORT" --mode prefix >"$TMP/a" 2>&1
tally "$TMP/a"
server_alive || { fail=$((fail + 1)); echo "FAIL the tiny model's server died"; }
stop_server

BUDGET=$((12 << 20))
start_server 300 -m "$MODEL" --parallel 4 --batch-tokens 16 --ctx 2048 --kv-budget 12M --kv f16 --seed 1 -t 2
wait_health
grep -q "KV pool of 512 positions (f16" "$TMP/log" && pass=$((pass + 1)) ||
    { fail=$((fail + 1)); echo "FAIL the start notice: $(grep 'KV pool' "$TMP/log")"; }
timeout 300 python3 "$HERE/kv_pool_test.py" --base "http://127.0.0.1:$PORT" --mode full --pid "$PID" \
    --budget "$BUDGET" --clients 4 >"$TMP/b" 2>&1
tally "$TMP/b"
server_alive || { fail=$((fail + 1)); echo "FAIL the server died with a full pool"; }
grep -q "ending an answer after\|KV pool is full" "$TMP/log" || true
echo "kv_pool: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
