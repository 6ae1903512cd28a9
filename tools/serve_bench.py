#!/usr/bin/env python3
"""serve_bench.py - a load generator for OpenAI-compatible servers: N clients
at once, each sending its requests one after another (streamed chat, the
answer's tokens timed as they arrive), with lengths drawn from a fixed-seed
distribution shaped like ShareGPT conversations (log-normal prompt and
answer lengths, median ~110 prompt words and ~120 answer tokens, clipped),
half of the requests opening with the same ~300-word system prompt (a
shared instruction or tool list). Every server gets the same requests.

Per server and client count it prints: aggregate output tok/s (every
answer token over the time from the first request to the last token),
requests/s, time to first token p50/p99 and time between tokens (inter-
token latency) p50/p99; with two servers, the ratios.

Drive servers already running (--base URL, repeated) or start them on
one model file (--model F with --r1 BIN and/or --llama-server BIN: both
start with the same threads, slots and context per slot, both up at once,
asked in turn for each client count, --rounds times, each round its own
requests: a server's cache of the last round's prompts does not help it).
Standard library only.

  tools/serve_bench.py --model m.gguf --r1 build/r1infer --llama-server PATH/llama-server \\
      --clients 1,8,32 --parallel 16 --threads 2
"""
import argparse
import http.client
import json
import math
import os
import random
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse

from loadtest import percentile as pct  # tools/loadtest.py, beside this one

WORDS = ("the of and to in is was for on that with as by at from his her an are this which be or have had not "
         "but one all were they their has been more when who will would there can out some what about into than "
         "them only other time new these two may first then do any like my now over such our man me even most "
         "made after also did many before must through back years where much your way well down should because "
         "each just those people how too little state good very make world still own see men work long get here "
         "between both life being under never day same another know while last might us great old year off come "
         "since against go came right used take three").split()


def words(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def lognormal(rng, median, sigma, lo, hi):
    return int(min(hi, max(lo, round(math.exp(rng.gauss(math.log(median), sigma))))))


def workload(seed, n_clients, per_client, max_prompt, max_answer, fixed_words=0, fixed_tokens=0, shared=0.5):
    """The requests of each client: (messages, max_tokens), the same for every server; fixed_words /
    fixed_tokens replace the drawn lengths, shared is the share of requests with the system prompt."""
    rng = random.Random(seed)
    system = "You are a helpful assistant. Follow these rules. " + words(random.Random(seed + 1), 300)
    out = []
    for c in range(n_clients):
        reqs = []
        for r in range(per_client):
            msgs = []
            if rng.random() < shared:
                msgs.append({"role": "system", "content": system})
            nw, nt = lognormal(rng, 110, 0.9, 8, max_prompt), lognormal(rng, 120, 0.7, 16, max_answer)
            msgs.append({"role": "user", "content": f"({c}.{r}) " + words(rng, fixed_words or nw)})
            reqs.append((msgs, fixed_tokens or nt))
        out.append(reqs)
    return out


def one_request(base, msgs, max_tokens, model):
    u = urllib.parse.urlparse(base)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=3600)
    body = {"model": model, "messages": msgs, "max_tokens": max_tokens, "temperature": 0, "stream": True}
    t0 = time.time()
    c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    times, status = [], r.status
    for line in r:
        if not line.startswith(b"data: ") or line.strip() == b"data: [DONE]":
            continue
        ev = json.loads(line[6:])
        d = ev["choices"][0].get("delta", {}) if ev.get("choices") else {}
        if d.get("content") or d.get("reasoning_content"):
            times.append(time.time())
    c.close()
    return t0, times, status


def run(base, work, model):
    res, lock = [], threading.Lock()

    def client(reqs):
        for msgs, mt in reqs:
            t0, times, st = one_request(base, msgs, mt, model)
            with lock:
                res.append((t0, times, st))

    th = [threading.Thread(target=client, args=(w,)) for w in work]
    t_start = time.time()
    for t in th:
        t.start()
    for t in th:
        t.join()
    ok = [r for r in res if r[2] == 200 and r[1]]
    last = max(r[1][-1] for r in ok) if ok else time.time()
    ntok = sum(len(r[1]) for r in ok)
    ttft = [r[1][0] - r[0] for r in ok]
    gaps = [b - a for r in ok for a, b in zip(r[1], r[1][1:])]
    wall = last - t_start
    return {"tok_s": ntok / wall, "req_s": len(ok) / wall, "tokens": ntok, "failed": len(res) - len(ok),
            "ttft50": pct(ttft, 50), "ttft99": pct(ttft, 99), "itl50": pct(gaps, 50) * 1e3,
            "itl99": pct(gaps, 99) * 1e3, "wall": wall}


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def start(name, cmd, log):
    port = free_port()
    cmd = [x.replace("{PORT}", str(port)) for x in cmd]
    f = open(log, "w")
    p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    for _ in range(1200):
        if p.poll() is not None:
            sys.exit(f"serve_bench: {name} exited at start (see {log})")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return p, base
        except OSError:
            pass
        time.sleep(0.25)
    p.kill()
    sys.exit(f"serve_bench: {name} did not answer /health (see {log})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", action="append", default=[], help="a running server (repeat for several)")
    ap.add_argument("--model", help="a GGUF file: start the servers below on it")
    ap.add_argument("--r1", help="r1infer binary to start (serve)")
    ap.add_argument("--llama-server", help="llama-server binary to start")
    ap.add_argument("--clients", default="1,8,32")
    ap.add_argument("--requests", type=int, default=0, help="requests per client (default: 4 / 2 / 1 for "
                                                             "1 / up to 8 / more clients)")
    ap.add_argument("--parallel", type=int, default=16, help="slots of each started server")
    ap.add_argument("--ctx", type=int, default=2048, help="context per slot of each started server")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-prompt", type=int, default=600, help="most words of a user message")
    ap.add_argument("--max-answer", type=int, default=400, help="most tokens of an answer")
    ap.add_argument("--prompt-words", type=int, default=0, help="every user message this many words instead")
    ap.add_argument("--max-tokens", type=int, default=0, help="every answer this many tokens instead")
    ap.add_argument("--shared", type=float, default=0.5, help="share of requests with the system prompt")
    a = ap.parse_args()
    servers, procs = [], []
    logdir = os.environ.get("TMPDIR", "/tmp")
    if a.model and a.r1:
        p, base = start("r1infer", [a.r1, "serve", "-m", a.model, "--port", "{PORT}", "--parallel", str(a.parallel),
                                    "--ctx", str(a.ctx), "-t", str(a.threads), "--queue", "256",
                                    "--no-access-log"], f"{logdir}/serve_bench_r1.log")
        servers.append(("r1infer", base)), procs.append(p)
    if a.model and a.llama_server:
        p, base = start("llama-server", [a.llama_server, "-m", a.model, "--port", "{PORT}", "-np", str(a.parallel),
                                         "-c", str(a.ctx * a.parallel), "-t", str(a.threads), "--jinja"],
                        f"{logdir}/serve_bench_llama.log")
        servers.append(("llama-server", base)), procs.append(p)
    servers += [(b, b) for b in a.base]
    if not servers:
        sys.exit("serve_bench: no server (--base URL, or --model with --r1 / --llama-server)")
    model = os.path.basename(a.model) if a.model else "default"
    rows = []
    try:
        for rnd in range(a.rounds):
            for n in [int(x) for x in a.clients.split(",")]:
                per = a.requests or (4 if n == 1 else 2 if n <= 8 else 1)
                work = workload(a.seed + n + 1000 * rnd, n, per, a.max_prompt, a.max_answer, a.prompt_words, a.max_tokens,
                                a.shared)
                res = {}
                for name, base in servers:
                    t = time.time()
                    res[name] = run(base, work, model)
                    r = res[name]
                    print(f"round {rnd + 1}, {n} clients x {per} requests, {name}: {r['tok_s']:.2f} tok/s, "
                          f"{r['req_s']:.3f} req/s, TTFT p50 {r['ttft50']:.2f} s p99 {r['ttft99']:.2f} s, ITL p50 "
                          f"{r['itl50']:.0f} ms p99 {r['itl99']:.0f} ms, {r['tokens']} tokens, {r['failed']} failed "
                          f"({time.time() - t:.0f} s)", flush=True)
                rows.append((rnd + 1, n, per, res))
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
    names = [s[0] for s in servers]
    print()
    print("| round | clients x requests | " + " | ".join(f"{n}: tok/s, req/s, TTFT p50/p99 s, ITL p50/p99 ms"
                                                       for n in names) + (" | tok/s ratio, TTFT p99 ratio |"
                                                                          if len(names) == 2 else " |"))
    print("|---" * (2 + len(names) + (len(names) == 2)) + "|")
    for rnd, n, per, res in rows:
        cells = [f"{res[x]['tok_s']:.2f}, {res[x]['req_s']:.3f}, {res[x]['ttft50']:.2f}/{res[x]['ttft99']:.2f}, "
                 f"{res[x]['itl50']:.0f}/{res[x]['itl99']:.0f}" for x in names]
        if len(names) == 2:
            r0, r1 = res[names[0]], res[names[1]]
            cells.append(f"{r0['tok_s'] / r1['tok_s']:.2f}x, {r0['ttft99'] / r1['ttft99']:.2f}x")
        print(f"| {rnd} | {n} x {per} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
