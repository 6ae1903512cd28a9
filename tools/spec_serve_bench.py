#!/usr/bin/env python3
"""spec_serve_bench.py - decode speed of `r1infer serve` with and without
speculative decoding, one client, greedy.

    tools/spec_serve_bench.py [--bin build/r1infer] [-m MODEL] [--spec "--lookup 3"]
                              [--runs 3] [--max-tokens 160] [-t 2] [--clients N] data/spec/*.txt

Starts two servers of the same model (plain, and with the --spec flags),
then for each prompt file sends the same greedy streaming chat request to
each in turn, --runs times (alternating, so machine noise hits both alike).
Decode tok/s = (tokens - 1) / (time of the last token - time of the first),
so prefill is left out; the best run of each is reported, with the drafts
kept (usage.completion_tokens_details) and whether the texts are identical.
With --clients N (servers with --parallel N): N clients at once, each
prompt file in turn, and the figure is all tokens / wall time of the round
(prefill included), best of --runs per server.
Run it alone on the machine (flock -x /tmp/r1-cpu.lock on the shared box).
"""
import argparse
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time


def start(binary, model, threads, extra, log):
    cmd = [binary, "serve", "-m", model, "--host", "127.0.0.1", "--port", "0", "-t", str(threads), "--seed", "1"]
    p = subprocess.Popen(cmd + extra, stdout=log, stderr=log)
    for _ in range(600):
        log.flush()
        with open(log.name) as f:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", f.read())
        if m:
            return p, int(m.group(1))
        if p.poll() is not None:
            break
        time.sleep(0.1)
    p.kill()
    sys.exit(f"spec_serve_bench: the server did not start: {open(log.name).read()[-500:]}")


def one(port, prompt, max_tokens):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}}
    c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    text, times, usage = "", [], None
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        ev = json.loads(line[6:])
        if ev.get("usage"):
            usage = ev["usage"]
        for ch in ev["choices"]:
            d = ch.get("delta", {})
            piece = (d.get("content") or "") + (d.get("reasoning_content") or "")
            if piece:
                text += piece
                times.append(time.perf_counter())
    c.close()
    n = usage["completion_tokens"]
    dt = times[-1] - times[0] if len(times) > 1 else float("nan")
    return text, n, (n - 1) / dt if dt > 0 else float("nan"), usage


def many(a, porta, portb):
    prompts = [open(p).read() for p in a.prompts]
    print(f"model {a.model}, {a.threads} threads, greedy, {a.clients} clients at once over {len(prompts)} prompts, "
          f"{a.max_tokens} tokens at most, best of {a.runs}; speculative: {a.spec}")
    best, texts = {"plain": 0.0, "spec": 0.0}, {}
    for _ in range(a.runs):
        for name, port in (("plain", porta), ("spec", portb)):
            out = [None] * len(prompts)

            def client(c):
                for i in range(c, len(prompts), a.clients):
                    out[i] = one(port, prompts[i], a.max_tokens)

            t0 = time.perf_counter()
            ts = [threading.Thread(target=client, args=(c,)) for c in range(a.clients)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            wall = time.perf_counter() - t0
            best[name] = max(best[name], sum(o[1] for o in out) / wall)
            texts.setdefault(name, [o[0] for o in out])
    same = sum(x == y for x, y in zip(texts["plain"], texts["spec"]))
    print(f"plain {best['plain']:.1f} tok/s, speculative {best['spec']:.1f} tok/s "
          f"({best['spec'] / best['plain']:.2f}x); texts identical: {same}/{len(prompts)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("prompts", nargs="+")
    ap.add_argument("--bin", default="build/r1infer")
    ap.add_argument("-m", "--model", default="models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--spec", default="--lookup 3", help="the speculating server's flags")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--clients", type=int, default=1)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    la, lb = open(os.path.join(tmp, "plain.log"), "w"), open(os.path.join(tmp, "spec.log"), "w")
    par = ["--parallel", str(a.clients)]
    pa, porta = start(a.bin, a.model, a.threads, par, la)
    pb, portb = start(a.bin, a.model, a.threads, par + a.spec.split(), lb)
    if a.clients > 1:
        try:
            return many(a, porta, portb)
        finally:
            for p in (pa, pb):
                p.terminate()
                p.wait()
    print(f"model {a.model}, {a.threads} threads, greedy, {a.max_tokens} tokens at most, best of {a.runs}; "
          f"speculative: {a.spec}")
    print(f"{'prompt':<22} {'tokens':>6} {'plain tok/s':>11} {'spec tok/s':>10} {'speedup':>7} {'kept':>11} same")
    try:
        for path in a.prompts:
            prompt = open(path).read()
            best = {"plain": 0.0, "spec": 0.0}
            texts, usage, n = {}, None, 0
            for _ in range(a.runs):
                for name, port in (("plain", porta), ("spec", portb)):
                    text, n, tps, u = one(port, prompt, a.max_tokens)
                    best[name] = max(best[name], tps)
                    texts.setdefault(name, text)
                    if name == "spec":
                        usage = u
            d = (usage or {}).get("completion_tokens_details") or {}
            acc, rej = d.get("accepted_prediction_tokens", 0), d.get("rejected_prediction_tokens", 0)
            kept = f"{acc}/{acc + rej}" if acc + rej else "-"
            same = "yes" if texts["plain"] == texts["spec"] else "NO"
            print(f"{os.path.basename(path):<22} {n:>6} {best['plain']:>11.1f} {best['spec']:>10.1f} "
                  f"{best['spec'] / best['plain']:>6.2f}x {kept:>11} {same}")
            sys.stdout.flush()
    finally:
        for p in (pa, pb):
            p.terminate()
            p.wait()


if __name__ == "__main__":
    main()
