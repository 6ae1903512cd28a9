#!/usr/bin/env python3
"""kv_pool_test.py - the server's shared, paged KV pool (driven by
tests/kv_pool.sh, which starts the servers).

--mode prefix (a tiny synthetic model, a large pool): a request with a
1,500-token prefix streams its answer; while its slot is still generating,
a second request with the same prefix computes under 20% of its prompt
(usage.cached_tokens, /metrics), and its greedy answer is the one it gets
alone afterwards.

Then one more long prompt than there are slots, one after another: the
first one's slot moves on, its cache is kept beyond the slots, and the
first prompt asked again computes under 20% of itself.

--mode full (the default model, --kv-budget 512 positions, far below what
the clients ask for): several clients at once, each a distinct ~100-token
prompt and 160 tokens with the end tokens banned (logit_bias), so the pool
runs out: conversations are preempted (their blocks given to the others,
their caches computed again later) and every one ends with its whole
answer, the same as alone (greedy, --batch-tokens 16: rows computed bit for
bit as alone); never a 500, never a broken stream. Then one conversation
that outgrows the whole pool ends with finish_reason length and the start
of its answer alone, and a prompt longer than the pool is a 400. The peak
resident memory grows by at most the budget (plus a fixed allowance for
buffers) over the warmed-up server's; /metrics counts the pool's blocks,
the preemptions and the request it ended.
"""
import argparse
import json
import sys
import threading
import time

from server_common import Server, check, run_groups


def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def status_kb(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return None


def stream(srv, body):
    """(HTTP status, finish_reason or None, text, error message or None, completion tokens) of a streamed
    completion."""
    c = srv.conn(300)
    try:
        c.request("POST", "/v1/completions", json.dumps(dict(body, stream=True, stream_options={"include_usage": True})),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            d = json.loads(r.read())
            return r.status, None, "", d.get("error", {}).get("message"), 0
        text, finish, err, done, ntok = "", None, None, False, 0
        for line in r:
            line = line.decode().strip()
            if line == "data: [DONE]":
                done = True
                break
            if not line.startswith("data: "):
                continue
            ev = json.loads(line[6:])
            if "error" in ev:
                err = ev["error"].get("message")
                continue
            if ev.get("usage"):
                ntok = ev["usage"]["completion_tokens"]
            if not ev.get("choices"):
                continue
            ch = ev["choices"][0]
            text += ch.get("text", "")
            finish = ch.get("finish_reason") or finish
        return (200 if done else -1), finish, text, err, ntok
    finally:
        c.close()


def test_prefix(srv):
    shared = " ".join(f"tool{i % 97} arg{i % 13}" for i in range(750))  # ~1,500 tokens
    a = {"prompt": shared + " first question?", "max_tokens": 400, "temperature": 0, "logit_bias": {"151643": -100}}
    b = {"prompt": shared + " second question?", "max_tokens": 8, "temperature": 0}
    box = {}

    def run_a():
        c = srv.conn(300)
        c.request("POST", "/v1/completions", json.dumps(dict(a, stream=True)), {"Content-Type": "application/json"})
        r = c.getresponse()
        n = 0
        for line in r:
            if line.startswith(b"data: {"):
                n += 1
                if n == 2:
                    box["generating"] = time.time()
        box["a_done"] = time.time()
        c.close()

    t = threading.Thread(target=run_a)
    t.start()
    for _ in range(600):
        if "generating" in box:
            break
        time.sleep(0.05)
    check("generating" in box, "prefix: the first request started generating")
    st, d = srv.post("/v1/completions", b)
    b_end = time.time()
    t.join(300)
    check(st == 200, f"prefix: second request {st} {d}")
    if st != 200:
        return
    u = d["usage"]
    cached = u.get("prompt_tokens_details", {}).get("cached_tokens", 0)
    computed = u["prompt_tokens"] - cached
    busy = "a_done" in box and b_end < box["a_done"]
    print(f"  prefix: prompt {u['prompt_tokens']} tokens, computed {computed}, cached {cached}; "
          f"first still generating when the second ended: {busy}", file=sys.stderr)
    check(u["prompt_tokens"] >= 1500, f"prefix: the prompt has {u['prompt_tokens']} tokens (want >= 1500)")
    check(busy, "prefix: the first request's slot was still generating")
    check(computed < 0.2 * u["prompt_tokens"], f"prefix: computed {computed} of {u['prompt_tokens']} (want < 20%)")
    m = metric(srv.metrics()[2], "r1_prefix_copied_tokens_total")
    check(m is not None and m >= 1500, f"prefix: /metrics shared tokens {m}")
    srv.wait_idle(30)
    st2, d2 = srv.post("/v1/completions", b)
    check(st2 == 200 and d2["choices"][0]["text"] == d["choices"][0]["text"],
          "prefix: the answer with a shared prefix is the answer alone")


def test_kept(srv, n_slots):
    """A long prompt whose slot moved on to other prompts is still cached: its blocks were kept beyond the
    slots (r1_prefix_kept), and the same prompt later computes under 20% of itself, with the same answer."""
    docs = [f"Document {k}. " + " ".join(f"d{k}x{i % 89}" for i in range(250)) for k in range(n_slots + 1)]

    def ask(p):
        st, d = srv.post("/v1/completions", {"prompt": p, "max_tokens": 6, "temperature": 0})
        return (d["choices"][0]["text"], d["usage"]) if st == 200 else (None, None)

    first = ask(docs[0])
    for p in docs[1:]:  # one more prompt than slots: the first one's slot takes another
        ask(p)
        srv.wait_idle(30)
    again = ask(docs[0])
    kept = metric(srv.metrics()[2], "r1_prefix_kept")
    u = again[1] or {}
    cached = u.get("prompt_tokens_details", {}).get("cached_tokens", 0)
    print(f"  kept: prompt {u.get('prompt_tokens')} tokens, cached {cached} after {n_slots} other prompts; "
          f"kept caches {kept}", file=sys.stderr)
    check(kept is not None and kept >= 1, f"kept: /metrics r1_prefix_kept {kept}")
    check(u and u["prompt_tokens"] - cached < 0.2 * u["prompt_tokens"], f"kept: computed {u} again")
    check(first[0] is not None and again[0] == first[0], "kept: the answer from a kept prefix is the first answer")


def test_full(srv, pid, budget, clients):
    ban = {"0": -100, "1": -100, "2": -100}
    prompts = [f"Story {k}: " + " ".join(f"w{(k * 7919 + i) % 5000}" for i in range(28)) for k in range(clients)]
    body = {"max_tokens": 160, "temperature": 0, "logit_bias": ban}
    srv.post("/v1/completions", dict(body, prompt="warm up", max_tokens=4))
    srv.wait_idle(30)
    hwm0 = status_kb(pid, "VmHWM")
    got = [None] * clients

    def one(i):
        if i % 2:
            got[i] = stream(srv, dict(body, prompt=prompts[i]))
        else:
            st, d = srv.post("/v1/completions", dict(body, prompt=prompts[i]))
            if st == 200:
                got[i] = (200, d["choices"][0]["finish_reason"], d["choices"][0]["text"], None,
                          d["usage"]["completion_tokens"])
            else:
                got[i] = (st, None, "", d.get("error", {}).get("message"), 0)

    ts = [threading.Thread(target=one, args=(i,)) for i in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(300)
    srv.wait_idle(30)
    hwm1 = status_kb(pid, "VmHWM")
    text = srv.metrics()[2]
    blocks, free, cut = (metric(text, n) for n in ("r1_kv_pool_blocks", "r1_kv_pool_blocks_free", "r1_kv_pool_full_total"))
    outcomes = [(g[0], g[1], g[4], (g[3] or "")[:60]) if g else None for g in got]
    pre = metric(text, "r1_kv_pool_preemptions_total")
    print(f"  full: outcomes {outcomes}", file=sys.stderr)
    print(f"  full: pool {blocks} blocks, {free} free after; preemptions {pre}; peak RSS "
          f"{hwm0 / 1024:.1f} -> {hwm1 / 1024:.1f} MiB (budget {budget / 2**20:.1f} MiB)", file=sys.stderr)
    for i, g in enumerate(got):
        check(g is not None and g[0] == 200 and not g[3] and g[1] == "length" and g[4] == 160,
              f"full: request {i} ended {g and g[:2] + g[3:]}, not with its whole answer")
    check(pre is not None and pre >= 1, f"full: /metrics r1_kv_pool_preemptions_total {pre} (the pool ran out)")
    check(blocks is not None and free is not None and 0 <= free <= blocks, f"full: blocks {free} free of {blocks}")
    allowance = 4 << 10  # KiB: response buffers and the like (an unbounded pool would add ~12 MiB more)
    check(hwm1 - hwm0 <= budget // 1024 + allowance,
          f"full: peak RSS grew {(hwm1 - hwm0) / 1024:.1f} MiB, budget {budget / 2**20:.1f} MiB + allowance")
    alone = {}
    for i, g in enumerate(got):  # each answer is the prompt's answer alone
        st, d = srv.post("/v1/completions", dict(body, prompt=prompts[i]))
        alone[i] = d["choices"][0]["text"] if st == 200 else None
        check(g is not None and alone[i] == g[2], f"full: request {i}'s answer is not its answer alone")
    # one conversation longer than the pool: the start of its answer, finish_reason length
    st, fin, txt, err, ntok = stream(srv, dict(body, prompt=prompts[0], max_tokens=450))
    check(st == 200 and fin == "length" and not err and txt.startswith(alone[0] or "?") and 160 < ntok < 450,
          f"full: a conversation past the pool ended {st} {fin} {err} with {ntok} tokens")
    cut = metric(srv.metrics()[2], "r1_kv_pool_full_total")
    check(cut == 1, f"full: /metrics r1_kv_pool_full_total {cut}")
    st, d = srv.post("/v1/completions", dict(body, prompt=" ".join(f"w{i}" for i in range(200))))
    check(st == 400 and "KV pool" in d.get("error", {}).get("message", ""), f"full: a prompt past the pool: {st} {d}")
    check(srv.health().get("status") == "ok", "full: the server is healthy")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--mode", choices=["prefix", "full"], required=True)
    ap.add_argument("--pid", type=int, default=0)
    ap.add_argument("--budget", type=int, default=0)
    ap.add_argument("--clients", type=int, default=4)
    a = ap.parse_args()
    srv = Server(a.base)
    srv.timeout = 300
    if a.mode == "prefix":
        return run_groups("kv_pool_prefix", [("1500-token prefix", lambda: test_prefix(srv)),
                                             ("kept prefixes", lambda: test_kept(srv, 4))])
    return run_groups("kv_pool_full", [("pool full", lambda: test_full(srv, a.pid, a.budget, a.clients))])


if __name__ == "__main__":
    sys.exit(main())
