#!/usr/bin/env bash
# batch_loadtest.sh - tools/loadtest.py against two r1infer builds in one run
# (e.g. before and after continuous batching), 8 and 32 concurrent streaming
# clients, each server started with --parallel equal to the clients.
#   tools/batch_loadtest.sh BEFORE_BIN AFTER_BIN [MODEL] [THREADS]
# Every (build, clients) run holds the exclusive CPU lock (/tmp/r1-cpu.lock)
# only while it runs. Prints one table row per run:
#   build clients parallel tok/s ttft_p50_ms ttft_p99_ms completed errors
set -u
BEFORE=$1 AFTER=$2 MODEL=${3:-models/SmolLM2-135M-Instruct.Q4_1.gguf} THREADS=${4:-2}
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
printf "%-7s %7s %8s %9s %12s %12s %9s %6s\n" build clients parallel "tok/s" "ttft_p50_ms" "ttft_p99_ms" completed errors
for clients in 8 32; do
    for which in before after; do
        bin=$BEFORE
        [ "$which" = after ] && bin=$AFTER
        flock -x /tmp/r1-cpu.lock bash -c '
            bin=$1 model=$2 clients=$3 threads=$4 tmp=$5 here=$6
            "$bin" serve -m "$model" --host 127.0.0.1 --port 0 --parallel "$clients" --queue 256 --ctx 512 \
                -t "$threads" --max-conns 512 >"$tmp/log" 2>&1 &
            pid=$!
            port=
            for _ in $(seq 300); do
                port=$(sed -n "s|.*listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p" "$tmp/log" | head -n 1)
                [ -n "$port" ] && break
                sleep 0.1
            done
            timeout 170 python3 "$here/loadtest.py" --base "http://127.0.0.1:$port" --clients "$clients" \
                --requests $((clients * 2)) --max-tokens 32 --temperature 0 --disconnect-every 0 --duration 120 \
                >"$tmp/out" 2>&1
            kill -TERM "$pid"; wait "$pid"
        ' _ "$bin" "$MODEL" "$clients" "$THREADS" "$TMP" "$HERE"
        out=$(cat "$TMP/out")
        tps=$(sed -n 's/.* requests\/s, \([0-9.]*\) streamed events\/s.*/\1/p' <<<"$out")
        p50=$(sed -n 's/.*time to first token: p50 \([0-9]*\) ms.*/\1/p' <<<"$out")
        p99=$(sed -n 's/.*time to first token: .* p99 \([0-9]*\) ms.*/\1/p' <<<"$out")
        comp=$(sed -n 's/^completed \([0-9]*\),.*/\1/p' <<<"$out")
        errs=$(sed -n 's/.*errors \([0-9]*\).*/\1/p' <<<"$out" | head -n 1)
        printf "%-7s %7s %8s %9s %12s %12s %9s %6s\n" "$which" "$clients" "$clients" "${tps:-?}" "${p50:-?}" \
            "${p99:-?}" "${comp:-?}" "${errs:-?}"
        [ -n "$tps" ] || sed 's/^/    /' <<<"$out" | tail -n 8
    done
done
