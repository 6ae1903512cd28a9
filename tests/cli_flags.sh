#!/usr/bin/env bash
# cli_flags.sh - the command line as a new user meets it: numbers validated
# alike (integers printed as integers), --version, prompts from a file or
# stdin, llama.cpp's spellings as aliases, -ngl refused with what to do
# instead, one line and a near hint for an unknown flag, per-command help,
# tokenize without -m. Runs on a tiny synthetic model (a few seconds).
# Last line: "cli_flags: P passed, F failed".
set -u
BIN=${R1_BIN:-build/r1infer}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }
# refused NAME PATTERN ARGS...: exits 2 and says PATTERN on one line of stderr
refused() {
    local name=$1 pat=$2; shift 2
    "$BIN" "$@" >"$T/out" 2>"$T/err"; local rc=$?
    if [ $rc -eq 2 ] && grep -q -- "$pat" "$T/err" && [ "$(wc -l <"$T/err")" -le 2 ]; then ok "$name"
    else bad "$name (rc $rc: $(head -c 300 "$T/err"))"; fi
}

"$BIN" synth --config tiny -o "$T/tiny" --seed 5 2>/dev/null
M=$T/tiny
ids() { "$BIN" run -m "$M" --temp 0 --print-ids "$@" 2>/dev/null; }

# numbers: the same validation everywhere, integers shown as integers
refused "run -n abc is refused" "-n expects an integer from 0 to 16777216, got 'abc'" run -m "$M" -p hi -n abc
refused "run -n -5 is refused" "-n expects an integer" run -m "$M" -p hi -n -5
refused "chat -n 1.5 is refused" "-n expects an integer" chat -m "$M" -n 1.5
refused "bench -n x is refused" "-n expects an integer" bench --synthetic tiny --spec -n x
refused "--ctx 0: the range is printed as integers" "--ctx expects an integer from 1 to 16777216, got '0'" \
    run -m "$M" -p hi --ctx 0
refused "--top-k 2.5 is refused (an integer)" "--top-k expects an integer" run -m "$M" -p hi --top-k 2.5
refused "--temp abc is refused (a number)" "--temp expects a number from 0 to 100" run -m "$M" -p hi --temp abc
refused "--seed -1 is refused" "--seed expects an integer" run -m "$M" -p hi --seed -1
refused "serve --port 70000 is refused" "--port expects an integer from 0 to 65535" serve -m "$M" --port 70000
refused "perplexity --chunks x is refused" "--chunks expects an integer" perplexity -m "$M" -f x --chunks x
refused "synth --seed x is refused" "--seed expects an integer" synth --config tiny -o "$T/x" --seed x
refused "a flag without its value says so" "-n needs a value" run -m "$M" -p hi -n
refused "bench --spec-k 4x is refused" "--spec-k takes 1..15" bench --spec --spec-k 4x
refused "synth: an unknown flag in one line" "unknown option '--bogus'" synth --config tiny --bogus
"$BIN" run -m "$M" -p hi --ctx 0 2>&1 | grep -q "e+" && bad "no float notation in ranges" || ok "no float notation in ranges"

# --version: version, commit, kernel sets, backends
"$BIN" --version >"$T/v"
check "--version prints the version and the commit" grep -Eq "^r1infer [0-9]+\.[0-9]+\.[0-9]+ \(commit ([0-9a-f]{7,}(-dirty)?|unknown)\)$" "$T/v"
check "...the cpu kernel sets, the one in use marked" grep -Eq "^cpu kernel sets: .*generic" "$T/v"
check "...and the backends built" grep -Eq "^backends: ref cpu" "$T/v"
built=$(sed -n 's/.*(commit \([0-9a-f]*\).*/\1/p' "$T/v")
if [ -n "$built" ] && git rev-parse --git-dir >/dev/null 2>&1; then # a build from a checkout
    check "...a commit of this repository" git cat-file -e "$built^{commit}"
fi

# prompts from a file and stdin give the ids of the same text given with -p
want=$(ids -p "Why is the sky blue?" -n 6)
check "run --print-ids gives 6 ids" python3 -c "import json,sys; assert len(json.loads(sys.argv[1]))==6" "$want"
printf 'Why is the sky blue?\n' >"$T/prompt.txt"
check "-f FILE gives the ids of -p TEXT" test "$(ids -f "$T/prompt.txt" -n 6)" = "$want"
check "-p - reads the prompt from stdin" test "$(printf 'Why is the sky blue?\n' | ids -p - -n 6)" = "$want"
refused "two prompts are refused" "give one prompt" run -m "$M" -p hi -f "$T/prompt.txt"
"$BIN" run -m "$M" -f "$T/nope.txt" >/dev/null 2>"$T/err"
check "a missing -f FILE is named" grep -q "cannot read $T/nope.txt" "$T/err"

# llama.cpp's spellings
want=$(ids -p hi -n 5 --ctx 32 --seed 7 --temp 0)
check "run gives 5 ids" python3 -c "import json,sys; assert len(json.loads(sys.argv[1]))==5" "$want"
check "-c, --ctx-size, -s, --temperature, --n-predict are aliases" \
    test "$(ids -p hi --n-predict 5 -c 32 -s 7 --temperature 0)" = "$want" -a \
         "$(ids -p hi -n 5 --ctx-size 32 -s 7)" = "$want"
"$BIN" run -m "$M" -p hi -c 10 -n 50 --ignore-eos --temp 0 --print-ids >"$T/o" 2>"$T/e"
check "-c sets the context (generation stops at it)" grep -q "context full at 10" "$T/e"
refused "-ngl is refused, saying what to do instead" "use --backend cuda" run -m "$M" -p hi -ngl 99
refused "--n-gpu-layers likewise" "use --backend cuda" serve -m "$M" --n-gpu-layers 10

# unknown flags: one line, the nearest flag as a hint
refused "an unknown flag: one line with a hint" "unknown option '--temperatur'; did you mean --temperature?" \
    run -m "$M" -p hi --temperatur 0
refused "...for the command's own flags too" "did you mean --parallel?" serve -m "$M" --paralel 2
refused "...no hint when nothing is near" "unknown option '--frobnicate' (r1infer run --help" run --frobnicate
refused "an option of another command does not apply" "--temp does not apply to perplexity" perplexity --temp 0
refused "a stray argument is named, with where a prompt goes" "unexpected argument 'hello' (a prompt goes after -p" \
    run -m "$M" hello
refused "r1infer --verison hints --version" "did you mean --version?" --verison
refused "an unknown command hints the nearest" "did you mean run?" rn

# per-command help
"$BIN" perplexity --help >"$T/h"
check "perplexity --help has no sampling or speculative options" \
    bash -c "! grep -Eq -- '--(temp|top-p|seed|lookup|draft)' '$T/h'"
check "...but its own (--kld, -c)" grep -q -- "--kld FILE" "$T/h"
for cmd in run chat serve bench perplexity; do
    "$BIN" $cmd --help | grep -Eo '^  (-[a-z], )?--?[a-z][a-z0-9-]*' | sed 's/^ *//' | sort | uniq -d >"$T/dup"
    check "$cmd --help lists each option once" test ! -s "$T/dup"
done
"$BIN" --help >"$T/h"
check "chat is not said to use the R1 template" bash -c "grep -q '^  chat ' '$T/h' && ! grep -q 'R1 template' '$T/h'"

# tokenize without -m: $R1INFER_MODEL (else the default model)
check "tokenize without -m uses \$R1INFER_MODEL" \
    test "$(R1INFER_MODEL=$M "$BIN" tokenize "Hello world")" = "$("$BIN" tokenize -m "$M" "Hello world")"
R1INFER_MODEL=$T/none "$BIN" tokenize hi >/dev/null 2>"$T/err"
check "...and names what it cannot read" grep -q "$T/none" "$T/err"

echo "cli_flags: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
