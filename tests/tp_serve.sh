#!/usr/bin/env bash
# tp_serve.sh - `r1infer serve`, `chat` and `bench` under mpirun (rank 0
# serves, the other ranks follow its steps; chat's lines go to every rank;
# bench takes the same steps on every rank): greedy chat and completion answers, streamed and
# not, from 4 clients at once, equal a one-process server's with 2 and 3
# ranks on the default model (3 KV heads: 2|1 and 1|1|1) and with 2 ranks
# in two network namespaces (TCP over a veth pair) on a tiny random model;
# SIGTERM ends every rank; a rank killed during a streamed answer ends the
# client's stream within 10 s and the job with an error. Last line: "tp_serve: P passed, F failed".
set -u
MODEL=${R1_TEST_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
HERE=$(cd "$(dirname "$0")" && pwd)
NAME=tp_serve
STOP_GRACE=100
. "$HERE/server_common.sh"
command -v mpirun >/dev/null || die "mpirun is not installed: run scripts/install-deps.sh (openmpi-bin)"
[ -f "$MODEL" ] || die "the default model $MODEL is absent (scripts/get-model.sh)"
MPI=(mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader,tcp)
SARGS=(--parallel 4 --ctx 1024 --threads 1 --seed 1)
pass=0 fail=0
count() { # the python test's result line
    local line; line=$(grep -E '^tp_serve: [0-9]+ passed, [0-9]+ failed$' "$1" | tail -n 1)
    if [ -n "$line" ]; then
        pass=$((pass + $(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$line")))
        fail=$((fail + $(sed -E 's/.*, ([0-9]+) failed/\1/' <<<"$line")))
    else fail=$((fail + 1)); echo "FAIL $2: no result line"; tail -n 20 "$1"; fi
}
check() { local name=$1; shift; if "$@"; then pass=$((pass + 1)); echo "ok   $name"; else fail=$((fail + 1)); echo "FAIL $name"; fi; }

# servers under mpirun: PIDS and PORTS by label; each logs to $TMP/LABEL.log
declare -A PIDS PORTS
start_ranks() { # label, model, command prefix (mpirun ... -np N, ip netns exec ...)...
    local label=$1 model=$2; shift 2
    "$@" "$BIN" serve -m "$model" "${SARGS[@]}" --host 127.0.0.1 --port 0 >"$TMP/$label.log" 2>&1 &
    PIDS[$label]=$!
    for _ in $(seq 300); do
        PORTS[$label]=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$TMP/$label.log" | head -n 1)
        [ -n "${PORTS[$label]}" ] && return 0
        kill -0 "${PIDS[$label]}" 2>/dev/null || break
        sleep 0.1
    done
    echo "FAIL $label: the server did not start"; tail -n 10 "$TMP/$label.log"; fail=$((fail + 1)); return 1
}
stop_ranks() { # label [rank0]: SIGTERM to mpirun (or the server), which passes it on, or to rank 0 itself
    # (rank0: it stops serving and sends the others home: every rank exits 0); the job must end within 10 s
    local p=${PIDS[$1]} r0="" c
    if [ "${2:-}" = rank0 ]; then
        for c in $(pgrep -P "$p" 2>/dev/null); do
            tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=0 && r0=$c
        done
        kill -TERM "${r0:-$p}" 2>/dev/null
    else kill -TERM "$p" 2>/dev/null; fi
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    check "$1: SIGTERM${r0:+ to rank 0} ends every rank within 10 s" bash -c "! kill -0 $p 2>/dev/null"
    kill -KILL "$p" 2>/dev/null
    wait "$p" 2>/dev/null
    local rc=$?
    [ -n "$r0" ] && check "...and every rank exits 0 (mpirun's exit $rc)" test "$rc" -eq 0
}

# the default model: one process, 2 and 3 ranks on this machine
start_server 300 -m "$MODEL" "${SARGS[@]}"
wait_health
ranks=()
for n in 2 3; do
    start_ranks "np$n" "$MODEL" "${MPI[@]}" -np "$n" && ranks+=(--ranks "$n ranks=http://127.0.0.1:${PORTS[np$n]}")
done
timeout 600 python3 "$HERE/tp_serve_test.py" --one "http://127.0.0.1:$PORT" "${ranks[@]}" >"$TMP/py.log" 2>&1
grep -v '^tp_serve: ' "$TMP/py.log"
count "$TMP/py.log" "default model, 2 and 3 ranks"
for n in 2 3; do [ -n "${PIDS[np$n]:-}" ] && stop_ranks "np$n" rank0; done
stop_server 50

# the tiny random model (R1 template), one process and 2 ranks in two network namespaces joined by a
# veth pair, as two hosts: mpirun in the first starts the second's daemon through an "ssh" that is
# `ip netns exec`, the collectives cross the veth by TCP; the clients run in the first namespace
"$BIN" synth --config tiny -o "$TMP/tiny" >"$TMP/synth.log" 2>&1 || die "synth failed: $(tail -n 3 "$TMP/synth.log")"
ns_a=r1ts$$a ns_b=r1ts$$b net=10.232.$(($$ % 250))
cleanup_ns() { ip netns del "$ns_a" 2>/dev/null; ip netns del "$ns_b" 2>/dev/null; }
trap 'cleanup_ns; cleanup' EXIT
if ip netns add "$ns_a" && ip netns add "$ns_b" && ip link add "${ns_a}0" type veth peer name "${ns_b}0" &&
    ip link set "${ns_a}0" netns "$ns_a" && ip link set "${ns_b}0" netns "$ns_b" &&
    ip -n "$ns_a" addr add "$net.1/24" dev "${ns_a}0" && ip -n "$ns_b" addr add "$net.2/24" dev "${ns_b}0" &&
    ip -n "$ns_a" link set "${ns_a}0" up && ip -n "$ns_b" link set "${ns_b}0" up &&
    ip -n "$ns_a" link set lo up && ip -n "$ns_b" link set lo up; then
    cat >"$TMP/agent.sh" <<AGENT
#!/bin/sh
# mpirun's plm_rsh_agent: "ssh HOST CMD" into the namespace that owns HOST
case \$1 in $net.1) ns=$ns_a ;; $net.2) ns=$ns_b ;; *) echo "agent: no namespace for \$1" >&2; exit 1 ;; esac
shift
exec ip netns exec "\$ns" sh -c "\$*"
AGENT
    chmod +x "$TMP/agent.sh"
    printf '%s slots=1\n%s slots=1\n' "$net.1" "$net.2" >"$TMP/hosts"
    rx0=$(ip -n "$ns_b" -s link show "${ns_b}0" | awk 'NR == 4 {print $1}')
    start_ranks tiny1 "$TMP/tiny" ip netns exec "$ns_a"
    start_ranks tinyns "$TMP/tiny" ip netns exec "$ns_a" mpirun --allow-run-as-root --oversubscribe -np 2 \
        --hostfile "$TMP/hosts" --mca plm_rsh_agent "$TMP/agent.sh" --mca btl self,tcp \
        --mca btl_tcp_if_include "$net.0/24" --mca oob_tcp_if_include "$net.0/24"
    if [ -n "${PORTS[tiny1]:-}" ] && [ -n "${PORTS[tinyns]:-}" ]; then
        timeout 600 ip netns exec "$ns_a" python3 "$HERE/tp_serve_test.py" --one "http://127.0.0.1:${PORTS[tiny1]}" \
            --ranks "tiny, 2 ranks in two namespaces=http://127.0.0.1:${PORTS[tinyns]}" >"$TMP/py.log" 2>&1
        grep -v '^tp_serve: ' "$TMP/py.log"
        count "$TMP/py.log" "tiny model, two namespaces"
        rx1=$(ip -n "$ns_b" -s link show "${ns_b}0" | awk 'NR == 4 {print $1}')
        check "...and the veth carried the steps ($((rx1 - rx0)) bytes into the second namespace)" \
            test $((rx1 - rx0)) -gt 100000
    fi
    for l in tiny1 tinyns; do [ -n "${PIDS[$l]:-}" ] && stop_ranks "$l"; done
else
    fail=$((fail + 1)); echo "FAIL cannot make two network namespaces and a veth pair (needs root and CAP_SYS_ADMIN)"
fi
cleanup_ns

# chat: rank 0 reads the lines, every rank gets them; the answers are one process's
CH=(chat -m "$MODEL" --temp 0 -n 24 --threads 1)
printf 'What is 2+2?\nAnd 3+3?\n' | timeout 120 "$BIN" "${CH[@]}" >"$TMP/chat1" 2>/dev/null
printf 'What is 2+2?\nAnd 3+3?\n' | timeout 120 "${MPI[@]}" -np 2 "$BIN" "${CH[@]}" >"$TMP/chat2" 2>"$TMP/chat2.err"
check "chat, 2 ranks: two greedy answers, one process's ($(wc -l <"$TMP/chat2") lines)" \
    bash -c "[ -s '$TMP/chat1' ] && cmp -s '$TMP/chat1' '$TMP/chat2'"
# bench --batch: every rank takes the same steps itself
timeout 300 "${MPI[@]}" -np 2 "$BIN" bench --synthetic tiny --batch 1,4 --threads 1 >"$TMP/bench" 2>&1
check "bench --batch 1,4, 2 ranks: both rows measured" \
    bash -c "grep -Eq '^ +0 +4 +[0-9.]+ +[0-9.]+' '$TMP/bench'"

# a rank killed while rank 0 streams an answer: the stream ends within 10 s, the job with an error
if start_ranks kill "$MODEL" "${MPI[@]}" -np 2; then
    victim=""
    for c in $(pgrep -P "${PIDS[kill]}" 2>/dev/null); do
        tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1 && victim=$c
    done
    curl -sN --max-time 60 "http://127.0.0.1:${PORTS[kill]}/v1/chat/completions" -d '{"messages":[{"role":"user",
        "content":"Tell me a long story."}],"max_tokens":4000,"temperature":0,"stream":true}' >"$TMP/kill.out" 2>&1 &
    client=$!
    sleep 2
    [ -n "$victim" ] && kill -9 "$victim"
    t0=$SECONDS
    for _ in $(seq 100); do kill -0 $client 2>/dev/null || break; sleep 0.1; done
    check "a killed rank (pid ${victim:-none found}): the client's stream ends within 10 s ($((SECONDS - t0)) s)" \
        bash -c "[ -n '$victim' ] && ! kill -0 $client 2>/dev/null"
    check "...after some tokens ($(grep -c '^data: ' "$TMP/kill.out") events)" test "$(grep -c '^data: ' "$TMP/kill.out")" -gt 1
    kill $client 2>/dev/null
    for _ in $(seq 100); do kill -0 "${PIDS[kill]}" 2>/dev/null || break; sleep 0.1; done
    wait "${PIDS[kill]}" 2>/dev/null
    rc=$?
    check "...and the job ends with an error (exit $rc)" test "$rc" -ne 0
    check "...saying which rank went (rank 0's log: $(grep -m1 -o 'rank [0-9].*' "$TMP/kill.log" | head -c 160))" \
        grep -q "rank 1" "$TMP/kill.log"
fi
echo "tp_serve: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
