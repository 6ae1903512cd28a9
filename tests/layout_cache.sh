#!/usr/bin/env bash
# layout_cache.sh - --layout-cache end to end on a tiny q4_K GGUF written by
# `synth -o`: the first run writes the cache and says so, the second maps it
# and says so, both give the greedy ids of a run without it; `auto` puts it
# under $XDG_CACHE_HOME/r1infer/layouts; a cache cut short is reported and
# rebuilt; two runs started together write it once; `off` and a bad value;
# help lists the flag.
# Last line: "layout_cache: P passed, F failed".
set -u
BIN=${R1_BIN:-build/r1infer}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }
ids() { "$BIN" run -m "$T/m.gguf" --prompt-ids 151646,3838,374 -n 8 --temp 0 --print-ids --ignore-eos "$@" 2>"$T/err"; }

"$BIN" synth --config tiny -o "$T/m.gguf" --dtype q4_0 --seed 5 2>/dev/null
check "synth writes a q4_0 GGUF" test -s "$T/m.gguf"
want=$(ids)
check "a run without the cache ($want)" test -n "$want"
a=$(ids --layout-cache "$T/c")
check "the first run with --layout-cache DIR gives the same ids ($a)" test -n "$a" -a "$a" = "$want"
check "...and says it wrote the cache" grep -q "layout cache: wrote $T/c/m.gguf-.*r1layout" "$T/err"
b=$(ids --layout-cache "$T/c")
check "the second run gives the same ids ($b)" test "$b" = "$want"
check "...mapping the cache, converting nothing" grep -q "layout cache: mapped .*nothing converted" "$T/err"
f=$(ls "$T"/c/*.r1layout)
head -c $(($(stat -c %s "$f") - 100)) "$f" >"$T/cut" && cp "$T/cut" "$f"
c=$(ids --layout-cache "$T/c")
check "a cache cut short is reported and rebuilt: $(head -c 200 "$T/err")" grep -q "truncated.*rebuilding" "$T/err"
check "...and the run gives the same ids ($c)" test "$c" = "$want"
rm -f "$f"
touch "$f.tmp.999999" # what a process killed while writing leaves
two() { "$BIN" run -m "$T/m.gguf" --prompt-ids 151646,3838,374 -n 8 --temp 0 --print-ids --ignore-eos \
    --layout-cache "$T/c" >"$T/o$1" 2>"$T/e$1"; }
two 1 & two 2
wait
n=$(cat "$T/o1" "$T/o2" | sort -u)
check "two runs starting together give the same ids ($(echo $n))" test "$n" = "$want"
w=$(cat "$T/e1" "$T/e2" | grep -c "layout cache: wrote") m=$(cat "$T/e1" "$T/e2" | grep -c "layout cache: mapped")
check "...one writes the cache, the other waits and maps it (wrote $w, mapped $m)" test "$w" = 1 -a "$m" = 1
check "...and the temporary file a killed writer left is gone" test ! -e "$f.tmp.999999"
d=$(XDG_CACHE_HOME="$T/xdg" ids --layout-cache auto)
check "auto writes under \$XDG_CACHE_HOME/r1infer/layouts" test "$d" = "$want" -a -n "$(ls "$T"/xdg/r1infer/layouts/*.r1layout 2>/dev/null)"
e=$(XDG_CACHE_HOME="$T/xdg2" ids --layout-cache off)
check "off writes nothing" test "$e" = "$want" -a ! -e "$T/xdg2"
"$BIN" run -m "$T/m.gguf" -p hi -n 1 --layout-cache "" >/dev/null 2>"$T/err"
check "an empty value is refused with a sentence" grep -q "layout-cache expects auto, off or a directory" "$T/err"
"$BIN" run --help >"$T/help" 2>&1
check "run --help lists --layout-cache" grep -q -- "--layout-cache" "$T/help"

echo "layout_cache: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
