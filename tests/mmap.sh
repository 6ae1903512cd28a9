#!/usr/bin/env bash
# mmap.sh - how a model is held, end to end on tiny synthetic GGUFs written
# by `synth -o FILE.gguf`: mapped (the default), --no-mmap and --mlock give
# the same greedy ids; a GGUF in a quantized type runs; a truncated file and
# an unknown synth dtype are refused with a sentence; help lists the flags.
# Last line: "mmap: P passed, F failed".
set -u
BIN=${R1_BIN:-build/r1infer}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }
ids() { "$BIN" run -m "$1" --prompt-ids 151646,3838,374 -n 8 --temp 0 --print-ids --ignore-eos "${@:2}" 2>"$T/err"; }

"$BIN" synth --config tiny -o "$T/tiny.gguf" --dtype bf16 --seed 3 2>/dev/null
check "synth -o FILE.gguf writes a GGUF" test -s "$T/tiny.gguf"
a=$(ids "$T/tiny.gguf")
check "the mapped model runs ($a)" test -n "$a"
b=$(ids "$T/tiny.gguf" --no-mmap)
check "--no-mmap gives the same ids ($b)" test -n "$b" -a "$a" = "$b"
c=$(ids "$T/tiny.gguf" --mlock)
if [ -z "$c" ] && grep -q -- "--mlock.*locked-memory limit" "$T/err"; then
    ok "--mlock is refused here with the limit named: $(head -c 200 "$T/err")"
else
    check "--mlock gives the same ids ($c)" test -n "$c" -a "$a" = "$c"
fi
d=$(ids "$T/tiny.gguf" --backend ref)
check "the ref backend on the mapped file agrees ($d)" test "$a" = "$d"

"$BIN" synth --config tiny -o "$T/q4.gguf" --dtype q4_0 2>/dev/null
q=$(ids "$T/q4.gguf")
qn=$(ids "$T/q4.gguf" --no-mmap)
check "a q4_0 synthetic GGUF runs, mapped and not, alike ($q)" test -n "$q" -a "$q" = "$qn"

head -c $(($(stat -c %s "$T/tiny.gguf") * 2 / 3)) "$T/tiny.gguf" >"$T/cut.gguf"
"$BIN" run -m "$T/cut.gguf" -p hi -n 1 >/dev/null 2>"$T/cut.err"
check "a truncated GGUF exits non-zero" test $? -ne 0
check "...saying it is truncated: $(head -c 160 "$T/cut.err")" grep -q "cut.gguf.*truncated" "$T/cut.err"
"$BIN" run -m "$T/cut.gguf" -p hi -n 1 --no-mmap >/dev/null 2>"$T/cut2.err"
check "...with --no-mmap too" grep -q "cut.gguf.*truncated" "$T/cut2.err"

"$BIN" synth --config tiny -o "$T/x.gguf" --dtype q4_0x8 >/dev/null 2>"$T/dt.err"
check "synth refuses a layout that is not a file dtype" grep -q "unknown --dtype q4_0x8" "$T/dt.err"
"$BIN" run --help >"$T/help" 2>&1
check "run --help lists --no-mmap and --mlock" grep -q -- "--no-mmap" "$T/help"
grep -q -- "--mlock" "$T/help" || bad "run --help lists --mlock"

echo "mmap: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
