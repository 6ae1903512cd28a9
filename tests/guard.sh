#!/usr/bin/env bash
# guard.sh - `r1infer serve` against slow clients: 300 connections that
# trickle their headers (from 127.0.0.2) while a normal client (127.0.0.1)
# must get its answer within 2 s; a trickled request is cut off at
# --request-deadline; the per-address connection limit; the access log;
# malformed HTTP answered with JSON; NaN logits fail the request with a message;
# more trickling connections (3 addresses) than --max-conns cannot keep a
# fourth address out.
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
timeout 60 python3 "$HERE/guard_test.py" --base "http://127.0.0.1:$PORT" --log "$TMP/log" >"$TMP/out" 2>&1
rc=$?
server_alive || rc=1
grep -v '^guard: ' "$TMP/out"
line=$(grep -E '^guard: [0-9]+ passed, [0-9]+ failed$' "$TMP/out" | tail -n 1)
P=$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$line"); F=$(sed -E 's/.*, ([0-9]+) failed/\1/' <<<"$line")
[ -n "$line" ] || { P=0; F=1; }
[ $rc -eq 0 ] || [ "$F" -gt 0 ] || F=1
stop_server 20

# a model whose final norm is NaN: the request fails with a message, the server lives on
cp -r "$TMP/tiny" "$TMP/nan"
python3 - "$TMP/nan/model.safetensors" <<'PY' || die "could not write the NaN model"
import json, struct, sys
with open(sys.argv[1], "r+b") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    t = json.loads(f.read(n))["model.norm.weight"]
    a, b = t["data_offsets"]
    f.seek(8 + n + a)
    f.write(b"\xc0\x7f" * ((b - a) // 2))  # bf16 NaN
PY
start_server 200 -m "$TMP/nan" --ctx 256 --seed 1
wait_health
out=$(curl -s --max-time 20 "http://127.0.0.1:$PORT/v1/completions" -d '{"prompt": "hi", "max_tokens": 4}')
if grep -q '"type":"server_error"' <<<"$out" && grep -q 'NaN or Inf' <<<"$out"; then P=$((P + 1)); else
    F=$((F + 1)); echo "FAIL NaN logits: $out" >&2; fi
curl -sf --max-time 5 "http://127.0.0.1:$PORT/health" >/dev/null && P=$((P + 1)) || {
    F=$((F + 1)); echo "FAIL the server does not answer after NaN logits" >&2; }
# more connections opening than --max-conns: the oldest of the busiest address makes room
start_server 200 -m "$TMP/tiny" --parallel 1 --ctx 256 --seed 1 --max-conns 64 --max-conns-per-ip 0 \
    --request-deadline 20
wait_health
timeout 60 python3 "$HERE/guard_test.py" --base "http://127.0.0.1:$PORT" --evict >"$TMP/out2" 2>&1
rc=$?
server_alive || rc=1
grep -v '^guard: ' "$TMP/out2"
line=$(grep -E '^guard: [0-9]+ passed, [0-9]+ failed$' "$TMP/out2" | tail -n 1)
if [ -n "$line" ]; then
    P=$((P + $(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$line"))); F=$((F + $(sed -E 's/.*, ([0-9]+) failed/\1/' <<<"$line")))
else F=$((F + 1)); fi
[ $rc -eq 0 ] || F=$((F + 1))
stop_server 20
echo "guard: $P passed, $F failed"
[ "$F" -eq 0 ]
