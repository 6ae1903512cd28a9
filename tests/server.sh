#!/usr/bin/env bash
# server.sh - end-to-end test of `r1infer serve`: synthesizes a tiny model in
# a temp dir, starts the server on a free loopback port, waits for /health,
# runs tests/server_test.py (openai client + raw HTTP) and stops the server.
# Last line: "server: P passed, F failed".
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
NAME=server
. "$HERE/server_common.sh"

python3 -c 'import openai' 2>/dev/null || die "the python package 'openai' is missing (pip install openai)"
"$BIN" synth --config tiny -o "$TMP/tiny" >"$TMP/synth.log" 2>&1 || die "synth failed: $(tail -n 3 "$TMP/synth.log")"
# --ctx 512 makes "prompt longer than the context" cheap; --timeout 2 makes the slow-client check quick
start_server 200 -m "$TMP/tiny" --parallel 2 --queue 2 --ctx 512 --api-key test-key \
    --max-body 65536 --timeout 2 --seed 1
wait_health

timeout 120 python3 "$HERE/server_test.py" --base "http://127.0.0.1:$PORT" --key test-key
rc=$?
server_alive || rc=1
exit $rc
