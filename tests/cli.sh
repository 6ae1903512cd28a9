#!/usr/bin/env bash
# CLI end to end on a tiny synthetic model: synth, run (text and ids),
# determinism at --temp 0, seeded sampling, the context limit, and clear
# errors for bad arguments. Last line: "cli: P passed, F failed".
set -u
BIN=${R1_BIN:-build/r1infer}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }

"$BIN" synth --config tiny -o "$T/tiny" --seed 5 2>"$T/synth.err"
check "synth tiny writes a checkpoint" test -s "$T/tiny/model.safetensors" -a -s "$T/tiny/tokenizer.json"

a=$("$BIN" run -m "$T/tiny" --prompt-ids 151646,3838,374 -n 12 --temp 0 --print-ids 2>/dev/null)
b=$("$BIN" run -m "$T/tiny" --prompt-ids 151646,3838,374 -n 12 --temp 0 --print-ids --backend ref 2>/dev/null)
check "--print-ids prints a JSON array of 12 ids" python3 -c "import json,sys; v=json.loads(sys.argv[1]); assert len(v)==12" "$a"
check "--temp 0 is deterministic (cpu == ref backend, same ids)" test "$a" = "$b"
c=$("$BIN" run -m "$T/tiny" --prompt-ids 151646,3838,374 -n 12 --temp 0 --print-ids 2>/dev/null)
check "--temp 0 twice gives identical ids" test "$a" = "$c"
g=$(R1_CPU_ISA=generic "$BIN" run -m "$T/tiny" --prompt-ids 151646,3838,374 -n 12 --temp 0 --print-ids 2>/dev/null)
check "R1_CPU_ISA=generic gives the same greedy ids" test "$a" = "$g"
R1_CPU_ISA=nosuch "$BIN" run -m "$T/tiny" --prompt-ids 1 -n 1 >/dev/null 2>"$T/isa.err"
check "R1_CPU_ISA=nosuch is refused, naming the sets" grep -q "R1_CPU_ISA=nosuch: no such kernel set (this build has: .*generic.*)" "$T/isa.err"
s1=$("$BIN" run -m "$T/tiny" --prompt-ids 151646,3838 -n 16 --temp 1.0 --top-p 1 --seed 42 --print-ids --ignore-eos 2>/dev/null)
s2=$("$BIN" run -m "$T/tiny" --prompt-ids 151646,3838 -n 16 --temp 1.0 --top-p 1 --seed 42 --print-ids --ignore-eos 2>/dev/null)
s3=$("$BIN" run -m "$T/tiny" --prompt-ids 151646,3838 -n 16 --temp 1.0 --top-p 1 --seed 43 --print-ids --ignore-eos 2>/dev/null)
check "a seeded run is reproducible" test "$s1" = "$s2"
check "another seed gives another run" test "$s1" != "$s3"

"$BIN" run -m "$T/tiny" -p "Hello, who are you?" -n 8 --seed 1 >"$T/out.txt" 2>"$T/err.txt"
check "run with a text prompt exits 0" test $? -eq 0
check "run prints Prefill: on stderr" grep -q "^Prefill: .* tok/s)" "$T/err.txt"
check "run prints Generated N tokens on stderr" grep -q "^Generated [0-9]* tokens in .* tok/s)" "$T/err.txt"

"$BIN" run -m "$T/tiny" --prompt-ids 151646,3838,374 -n 50 --ctx 10 --temp 0 --ignore-eos --print-ids >"$T/o" 2>"$T/e"
check "generation stops at the end of the context with a message" grep -q "context full" "$T/e"
check "...after exactly ctx - prompt + 1 tokens" python3 -c "import json; assert len(json.load(open('$T/o')))==8"

"$BIN" run -m "$T/nope" -p hi >/dev/null 2>"$T/e"; rc=$?
check "a missing model exits non-zero" test $rc -ne 0
check "...and names the path" grep -q "$T/nope" "$T/e"
"$BIN" run -m "$T/tiny" -p hi --temp abc >/dev/null 2>"$T/e"; rc=$?
check "a bad --temp is refused" test $rc -eq 2
"$BIN" run -m "$T/tiny" --prompt-ids 1,2,999999999 --print-ids >/dev/null 2>"$T/e"; rc=$?
check "an id outside the vocabulary is refused" grep -q "outside the vocabulary" "$T/e"
"$BIN" run -m "$T/tiny" -p hi --backend cuda >/dev/null 2>"$T/e"; rc=$?
check "--backend cuda without CUDA says so" grep -qi "cuda" "$T/e"
"$BIN" --help >/dev/null; check "r1infer --help exits 0" test $? -eq 0
"$BIN" frobnicate >/dev/null 2>&1; check "an unknown command exits 2" test $? -eq 2
for cmd in run chat synth tokenize bench serve convert; do
    "$BIN" $cmd --help >"$T/h" 2>&1
    check "r1infer $cmd --help prints usage" grep -qi "usage" "$T/h"
done
printf 'hello\n/quit\n' | "$BIN" chat -m "$T/tiny" -n 4 --seed 3 >"$T/chat.out" 2>"$T/chat.err"
check "chat answers a line from stdin and quits" test $? -eq 0 -a -s "$T/chat.out"

# speculative decoding: the same greedy ids, and a draft of another vocabulary refused by name
l=$("$BIN" run -m "$T/tiny" --prompt-ids 151646,3838,374,3838,374 -n 12 --temp 0 --print-ids --lookup 2 2>/dev/null)
check "run --lookup gives the plain greedy ids" test "$l" = "$("$BIN" run -m "$T/tiny" --prompt-ids 151646,3838,374,3838,374 -n 12 --temp 0 --print-ids 2>/dev/null)"
d=$("$BIN" run -m "$T/tiny" --prompt-ids 151646,3838,374 -n 12 --temp 0 --print-ids --draft "$T/tiny" --draft-n 3 --verbose 2>"$T/e")
check "run --draft (the model itself) gives the plain greedy ids" test "$d" = "$a"
check "run --verbose prints the speculative statistics" grep -q "^Speculative: [0-9]* drafted, [0-9]* accepted" "$T/e"
"$BIN" synth --config tiny -o "$T/tiny_l3" --seed 6 --tokenizer tests/fixtures/tok_llama3 2>/dev/null
"$BIN" run -m "$T/tiny" -p hi -n 2 --draft "$T/tiny_l3" >/dev/null 2>"$T/e"; rc=$?
check "a draft of another vocabulary is refused, saying so" grep -q "must share the target's vocabulary" "$T/e"
check "...with a non-zero exit" test $rc -ne 0

echo "cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
