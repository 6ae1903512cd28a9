#!/usr/bin/env bash
# guard.sh - `r1infer serve` against slow clients: 300 connections that
# trickle their headers (from 127.0.0.2) while a normal client (127.0.0.1)
# must get its answer within 2 s; a trickled request is cut off at
# --request-deadline; the per-address connection limit; the access log.
# Last line: "guard: P passed, F failed".
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
NAME=guard
STOP_GRACE=5
. "$HERE/server_common.sh"
"$BIN" synth --config tiny -o "$TMP/tiny" >"$TMP/synth.log" 2>&1 || die "synth failed: $(tail -n 3 "$TMP/synth.log")"
start_server 200 -m "$TMP/tiny" --parallel 1 --ctx 256 --seed 1 --max-conns 400 --max-conns-per-ip 32 \
    --request-deadline 2 --timeout 30
wait_health
timeout 60 python3 "$HERE/guard_test.py" --base "http://127.0.0.1:$PORT" --log "$TMP/log"
rc=$?
server_alive || rc=1
exit $rc
