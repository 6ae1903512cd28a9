#!/usr/bin/env bash
# gguf_convert.sh - `r1infer convert` end to end: each HF fixture (qwen2 and
# llama: the llama GGUF has llama.cpp's permuted Q/K and rope_freqs) converted
# to each dtype is read back by gguf-py (gguf.GGUFReader) and compared
# tensor by tensor with the safetensors weights (tools/check_gguf.py), then
# run by r1infer: greedy ids from the f32/f16/bf16 conversions equal the
# ones from the safetensors checkpoint. Skips (with a message) only when
# python3's gguf module is missing. Last line: "gguf_convert: P passed, F failed".
set -u
BIN=${R1_BIN:-build/r1infer}
pass=0 fail=0
check() { # description, command...
    local what=$1; shift
    if "$@"; then pass=$((pass + 1)); else echo "FAIL: $what"; fail=$((fail + 1)); fi
}
if ! python3 -c "import gguf, numpy, safetensors" 2>/dev/null; then
    echo "gguf_convert: SKIPPED: python3 with gguf, numpy and safetensors is needed (pip install gguf safetensors)"
    echo "gguf_convert: 0 passed, 0 failed"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ids() { # model -> greedy ids of the first 8 steps after a fixed prompt
    "$BIN" run -m "$1" --prompt-ids 5,17,42,99,3 -n 8 --temp 0 --print-ids --ignore-eos \
        --backend ref 2>/dev/null | tail -n 1
}
for spec in gqa2_f32:f32 f16:f16 mha_bf16:bf16 mha_bf16:q8_0 gqa2_f32:q4_0 gqa4_tied_f32:q4_K \
            gqa4_tied_f32:q6_K gqa4_tied_f32:f16 llama_gqa_f32:f32 llama_gqa_f32:q8_0; do
    fx=${spec%%:*} dt=${spec#*:}
    out="$tmp/$fx-$dt.gguf"
    check "convert $fx --dtype $dt" "$BIN" convert -m "tests/fixtures/$fx" -o "$out" --dtype "$dt"
    [ -f "$out" ] || continue
    check "gguf-py reads $fx-$dt" python3 tools/check_gguf.py "$out" "tests/fixtures/$fx"
    case $dt in
    f32 | f16 | bf16)
        want=$(ids "tests/fixtures/$fx") got=$(ids "$out")
        check "greedy ids of $fx-$dt ($got) equal the safetensors run ($want)" \
            test -n "$want" -a "$want" = "$got" ;;
    *)
        got=$(ids "$out")
        check "run $fx-$dt" test -n "$got" ;;
    esac
done
# a directory that is not a checkpoint: an error, not a crash
"$BIN" convert -m "$tmp" -o "$tmp/x.gguf" 2>"$tmp/err"
rc=$?
check "convert of an empty directory fails with a message (rc $rc)" \
    test "$rc" -eq 1 -a -s "$tmp/err"
echo "gguf_convert: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
