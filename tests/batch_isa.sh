#!/usr/bin/env bash
# test_batch (continuous batching: a sequence gives the same greedy tokens
# alone and batched with others) under every cpu kernel set this CPU runs,
# chosen with R1_CPU_ISA as a user would; the plain run covers the best set.
# Last line: "batch_isa: P passed, F failed".
set -u
B=${R1_BUILD:-build}
BIN=${R1_BIN:-$B/r1infer}
TB="$B/tests/test_batch"
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
if [ ! -x "$TB" ] || [ ! -x "$BIN" ]; then
    bad "needs $TB and $BIN (make tests)"
    echo "batch_isa: $pass passed, $fail failed"
    exit 1
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$BIN" synth --config tiny -o "$T/tiny" --seed 5 2>/dev/null
sets=$(R1_CPU_ISA=nosuch "$BIN" run -m "$T/tiny" --prompt-ids 1 -n 1 2>&1 >/dev/null |
    sed -n 's/.*this build has: *\([^)]*\)).*/\1/p' | head -n 1)
[ -n "$sets" ] || bad "the build names its cpu kernel sets on a bad R1_CPU_ISA"
for isa in $sets; do
    if R1_CPU_ISA=$isa "$BIN" run -m "$T/tiny" --prompt-ids 1 -n 1 2>&1 >/dev/null |
        grep -q "cannot run the '$isa' kernels"; then
        echo "skip $isa: this CPU cannot run it"
        continue
    fi
    out=$(R1_CPU_ISA=$isa "$TB" 2>&1)
    rc=$?
    line=$(grep -E '^test_batch: [0-9]+ passed, [0-9]+ failed$' <<<"$out" | tail -n 1)
    if [ "$rc" -eq 0 ] && grep -q ', 0 failed$' <<<"$line"; then
        ok "R1_CPU_ISA=$isa test_batch ($line)"
    else
        grep -E 'FAIL|rror' <<<"$out" | head -n 20
        bad "R1_CPU_ISA=$isa test_batch (exit $rc: ${line:-no summary})"
    fi
done
echo "batch_isa: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
