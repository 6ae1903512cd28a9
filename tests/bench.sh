#!/usr/bin/env bash
# tests/bench.sh - `r1infer bench` end to end on the tiny synthetic model in
# quick mode (figures are not meaningful, the plumbing is): exit codes, the
# report's sections, and the CSV / JSON / SVG files (tests/bench_check.py).
# Prints "bench: P passed, F failed" last.
set -u
BIN=${R1_BIN:-build/r1infer}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
expect() { # description, condition...
    local what=$1; shift
    if "$@"; then ok; else bad "$what"; fi
}

"$BIN" bench --synthetic tiny --quick --runs 3 --compare ref \
    --csv "$tmp/b.csv" --json "$tmp/b.json" --svg "$tmp/b.svg" >"$tmp/out" 2>"$tmp/err"
rc=$?
expect "bench exits 0 (got $rc: $(tail -n 3 "$tmp/err"))" test "$rc" -eq 0
for section in "bandwidth" "kernel suite" "in situ" "end to end" "backend cpu" "backend ref" "attention_gqa" \
    "prefill    64" "decode  ctx     0" "bench finished"; do
    expect "report has '$section'" grep -q -- "$section" "$tmp/out"
done
expect "nothing on stderr without a terminal" test ! -s "$tmp/err"

if command -v python3 >/dev/null; then
    python3 "$here/bench_check.py" "$tmp/b.csv" "$tmp/b.json" "$tmp/b.svg" >"$tmp/check" 2>&1
    p=$(grep -c '^ok ' "$tmp/check"); f=$(grep -c '^FAIL' "$tmp/check")
    pass=$((pass + p)); fail=$((fail + f))
    grep '^FAIL' "$tmp/check"
    if [ "$p" -eq 0 ]; then bad "bench_check.py ran no checks: $(tail -n 3 "$tmp/check")"; fi
else
    echo "bench: python3 not found, file checks skipped"
fi

# usage errors exit 2 with a sentence, and never start a run
# (a copy of the binary run from an empty directory: no default model beside it)
cp "$BIN" "$tmp/r1infer-copy"
(cd "$tmp" && R1INFER_MODEL= ./r1infer-copy bench >/dev/null 2>"$tmp/e1"); rc=$?
expect "no model: exit 2 (got $rc)" test "$rc" -eq 2
expect "no model: says what to do" grep -q -- "--synthetic" "$tmp/e1"
"$BIN" bench --synthetic tiny --bogus >/dev/null 2>&1; rc=$?
expect "unknown option: exit 2 (got $rc)" test "$rc" -eq 2
"$BIN" bench --synthetic nope --quick >/dev/null 2>"$tmp/e2"; rc=$?
expect "unknown synthetic shape: exit 1 (got $rc)" test "$rc" -eq 1
expect "unknown synthetic shape: names the choices" grep -q "1.5b" "$tmp/e2"
"$BIN" bench --synthetic tiny --runs 0 >/dev/null 2>&1; rc=$?
expect "--runs 0: exit 2 (got $rc)" test "$rc" -eq 2

# --batch: one decode_batch CSV row per batch size, a chart, bad lists refused
"$BIN" bench --synthetic tiny --quick --batch 1,3 --csv "$tmp/bb.csv" --svg "$tmp/bb.svg" >"$tmp/bout" 2>"$tmp/berr"; rc=$?
expect "--batch 1,3: exit 0 (got $rc: $(tail -n 2 "$tmp/berr"))" test "$rc" -eq 0
expect "--batch: the report has a row per batch size (depth 0)" grep -Eq '^ +0 +3 +[0-9.]+ +[0-9.]+' "$tmp/bout"
expect "--batch: the report has the bandwidth probe" grep -q '^bandwidth [0-9.]* GB/s' "$tmp/bout"
expect "--batch: CSV rows for batch sizes 1 and 3" test "$(awk -F, 'NR > 1 && $2 == "decode_batch" {print $5}' "$tmp/bb.csv" | tr '\n' ' ')" = "1 3 "
expect "--batch: the CSV header has batch_size" grep -q '^device_id,kernel_id,dtype,input_shape,batch_size,' "$tmp/bb.csv"
if command -v python3 >/dev/null; then
    expect "--batch: the SVG parses" python3 -c "import sys, xml.dom.minidom as m; m.parse(sys.argv[1])" "$tmp/bb.svg"
fi
"$BIN" bench --synthetic tiny --quick --batch 1,3 --profile >"$tmp/bpout" 2>"$tmp/bperr"; rc=$?
expect "--batch --profile: exit 0 (got $rc: $(tail -n 2 "$tmp/bperr"))" test "$rc" -eq 0
expect "--batch --profile: a profile with a column per batch size" grep -Eq '^  kernel +batch 1 +batch 3 *$' "$tmp/bpout"
expect "--batch --profile: lm_head's ms per step at both sizes, shares that sum to ~100%" \
    awk '/^kernel profile/ {p = 1; next} $1 == "kernel" {next} p && NF == 5 {a += $3; b += $5; if ($1 == "lm_head" && $2 > 0 && $4 > 0) l = 1}
         END {exit !(l && a > 99 && a < 101 && b > 99 && b < 101)}' "$tmp/bpout"
expect "--batch without --profile: no profile" sh -c "! grep -q '^kernel profile' '$tmp/bout'"
# --batch with --depth: each size at each depth, every sequence that deep
"$BIN" bench --synthetic tiny --quick --batch 1,2 --depth 40,100 --csv "$tmp/bd.csv" >"$tmp/bdout" 2>"$tmp/bderr"; rc=$?
expect "--batch --depth: exit 0 (got $rc: $(tail -n 2 "$tmp/bderr"))" test "$rc" -eq 0
expect "--batch --depth: rows for batch 2 at depths 40 and 100, with a share of the bandwidth" \
    sh -c "grep -Eq '^ +40 +2 +[0-9.]+ .* [0-9.]+% ' '$tmp/bdout' && grep -Eq '^ +100 +2 +[0-9.]+ .* [0-9.]+% ' '$tmp/bdout'"
expect "--batch --depth: CSV rows name the positions decoded" \
    test "$(awk -F, 'NR > 1 {print $4 "/" $5}' "$tmp/bd.csv" | tr '\n' ' ')" = '"synthetic tiny ctx 40-42"/1 "synthetic tiny ctx 40-42"/2 "synthetic tiny ctx 100-102"/1 "synthetic tiny ctx 100-102"/2 '
"$BIN" bench --synthetic tiny --quick --batch 1 --depth 1000000 >/dev/null 2>"$tmp/bderr2"; rc=$?
expect "--batch --depth past the model's length: an error naming it (got $rc: $(cat "$tmp/bderr2"))" \
    sh -c "test $rc -ne 0 && grep -q 'positions' '$tmp/bderr2'"
"$BIN" bench --synthetic tiny --batch 0,2 >/dev/null 2>&1; rc=$?
expect "--batch 0,2: exit 2 (got $rc)" test "$rc" -eq 2
"$BIN" bench --synthetic tiny --batch 2, >/dev/null 2>&1; rc=$?
expect "--batch 2,: exit 2 (got $rc)" test "$rc" -eq 2

# tools/gpu_bench (scripts/gpu-check.sh's benchmark) on the cpu backend: it builds its
# models by hand, so a field the session starts to read shows up here, not first on a GPU machine
GB=$(dirname "$BIN")/tools/gpu_bench
if [ -x "$GB" ]; then
    "$GB" --backend cpu --models tiny --dtypes bf16,q8_0 --gen 4 --prompt 16 --profile >"$tmp/gb" 2>&1; rc=$?
    expect "gpu_bench --backend cpu: exit 0 (got $rc: $(tail -n 2 "$tmp/gb"))" test "$rc" -eq 0
    expect "gpu_bench: a table row per dtype" test "$(grep -Ec '^\| tiny \| (bf16|q8_0) \| [0-9.]+ \|' "$tmp/gb")" -eq 2
    expect "gpu_bench --profile: lm_head's time per step" grep -Eq '^  profile tiny +bf16 +lm_head +[0-9.]+ us/step' "$tmp/gb"
else
    bad "no $GB (make tests builds it)"
fi

# tools/ncu_decode.py (gpu-check.sh --ncu) on a made-up ncu csv: 4 forward passes of
# embedding + 2 matvec launches; the last 2 complete steps are summed per kernel
if command -v python3 >/dev/null; then
    {
        echo '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"'
        id=0
        for step in 1 2 3 4; do
            for k in "embedding_kernel(int)" "matvec_kernel<2, 1>(dmat)" "matvec_kernel<2, 1>(dmat)"; do
                echo "\"$id\",\"$k\",\"gpu__time_duration.sum\",\"ns\",\"$((1000 * step))\""
                echo "\"$id\",\"$k\",\"dram__bytes_read.sum\",\"byte\",\"2,000,000\""
                id=$((id + 1))
            done
        done
    } >"$tmp/ncu.csv"
    python3 "$here/../tools/ncu_decode.py" "$tmp/ncu.csv" 2 >"$tmp/ncu.out" 2>&1; rc=$?
    expect "ncu_decode.py: exit 0 (got $rc: $(tail -n 2 "$tmp/ncu.out"))" test "$rc" -eq 0
    # steps 2 and 3: matvec 2 launches a step, (2 x 2000 + 2 x 3000) ns / 2 steps = 5.0 us, 2.50 us a launch
    expect "ncu_decode.py: matvec's launches, us per step and per launch" \
        grep -Eq '^matvec_kernel<2, 1> +2 +5\.0 +2\.50 +800$' "$tmp/ncu.out"
    expect "ncu_decode.py: the step's total" grep -Eq '^step +3 +7\.5$' "$tmp/ncu.out"
fi

# --depth: decode rows at long contexts, capped at the model's length (tiny: 4096)
"$BIN" bench --synthetic tiny --quick --runs 1 --depth 1500,9000 >"$tmp/depth.out" 2>"$tmp/depth.err"; rc=$?
expect "bench --depth: exit 0 (got $rc: $(tail -n 2 "$tmp/depth.err"))" test "$rc" -eq 0
expect "bench --depth 1500: a decode row at ctx 1500" grep -Eq 'decode +ctx +1500 ' "$tmp/depth.out"
# the 4096 row and the capped 9000 row both decode at the last positions the context holds
expect "bench --depth 9000: capped at the model's 4096 positions" \
    test "$(grep -Ec 'decode +ctx +409[0-9] ' "$tmp/depth.out")" -eq 2
"$BIN" bench --synthetic tiny --quick --depth 0x >/dev/null 2>"$tmp/depth_bad.err"
expect "bench --depth 0x is refused" grep -q "depth expects up to 5 contexts" "$tmp/depth_bad.err"

echo "bench: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
