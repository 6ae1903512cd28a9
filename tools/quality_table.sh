#!/usr/bin/env bash
# quality_table.sh - the README's quality table: perplexity, KL divergence
# against f32, top-1 agreement, file size and decode speed of the default
# model in every weight format r1infer converts to, on the corpus (the Debian
# FAQ of the debian-faq package).
#
# Each format is written once as a GGUF by `r1infer convert` from the model
# file (the same conversion --dtype does at load), so that llama.cpp, when
# LLAMA_PERPLEXITY (its llama-perplexity binary) is given, scores the very
# same weights; LLAMA_BENCH (llama-bench) adds its decode speed. llama.cpp is
# not built or shipped here: point the variables at a build of your own.
#
# Usage: tools/quality_table.sh OUT_DIR [CHUNKS]   (env: MODEL, CORPUS, CTX=512,
#        THREADS=2, FORMATS="f32 bf16 f16 q8_0 q6_K q4_K q4_0 own", PART=ppl|speed|all)
# Writes OUT_DIR/<format>.{gguf,r1.json,r1q8.json,llama.txt,speed.txt} and prints rows.
set -euo pipefail
OUT=${1:?usage: tools/quality_table.sh OUT_DIR [CHUNKS]}
CHUNKS=${2:-8}
BIN=${R1_BIN:-build/r1infer}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
CORPUS=${CORPUS:-build/corpus/debian-faq.txt}
CTX=${CTX:-512}
THREADS=${THREADS:-2}
FORMATS=${FORMATS:-f32 bf16 f16 q8_0 q6_K q4_K q4_0 own}
PART=${PART:-all}
mkdir -p "$OUT"
[ -f "$CORPUS" ] || { mkdir -p "$(dirname "$CORPUS")"; zcat /usr/share/doc/debian/FAQ/debian-faq.en.txt.gz > "$CORPUS"; }

gguf_of() { [ "$1" = own ] && echo "$MODEL" || echo "$OUT/$1.gguf"; }
for f in $FORMATS; do
    g=$(gguf_of "$f")
    [ "$f" = own ] || [ -f "$g" ] || "$BIN" convert -m "$MODEL" -o "$g" --dtype "$f" >/dev/null 2>&1
done
ppl() { # format, env prefix..., extra args
    local f=$1 tag=$2; shift 2
    env "$@" "$BIN" perplexity -m "$(gguf_of "$f")" -f "$CORPUS" --ctx "$CTX" --chunks "$CHUNKS" -t "$THREADS" \
        --json --kld "$OUT/base.kld" > "$OUT/$f.$tag.json"
}
if [ "$PART" != speed ]; then
    [ -f "$OUT/base.kld" ] || "$BIN" perplexity -m "$OUT/f32.gguf" -f "$CORPUS" --ctx "$CTX" --chunks "$CHUNKS" \
        -t "$THREADS" --kld-base "$OUT/base.kld" --json > "$OUT/f32.base.json"
    if [ -n "${LLAMA_PERPLEXITY:-}" ] && [ ! -f "$OUT/llama-base.kld" ]; then
        "$LLAMA_PERPLEXITY" -m "$OUT/f32.gguf" -f "$CORPUS" -c "$CTX" --chunks "$CHUNKS" -t "$THREADS" \
            --kl-divergence-base "$OUT/llama-base.kld" > "$OUT/f32.llama-base.txt" 2>&1
    fi
    for f in $FORMATS; do
        ppl "$f" r1
        case $f in f32|bf16|f16) ;; *) ppl "$f" r1q8 R1_CPU_ACT=q8 ;; esac
        if [ -n "${LLAMA_PERPLEXITY:-}" ]; then
            "$LLAMA_PERPLEXITY" -m "$(gguf_of "$f")" -f "$CORPUS" -c "$CTX" --chunks "$CHUNKS" -t "$THREADS" \
                --kl-divergence-base "$OUT/llama-base.kld" --kl-divergence > "$OUT/$f.llama.txt" 2>&1 || true
        fi
    done
fi
if [ "$PART" != ppl ]; then
    for f in $FORMATS; do
        "$BIN" run -m "$(gguf_of "$f")" --raw -p "The Debian project" -n 128 --ignore-eos --temp 0 -t "$THREADS" \
            2>&1 >/dev/null | grep Generated > "$OUT/$f.speed.txt" || true
        if [ -n "${LLAMA_BENCH:-}" ]; then
            "$LLAMA_BENCH" -m "$(gguf_of "$f")" -p 0 -n 128 -t "$THREADS" -r 3 -o csv 2>/dev/null | tail -n 1 \
                >> "$OUT/$f.speed.txt" || true
        fi
    done
fi
python3 - "$OUT" "$MODEL" $FORMATS <<'PYEOF'
import json, os, re, sys
out, model, fmts = sys.argv[1], sys.argv[2], sys.argv[3:]
def js(p):
    try: return json.load(open(p))
    except Exception: return None
def llama(p):
    try: t = open(p).read()
    except OSError: return {}
    g = lambda pat: (m.group(1) if (m := re.search(pat, t)) else None)
    return {"ppl": g(r"Mean PPL\(Q\)\s*:\s*([\d.]+)"), "kld": g(r"Mean\s+KLD:\s*([-\d.]+)"),
            "p99": g(r"99\.0%\s+KLD:\s*([-\d.]+)"), "top": g(r"Same top p:\s*([\d.]+)")}
print("| weights | size MB | PPL r1infer | PPL llama.cpp | KLD r1infer (2-part / q8 act) | KLD llama.cpp | "
      "99% KLD r1infer | 99% KLD llama.cpp | top-1 r1infer | top-1 llama.cpp | RMS dp r1infer | decode tok/s r1infer | decode tok/s llama.cpp |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for f in fmts:
    g = model if f == "own" else os.path.join(out, f + ".gguf")
    r, q, l = js(os.path.join(out, f + ".r1.json")), js(os.path.join(out, f + ".r1q8.json")), llama(os.path.join(out, f + ".llama.txt"))
    sp = open(os.path.join(out, f + ".speed.txt")).read().splitlines() if os.path.exists(os.path.join(out, f + ".speed.txt")) else []
    r1s = next((re.search(r"\(([\d.]+) tok/s\)", s).group(1) for s in sp if s.startswith("Generated")), "-")
    ls = next((s.split(",")[-2].strip('"') for s in sp if s.count(",") > 10), "-")
    k = r["kld"] if r else {}
    kq = (" / %.5f" % q["kld"]["mean"]) if q else ""
    print(f"| {f if f != 'own' else 'q4_1 (the file)'} | {os.path.getsize(g)/1e6:.1f} | "
          f"{r['ppl']:.4f} ± {r['ppl_err']:.4f} | {l.get('ppl') or '-'} | {k.get('mean', 0):.5f}{kq} | {l.get('kld') or '-'} | "
          f"{k.get('p99', 0):.4f} | {l.get('p99') or '-'} | {100*k.get('same_top', 0):.2f}% | {(l.get('top') or '-') + ('%' if l.get('top') else '')} | "
          f"{100*k.get('rms_dp', 0):.3f}% | {r1s} | {ls} |" if r else f"| {f} | missing |")
PYEOF
