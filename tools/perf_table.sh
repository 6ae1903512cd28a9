#!/usr/bin/env bash
# perf_table.sh - the performance table of docs/performance.md for this
# machine: `r1infer bench` end to end (prefill and decode tok/s, decode as a
# fraction of the bandwidth ceiling) for each model given, as one Markdown
# table headed by the machine, the date, the commit and the commands.
#
#   tools/perf_table.sh [-t THREADS] [-r RUNS] [-w LOAD] [-u FILE]... [MODEL_ARGS ...]
#
# Before the first run it waits (up to 10 minutes, saying so every 30 s)
# until the 1-minute load average is below LOAD (default 0.5): a table made
# beside other work shows a fraction of what the machine does alone. The
# load it started at is printed in the table's heading.
# -u FILE replaces the table between the lines <!-- perf:begin --> and
# <!-- perf:end --> of FILE (README.md, docs/performance.md) instead of
# printing it.
# Each MODEL_ARGS is one quoted argument list for bench, e.g.
#   tools/perf_table.sh "-m models/SmolLM2-135M-Instruct.Q4_1.gguf" \
#                       "--synthetic 1.5b --dtype q4_0" "--synthetic 1.5b --dtype bf16"
# Default: the default model. Output on stdout; R1_BIN picks the binary.
set -euo pipefail
BIN=${R1_BIN:-build/r1infer}
threads=$(nproc) runs=5 update=() max_load=0.5
while [ $# -gt 1 ] && { [ "$1" = -t ] || [ "$1" = -r ] || [ "$1" = -w ] || [ "$1" = -u ]; }; do
    case $1 in
    -t) threads=$2 ;;
    -r) runs=$2 ;;
    -w) max_load=$2 ;;
    -u) grep -q '^<!-- perf:begin -->$' "$2" || { echo "$0: $2 has no <!-- perf:begin --> line" >&2; exit 2; }
        update+=("$2") ;;
    esac
    shift 2
done
[ $# -gt 0 ] || set -- "-m models/SmolLM2-135M-Instruct.Q4_1.gguf"
[ -x "$BIN" ] || { echo "$0: no $BIN (run make first)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# a quiet machine first: the 1-minute load average below max_load
waited=0
while [ -r /proc/loadavg ] && awk -v m="$max_load" '{ exit !($1 >= m) }' /proc/loadavg; do
    if [ "$waited" -ge 600 ]; then
        echo "$0: load average still $(cut -d' ' -f1 /proc/loadavg) after 10 minutes; measuring anyway" >&2
        break
    fi
    [ $((waited % 30)) -eq 0 ] && echo "$0: waiting for the load average ($(cut -d' ' -f1 /proc/loadavg)) to fall below $max_load" >&2
    sleep 5
    waited=$((waited + 5))
done
load=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")
i=0
for args in "$@"; do
    i=$((i + 1))
    # shellcheck disable=SC2086 # each argument is a list of bench options
    "$BIN" bench $args -t "$threads" --runs "$runs" --json "$tmp/$i.json" >"$tmp/$i.txt" 2>"$tmp/$i.err" ||
        { echo "$0: bench $args failed:" >&2; tail -n 5 "$tmp/$i.err" >&2; exit 1; }
done

python3 - "$tmp" "$BIN" "$threads" "$runs" "$load" "$@" >"$tmp/table.md" <<'PY'
import json, os, sys, datetime
tmp, binary, threads, runs, load, argsets = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:]
runs_ = [json.load(open(f"{tmp}/{i + 1}.json")) for i in range(len(argsets))]
m = runs_[0]["machine"]
date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
print(f"### {m['cpu']} ({m['isa']}), {threads} threads\n")
quoted = " ".join(f'"{a}"' for a in argsets)
print(f"{date}, commit {m['git_sha']}, {m['toolchain']}, {m['os']}; "
      f"read bandwidth {runs_[0]['bandwidth']['best_gbps']:.1f} GB/s (best of the probe), "
      f"load average {load} before the first run. Made by "
      f"`tools/perf_table.sh -t {threads} -r {runs} {quoted}`, which runs:\n")
for a in argsets:
    print(f"    {binary} bench {a} -t {threads} --runs {runs} --json FILE")
print()
print("| model | weights | prefill 64 tok/s | prefill 512 tok/s | decode tok/s (ctx 0 / 512 / 4096) "
      "| decode GB/token | of the ceiling (ctx 0) |")
print("|---|---|---|---|---|---|---|")
for r in runs_:
    e, mo = r["end_to_end"], r["model"]
    pre = {p["tokens"]: p["tok_s"] for p in e["prefill"] if not p.get("skipped")}
    dec = [d for d in e["decode"] if not d.get("skipped")]
    fmt = lambda x: f"{x:.1f}" if x >= 10 else f"{x:.2f}"
    print(f"| {os.path.basename(mo['name'])} | {mo['dtype']} | {fmt(pre.get(64, 0))} | {fmt(pre.get(512, 0))} | "
          + " / ".join(fmt(d["tok_s"]) for d in dec)
          + f" | {dec[0]['bytes_per_token'] / 1e9:.3f} | {100 * dec[0]['fraction_of_ceiling']:.0f}% |")
PY
if [ ${#update[@]} -eq 0 ]; then
    cat "$tmp/table.md"
    exit 0
fi
for f in "${update[@]}"; do
    python3 - "$f" "$tmp/table.md" <<'PY'
import sys
path, table = sys.argv[1], open(sys.argv[2]).read()
text = open(path).read()
head, rest = text.split("<!-- perf:begin -->\n", 1)
_, tail = rest.split("<!-- perf:end -->", 1)
open(path, "w").write(head + "<!-- perf:begin -->\n" + table + "<!-- perf:end -->" + tail)
PY
    echo "$0: updated $f" >&2
done
