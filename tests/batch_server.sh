#!/usr/bin/env bash
# batch_server.sh - continuous batching in `r1infer serve`: a tiny synthetic
# model, --parallel 4, --batch-tokens 16 (prompts prefill in chunks between
# decode rows), --queue 16; runs tests/batch_server_test.py (200 concurrent
# clients among others) and checks the server survived and exits cleanly.
# R1_BIN may be an ASan build (make SAN=1): the server's exit then reports
# leaks. Steps of at most 16 rows run the cpu decode form, bit for bit one
# decode step per row, so "concurrent == alone" holds exactly, whatever rows
# the engine happens to put together. Last line: "batch_server: P passed, F failed".
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
NAME=batch_server STOP_GRACE=0 # the clean shutdown is checked below; at exit, SIGKILL
. "$HERE/server_common.sh"

"$BIN" synth --config tiny -o "$TMP/tiny" >"$TMP/synth.log" 2>&1 || die "synth failed: $(tail -n 3 "$TMP/synth.log")"
start_server 300 -m "$TMP/tiny" --parallel 4 --batch-tokens 16 --queue 16 --ctx 1024 --max-conns 400 --seed 1 -t 2

timeout 300 python3 "$HERE/batch_server_test.py" --base "http://127.0.0.1:$PORT" --clients "${R1_CLIENTS:-200}"
rc=$?
server_alive || rc=1
# a clean shutdown; under ASan this is where leaks are reported
kill -TERM "$PID" 2>/dev/null
for _ in $(seq 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$PID" 2>/dev/null; then
    echo "batch_server.sh: the server did not exit on SIGTERM" >&2
    rc=1
else
    wait "$PID"
    st=$?
    PID=
    if [ "$st" -ne 0 ] || grep -q "ERROR: \(Leak\|Address\)Sanitizer" "$TMP/log"; then
        echo "batch_server.sh: the server exited with $st" >&2
        grep -A 12 "Sanitizer" "$TMP/log" | head -n 40 >&2
        echo "batch_server: 0 passed, 1 failed"
        exit 1
    fi
fi
exit $rc
