#!/usr/bin/env bash
# gguf_tokenizer.sh - the tokenizer read from GGUF metadata equals the
# tokenizer.json one: a GGUF holding the DeepSeek-R1-Distill-Qwen tokenizer
# is written with gguf-py (tools/make_gguf_tokenizer.py, ~5 MB, in a temp
# dir) and every encode vector is checked by test_gguf (R1_GGUF_TOKENIZER);
# then a synthetic model converted by `r1infer convert` generates from a
# text prompt with the tokenizer inside its GGUF. Skips (with a message)
# only when python3's gguf module is missing.
set -u
BUILD=${R1_BUILD:-build}
BIN=${R1_BIN:-$BUILD/r1infer}
if ! python3 -c "import gguf" 2>/dev/null; then
    echo "gguf_tokenizer: SKIPPED: python3 gguf is missing (pip install gguf)"
    echo "gguf_tokenizer: 0 passed, 0 failed"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
check() { local what=$1; shift; if "$@"; then pass=$((pass + 1)); else echo "FAIL: $what"; fail=$((fail + 1)); fi; }
check "make the tokenizer GGUF" python3 tools/make_gguf_tokenizer.py \
    data/tokenizers/deepseek-r1-distill-qwen "$tmp/tok.gguf" --vocab 151936
out=$(R1_GGUF_TOKENIZER="$tmp/tok.gguf" "$BUILD/tests/test_gguf" 2>&1)
echo "$out" | tail -n 5
check "gguf-py tokenizer GGUF encodes like tokenizer.json" \
    grep -qE '^test_gguf_tokenizer: [0-9]+ passed, 0 failed$' <<<"$out"
check "synth tiny" "$BIN" synth --config tiny -o "$tmp/tiny"
check "convert tiny" "$BIN" convert -m "$tmp/tiny" -o "$tmp/tiny.gguf" --dtype q8_0
text=$("$BIN" run -m "$tmp/tiny.gguf" -p "Hello" -n 4 --temp 0 --ignore-eos 2>&1)
rc=$?
check "run a GGUF with its own tokenizer from a text prompt (rc $rc)" test "$rc" -eq 0
echo "gguf_tokenizer: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
