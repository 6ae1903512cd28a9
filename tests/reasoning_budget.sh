#!/usr/bin/env bash
# The reasoning budget end to end on a tiny synthetic model with the R1
# tokenizer and template (whose generation prompt opens <think>, and whose
# random weights never close it): run emits the ids of "\n</think>\n\n"
# after exactly N thinking tokens (before any with budget 0), chat closes
# the block too, and serve splits reasoning_content from content at the
# budget, per request (reasoning_budget_tokens, thinking_budget) or by the
# server's --reasoning-budget. Last line: "reasoning_budget: P passed, F failed".
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
NAME=reasoning_budget
. "$HERE/server_common.sh"
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }

"$BIN" synth --config tiny -o "$TMP/tiny" --seed 3 >/dev/null 2>&1 || die "synth failed"
M=$TMP/tiny
close=$(printf '%s\n' '"\n</think>\n\n"' | "$BIN" tokenize -m "$M" --jsonl)
check "the close sequence encodes (\\n</think>\\n\\n: $close)" python3 -c "import json,sys; assert len(json.loads(sys.argv[1])) >= 2" "$close"

ids() { "$BIN" run -m "$M" -p "What is 2+2?" -n 16 --temp 0 --ignore-eos --print-ids "$@" 2>"$TMP/run.err"; }
free=$(ids)
b5=$(ids --reasoning-budget 5)
b0=$(ids --reasoning-budget 0)
# python: the budget's ids are the free run's first N, then the close sequence
at() { python3 -c "
import json,sys
free, got, close, n = json.loads(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3]), int(sys.argv[4])
assert not any(i == close[1] for i in free), 'the model closed the block by itself'
assert got[:n] == free[:n], (got, free)
assert got[n:n + len(close)] == close, (got, close)
assert len(got) == 16
" "$free" "$1" "$close" "$2"; }
check "run --reasoning-budget 5: 5 thinking tokens, then \\n</think>\\n\\n" at "$b5" 5
check "run --reasoning-budget 0: the block closed before the first token" at "$b0" 0
"$BIN" run -m "$M" --prompt-ids 1,2 -n 2 --reasoning-budget 2 --lookup 2 >/dev/null 2>"$TMP/spec.err"
check "--reasoning-budget with --lookup is refused with a sentence" grep -q "does not combine with --lookup" "$TMP/spec.err"
"$BIN" run -m "$M" -p hi -n 2 --reasoning-budget -3 >/dev/null 2>"$TMP/neg.err"
check "--reasoning-budget -3 is refused" grep -q "reasoning-budget expects an integer" "$TMP/neg.err"

printf 'What is 2+2?\n' | "$BIN" chat -m "$M" -n 12 --temp 0 --reasoning-budget 4 >"$TMP/chat.out" 2>/dev/null
check "chat --reasoning-budget 4 closes the think block" grep -q "</think>" "$TMP/chat.out"
printf 'What is 2+2?\n' | "$BIN" chat -m "$M" -n 12 --temp 0 >"$TMP/chat0.out" 2>/dev/null
check "... which chat without a budget does not" bash -c "! grep -q '</think>' '$TMP/chat0.out'"

start_server 200 -m "$M" --ctx 256 --seed 1 --reasoning-budget 3
wait_health
post() { curl -s --max-time 60 "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' -d "$1"; }
req() { printf '{"messages":[{"role":"user","content":"What is 2+2?"}],"max_tokens":12,"temperature":0%s}' "$1"; }
post "$(req '')" >"$TMP/s_default.json"
post "$(req ',"reasoning_budget_tokens":-1')" >"$TMP/s_free.json"
post "$(req ',"reasoning_budget_tokens":6')" >"$TMP/s_6.json"
post "$(req ',"thinking_budget":0')" >"$TMP/s_0.json"
post "$(req ',"reasoning_budget_tokens":-2')" >"$TMP/s_bad.json"
msg() { python3 -c "
import json,sys
m = json.load(open(sys.argv[1]))['choices'][0]['message']
print(json.dumps([m.get('reasoning_content') or '', m.get('content') or '']))" "$1"; }
has() { python3 -c "
import json,sys
think, answer = json.loads(sys.argv[1])
want_think, want_answer = sys.argv[2] == '1', sys.argv[3] == '1'
assert bool(think) == want_think and bool(answer) == want_answer, (think, answer)
" "$(msg "$1")" "$2" "$3"; }
check "serve --reasoning-budget 3: reasoning_content and content both filled" has "$TMP/s_default.json" 1 1
check "reasoning_budget_tokens -1: all reasoning, no answer (the model never closes)" has "$TMP/s_free.json" 1 0
check "reasoning_budget_tokens 6: reasoning and answer" has "$TMP/s_6.json" 1 1
check "thinking_budget 0: no reasoning_content, an answer" has "$TMP/s_0.json" 0 1
longer() { python3 -c "
import json,sys
a, b = json.loads(sys.argv[1])[0], json.loads(sys.argv[2])[0]
assert len(b) > len(a) and b.startswith(a), (a, b)" "$(msg "$1")" "$(msg "$2")"; }
check "... a budget of 6 thinks longer than one of 3, along the same text" longer "$TMP/s_default.json" "$TMP/s_6.json"
check "reasoning_budget_tokens -2 is a 400 naming the field" grep -q '"param": *"reasoning_budget_tokens"' "$TMP/s_bad.json"
server_alive || bad "the server is still alive"

echo "$NAME: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
