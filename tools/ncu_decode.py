#!/usr/bin/env python3
"""ncu_decode.py - per-kernel time of the decode steps from an ncu --csv
run of gpu_bench (scripts/gpu-check.sh --ncu writes one).

    ncu_decode.py NCU.csv [STEPS]

The csv holds gpu__time_duration.sum (and optionally dram__bytes_read.sum)
for every launch. The decode steps are found by their embedding launches (one
per forward pass): the last STEPS (default 3) complete steps before the final
embedding are summed per kernel name. Prints launches, us per step, us per
launch and GB/s read for each kernel, then the step's total. ncu serializes
launches, so the total is the kernels' sum without the gaps a graph has."""
import collections
import csv
import re
import sys


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    hdr, launches = None, collections.OrderedDict()
    with open(sys.argv[1], newline="") as f:
        for row in csv.reader(f):
            if row and row[0] == "ID":
                hdr = row
                continue
            if not hdr or len(row) != len(hdr):
                continue  # ncu's own lines and gpu_bench's output
            d = dict(zip(hdr, row))
            k = launches.setdefault(d["ID"], {"name": re.sub(r"\(.*", "", d["Kernel Name"])})
            k[d["Metric Name"]] = float(d["Metric Value"].replace(",", ""))
    ks = list(launches.values())
    emb = [i for i, k in enumerate(ks) if k["name"].startswith("embedding")]
    if len(emb) < steps + 1:
        sys.exit(f"ncu_decode.py: {len(emb)} forward passes in {sys.argv[1]}, need {steps + 1}")
    agg = collections.OrderedDict()
    for k in ks[emb[-steps - 1]:emb[-1]]:
        a = agg.setdefault(k["name"], [0, 0.0, 0.0])
        a[0] += 1
        a[1] += k.get("gpu__time_duration.sum", 0.0)
        a[2] += k.get("dram__bytes_read.sum", 0.0)
    total = sum(a[1] for a in agg.values())
    print(f"{'kernel':<44} {'launches':>8} {'us/step':>9} {'us/launch':>9} {'GB/s':>7}")
    for name, (n, ns, b) in agg.items():
        print(f"{name[:44]:<44} {n / steps:8.0f} {ns / steps / 1e3:9.1f} {ns / n / 1e3:9.2f} {b / ns if ns else 0:7.0f}")
    print(f"{'step':<44} {sum(a[0] for a in agg.values()) / steps:8.0f} {total / steps / 1e3:9.1f}")


if __name__ == "__main__":
    main()
