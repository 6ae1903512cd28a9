#!/usr/bin/env python3
"""spec_server_test.py - speculative decoding in `r1infer serve`, driven by
tests/spec_server.sh: one plain server and one or more speculating servers
(--lookup N, --draft MODEL) of the same model, each with --parallel 3 and
--batch-tokens 16 (steps of <= 16 rows: every row bit for bit one decode
step, so a greedy text cannot depend on what shares its step).

Standard library only. For every speculating server, against the plain one:
  - greedy chat and text completions, several concurrent clients, streamed
    and not, give exactly the plain server's text (reasoning and content);
    max_tokens, stop strings, n = 2 choices, a follow-up that reuses the
    slot's prompt cache (holding speculated tokens), and a request after a
    client hung up mid-stream, too;
  - logprobs requests (not speculated) give the plain server's logprobs;
  - sampling requests (temperature > 0) complete and are well formed;
  - usage has completion_tokens_details (accepted <= drafted) and /metrics
    the r1_spec_* counters, which grow; with --quote, a prompt that quotes a
    text gets accepted drafts (> 0) on each speculating server.
Prints "spec_server: P passed, F failed" last.
"""
import argparse
import json
import re
import socket
import sys
import threading
import time
import traceback

import server_common
from server_common import check


class Server(server_common.Server):
    """a speculating server: long requests (ASan builds), /metrics as text"""

    timeout, conn_timeout, poll = 300, 300, 0.02

    def metrics(self):
        return super().metrics()[2]


def metric(text, name):
    m = re.search(r"^" + re.escape(name) + r" ([0-9.e+-]+)$", text, re.M)
    return float(m.group(1)) if m else None


def run(srv, path, body):
    """One request; streamed or not, returns (status, text, reasoning, finish, usage, raw)."""
    if not body.get("stream"):
        st, j = srv.post(path, body)
        if st != 200:
            return st, None, None, None, None, j
        c = j["choices"][0]
        if "message" in c:
            return st, c["message"].get("content") or "", c["message"].get("reasoning_content") or "", \
                c["finish_reason"], j.get("usage"), j
        return st, c["text"], "", c["finish_reason"], j.get("usage"), j
    c = srv.conn()
    body = dict(body, stream_options={"include_usage": True})
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read().decode()
    c.close()
    if r.status != 200:
        return r.status, None, None, None, None, data
    lines = [ln for ln in data.split("\n") if ln]
    text, reasoning, finish, usage, ok = "", "", None, None, True
    ok = lines[-1] == "data: [DONE]" and all(ln.startswith("data: ") for ln in lines)
    for ln in lines[:-1]:
        ev = json.loads(ln[6:])
        if ev.get("usage"):
            usage = ev["usage"]
        for ch in ev["choices"]:
            d = ch.get("delta", ch)
            text += d.get("content") or d.get("text") or ""
            reasoning += d.get("reasoning_content") or ""
            finish = ch.get("finish_reason") or finish
    return (200 if ok else -1), text, reasoning, finish, usage, lines


def chat(prompt, max_tokens, stream=False, **kw):
    return "/v1/chat/completions", dict({"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
                                         "temperature": 0, "stream": stream}, **kw)


def text_req(prompt, max_tokens, stream=False, **kw):
    return "/v1/completions", dict({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                                    "stream": stream}, **kw)


def test_greedy(plain, spec, prompts, max_tokens):
    reqs = []
    for i, p in enumerate(prompts):
        reqs.append(chat(p, max_tokens))
        reqs.append(text_req(p, max_tokens // 2))
    want = [run(plain, *r)[1:4] for r in reqs]
    check(all(w[0] is not None for w in want), "the plain server answers")
    for rnd in range(2):  # several clients at once, streamed (odd) and not (even), twice
        got = [None] * len(reqs)

        def one(i):
            time.sleep(0.005 * ((i * 7 + rnd) % 5))
            path, body = reqs[i]
            got[i] = run(spec, path, dict(body, stream=(i + rnd) % 2 == 1))

        ts = [threading.Thread(target=one, args=(i,)) for i in range(len(reqs))]
        for t in ts:
            t.start()
        for t in ts:
            t.join(600)
        for i, g in enumerate(got):
            check(g is not None and g[0] == 200 and tuple(g[1:4]) == want[i],
                  f"round {rnd}, request {i} ({reqs[i][0]}, stream={(i + rnd) % 2 == 1}): "
                  f"{g[1:4] if g else None!r} != plain {want[i]!r}")
            if g and g[0] == 200:
                u = g[4] or {}
                d = u.get("completion_tokens_details") or {}
                a, r = d.get("accepted_prediction_tokens"), d.get("rejected_prediction_tokens")
                check(a is not None and r is not None and a >= 0 and r >= 0 and a <= u.get("completion_tokens", 0),
                      f"usage reports the drafts: {u}")


def test_limits(plain, spec, prompt):
    # max_tokens cuts a speculative step's ids exactly where plain decoding stops
    for n in (1, 2, 7):
        p = run(plain, *text_req(prompt, n))
        s = run(spec, *text_req(prompt, n))
        check(s[1:4] == p[1:4] and s[4]["completion_tokens"] == p[4]["completion_tokens"],
              f"max_tokens {n}: {s[1:5]!r} vs plain {p[1:5]!r}")
    full = run(plain, *text_req(prompt, 40))[1]
    if len(full) > 12:
        stop = full[len(full) // 2:len(full) // 2 + 3]
        for stream in (False, True):
            p = run(plain, *text_req(prompt, 40, stream, stop=[stop]))
            s = run(spec, *text_req(prompt, 40, stream, stop=[stop]))
            check(s[1:4] == p[1:4], f"stop {stop!r} stream={stream}: {s[1:4]!r} vs plain {p[1:4]!r}")
    # n = 2 greedy choices, each speculating on its own slot
    st, j = spec.post(*text_req(prompt, 16, n=2))
    single = run(plain, *text_req(prompt, 16))[1]
    texts = sorted(c["text"] for c in j["choices"]) if st == 200 else None
    check(texts == [single, single], f"n = 2 greedy == plain: {texts!r} vs {single!r}")


def test_followup(plain, spec, prompt):
    # the second request starts with the first one's prompt and output: the
    # slot's prompt cache (speculated tokens included) is reused
    first = run(spec, *text_req(prompt, 30))
    check(first[1] == run(plain, *text_req(prompt, 30))[1], "the first turn matches plain")
    follow = prompt + first[1] + " And then"
    p = run(plain, *text_req(follow, 24))
    m0 = spec.metrics()
    s = run(spec, *text_req(follow, 24))
    check(s[1:4] == p[1:4], f"follow-up: {s[1:4]!r} vs plain {p[1:4]!r}")
    check(s[4]["prompt_tokens_details"]["cached_tokens"] > 0, f"the follow-up reuses the cache: {s[4]}")
    # a draft model's session keeps that prefix too: only the new ids run through it
    m1 = spec.metrics()
    ran = metric(m1, "r1_spec_draft_prompt_tokens_total") - metric(m0, "r1_spec_draft_prompt_tokens_total")
    kept = metric(m1, "r1_spec_draft_cached_tokens_total") - metric(m0, "r1_spec_draft_cached_tokens_total")
    if ran + kept > 0:  # a --draft server (lookup has no draft session)
        cached = s[4]["prompt_tokens_details"]["cached_tokens"]
        check(kept > 0 and kept >= cached - 1 and ran + kept == s[4]["prompt_tokens"],
              f"the draft keeps the slot's prefix: kept {kept}, ran {ran}, target cached {cached} "
              f"of {s[4]['prompt_tokens']}")


def test_hangup(plain, spec, prompt):
    c = spec.conn()
    c.request("POST", "/v1/completions", json.dumps({"prompt": prompt, "max_tokens": 100000, "temperature": 0,
                                                     "stream": True}), {"Content-Type": "application/json"})
    r = c.getresponse()
    check(r.readline().startswith(b"data: "), "a stream starts")
    r.readline()
    r.readline()
    c.sock.shutdown(socket.SHUT_RDWR)
    c.close()
    h = spec.wait_idle(5)
    check(h["slots_busy"] == 0, f"a hang-up frees the slot: {h}")
    # the same prompt again (the slot's cache was cut back) and another
    for q in (prompt, prompt + " Once more:"):
        p = run(plain, *text_req(q, 20))
        s = run(spec, *text_req(q, 20))
        check(s[1:4] == p[1:4], f"after a hang-up: {s[1:4]!r} vs plain {p[1:4]!r}")


def test_logprobs(plain, spec, prompt):
    body = {"prompt": prompt, "max_tokens": 6, "temperature": 0, "logprobs": 2}
    sp_, j = spec.post("/v1/completions", body)
    pp, k = plain.post("/v1/completions", body)
    check(sp_ == 200 and pp == 200 and j["choices"][0]["logprobs"] == k["choices"][0]["logprobs"]
          and j["choices"][0]["text"] == k["choices"][0]["text"], "logprobs (not speculated) as plain")
    check("completion_tokens_details" not in j["usage"], f"no drafts with logprobs: {j['usage']}")


def test_sampling(spec, prompts):
    results = []
    lock = threading.Lock()

    def one(i):
        stream = i % 2 == 1
        path, body = chat(prompts[i % len(prompts)], 24, stream, temperature=0.8, top_p=0.95, seed=100 + i)
        if i % 3 == 2:
            path, body = text_req(prompts[i % len(prompts)], 24, stream, temperature=1.0, seed=100 + i)
        r = run(spec, path, body)
        ok = r[0] == 200 and isinstance(r[1], str) and r[3] in ("stop", "length")
        ok = ok and r[4] is not None and 1 <= r[4]["completion_tokens"] <= 24
        d = (r[4] or {}).get("completion_tokens_details") or {}
        ok = ok and d.get("accepted_prediction_tokens", -1) >= 0 and d.get("rejected_prediction_tokens", -1) >= 0
        if not stream and ok:
            raw = r[5]
            ok = raw["object"] in ("chat.completion", "text_completion") and raw["id"] and raw["choices"]
        with lock:
            results.append((i, ok, r[:5]))

    ts = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(600)
    check(len(results) == 8, f"{len(results)} of 8 sampling requests finished")
    for i, ok, r in results:
        check(ok, f"sampling request {i} well formed: {r!r}")


def test_metrics(spec, quote, tag):
    text = spec.metrics()
    for fam in ("r1_spec_drafted_tokens_total", "r1_spec_accepted_tokens_total", "r1_spec_steps_total"):
        check(f"# TYPE {fam} counter" in text, f"{tag}: /metrics has {fam}")
    d0, a0 = metric(text, "r1_spec_drafted_tokens_total"), metric(text, "r1_spec_accepted_tokens_total")
    check(d0 is not None and a0 is not None and 0 <= a0 <= d0 and d0 > 0, f"{tag}: drafted {d0} >= accepted {a0}")
    if quote:
        r = run(spec, *chat(quote, 60))
        d = (r[4] or {}).get("completion_tokens_details") or {}
        text = spec.metrics()
        d1, a1 = metric(text, "r1_spec_drafted_tokens_total"), metric(text, "r1_spec_accepted_tokens_total")
        check(d.get("accepted_prediction_tokens", 0) > 0, f"{tag}: drafts kept on a quoting prompt: {r[4]}")
        check(a1 - a0 == d.get("accepted_prediction_tokens") and d1 > d0,
              f"{tag}: /metrics counts them: accepted {a0} -> {a1}, drafted {d0} -> {d1}, usage {d}")
        print(f"  {tag}: quoting prompt: {d} of {r[4]['completion_tokens']} tokens", file=sys.stderr)


def test_plain_has_none(plain):
    text = plain.metrics()
    check(metric(text, "r1_spec_drafted_tokens_total") == 0, "the plain server drafts nothing")
    r = run(plain, *text_req("Hello", 4))
    check(r[0] == 200 and "completion_tokens_details" not in r[4], f"plain usage has no drafts: {r[4]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plain", required=True)
    ap.add_argument("--spec", action="append", required=True, help="NAME=URL of a speculating server")
    ap.add_argument("--prompts", nargs="*", default=[], help="files holding prompts (else built in)")
    ap.add_argument("--quote", help="a file holding a prompt that quotes text (accepted drafts expected)")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--tag", default="spec_server")
    a = ap.parse_args()
    plain = Server(a.plain)
    prompts = [open(f).read() for f in a.prompts] or [
        "Once upon a time",
        "Repeat after me: the cat sat on the mat, the cat sat on the mat, the cat sat on the mat.",
        "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16",
        "A longer prompt that takes several engine steps to prefill: " + " ".join(f"w{i}" for i in range(40)),
    ]
    quote = open(a.quote).read() if a.quote else None
    t0 = time.time()
    tests = [("plain", lambda: test_plain_has_none(plain))]
    for s in a.spec:
        tag, url = s.split("=", 1)
        spec = Server(url)
        tests += [
            (f"{tag} greedy", lambda spec=spec: test_greedy(plain, spec, prompts, a.max_tokens)),
            (f"{tag} limits", lambda spec=spec: test_limits(plain, spec, prompts[1])),
            (f"{tag} follow-up", lambda spec=spec: test_followup(plain, spec, prompts[0])),
            (f"{tag} hang-up", lambda spec=spec: test_hangup(plain, spec, prompts[2 % len(prompts)])),
            (f"{tag} logprobs", lambda spec=spec: test_logprobs(plain, spec, prompts[0])),
            (f"{tag} sampling", lambda spec=spec: test_sampling(spec, prompts)),
            (f"{tag} metrics", lambda spec=spec, tag=tag: test_metrics(spec, quote, tag)),
        ]
    for name, fn in tests:
        t = time.time()
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - every failure is a test failure
            traceback.print_exc()
            check(False, f"{name}: {type(e).__name__}: {e}")
        print(f"  {a.tag} {name}: {time.time() - t:.1f}s", file=sys.stderr)
    print(f"  {a.tag} total {time.time() - t0:.1f}s", file=sys.stderr)
    return server_common.finish(a.tag)


if __name__ == "__main__":
    sys.exit(main())
