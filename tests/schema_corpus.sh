#!/usr/bin/env bash
# schema_corpus.sh - the JSON schemas of llama.cpp's own converter test
# (tests/test-json-schema-to-grammar.cpp inside the llama-cpp-python sdist,
# a pinned version fetched with pip and read, never copied into this
# repository) against `r1infer serve` on the default model: the schemas
# llama.cpp converts are accepted, those it refuses are refused, and every
# answer that finishes validates with jsonschema, several seeds each
# (tests/schema_corpus_test.py). Last line: "schema_corpus: P passed, F failed".
set -u
MODEL=${R1_TEST_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
PKG=llama-cpp-python==0.3.36
HERE=$(cd "$(dirname "$0")" && pwd)
NAME=schema_corpus
. "$HERE/server_common.sh"
CASES=${R1_SCHEMA_CORPUS:-build/cache/test-json-schema-to-grammar.cpp}
python3 -c 'import jsonschema' 2>/dev/null || die "the python package jsonschema is needed"
[ -f "$MODEL" ] || die "the default model $MODEL is absent (scripts/get-model.sh)"
if [ ! -s "$CASES" ]; then
    t0=$SECONDS
    python3 -m pip download --no-deps --no-binary :all: -q -d "$TMP/sdist" "$PKG" >"$TMP/pip.log" 2>&1 ||
        die "pip download $PKG failed (set R1_SCHEMA_CORPUS to the test file): $(tail -n 3 "$TMP/pip.log")"
    mkdir -p "$(dirname "$CASES")"
    tar -xzOf "$TMP"/sdist/*.tar.gz --wildcards '*/vendor/llama.cpp/tests/test-json-schema-to-grammar.cpp' \
        >"$TMP/cases.cpp" 2>"$TMP/tar.log" && [ -s "$TMP/cases.cpp" ] ||
        die "the sdist of $PKG has no tests/test-json-schema-to-grammar.cpp: $(tail -n 2 "$TMP/tar.log")"
    mv "$TMP/cases.cpp" "$CASES"
    echo "  fetched $CASES from $PKG in $((SECONDS - t0)) s" >&2
fi
start_server 300 -m "$MODEL" --parallel 4 --ctx 2048 --seed 1
wait_health
timeout 600 python3 "$HERE/schema_corpus_test.py" --base "http://127.0.0.1:$PORT" --cases "$CASES" \
    --seeds "${R1_SCHEMA_SEEDS:-2}"
rc=$?
server_alive || { echo "$NAME: 0 passed, 1 failed"; exit 1; }
exit $rc
