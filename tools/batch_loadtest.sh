#!/usr/bin/env bash
# batch_loadtest.sh - tools/loadtest.py against two r1infer builds in one run
# (e.g. before and after continuous batching): 8 and 32 concurrent streaming
# clients (greedy, 32 tokens, two requests per client), each server started
# with --parallel equal to the clients. The builds alternate, ROUNDS times,
# inside one hold of the exclusive CPU lock (/tmp/r1-cpu.lock), so a busy
# minute on the shared machine hits both alike.
#   tools/batch_loadtest.sh BEFORE_BIN AFTER_BIN [MODEL] [THREADS] [ROUNDS]
# Prints one row per run:
#   round build clients tok/s ttft_p50_ms ttft_p99_ms completed errors
set -u
BEFORE=$1 AFTER=$2 MODEL=${3:-models/SmolLM2-135M-Instruct.Q4_1.gguf} THREADS=${4:-2} ROUNDS=${5:-2}
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

one() { # bin clients -> a table row
    local bin=$1 clients=$2 pid port out
    "$bin" serve -m "$MODEL" --host 127.0.0.1 --port 0 --parallel "$clients" --queue 256 --ctx 512 \
        -t "$THREADS" --max-conns 512 >"$TMP/log" 2>&1 &
    pid=$!
    port=
    for _ in $(seq 300); do
        port=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$TMP/log" | head -n 1)
        [ -n "$port" ] && break
        sleep 0.1
    done
    out=$(timeout 170 python3 "$HERE/loadtest.py" --base "http://127.0.0.1:$port" --clients "$clients" \
        --requests $((clients * 2)) --max-tokens 32 --temperature 0 --disconnect-every 0 --duration 120 2>&1)
    kill -TERM "$pid"
    wait "$pid"
    printf "%7s %7s %12s %12s %9s %6s\n" "$clients" \
        "$(sed -n 's/.* requests\/s, \([0-9.]*\) streamed events\/s.*/\1/p' <<<"$out")" \
        "$(sed -n 's/.*time to first token: p50 \([0-9]*\) ms.*/\1/p' <<<"$out")" \
        "$(sed -n 's/.*time to first token: .* p99 \([0-9]*\) ms.*/\1/p' <<<"$out")" \
        "$(sed -n 's/^completed \([0-9]*\),.*/\1/p' <<<"$out")" \
        "$(sed -n 's/.*errors \([0-9]*\).*/\1/p' <<<"$out" | head -n 1)"
}

export -f one
export MODEL THREADS HERE TMP
flock -x /tmp/r1-cpu.lock bash -c '
    printf "%-5s %-6s %7s %7s %12s %12s %9s %6s\n" round build clients "tok/s" ttft_p50_ms ttft_p99_ms completed errors
    for r in $(seq "$3"); do
        for clients in 8 32; do
            order="before after"
            [ $((r % 2)) -eq 0 ] && order="after before"
            for which in $order; do
                bin=$1
                [ "$which" = after ] && bin=$2
                printf "%-5s %-6s " "$r" "$which"
                one "$bin" "$clients"
            done
        done
    done
' _ "$BEFORE" "$AFTER" "$ROUNDS"
