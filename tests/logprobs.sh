#!/usr/bin/env bash
# logprobs.sh - the server's logprobs on the default model against
# `r1infer perplexity`: makes a top-1 KL-divergence base over the first
# window (--ctx 256) of the corpus, starts `r1infer serve` on a free
# loopback port and runs tests/logprobs_test.py. Also the CLI's errors on
# bad input (empty or short text, --ctx beyond the model, a base from
# another model). Last line: "logprobs: P passed, F failed".
set -u
MODEL=${R1_TEST_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
CORPUS=${R1_TEST_CORPUS:-build/corpus/debian-faq.txt}
HERE=$(cd "$(dirname "$0")" && pwd)
NAME=logprobs
. "$HERE/server_common.sh"
[ -f "$MODEL" ] || die "the default model $MODEL is absent (scripts/get-model.sh)"
[ -f "$CORPUS" ] || die "the corpus $CORPUS is absent (apt-get install debian-faq; scripts/run-tests.sh unpacks it)"

p=0 f=0
expect_fail() { # what, expected text, command...
    local what=$1 want=$2; shift 2
    local out; out=$("$@" 2>&1); local rc=$?
    if [ $rc -ne 0 ] && grep -q -- "$want" <<<"$out"; then p=$((p + 1)); else
        f=$((f + 1)); echo "FAIL $what: exit $rc, wanted '$want' in: $out" >&2; fi
}
: > "$TMP/empty.txt"
head -c 300 "$CORPUS" > "$TMP/short.txt"
expect_fail "empty text" "is empty" "$BIN" perplexity -m "$MODEL" -f "$TMP/empty.txt"
expect_fail "short text" "fewer than one window of --ctx 512" "$BIN" perplexity -m "$MODEL" -f "$TMP/short.txt"
expect_fail "missing text" "cannot" "$BIN" perplexity -m "$MODEL" -f "$TMP/nonexistent.txt"
expect_fail "--ctx beyond the model" "larger than the model's max_position_embeddings 8192" \
    "$BIN" perplexity -m "$MODEL" -f "$CORPUS" --ctx 16384
expect_fail "no -f" "give the text with -f" "$BIN" perplexity -m "$MODEL"
# a base from another model (a random tiny qwen2 with the DeepSeek tokenizer: another vocabulary)
"$BIN" synth --config tiny -o "$TMP/tiny" >"$TMP/synth.log" 2>&1 || die "synth: $(tail -n 3 "$TMP/synth.log")"
"$BIN" perplexity -m "$TMP/tiny" -f "$TMP/short.txt" --ctx 16 --chunks 2 \
    --kld-base "$TMP/other.kld" >"$TMP/other.log" 2>&1 || die "base of the tiny model: $(tail -n 3 "$TMP/other.log")"
expect_fail "base from another model" "another model" \
    "$BIN" perplexity -m "$MODEL" -f "$CORPUS" --ctx 16 --chunks 2 --kld "$TMP/other.kld"
# a base of this model over other text (another tokenization): the token hash refuses it
"$BIN" perplexity -m "$MODEL" -f "$TMP/short.txt" --ctx 16 --chunks 2 --kld-base "$TMP/self.kld" \
    >"$TMP/self.log" 2>&1 || die "base: $(tail -n 3 "$TMP/self.log")"
tail -c +5000 "$CORPUS" | head -c 300 > "$TMP/shifted.txt"
expect_fail "base of other token ids" "other token ids" \
    "$BIN" perplexity -m "$MODEL" -f "$TMP/shifted.txt" --ctx 16 --chunks 2 --kld "$TMP/self.kld"
out=$("$BIN" perplexity -m "$MODEL" -f "$TMP/short.txt" --ctx 16 --chunks 2 --kld "$TMP/self.kld" 2>&1)
if grep -q "same top-1:   100.000%" <<<"$out"; then p=$((p + 1)); else f=$((f + 1)); echo "FAIL self KLD: $out" >&2; fi

# the perplexity path's log-probabilities of the corpus's first window
"$BIN" perplexity -m "$MODEL" -f "$CORPUS" --ctx 256 --chunks 1 --kld-base "$TMP/base.kld" --kld-top 1 \
    >"$TMP/ppl.log" 2>&1 || die "perplexity: $(tail -n 3 "$TMP/ppl.log")"
python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))' < "$CORPUS" |
    "$BIN" tokenize -m "$MODEL" --jsonl > "$TMP/ids.json" || die "tokenize failed"

# the kernel set the server runs: the repeat tolerance depends on it
kset=$("$BIN" --version | grep -o '[a-z0-9-]* (in use)' | cut -d' ' -f1)
start_server 300 -m "$MODEL" --parallel 1 --ctx 1024 --seed 1
out=$(timeout 300 python3 "$HERE/logprobs_test.py" --base "http://127.0.0.1:$PORT" --ids "$TMP/ids.json" \
      --kld-base "$TMP/base.kld" --kernel-set "$kset" 2>&1)
rc=$?
printf '%s\n' "$out" | grep -v '^logprobs: '
line=$(printf '%s\n' "$out" | grep -E '^logprobs: [0-9]+ passed, [0-9]+ failed$' | tail -n 1)
pp=$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$line"); ff=$(sed -E 's/.*, ([0-9]+) failed/\1/' <<<"$line")
[ -n "$line" ] || { pp=0; ff=1; }
[ $rc -eq 0 ] || [ "$ff" -gt 0 ] || ff=1
server_alive || ff=$((ff + 1))
echo "logprobs: $((p + pp)) passed, $((f + ff)) failed"
[ $((f + ff)) -eq 0 ]
