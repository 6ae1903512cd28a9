#!/usr/bin/env python3
"""serve_bench.py - decode speed of a running server as clients see it:
N clients at once, each one streamed chat request (temperature 0, fixed
max_tokens; on a random-weight model the answers run to it). Prints per
client the time to first token and its decode rate (tokens after the
first over the time after the first), and the aggregate decode rate:
the tokens streamed once every client had its first (every prompt is in)
over the time from then to the last token; and end to end, every token
over the time from the first request sent to the last token (prefill
included). Then time to first token and the time between tokens (inter-
token latency), p50 and p99. Any OpenAI-compatible server (llama-server
too). Standard library only.

  tools/serve_bench.py --base http://127.0.0.1:8080 --clients 8 --max-tokens 64
"""
import argparse
import http.client
import json
import statistics
import threading
import time
import urllib.parse

ap = argparse.ArgumentParser()
ap.add_argument("--base", required=True)
ap.add_argument("--clients", type=int, default=1)
ap.add_argument("--max-tokens", type=int, default=64)
ap.add_argument("--prompt", default="Explain how a transformer language model decodes one token.")
ap.add_argument("--prompt-words", type=int, default=0, help="make the prompt about this many words long "
                                                            "(a document to read: prefill-heavy requests)")
args = ap.parse_args()
u = urllib.parse.urlparse(args.base)
res = []
lock = threading.Lock()


def client(i):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=3600)
    text = f"({i}) {args.prompt}"
    if args.prompt_words:
        text = " ".join(f"w{(i * 7919 + k) % 5000}" for k in range(args.prompt_words)) + " " + text
    body = {"messages": [{"role": "user", "content": text}], "max_tokens": args.max_tokens,
            "temperature": 0, "stream": True}
    t0 = time.time()
    c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    times = []
    for line in r:
        if not line.startswith(b"data: ") or line.strip() == b"data: [DONE]":
            continue
        ev = json.loads(line[6:])
        d = ev["choices"][0].get("delta", {}) if ev.get("choices") else {}
        if d.get("content") or d.get("reasoning_content"):
            times.append(time.time())
    with lock:
        res.append((t0, times))


th = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
for t in th:
    t.start()
for t in th:
    t.join()
def pct(xs, p):
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


rates, ttft, gaps = [], [], []
for t0, times in res:
    ttft.append(times[0] - t0)
    gaps += [b - a for a, b in zip(times, times[1:])]
    if len(times) > 1:
        rates.append((len(times) - 1) / (times[-1] - times[0]))
t_sent = min(t[0] for t in res)
start = max(t[1][0] for t in res)
last = max(t[1][-1] for t in res)
tokens = sum(sum(1 for x in t[1] if x > start) for t in res)
print(f"serve_bench: {args.clients} clients x {args.max_tokens} tokens: aggregate {tokens / (last - start):.2f} tok/s, "
      f"per client {statistics.median(rates):.2f} tok/s (median), time to first token "
      f"{statistics.median(ttft):.2f} s (median); end to end {sum(len(t[1]) for t in res) / (last - t_sent):.2f} "
      f"tok/s (every token over the time from the first request to the last token)")
print(f"  time to first token p50 {pct(ttft, 50):.2f} s, p99 {pct(ttft, 99):.2f} s; between tokens p50 "
      f"{pct(gaps, 50) * 1e3:.0f} ms, p99 {pct(gaps, 99) * 1e3:.0f} ms" if gaps else "  (one token each)")
