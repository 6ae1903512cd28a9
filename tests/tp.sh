#!/usr/bin/env bash
# Tensor parallelism over MPI: greedy ids of `mpirun -np 2|3 r1infer run`
# equal one process's on the fixtures (GQA, MHA, tied, llama, f16, bf16)
# and on the default model (3 KV heads: 2 ranks split them 2|1); a cut the
# model does not allow is refused with a clear message; a rank killed in
# the middle of a generation ends the job with an error, not a hang; two
# ranks in two network namespaces (TCP over a veth pair) agree too.
# Needs mpirun and an MPI build (openmpi-bin libopenmpi-dev: both from
# scripts/install-deps.sh; the Makefile builds with MPI when mpicc is there).
# Last line: "tp: P passed, F failed".
set -u
BIN=${R1_BIN:-build/r1infer}
MODEL=${R1_TEST_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
FIX=tests/fixtures
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }

if ! command -v mpirun >/dev/null; then
    echo "tp: mpirun is not installed: run scripts/install-deps.sh (openmpi-bin libopenmpi-dev)"
    echo "tp: 0 passed, 1 failed"
    exit 1
fi
# every rank on this machine, one thread each; as root in CI containers
MPI=(mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader,tcp)

# greedy ids of `run` with N ranks (N = 0: without mpirun at all)
ids() {
    local n=$1 m=$2 prompt=$3 steps=$4
    local cmd=("$BIN" run -m "$m" --prompt-ids "$prompt" -n "$steps" --temp 0 --print-ids --ignore-eos --threads 1)
    if [ "$n" = 0 ]; then timeout 120 "${cmd[@]}" 2>"$T/err"
    else timeout 120 "${MPI[@]}" -np "$n" "${cmd[@]}" 2>"$T/err"; fi
}

# the build must be an MPI build: a plain one refuses to be a rank, saying so
out=$(ids 2 "$FIX/gqa2_f32" 1,2,3 2)
if grep -q "built without MPI" "$T/err"; then
    echo "tp: $BIN was built without MPI: rebuild with make MPI=1 (needs mpicc: scripts/install-deps.sh)"
    echo "tp: 0 passed, 1 failed"
    exit 1
fi

prompt_of() { python3 -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['prompt_ids'])))" "$1"; }

for f in gqa2_f32 gqa4_tied_f32 llama_gqa_f32 mha_bf16 f16 trained_f32; do
    d=$FIX/$f
    [ -f "$d/config.json" ] || { bad "$f: fixture missing"; continue; }
    p=$(prompt_of "$d/expected.json")
    one=$(ids 0 "$d" "$p" 16)
    check "$f: one process gives 16 ids" test "$(echo "$one" | tr -cd , | wc -c)" -eq 15
    kv=$(python3 -c "import json,sys; c=json.load(open(sys.argv[1])); print(c.get('num_key_value_heads', c['num_attention_heads']))" "$d/config.json")
    for n in 2 3; do
        [ "$n" -le "$kv" ] || continue
        got=$(ids "$n" "$d" "$p" 16)
        if [ "$got" = "$one" ]; then ok "$f: $n ranks give one process's greedy ids"
        else bad "$f: $n ranks: $got, one process: $one"; sed 's/^/    /' "$T/err" | tail -5; fi
    done
done

# more ranks than KV heads: refused with what to do, non-zero exit, no hang
ids 3 "$FIX/gqa2_f32" 1,2,3 2 >/dev/null
rc=$?
check "3 ranks on 2 KV heads: refused, saying how many ranks fit" grep -q "run at most 2 ranks" "$T/err"
check "...with a non-zero exit (not a timeout)" test $rc -ne 0 -a $rc -ne 124

# the default model: 9 Q heads in 3 KV groups, Q4_1, tied; 2 ranks hold 2|1 groups
if [ -f "$MODEL" ]; then
    p=1,9690,28,1017,346,1056,30,1423,8423
    one=$(ids 0 "$MODEL" "$p" 32)
    check "default model: one process gives 32 ids" test "$(echo "$one" | tr -cd , | wc -c)" -eq 31
    for n in 2 3; do
        got=$(ids "$n" "$MODEL" "$p" 32)
        if [ "$got" = "$one" ]; then ok "default model: $n ranks give one process's greedy ids"
        else bad "default model: $n ranks: $got, one process: $one"; sed 's/^/    /' "$T/err" | tail -5; fi
    done

    # kill rank 1 in the middle of a long generation: the job ends with an error
    "${MPI[@]}" -np 2 "$BIN" run -m "$MODEL" --prompt-ids "$p" -n 100000 --ctx 4096 --ignore-eos --temp 0 --threads 1 \
        >/dev/null 2>"$T/kill.err" &
    job=$!
    victim=""
    for _ in $(seq 1 100); do # up to 20 s for the ranks to start
        for c in $(pgrep -P $job 2>/dev/null); do
            tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1 && victim=$c
        done
        [ -n "$victim" ] && break
        sleep 0.2
    done
    sleep 2 # into the generation
    [ -n "$victim" ] && kill -9 "$victim"
    rc=0
    for _ in $(seq 1 150); do # 30 s: more is a hang
        kill -0 $job 2>/dev/null || break
        sleep 0.2
    done
    if kill -0 $job 2>/dev/null; then
        kill -9 $job; wait $job 2>/dev/null; rc=124
    else
        wait $job; rc=$?
    fi
    check "a killed rank (pid ${victim:-none found}) ends the job within 30 s" test -n "$victim" -a $rc -ne 124
    check "...with a non-zero exit ($rc)" test $rc -ne 0 -a $rc -ne 124
else
    bad "default model $MODEL missing (scripts/get-model.sh)"
fi

# greedy decode through r1_session_forward_argmax: each rank's best of its
# vocabulary rows, then one all-reduce (MAXLOC) instead of gathering the
# logits; the ids must be one process's (tp_bench prints their hash)
TPB=${R1_BUILD:-build}/tools/tp_bench
if [ -x "$TPB" ]; then
    tpb=(--synthetic tiny --dtype q8_0 --threads 1 --tokens 64 --prompt 6)
    h1=$(timeout 120 "$TPB" "${tpb[@]}" 2>&1 | grep -o 'ids hash [0-9a-f]*')
    h2=$(timeout 120 "${MPI[@]}" -np 2 "$TPB" "${tpb[@]}" 2>&1 | grep -o 'ids hash [0-9a-f]*')
    echo "     tp_bench tiny q8_0, 64 tokens: one process: ${h1:-none}, 2 ranks: ${h2:-none}"
    check "distributed argmax: 2 ranks decode one process's greedy ids (tp_bench)" test -n "$h1" -a "$h1" = "$h2"
else
    bad "$TPB missing (make tests builds it)"
fi

# two ranks in two network namespaces joined by a veth pair, as the test's
# own hosts: mpirun runs in the first, starts the second's daemon through an
# "ssh" that is `ip netns exec`, and the all-reduces cross the veth by TCP
ns_a=r1tp$$a ns_b=r1tp$$b net=10.231.$(($$ % 250)) # this run's names only
cleanup_ns() { ip netns del "$ns_a" 2>/dev/null; ip netns del "$ns_b" 2>/dev/null; }
trap 'cleanup_ns; rm -rf "$T"' EXIT
if ip netns add "$ns_a" && ip netns add "$ns_b" && ip link add "${ns_a}0" type veth peer name "${ns_b}0" &&
    ip link set "${ns_a}0" netns "$ns_a" && ip link set "${ns_b}0" netns "$ns_b" &&
    ip -n "$ns_a" addr add "$net.1/24" dev "${ns_a}0" && ip -n "$ns_b" addr add "$net.2/24" dev "${ns_b}0" &&
    ip -n "$ns_a" link set "${ns_a}0" up && ip -n "$ns_b" link set "${ns_b}0" up &&
    ip -n "$ns_a" link set lo up && ip -n "$ns_b" link set lo up; then
    cat >"$T/agent.sh" <<AGENT
#!/bin/sh
# mpirun's plm_rsh_agent: "ssh HOST CMD" into the namespace that owns HOST
case \$1 in $net.1) ns=$ns_a ;; $net.2) ns=$ns_b ;; *) echo "agent: no namespace for \$1" >&2; exit 1 ;; esac
shift
exec ip netns exec "\$ns" sh -c "\$*"
AGENT
    chmod +x "$T/agent.sh"
    printf '%s slots=1\n%s slots=1\n' "$net.1" "$net.2" >"$T/hosts"
    d=$FIX/gqa2_f32
    p=$(prompt_of "$d/expected.json")
    one=$(ids 0 "$d" "$p" 16)
    rx0=$(ip -n "$ns_b" -s link show "${ns_b}0" | awk 'NR == 4 {print $1}')
    got=$(timeout 120 ip netns exec "$ns_a" mpirun --allow-run-as-root --oversubscribe -np 2 --hostfile "$T/hosts" \
        --mca plm_rsh_agent "$T/agent.sh" --mca btl self,tcp --mca btl_tcp_if_include "$net.0/24" \
        --mca oob_tcp_if_include "$net.0/24" "$BIN" run -m "$d" --prompt-ids "$p" -n 16 --temp 0 --print-ids \
        --ignore-eos --threads 1 2>"$T/ns.err")
    rx1=$(ip -n "$ns_b" -s link show "${ns_b}0" | awk 'NR == 4 {print $1}')
    if [ -n "$got" ] && [ "$got" = "$one" ]; then ok "two namespaces over a veth pair: one process's greedy ids"
    else bad "two namespaces: $got, one process: $one"; sed 's/^/    /' "$T/ns.err" | tail -5; fi
    check "...and the veth carried them ($((rx1 - rx0)) bytes into the second namespace)" \
        test $((rx1 - rx0)) -gt 10000
else
    bad "cannot make two network namespaces and a veth pair (ip netns needs root and CAP_SYS_ADMIN)"
fi
cleanup_ns

echo "tp: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
