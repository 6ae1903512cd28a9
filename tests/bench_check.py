#!/usr/bin/env python3
"""bench_check.py CSV JSON SVG - check the files `r1infer bench` writes.

Prints one line per check, "ok ..." or "FAIL ...", for tests/bench.sh to count.
CSV: the exact leaderboard header, 12 fields a row, numeric latency and
throughput, every suite kernel plus one decode_step row. JSON: parses, has the
sections and numbers the report promises. SVG: well-formed XML, an <svg> root.
"""
import csv
import json
import math
import sys
import xml.etree.ElementTree as ET

HEADER = ("device_id,kernel_id,dtype,input_shape,batch_size,impl_lang,latency_us,"
          "throughput_gbps,driver_version,toolchain,git_sha,submitter")
KERNELS = {"embedding", "rms_norm", "qkv_bias", "rope_qk", "kv_append", "attention_gqa",
           "matvec_add.o_proj", "gate_up_silu", "matvec_add.down_proj", "lm_head", "argmax",
           "sample", "decode_step"}


def check(ok, what):
    print(("ok " if ok else "FAIL ") + what)


def number(s):
    try:
        v = float(s)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def check_csv(path):
    with open(path, newline="") as f:
        text = f.read()
    lines = text.splitlines()
    check(bool(lines) and lines[0] == HEADER, "csv header is exactly the leaderboard header")
    rows = list(csv.reader(text.splitlines()[1:]))
    check(len(rows) >= len(KERNELS), "csv has %d rows (>= %d)" % (len(rows), len(KERNELS)))
    bad = [r for r in rows if len(r) != 12]
    check(not bad, "every csv row has 12 fields" + (": %r" % bad[:1] if bad else ""))
    good = [r for r in rows if len(r) == 12]
    nonnum = [r for r in good if number(r[6]) is None or number(r[7]) is None or number(r[6]) < 0]
    check(not nonnum, "latency_us and throughput_gbps are numbers" + (": %r" % nonnum[:1] if nonnum else ""))
    check(all(r[4] == "1" and r[5] == "c" for r in good), "batch_size 1, impl_lang c")
    check(all(r[0] and r[10] and r[11] for r in good), "device_id, git_sha and submitter are set")
    ids = {r[1] for r in good}
    check(KERNELS <= ids, "every kernel has a row (missing: %s)" % sorted(KERNELS - ids))
    check(sum(r[1] == "decode_step" for r in good) == 1, "exactly one decode_step row")


def check_json(path):
    try:
        with open(path) as f:
            j = json.load(f)
    except (OSError, ValueError) as e:
        check(False, "json parses: %s" % e)
        return
    check(True, "json parses")
    for key in ("machine", "bandwidth", "model", "kernel_suite", "in_situ", "end_to_end"):
        check(key in j, "json has '%s'" % key)
    bw = j.get("bandwidth", {}).get("best_gbps", 0)
    check(isinstance(bw, (int, float)) and bw > 0, "bandwidth best_gbps > 0")
    ks = j.get("kernel_suite", {}).get("kernels", [])
    check(len(ks) >= 12 and all(k.get("us_median", -1) >= 0 and k.get("bytes", 0) > 0 for k in ks),
          "kernel suite rows have a time and a traffic model")
    dec = [d for d in j.get("end_to_end", {}).get("decode", []) if not d.get("skipped")]
    check(dec and all(d.get("tok_s", 0) > 0 and d.get("bytes_per_token", 0) > 0 for d in dec),
          "decode rows have tok/s and bytes per token")
    pre = [p for p in j.get("end_to_end", {}).get("prefill", []) if not p.get("skipped")]
    check(pre and all(p.get("tok_s", 0) > 0 for p in pre), "prefill rows have tok/s")


def check_svg(path):
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        check(False, "svg is well-formed XML: %s" % e)
        return
    check(True, "svg is well-formed XML")
    check(root.tag == "{http://www.w3.org/2000/svg}svg", "svg root is <svg> in the SVG namespace")
    rects = root.findall(".//{http://www.w3.org/2000/svg}rect")
    check(len(rects) > 10, "svg has bars (%d rects)" % len(rects))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: bench_check.py CSV JSON SVG")
    check_csv(sys.argv[1])
    check_json(sys.argv[2])
    check_svg(sys.argv[3])
