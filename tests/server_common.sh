# server_common.sh - sourced by the server tests (server.sh, batch_server.sh,
# logprobs.sh): the binary, a temp dir removed at exit with the server
# stopped, die, starting `r1infer serve` on a free loopback port and waiting
# for it. Set NAME (the name of the test's last line, "NAME: P passed, F
# failed") before sourcing, and STOP_GRACE (tenths of a second between
# SIGTERM and SIGKILL at exit; 0: SIGKILL at once; default 50) if need be.
# Defines BIN, TMP, PID, PORT and the functions below.
BIN=${R1_BIN:-build/r1infer}
TMP=$(mktemp -d)
PID=
PORT=

# stop_server [GRACE]: SIGTERM, then SIGKILL after GRACE tenths of a second
stop_server() {
    local grace=${1:-50}
    [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null || return 0
    if [ "$grace" -gt 0 ]; then
        kill -TERM "$PID" 2>/dev/null
        for _ in $(seq "$grace"); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
    fi
    kill -KILL "$PID" 2>/dev/null
}
cleanup() {
    stop_server "${STOP_GRACE:-50}"
    rm -rf "$TMP"
}
trap cleanup EXIT
die() {
    echo "$NAME.sh: $*" >&2
    [ -f "$TMP/log" ] && tail -n 20 "$TMP/log" >&2
    echo "$NAME: 0 passed, 1 failed"
    exit 1
}

# start_server TRIES ARGS...: `$BIN serve ARGS` on 127.0.0.1 and a free
# port in the background, its output in $TMP/log; sets PID, and PORT once
# it says it listens (within TRIES tenths of a second), or dies.
start_server() {
    local tries=$1
    shift
    "$BIN" serve "$@" --host 127.0.0.1 --port 0 >"$TMP/log" 2>&1 &
    PID=$!
    PORT=
    for _ in $(seq "$tries"); do
        PORT=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$TMP/log" | head -n 1)
        [ -n "$PORT" ] && break
        kill -0 "$PID" 2>/dev/null || die "the server exited at start"
        sleep 0.1
    done
    [ -n "$PORT" ] || die "the server did not start listening"
}

# wait_health: until GET /health answers (10 s), or dies
wait_health() {
    for _ in $(seq 100); do
        curl -sf --max-time 2 "http://127.0.0.1:$PORT/health" >/dev/null && return 0
        sleep 0.1
    done
    curl -sf --max-time 2 "http://127.0.0.1:$PORT/health" >/dev/null || die "/health did not answer"
}

# server_alive: 0 while the server runs; else says so, shows its log's end, 1
server_alive() {
    kill -0 "$PID" 2>/dev/null && return 0
    echo "$NAME.sh: the server died during the tests" >&2
    tail -n 20 "$TMP/log" >&2
    return 1
}
