#!/usr/bin/env python3
"""loadtest.py - concurrent streaming clients against `r1infer serve` on loopback.

    tools/loadtest.py --base http://127.0.0.1:8080 [--clients 50] [--requests 100]
                      [--max-tokens 32] [--temperature 0.6] [--disconnect-every 5] [--duration 120] [--key KEY]

Each of --clients threads sends streaming /v1/chat/completions requests
(http.client, no extra packages) until --requests have been sent or
--duration seconds have passed. Every --disconnect-every-th request hangs up
after its first few events, to exercise cancellation. Half of the prompts
share a long prefix, to exercise the prompt cache. Reports requests/s,
tokens/s, time to first token (p50/p99), 503s and errors, and checks that
every slot is idle again at the end (/health). Loopback only.
"""
import argparse
import http.client
import json
import socket
import statistics
import sys
import threading
import time
import urllib.parse

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def percentile(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.ttft, self.latency = [], []
        self.completed = self.disconnected = self.rejected = self.errors = self.tokens = 0
        self.error_samples = []

    def add(self, **kw):
        with self.lock:
            for k, v in kw.items():
                if k in ("ttft", "latency"):
                    getattr(self, k).append(v)
                elif k == "error":
                    self.errors += 1
                    if len(self.error_samples) < 5:
                        self.error_samples.append(v)
                else:
                    setattr(self, k, getattr(self, k) + v)


def one_request(host, port, key, i, args, stats):
    prefix = "You are a careful assistant. Answer briefly and check your work. " * 4 if i % 2 else ""
    body = json.dumps({"model": "load", "messages": [{"role": "user", "content": f"{prefix}Request {i}: count to ten."}],
                       "max_tokens": args.max_tokens, "stream": True, "temperature": args.temperature, "seed": i})
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    hang_up = args.disconnect_every > 0 and i % args.disconnect_every == args.disconnect_every - 1
    t0 = time.perf_counter()
    c = http.client.HTTPConnection(host, port, timeout=args.request_timeout)
    try:
        c.request("POST", "/v1/chat/completions", body, headers)
        r = c.getresponse()
        if r.status == 503:
            r.read()
            stats.add(rejected=1)
            return
        if r.status != 200:
            stats.add(error=f"status {r.status}: {r.read()[:200]!r}")
            return
        first, events, done = None, 0, False
        while True:
            line = r.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data: "):
                continue
            data = line[6:]
            if data == b"[DONE]":
                done = True
                break
            j = json.loads(data)
            if "error" in j:
                stats.add(error=f"stream error: {j['error']}")
                return
            d = j["choices"][0].get("delta", {}) if j.get("choices") else {}
            if d.get("content") or d.get("reasoning_content"):
                events += 1
                if first is None:
                    first = time.perf_counter() - t0
                    stats.add(ttft=first)
                if hang_up and events >= 3:
                    c.sock.shutdown(socket.SHUT_RDWR)
                    stats.add(disconnected=1, tokens=events)
                    return
        if done:
            stats.add(completed=1, tokens=events, latency=time.perf_counter() - t0)
        else:
            stats.add(error="stream ended without [DONE]")
    except (OSError, http.client.HTTPException, ValueError) as e:
        stats.add(error=f"{type(e).__name__}: {e}")
    finally:
        c.close()


def health(host, port):
    c = http.client.HTTPConnection(host, port, timeout=10)
    try:
        c.request("GET", "/health")
        return json.loads(c.getresponse().read())
    finally:
        c.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default="http://127.0.0.1:8080")
    ap.add_argument("--key", default=None)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--requests", type=int, default=100)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--temperature", type=float, default=0.6, help="0 = greedy (cheapest sampling)")
    ap.add_argument("--disconnect-every", type=int, default=5)
    ap.add_argument("--duration", type=float, default=120, help="stop sending new requests after this many seconds")
    ap.add_argument("--request-timeout", type=float, default=300)
    args = ap.parse_args()
    u = urllib.parse.urlparse(args.base)
    if u.hostname not in LOOPBACK:
        sys.exit(f"loadtest.py: refusing {u.hostname}: loopback addresses only")
    host, port = u.hostname, u.port or 80
    args.clients = max(1, min(args.clients, 500))
    args.requests = max(1, min(args.requests, 100000))

    stats = Stats()
    next_i = [0]
    lock = threading.Lock()
    deadline = time.time() + args.duration

    def client():
        while True:
            with lock:
                i = next_i[0]
                if i >= args.requests or time.time() > deadline:
                    return
                next_i[0] += 1
            one_request(host, port, args.key, i, args, stats)

    h0 = health(host, port)
    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, daemon=True) for _ in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(args.duration + args.request_timeout)
    wall = time.perf_counter() - t0
    end = time.time() + 5
    h = health(host, port)
    while (h["slots_busy"] or h["queued"]) and time.time() < end:
        time.sleep(0.05)
        h = health(host, port)

    finished = stats.completed + stats.disconnected
    print(f"clients {args.clients}, requests sent {next_i[0]}, max_tokens {args.max_tokens}, server slots {h0['slots']}")
    print(f"completed {stats.completed}, disconnected on purpose {stats.disconnected}, 503 {stats.rejected}, "
          f"errors {stats.errors}")
    print(f"wall {wall:.2f} s: {finished / wall:.2f} requests/s, {stats.tokens / wall:.1f} streamed events/s")
    print(f"time to first token: p50 {percentile(stats.ttft, 50) * 1e3:.0f} ms, p99 {percentile(stats.ttft, 99) * 1e3:.0f} ms "
          f"(n={len(stats.ttft)})")
    if stats.latency:
        print(f"full request latency: p50 {percentile(stats.latency, 50):.2f} s, p99 {percentile(stats.latency, 99):.2f} s, "
              f"mean {statistics.mean(stats.latency):.2f} s")
    print(f"server after: {h}")
    for e in stats.error_samples:
        print(f"  error: {e}")
    ok = stats.errors == 0 and h["slots_busy"] == 0 and h["queued"] == 0
    print("loadtest: OK" if ok else "loadtest: PROBLEMS")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
