#!/usr/bin/env bash
# make demo: synthesize a small random-weight model of the real tokenizer and
# the Qwen2 architecture (until a trained model ships), then generate from it
# with the R1 chat template. The text is gibberish (random weights); what the
# demo shows is the whole path: load, tokenize, prefill, decode, stream.
set -euo pipefail
BIN=${1:-build/r1infer}
MODEL=${R1_DEMO_MODEL:-models/tiny}
if [ ! -f "$MODEL/model.safetensors" ]; then
    "$BIN" synth --config tiny -o "$MODEL" --tokenizer data/tokenizers/deepseek-r1-distill-qwen --seed 7
fi
echo "--- r1infer run -m $MODEL -p 'Why is the sky blue?' -n 48 --seed 1"
"$BIN" run -m "$MODEL" -p "Why is the sky blue?" -n 48 --seed 1
