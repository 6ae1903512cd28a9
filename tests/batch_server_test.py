#!/usr/bin/env python3
"""batch_server_test.py - continuous batching in `r1infer serve`, driven by
tests/batch_server.sh (a server with --parallel 4 and a small --batch-tokens,
so prompts are prefilled in chunks between the other slots' decode rows).

Standard library only (http.client, threads). Checks:
  - N concurrent greedy requests (prompts of different lengths, one longer
    than --batch-tokens) each return exactly what the same request returns
    alone;
  - a streaming client that hangs up frees its slot at once (/health,
    /metrics), and the server keeps serving;
  - 200 concurrent clients against a bounded queue: every response is a
    well-formed completion (200) or a well-formed 503 with Retry-After; the
    server is idle and alive afterwards;
  - n > 1: the choices of one prompt, prefilled once, each what n = 1 gives
    (greedy), streamed with their index and one [DONE];
  - GET /metrics is Prometheus text with the documented families, and its
    counters move; POST /tokenize and /detokenize round-trip.
Prints "batch_server: P passed, F failed" last.
"""
import argparse
import json
import re
import socket
import sys
import threading
import time

import server_common
from server_common import check, run_groups


class Server(server_common.Server):
    """--parallel 4 with chunked prefill: a request may wait its turn"""

    timeout, conn_timeout, poll = 120, 60, 0.02


def metric(text, name):
    m = re.search(r"^" + re.escape(name) + r" ([0-9.e+-]+)$", text, re.M)
    return float(m.group(1)) if m else None


def complete(srv, prompt, max_tokens, n=None):
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
    st, _, data = srv.request("POST", "/v1/completions", body)
    if st != 200:
        return None
    return json.loads(data)["choices"][0]["text"]


PROMPTS = [
    "Once upon a time",
    "The quick brown fox jumps over the lazy dog. " * 3,
    "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20",
    "A long prompt that needs several engine steps to prefill: " + " ".join(f"word{i}" for i in range(120)),
    "Hello",
    "In a hole in the ground there lived a hobbit. Not a nasty, dirty, wet hole.",
]


def test_same_as_alone(srv):
    alone = [complete(srv, p, 24) for p in PROMPTS]
    check(all(a is not None for a in alone), f"alone requests answer: {alone}")
    for rnd in range(2):
        got = [None] * len(PROMPTS)

        def one(i):
            time.sleep(0.01 * ((i * 7 + rnd) % 5))  # start at different steps
            got[i] = complete(srv, PROMPTS[i], 24)

        ts = [threading.Thread(target=one, args=(i,)) for i in range(len(PROMPTS))]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        for i in range(len(PROMPTS)):
            check(got[i] == alone[i], f"round {rnd}: prompt {i} concurrent {got[i]!r} != alone {alone[i]!r}")


def test_hangup(srv):
    _, _, m0 = srv.metrics()
    c0 = metric(m0, 'r1_requests_total{outcome="cancelled"}')
    conns = []
    for i in range(3):
        c = srv.conn()
        c.request("POST", "/v1/completions", json.dumps({"prompt": f"story {i}", "max_tokens": 100000,
                                                         "temperature": 1.0, "stream": True}),
                  {"Content-Type": "application/json"})
        conns.append(c)
    r = conns[0].getresponse()
    check(r.readline().startswith(b"data: "), "a stream starts")
    end = time.time() + 10
    while time.time() < end and srv.health()["slots_busy"] < 3:
        time.sleep(0.02)
    check(srv.health()["slots_busy"] == 3, "three streams generate")
    t = time.time()
    for c in conns:
        c.sock.shutdown(socket.SHUT_RDWR)
        c.close()
    h = srv.wait_idle(3.0)
    check(h["slots_busy"] == 0, f"hang-ups free the slots: {h} after {time.time() - t:.2f}s")
    _, _, m1 = srv.metrics()
    check(metric(m1, 'r1_requests_total{outcome="cancelled"}') >= c0 + 3, "the metrics count 3 cancellations")
    check(metric(m1, "r1_slots_busy") == 0, "r1_slots_busy 0 after hang-ups")
    check(complete(srv, "still there?", 4) is not None, "serving after hang-ups")


def test_many_clients(srv, n_clients):
    results = []
    lock = threading.Lock()

    def one(i):
        stream = i % 2 == 0
        body = {"prompt": f"client {i} says", "max_tokens": 8, "temperature": 0.7, "seed": i, "stream": stream}
        try:
            c = srv.conn(timeout=300)
            c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
            r = c.getresponse()
            data = r.read()
            hd = dict(r.getheaders())
            c.close()
            ok = False
            if r.status == 200 and not stream:
                j = json.loads(data)
                ok = j["object"] == "text_completion" and isinstance(j["choices"][0]["text"], str) and \
                    j["usage"]["completion_tokens"] >= 1
            elif r.status == 200:
                lines = [ln for ln in data.decode().split("\n") if ln]
                ok = lines[-1] == "data: [DONE]" and all(ln.startswith("data: ") for ln in lines)
                for ln in lines[:-1]:
                    j = json.loads(ln[6:])
                    ok = ok and j["object"] == "text_completion"
            elif r.status == 503:
                e = json.loads(data)["error"]
                ok = e["code"] == "server_busy" and "Retry-After" in hd
            with lock:
                results.append((r.status, ok))
        except Exception as e:  # noqa: BLE001 - every failure is a test failure
            with lock:
                results.append((0, False))
            print(f"client {i}: {type(e).__name__}: {e}", file=sys.stderr)

    ts = [threading.Thread(target=one, args=(i,)) for i in range(n_clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(300)
    served = sum(1 for s, ok in results if s == 200 and ok)
    busy = sum(1 for s, ok in results if s == 503 and ok)
    check(len(results) == n_clients, f"{len(results)} of {n_clients} clients finished")
    check(all(ok for _, ok in results), f"every response well-formed: {[r for r in results if not r[1]][:5]}")
    check(served >= 4 and served + busy == n_clients, f"{served} served + {busy} refused = {n_clients}")
    h = srv.wait_idle(10.0)
    check(h["slots_busy"] == 0 and h["queued"] == 0, f"idle after {n_clients} clients: {h}")
    print(f"  {n_clients} clients: {served} served, {busy} refused (503)", file=sys.stderr)


def test_metrics_tokenize(srv):
    st, hd, text = srv.metrics()
    check(st == 200 and hd.get("Content-Type", "").startswith("text/plain"), f"/metrics: {st} {hd}")
    for fam in ("r1_requests_total", "r1_prompt_tokens_total", "r1_completion_tokens_total", "r1_queue_length",
                "r1_slots_busy", "r1_step_seconds"):
        check(f"# TYPE {fam} " in text, f"/metrics has {fam}")
    for ln in text.splitlines():
        check(ln.startswith("#") or re.match(r"^[a-z0-9_]+(\{[a-z]+=\"[^\"]*\"\})? [0-9.e+-]+$", ln),
              f"a Prometheus sample line: {ln!r}")
    cnt = metric(text, "r1_step_seconds_count")
    inf = re.search(r'^r1_step_seconds_bucket\{le="\+Inf"\} (\d+)$', text, re.M)
    check(cnt and cnt > 0 and inf and float(inf.group(1)) == cnt, "the step histogram counts every step")
    out0 = metric(text, "r1_completion_tokens_total")
    complete(srv, "count the tokens", 5)
    check(metric(srv.metrics()[2], "r1_completion_tokens_total") >= out0 + 5, "tokens out grow by 5")
    st, _, data = srv.request("POST", "/tokenize", {"content": "Hello world, again"})
    toks = json.loads(data)["tokens"] if st == 200 else None
    check(st == 200 and toks and all(isinstance(t, int) for t in toks), f"/tokenize: {st} {data[:200]!r}")
    st, _, data = srv.request("POST", "/detokenize", {"tokens": toks or []})
    check(st == 200 and json.loads(data)["content"] == "Hello world, again", f"/detokenize: {st} {data[:200]!r}")
    st, _, data = srv.request("POST", "/tokenize", {"content": "Hi", "with_pieces": True})
    check(st == 200 and "".join(p["piece"] for p in json.loads(data)["tokens"]) == "Hi", f"pieces: {data[:200]!r}")
    st, _, _ = srv.request("POST", "/detokenize", {"tokens": [-1]})
    check(st == 400, "/detokenize refuses a bad id")


def test_n_choices(srv):
    prompt = "Several choices from one prompt, prefilled once: " + " ".join(f"n{i}" for i in range(40))
    alone = srv.request("POST", "/v1/completions", {"prompt": prompt, "max_tokens": 12, "temperature": 0})
    a = json.loads(alone[2])
    m0 = metric(srv.metrics()[2], "r1_prompt_tokens_total")
    st, _, data = srv.request("POST", "/v1/completions", {"prompt": prompt + " again", "max_tokens": 12,
                                                          "temperature": 0, "n": 3})
    j = json.loads(data) if st == 200 else {}
    ch = j.get("choices", [])
    check(st == 200 and sorted(c["index"] for c in ch) == [0, 1, 2], f"n = 3: three choices: {st} {data[:300]!r}")
    texts = {c["text"] for c in ch}
    check(len(texts) == 1, f"greedy choices agree: {texts}")
    m1 = metric(srv.metrics()[2], "r1_prompt_tokens_total")
    pt = j.get("usage", {}).get("prompt_tokens", 0)
    check(pt > 40 and m1 - m0 <= pt, f"the prompt is prefilled once: {m1 - m0} tokens computed, prompt {pt}")
    check(j.get("usage", {}).get("completion_tokens") == 36, f"usage sums the choices: {j.get('usage')}")
    # the choices continue the prompt exactly as one request alone does
    single = json.loads(srv.request("POST", "/v1/completions", {"prompt": prompt + " again", "max_tokens": 12,
                                                                 "temperature": 0})[2])
    check(texts == {single["choices"][0]["text"]}, f"n = 3 greedy == n = 1: {texts} vs {single['choices'][0]['text']!r}")
    check(a["choices"][0]["index"] == 0, "n = 1 has index 0")
    # sampled choices differ in their seeds; streaming tags every chunk with its choice
    c = srv.conn()
    c.request("POST", "/v1/chat/completions", json.dumps({"messages": [{"role": "user", "content": "hi"}], "n": 2,
                                                          "max_tokens": 10, "temperature": 1.0, "seed": 3,
                                                          "stream": True, "stream_options": {"include_usage": True}}),
              {"Content-Type": "application/json"})
    r = c.getresponse()
    lines = [ln for ln in r.read().decode().split("\n") if ln]
    c.close()
    check(lines and lines[-1] == "data: [DONE]" and sum(ln == "data: [DONE]" for ln in lines) == 1,
          f"one [DONE] at the end: {lines[-3:]}")
    finish, usage = {}, None
    for ln in lines[:-1]:
        ev = json.loads(ln[6:])
        if not ev["choices"]:
            usage = ev.get("usage")
        for chc in ev["choices"]:
            if chc.get("finish_reason"):
                finish[chc["index"]] = chc["finish_reason"]
    check(sorted(finish) == [0, 1], f"both choices finish: {finish}")
    check(usage and usage["completion_tokens"] >= 2, f"one usage chunk for both: {usage}")
    st, _, data = srv.request("POST", "/v1/completions", {"prompt": "x", "n": 5})
    check(st == 400 and b"--parallel" in data, f"n > --parallel: {st} {data[:200]!r}")
    check(srv.wait_idle(5)["slots_busy"] == 0, "idle after n > 1")


def test_prefix_sharing(srv):
    """A long prefix that another slot holds is copied, not computed: four prompts sharing a system part, first
    one after another (they all land on the slot that has it), then all at once (one gets that slot, the others
    copy its prefix): the same answers, usage.cached_tokens counts the copied part, /metrics the copies."""
    shared = "You are a careful assistant. Rules: " + " ".join(f"rule{i}" for i in range(150)) + ". "
    qs = [shared + f"Question {k}: what is {k} plus {k}?" for k in range(4)]

    def ask(q):
        st, _, data = srv.request("POST", "/v1/completions", {"prompt": q, "max_tokens": 12, "temperature": 0})
        if st != 200:
            return None, 0, 0
        d = json.loads(data)
        u = d["usage"]
        return d["choices"][0]["text"], u["prompt_tokens"], u.get("prompt_tokens_details", {}).get("cached_tokens", 0)

    seq = [ask(q) for q in qs]
    check(all(a[0] is not None for a in seq), f"prefix sharing: sequential answers {seq}")
    srv.wait_idle()
    m0 = metric(srv.metrics()[2], "r1_prefix_copies_total")
    got = [None] * len(qs)

    def one(i):
        got[i] = ask(qs[i])

    ts = [threading.Thread(target=one, args=(i,)) for i in range(len(qs))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    m1 = metric(srv.metrics()[2], "r1_prefix_copies_total")
    for i in range(len(qs)):
        check(got[i] is not None and got[i][0] == seq[i][0], f"prefix sharing: prompt {i} at once {got[i]} != "
                                                             f"one after another {seq[i]}")
    n_prompt = seq[0][1]
    taken = sorted(g[2] for g in got if g)
    print(f"  prefix sharing: prompts of {n_prompt} tokens, cached at once {taken}, copies {m0} -> {m1}",
          file=sys.stderr)
    check(m0 is not None and m1 is not None and m1 - m0 >= 2, f"prefix sharing: copies {m0} -> {m1} (want >= 2)")
    check(sum(t >= n_prompt - 20 for t in taken) >= 3, f"prefix sharing: cached tokens {taken} of {n_prompt}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--clients", type=int, default=200)
    a = ap.parse_args()
    srv = Server(a.base)
    return run_groups("batch_server", [
        ("same as alone", lambda: test_same_as_alone(srv)), ("hang-up", lambda: test_hangup(srv)),
        ("many clients", lambda: test_many_clients(srv, a.clients)),
        ("metrics+tokenize", lambda: test_metrics_tokenize(srv)), ("n > 1", lambda: test_n_choices(srv)),
        ("prefix sharing", lambda: test_prefix_sharing(srv))])


if __name__ == "__main__":
    sys.exit(main())
