#!/usr/bin/env bash
# The Hugging Face fixtures (test_fixtures: logits, greedy ids, chunked
# prefill, the quantized conversions) once more under every other cpu kernel
# set this CPU runs, chosen the way a user would, with R1_CPU_ISA: the plain
# run of test_fixtures covers only the best set. The sets come from the
# build's own list (best first); one this CPU cannot run is named and left
# out, as test_kernels does. Last line: "fixtures_isa: P passed, F failed".
set -u
B=${R1_BUILD:-build}
BIN=${R1_BIN:-$B/r1infer}
FX="$B/tests/test_fixtures"
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }

if [ ! -x "$FX" ] || [ ! -x "$BIN" ]; then
    bad "needs $FX and $BIN (make tests)"
    echo "fixtures_isa: $pass passed, $fail failed"
    exit 1
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$BIN" synth --config tiny -o "$T/tiny" --seed 5 2>/dev/null # the backend starts after a model loads
# "R1_CPU_ISA=nosuch: no such kernel set (this build has: avx512 avx2 generic)"
sets=$(R1_CPU_ISA=nosuch "$BIN" run -m "$T/tiny" --prompt-ids 1 -n 1 2>&1 >/dev/null |
    sed -n 's/.*this build has: *\([^)]*\)).*/\1/p' | head -n 1)
if [ -z "$sets" ]; then
    bad "the build names its cpu kernel sets on a bad R1_CPU_ISA"
    echo "fixtures_isa: $pass passed, $fail failed"
    exit 1
fi
best=""
for isa in $sets; do
    if R1_CPU_ISA=$isa "$BIN" run -m "$T/tiny" --prompt-ids 1 -n 1 2>&1 >/dev/null |
        grep -q "cannot run the '$isa' kernels"; then
        echo "skip $isa: this CPU cannot run it"
        continue
    fi
    if [ -z "$best" ]; then
        best=$isa
        echo "skip $isa: the best set here, which the plain test_fixtures run covers"
        continue
    fi
    out=$(R1_CPU_ISA=$isa "$FX" 2>&1)
    rc=$?
    line=$(grep -E '^test_fixtures: [0-9]+ passed, [0-9]+ failed$' <<<"$out" | tail -n 1)
    if [ "$rc" -eq 0 ] && [ -n "$line" ] && grep -q ', 0 failed$' <<<"$line"; then
        ok "R1_CPU_ISA=$isa test_fixtures ($line)"
    else
        grep -E 'FAIL|rror' <<<"$out" | head -n 20
        bad "R1_CPU_ISA=$isa test_fixtures (exit $rc: ${line:-no summary})"
    fi
done
[ -n "$best" ] || bad "no cpu kernel set of this build runs here"
echo "fixtures_isa: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
