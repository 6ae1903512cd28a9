#!/usr/bin/env bash
# The environment variables r1infer reads (src/util/env.c): every name the
# sources read is in the one table `r1infer --help-env` prints, the README's
# Environment section is that table, a set R1_* variable r1infer does not
# read (a typo, a retired switch) and a value outside a variable's choices
# are reported, and the library calls getenv in one file only.
# Last line: "env: P passed, F failed".
set -u
BIN=${R1_BIN:-build/r1infer}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }

"$BIN" --help-env >"$T/table.md"
check "--help-env prints a Markdown table" grep -q '^| `R1_CPU_ISA` |' "$T/table.md"
# the names passed to r1_env, r1_env_each, r1_env_choice and r1_device_env_index
names=$(grep -rhoE '(r1_env|r1_env_each|r1_env_choice|r1_device_env_index)\("[A-Z0-9_]+"' src |
    sed -E 's/.*\("([A-Z0-9_]+)"/\1/' | sort -u)
missing=""
for n in $names; do
    case $n in *_) pat="\`$n<" ;; *) pat="\`$n\`" ;; esac
    grep -qF "$pat" "$T/table.md" || missing="$missing $n"
done
check "every variable the sources read is in the table ($(wc -w <<<"$names") names)${missing:+: missing$missing}" \
    test -z "$missing" -a -n "$names"
files=$(grep -rlE '\bgetenv\(' src --include='*.c' --include='*.cu' --include='*.h')
check "getenv is called in src/util/env.c only (found: $(echo $files))" test "$files" = "src/util/env.c"
sed -n '/<!-- env:begin -->/,/<!-- env:end -->/p' README.md | sed '1d;$d' | grep -v '^$' >"$T/readme.md"
check "the README's Environment section is the table (tools/env_table.sh)" cmp -s "$T/readme.md" "$T/table.md"

"$BIN" synth --config tiny -o "$T/tiny" --seed 5 2>/dev/null
R1_CPU_PLAIN=1 "$BIN" run -m "$T/tiny" --prompt-ids 1 -n 1 >/dev/null 2>"$T/unknown.err"
check "a set R1_ variable r1infer does not read is reported" \
    grep -q "environment variable R1_CPU_PLAIN is not one r1infer reads" "$T/unknown.err"
R1_CPU_ACT=q9 "$BIN" run -m "$T/tiny" --prompt-ids 1 -n 1 >/dev/null 2>"$T/choice.err"
check "a value outside a variable's choices is reported" grep -q "R1_CPU_ACT=q9: expected one of q8|q8x2" "$T/choice.err"
R1_CPU_ACT=q8 "$BIN" run -m "$T/tiny" --prompt-ids 1 -n 1 >/dev/null 2>"$T/good.err"
check "a valid setting is not reported" test ! -s "$T/good.err" -o -z "$(grep 'environment' "$T/good.err")"
echo "env: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
