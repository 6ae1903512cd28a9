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
if ! python3 -c "import gguf, numpy" 2>/dev/null; then
    echo "gguf_convert: SKIPPED: python3 with gguf and numpy is needed (pip install gguf numpy)"
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
            gqa4_tied_f32:q6_K gqa4_tied_f32:f16 llama_gqa_f32:f32 llama_gqa_f32:q8_0 \
            gqa4_tied_f32:q4_1 gqa2_f32:q5_0 mha_bf16:q5_1; do
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
# GGUF in: every matrix requantized as --dtype does at load, metadata copied.
# The converted file runs exactly as the original loaded with --dtype.
for spec in llama_q4_1:q8_0 llama_q4_1:f32 tied_q4_k_m:q4_0 gqa2_q4_1_mix:bf16; do
    fx=${spec%%:*} dt=${spec#*:}
    src="tests/fixtures/gguf/$fx.gguf" out="$tmp/$fx-re-$dt.gguf"
    check "convert $fx.gguf --dtype $dt" "$BIN" convert -m "$src" -o "$out" --dtype "$dt"
    [ -f "$out" ] || continue
    check "$fx-re-$dt: metadata copied, every matrix $dt" python3 - "$src" "$out" "$dt" <<'PYEOF'
import sys, gguf
a, b, dt = gguf.GGUFReader(sys.argv[1]), gguf.GGUFReader(sys.argv[2]), sys.argv[3].upper()
skip = {"general.file_type", "general.alignment"}
ka = {k: (f.types, [bytes(p) for p in f.parts[len(f.parts) - len(f.data):]]) for k, f in a.fields.items()
      if not k.startswith("GGUF.") and k not in skip}
kb = {k: (f.types, [bytes(p) for p in f.parts[len(f.parts) - len(f.data):]]) for k, f in b.fields.items()
      if not k.startswith("GGUF.") and k not in skip}
ok = ka == kb
for t in b.tensors:
    want = dt if len(t.shape) == 2 else [x for x in a.tensors if x.name == t.name][0].tensor_type.name
    ok &= t.tensor_type.name == want
sys.exit(0 if ok and len(a.tensors) == len(b.tensors) else 1)
PYEOF
    want=$("$BIN" run -m "$src" --dtype "$dt" --prompt-ids 5,17,42,99,3 -n 8 --temp 0 --print-ids --ignore-eos \
        --backend ref 2>/dev/null | tail -n 1)
    got=$(ids "$out")
    check "greedy ids of $fx-re-$dt ($got) equal --dtype $dt at load ($want)" test -n "$want" -a "$want" = "$got"
done
# a directory that is not a checkpoint: an error, not a crash
"$BIN" convert -m "$tmp" -o "$tmp/x.gguf" 2>"$tmp/err"
rc=$?
check "convert of an empty directory fails with a message (rc $rc)" \
    test "$rc" -eq 1 -a -s "$tmp/err"
echo "gguf_convert: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
