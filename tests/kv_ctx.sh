#!/usr/bin/env bash
# Long context and the q8_0 KV cache end to end: with no --ctx, run takes
# the model's max_position_embeddings (a tiny synthetic model stretched to
# 32768) and accepts a prompt past 4096 tokens, saying what it chose; --kv
# q8_0 generates (cpu, ref, opencl and cuda alike), keeps speculative
# decoding exact and is refused where it cannot run; serve with no --ctx
# gives each conversation up to the model's length from a pool of 2 x that.
# Last line: "kv_ctx: P passed, F failed".
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
NAME=kv_ctx
. "$HERE/server_common.sh"
T=$TMP
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }

"$BIN" synth --config tiny -o "$T/tiny" --seed 7 2>/dev/null
sed -i 's/"max_position_embeddings": [0-9]*/"max_position_embeddings": 32768/' "$T/tiny/config.json"
check "the synthetic model says max_position_embeddings 32768" grep -q '"max_position_embeddings": 32768' "$T/tiny/config.json"

# a 5000-token prompt (ids, so no tokenizer time), 4 greedy tokens after it
ids=$(python3 -c "print(','.join(str(151646 if i == 0 else 1000 + (i * 7919) % 50000) for i in range(5000)))")
"$BIN" run -m "$T/tiny" --prompt-ids "$ids" -n 4 --temp 0 --ignore-eos --print-ids >"$T/o" 2>"$T/e"
check "run with no --ctx accepts a 5000-token prompt" test $? -eq 0
check "... and generates 4 tokens after it" python3 -c "import json; assert len(json.load(open('$T/o'))) == 4"
check "... saying the context is the model's 32768" \
    grep -q "^r1infer: context 32768 tokens, the model's max_position_embeddings (f16 KV cache" "$T/e"
"$BIN" run -m "$T/tiny" --prompt-ids "$ids" -n 4 --ctx 4096 --temp 0 >/dev/null 2>"$T/e2"
check "--ctx 4096 still refuses it, saying to raise --ctx" grep -q "raise --ctx" "$T/e2"
check "... and prints no notice (the user chose)" bash -c "! grep -q 'max_position_embeddings (' '$T/e2'"

# q8_0 KV: a model whose head_dim (32) is a multiple of the block
M=tests/fixtures/trained_f32
p=1,38,37,27,62,31,200,17
a=$("$BIN" run -m $M --prompt-ids $p -n 24 --temp 0 --ignore-eos --print-ids --kv q8_0 2>"$T/q8e")
check "--kv q8_0 runs and says its cache" grep -q "q8_0 KV cache" "$T/q8e"
check "... 24 greedy ids" python3 -c "import json,sys; assert len(json.loads(sys.argv[1])) == 24" "$a"
r=$("$BIN" run -m $M --prompt-ids $p -n 24 --temp 0 --ignore-eos --print-ids --kv q8_0 --backend ref 2>/dev/null)
check "--kv q8_0: cpu and ref give the same greedy ids" test "$a" = "$r"
l=$("$BIN" run -m $M --prompt-ids $p -n 24 --temp 0 --ignore-eos --print-ids --kv q8_0 --lookup 2 2>/dev/null)
check "--kv q8_0 --lookup (drafts verified, rejected rows rolled back) gives the same ids" test "$a" = "$l"
"$BIN" run -m "$T/tiny" --prompt-ids 151646,3838 -n 2 --kv q8_0 >/dev/null 2>"$T/hd"
check "--kv q8_0 on head_dim 16 is refused with a sentence" grep -q "needs a head_dim that is a multiple of 32" "$T/hd"
"$BIN" run -m $M --prompt-ids $p -n 2 --kv q4_0 >/dev/null 2>"$T/bad"
check "--kv q4_0 is refused, naming the choices" grep -q "f32, f16 or q8_0" "$T/bad"
c=$("$BIN" run -m $M --prompt-ids $p -n 24 --temp 0 --ignore-eos --print-ids --kv q8_0 --backend opencl 2>"$T/cl")
if grep -Eq "not in this build|no OpenCL" "$T/cl"; then
    check "--kv q8_0 on opencl: this build or machine has no OpenCL, said so" test -z "$c"
else
    check "--kv q8_0 on opencl gives ref's greedy ids" test "$c" = "$r"
fi
g=$("$BIN" run -m $M --prompt-ids $p -n 24 --temp 0 --ignore-eos --print-ids --kv q8_0 --backend cuda 2>"$T/cu")
if grep -Eq "not in this build|no CUDA|CUDA device" "$T/cu" && [ -z "$g" ]; then
    check "--kv q8_0 on cuda: this build or machine has no CUDA, said so" test -z "$g"
else
    check "--kv q8_0 on cuda gives ref's greedy ids" test "$g" = "$r"
fi

start_server 200 -m "$T/tiny" --parallel 2
wait_health
check "serve with no --ctx: a KV pool of 2 x the model's length, in a notice" \
    grep -q "^r1infer serve: KV pool of 65536 positions (f16, .* GB, committed as used) shared by 2 conversations of up to 32768" "$TMP/log"
check "... and the model's length per conversation on the start line" grep -q "ctx 32768 per conversation" "$TMP/log"
curl -s --max-time 60 "http://127.0.0.1:$PORT/v1/completions" -H 'Content-Type: application/json' \
    -d "{\"prompt\": [$ids], \"max_tokens\": 2, \"temperature\": 0}" >"$T/long.json"
check "... and completes a 5000-token prompt" python3 -c "
import json; r = json.load(open('$T/long.json')); assert r['usage']['prompt_tokens'] == 5000, r"
server_alive || bad "the server is still alive"

echo "kv_ctx: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
