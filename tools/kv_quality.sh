#!/usr/bin/env bash
# kv_quality.sh - what a q8_0 KV cache costs against f16 on a real model:
# perplexity and KL divergence on the corpus (the Debian FAQ of the
# debian-faq package) at two window lengths, and greedy text on the prompts
# in data/spec/ (64 tokens each, the chat template applied): how many come
# out identical, and where the first that differ part.
#
# Usage: tools/kv_quality.sh OUT_DIR   (env: MODEL, CORPUS, THREADS=2,
#        WINDOWS="512:8 2048:2" as ctx:chunks, N=64)
# Prints markdown rows for docs/quality.md; keeps the JSON in OUT_DIR.
set -euo pipefail
OUT=${1:?usage: tools/kv_quality.sh OUT_DIR}
BIN=${R1_BIN:-build/r1infer}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
CORPUS=${CORPUS:-build/corpus/debian-faq.txt}
THREADS=${THREADS:-2}
WINDOWS=${WINDOWS:-512:8 2048:2}
N=${N:-64}
mkdir -p "$OUT"
[ -f "$CORPUS" ] || { mkdir -p "$(dirname "$CORPUS")"; zcat /usr/share/doc/debian/FAQ/debian-faq.en.txt.gz > "$CORPUS"; }

echo "| window x chunks | KV | PPL | ΔPPL vs f16 | mean KLD vs f16 | 99% KLD | top-1 same as f16 |"
echo "|---|---|---|---|---|---|---|"
for w in $WINDOWS; do
    ctx=${w%%:*} chunks=${w##*:}
    base="$OUT/f16.$ctx.kld"
    "$BIN" perplexity -m "$MODEL" -f "$CORPUS" --ctx "$ctx" --chunks "$chunks" -t "$THREADS" --kv f16 \
        --kld-base "$base" --json > "$OUT/f16.$ctx.json" 2>/dev/null
    "$BIN" perplexity -m "$MODEL" -f "$CORPUS" --ctx "$ctx" --chunks "$chunks" -t "$THREADS" --kv q8_0 \
        --kld "$base" --json > "$OUT/q8_0.$ctx.json" 2>/dev/null
    python3 - "$OUT/f16.$ctx.json" "$OUT/q8_0.$ctx.json" "$ctx" "$chunks" <<'EOF'
import json, sys
f, q = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
k = q["kld"]
print(f"| {sys.argv[3]} x {sys.argv[4]} | f16 | {f['ppl']:.4f} ± {f['ppl_err']:.4f} | | | | |")
print(f"| {sys.argv[3]} x {sys.argv[4]} | q8_0 | {q['ppl']:.4f} ± {q['ppl_err']:.4f} | "
      f"{100 * (q['ppl'] / f['ppl'] - 1):+.3f}% | {k['mean']:.6f} | {k['p99']:.5f} | {100 * k['same_top']:.2f}% |")
EOF
done

echo
echo "| prompt | greedy $N tokens, q8_0 vs f16 |"
echo "|---|---|"
same=0 total=0
for p in data/spec/*.txt; do
    name=$(basename "$p" .txt)
    for kv in f16 q8_0; do
        "$BIN" run -m "$MODEL" -p "$(cat "$p")" -n "$N" --temp 0 --ignore-eos --print-ids --kv "$kv" -t "$THREADS" \
            > "$OUT/greedy.$name.$kv" 2>/dev/null
    done
    verdict=$(python3 - "$OUT/greedy.$name.f16" "$OUT/greedy.$name.q8_0" <<'EOF'
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
d = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
print("identical" if d is None and len(a) == len(b) else f"differ from token {d}")
EOF
)
    total=$((total + 1))
    [ "$verdict" = identical ] && same=$((same + 1))
    echo "| $name | $verdict |"
done
echo
echo "identical: $same of $total"
