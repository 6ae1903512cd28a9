#!/usr/bin/env bash
# server.sh - end-to-end test of `r1infer serve`: synthesizes a tiny model in
# a temp dir, starts the server on a free loopback port, waits for /health,
# runs tests/server_test.py (openai client + raw HTTP) and stops the server.
# Last line: "server: P passed, F failed".
set -u
BIN=${R1_BIN:-build/r1infer}
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d)
PID=
cleanup() {
    if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
        kill -TERM "$PID" 2>/dev/null
        for _ in $(seq 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$PID" 2>/dev/null
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT
die() { echo "server.sh: $*" >&2; [ -f "$TMP/log" ] && tail -n 20 "$TMP/log" >&2; echo "server: 0 passed, 1 failed"; exit 1; }

python3 -c 'import openai' 2>/dev/null || die "the python package 'openai' is missing (pip install openai)"
"$BIN" synth --config tiny -o "$TMP/tiny" >"$TMP/synth.log" 2>&1 || die "synth failed: $(tail -n 3 "$TMP/synth.log")"
# --ctx 512 makes "prompt longer than the context" cheap; --timeout 2 makes the slow-client check quick
"$BIN" serve -m "$TMP/tiny" --host 127.0.0.1 --port 0 --parallel 2 --queue 2 --ctx 512 --api-key test-key \
    --max-body 65536 --timeout 2 --seed 1 >"$TMP/log" 2>&1 &
PID=$!
PORT=
for _ in $(seq 200); do
    PORT=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$TMP/log" | head -n 1)
    [ -n "$PORT" ] && break
    kill -0 "$PID" 2>/dev/null || die "the server exited at start"
    sleep 0.1
done
[ -n "$PORT" ] || die "the server did not start listening"
for _ in $(seq 100); do
    curl -sf --max-time 2 "http://127.0.0.1:$PORT/health" >/dev/null && break
    sleep 0.1
done
curl -sf --max-time 2 "http://127.0.0.1:$PORT/health" >/dev/null || die "/health did not answer"

timeout 120 python3 "$HERE/server_test.py" --base "http://127.0.0.1:$PORT" --key test-key
rc=$?
kill -0 "$PID" 2>/dev/null || { echo "server.sh: the server died during the tests" >&2; tail -n 20 "$TMP/log" >&2; rc=1; }
exit $rc
