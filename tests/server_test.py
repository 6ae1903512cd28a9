#!/usr/bin/env python3
"""server_test.py - end-to-end tests of `r1infer serve`, driven by tests/server.sh.

Talks only to the server on 127.0.0.1 given by --base, with the official
`openai` client where the API is exercised and raw http.client / sockets
where the test needs control of the bytes (bad input, disconnects, slow and
oversized requests). Every request has a timeout; the run is bounded.
Prints "server: P passed, F failed" last.
"""
import argparse
import json
import re
import socket
import sys
import threading
import time

import openai

from server_common import Server, check, run_groups


def is_error(status, data, want_status, what, code=None):
    check(status == want_status, f"{what}: status {status}, want {want_status} ({data[:200]!r})")
    try:
        e = json.loads(data)["error"]
        ok = all(k in e for k in ("message", "type", "param", "code")) and isinstance(e["message"], str) and e["message"]
        check(ok, f"{what}: error object lacks fields: {e}")
        if code:
            check(e["code"] == code, f"{what}: code {e['code']}, want {code}")
        return e
    except (ValueError, KeyError, TypeError):
        check(False, f"{what}: not an OpenAI error JSON: {data[:200]!r}")
        return None


USER = [{"role": "user", "content": "What is 2 + 2?"}]


def test_basic(srv, client):
    h = srv.health()
    check(h["status"] == "ok" and h["slots"] == 2, f"health: {h}")
    models = client.models.list()
    check(len(models.data) == 1 and models.data[0].id, f"models: {models}")
    # one model by its id (openai's models.retrieve), and an unknown id
    m = client.models.retrieve(models.data[0].id)
    check(m.id == models.data[0].id and m.object == "model", f"models.retrieve: {m}")
    try:
        client.models.retrieve(models.data[0].id + "-other")
        check(False, "models.retrieve of an unknown id succeeded")
    except openai.NotFoundError as e:
        check("does not exist" in str(e), f"unknown model: {e}")
    # CORS: every answer may be read by a page of another origin, and a
    # preflight is answered without the key
    st, hd, _ = srv.request("OPTIONS", "/v1/chat/completions", auth=False,
                            headers={"Origin": "http://example.test", "Access-Control-Request-Method": "POST"})
    check(st == 204 and hd.get("Access-Control-Allow-Origin") == "*" and "POST" in hd.get(
        "Access-Control-Allow-Methods", "") and "Authorization" in hd.get("Access-Control-Allow-Headers", ""),
          f"CORS preflight: {st} {hd}")
    st, hd, _ = srv.request("GET", "/v1/models")
    check(st == 200 and hd.get("Access-Control-Allow-Origin") == "*", f"CORS header on an answer: {hd}")
    st, hd, body = srv.request("GET", "/", auth=False)
    check(st == 200 and b"<title>r1infer" in body and "text/html" in hd.get("Content-Type", ""), "chat page")
    st, _, _ = srv.request("HEAD", "/health", auth=False)
    check(st == 200, "HEAD /health")


def test_chat(srv, client):
    r = client.chat.completions.create(model="my-model", messages=USER, max_tokens=8, temperature=0)
    c = r.choices[0]
    check(r.id.startswith("chatcmpl-") and r.object == "chat.completion" and r.model == "my-model", f"chat shape: {r}")
    check(c.index == 0 and c.message.role == "assistant" and c.finish_reason == "length", f"chat choice: {c}")
    u = r.usage
    check(u.completion_tokens == 8 and u.total_tokens == u.prompt_tokens + 8 and u.prompt_tokens > 5, f"chat usage: {u}")
    check(u.prompt_tokens_details is not None and u.prompt_tokens_details.cached_tokens >= 0, f"cached_tokens: {u}")
    # the template opened <think> and a random model never closes it: all reasoning, no answer
    reasoning = getattr(c.message, "reasoning_content", None) or (c.message.model_extra or {}).get("reasoning_content")
    check(bool(reasoning) and c.message.content == "", f"reasoning split: content {c.message.content!r} reasoning {reasoning!r}")

    # the same greedy request again: same text, and the prompt comes from the slot's cache
    r2 = client.chat.completions.create(model="my-model", messages=USER, max_tokens=8, temperature=0)
    reasoning2 = (r2.choices[0].message.model_extra or {}).get("reasoning_content")
    check(reasoning2 == reasoning, f"greedy is deterministic: {reasoning!r} vs {reasoning2!r}")
    check(r2.usage.prompt_tokens_details.cached_tokens == r2.usage.prompt_tokens - 1,
          f"prompt cache reuse: {r2.usage}")

    # streaming: the same text as deltas, usage in the last chunk
    s = client.chat.completions.create(model="my-model", messages=USER, max_tokens=8, temperature=0, stream=True,
                                       stream_options={"include_usage": True})
    text, roles, finish, usage, ids = "", [], None, None, set()
    for chunk in s:
        ids.add(chunk.id)
        check(chunk.object == "chat.completion.chunk", f"chunk object {chunk.object}")
        if chunk.usage:
            usage = chunk.usage
        for ch in chunk.choices:
            d = ch.delta
            if d.role:
                roles.append(d.role)
            text += (d.model_extra or {}).get("reasoning_content") or ""
            check(not d.content, f"no answer text expected, got {d.content!r}")
            if ch.finish_reason:
                finish = ch.finish_reason
    check(text == reasoning, f"stream == non-stream: {text!r} vs {reasoning!r}")
    check(roles == ["assistant"] and finish == "length" and len(ids) == 1, f"stream roles {roles} finish {finish}")
    check(usage is not None and usage.completion_tokens == 8, f"stream usage {usage}")

    # raw SSE framing
    c = srv.conn()
    c.request("POST", "/v1/chat/completions", json.dumps({"messages": USER, "max_tokens": 3, "stream": True}),
              {"Authorization": "Bearer " + srv.key, "Content-Type": "application/json"})
    r = c.getresponse()
    raw = r.read().decode()
    c.close()
    check(r.status == 200 and r.getheader("Content-Type") == "text/event-stream", "SSE content type")
    events = [e for e in raw.split("\n\n") if e]
    check(all(e.startswith("data: ") for e in events) and events[-1] == "data: [DONE]", f"SSE framing: {raw[:300]!r}")


def test_keep_alive(srv):
    # HTTP/1.1 clients (the openai SDK among them) keep the connection: every
    # kind of answer that has read the whole request leaves it open
    auth = {"Authorization": "Bearer " + srv.key, "Content-Type": "application/json"}
    chat = json.dumps({"messages": USER, "max_tokens": 2})
    stream = json.dumps({"messages": USER, "max_tokens": 2, "stream": True})
    steps = [("GET", "/health", None, {}, 200), ("GET", "/v1/models", None, auth, 200),
             ("HEAD", "/health", None, {}, 200), ("GET", "/v1/nothing", None, {}, 404),
             ("GET", "/v1/models", None, {}, 401), ("POST", "/v1/chat/completions", chat, auth, 200),
             ("POST", "/v1/chat/completions", stream, auth, 200),
             ("POST", "/v1/chat/completions", b'{"messages": [', auth, 400), ("GET", "/health", None, {}, 200)]
    c = srv.conn()
    c.connect()
    sock, port = c.sock, c.sock.getsockname()[1]
    for method, path, body, headers, want in steps:
        c.request(method, path, body, headers)
        r = c.getresponse()
        data = r.read()
        check(r.status == want, f"keep-alive {method} {path}: status {r.status}, want {want} ({data[:200]!r})")
        check((r.getheader("Connection") or "").lower() != "close" and c.sock is sock,
              f"keep-alive {method} {path}: the connection was closed ({r.getheader('Connection')!r})")
        if c.sock is not sock:
            break
    check(c.sock is sock and sock.getsockname()[1] == port, "keep-alive: all requests on one connection")
    c.close()


def connections(srv):
    """The server's r1_http_connections_total (read on a connection of its own, counted)."""
    st, _, body = srv.request("GET", "/metrics")
    m = re.search(rb"^r1_http_connections_total (\d+)$", body, re.M)
    check(st == 200 and m is not None, f"/metrics has r1_http_connections_total: {st} {body[-300:]!r}")
    return int(m.group(1)) if m else -1


def test_sdk_connection(srv, base):
    # the openai SDK (httpx underneath) keeps one connection for a client's
    # requests: the server counts one connection for them (and one for each
    # /metrics read). The stream goes last: the sync client closes its
    # connection itself once it has read a stream's [DONE].
    c0 = connections(srv)
    cl = openai.OpenAI(base_url=base + "/v1", api_key=KEY, max_retries=0, timeout=60)
    ids = [m.id for m in cl.models.list().data]
    cl.models.retrieve(ids[0])
    for _ in range(2):
        r = cl.chat.completions.create(model=ids[0], messages=USER, max_tokens=3)
        check(r.choices[0].message.content is not None, "sdk: an answer")
    cl.models.list()
    with cl.chat.completions.create(model=ids[0], messages=USER, max_tokens=3, stream=True) as st:
        parts = [ch for ch in st]
    check(len(parts) >= 1, "sdk: a stream")
    cl.close()
    c1 = connections(srv)
    check(c1 - c0 == 2, f"sdk: 6 requests on one connection (connections {c0} -> {c1}: want +2, one of them /metrics)")


def test_completion(srv, client):
    r = client.completions.create(model="m", prompt="Once upon a time", max_tokens=12, temperature=0)
    check(r.object == "text_completion" and r.id.startswith("cmpl-") and r.choices[0].finish_reason == "length",
          f"completion: {r}")
    text = r.choices[0].text
    check(r.usage.completion_tokens == 12 and len(text) > 0, f"completion usage {r.usage}")
    s = client.completions.create(model="m", prompt="Once upon a time", max_tokens=12, temperature=0, stream=True)
    st = "".join(ch.choices[0].text for ch in s if ch.choices)
    check(st == text, f"stream completion == non-stream: {st!r} vs {text!r}")
    # token-id prompt: exact prompt count
    r = client.completions.create(model="m", prompt=[1, 2, 3, 4, 5], max_tokens=2, temperature=0)
    check(r.usage.prompt_tokens == 5 and r.usage.completion_tokens == 2, f"token prompt usage {r.usage}")
    return text


def pick_stop(text):
    """A short stop string from the middle of text, preferring plain ASCII."""
    n = len(text)
    for i in range(n // 3, n - 2):
        w = text[i:i + 3]
        if w.isascii() and w.strip() == w and w.isprintable() and "\ufffd" not in w:
            return w
    return text[n // 2]


def test_stop(srv, client, text):
    stop = pick_stop(text)
    want = text[:text.find(stop)]
    r = client.completions.create(model="m", prompt="Once upon a time", max_tokens=12, temperature=0, stop=[stop, "\x01never"])
    got = r.choices[0].text
    check(got == want and r.choices[0].finish_reason == "stop", f"stop {stop!r}: {got!r}, want {want!r} ({text!r})")
    s = client.completions.create(model="m", prompt="Once upon a time", max_tokens=12, temperature=0, stop=stop, stream=True)
    finish, got = None, ""
    for ch in s:
        if ch.choices:
            got += ch.choices[0].text
            finish = ch.choices[0].finish_reason or finish
    check(got == want and finish == "stop", f"streamed stop {stop!r}: {got!r}, want {want!r}")
    # a stop string in the reasoning of a chat
    r = client.chat.completions.create(model="m", messages=USER, max_tokens=8, temperature=0)
    full = (r.choices[0].message.model_extra or {}).get("reasoning_content") or ""
    stop = pick_stop(full)
    r = client.chat.completions.create(model="m", messages=USER, max_tokens=8, temperature=0, stop=stop)
    got = (r.choices[0].message.model_extra or {}).get("reasoning_content") or ""
    check(stop not in got and full.startswith(got) and r.choices[0].finish_reason == "stop",
          f"chat stop {stop!r}: {got!r} from {full!r}")


def test_auth(srv, base):
    st, hd, data = srv.request("GET", "/v1/models", auth=False)
    is_error(st, data, 401, "no API key", "invalid_api_key")
    st, _, data = srv.request("POST", "/v1/chat/completions", {"messages": USER}, auth=False,
                              headers={"Authorization": "Bearer wrong-key"})
    is_error(st, data, 401, "wrong API key")
    st, _, data = srv.request("POST", "/v1/chat/completions", {"messages": USER}, auth=False,
                              headers={"Authorization": "Bearer " + srv.key + "x"})
    is_error(st, data, 401, "key with a suffix")
    bad = openai.OpenAI(base_url=base + "/v1", api_key="nope", max_retries=0, timeout=30)
    try:
        bad.models.list()
        check(False, "openai client with a wrong key succeeded")
    except openai.AuthenticationError:
        check(True, "")
    st, _, _ = srv.request("GET", "/health", auth=False)
    check(st == 200, "health needs no key")


def test_bad_input(srv):
    P = "/v1/chat/completions"
    cases = [
        ("malformed JSON", P, b'{"messages": [', 400),
        ("not an object", P, b"[1, 2]", 400),
        ("wrong type", P, {"messages": USER, "temperature": "hot"}, 400),
        ("wrong type max_tokens", P, {"messages": USER, "max_tokens": "8"}, 400),
        ("unknown role", P, {"messages": [{"role": "wizard", "content": "x"}]}, 400),
        ("empty messages", P, {"messages": []}, 400),
        ("missing messages", P, {"prompt": "x"}, 400),
        ("n > --parallel", P, {"messages": USER, "n": 3}, 400),
        ("stop of wrong type", P, {"messages": USER, "stop": 3}, 400),
        ("invalid UTF-8", P, b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}', 400),
        ("lone surrogate", P, b'{"messages": [{"role": "user", "content": "\\ud800"}]}', 400),
        ("completion without prompt", "/v1/completions", {"messages": USER}, 400),
        ("token id beyond vocab", "/v1/completions", {"prompt": [1, 10**9]}, 400),
    ]
    for what, path, body, want in cases:
        st, _, data = srv.request("POST", path, body)
        is_error(st, data, want, what)
    long = [{"role": "user", "content": "hello " * 700}]
    st, _, data = srv.request("POST", P, {"messages": long, "max_tokens": 1})
    is_error(st, data, 400, "prompt longer than the context", "context_length_exceeded")
    st, _, data = srv.request("POST", "/v1/completions", {"prompt": "hello " * 700})
    is_error(st, data, 400, "completion prompt longer than the context", "context_length_exceeded")
    big = json.dumps({"messages": [{"role": "user", "content": "x" * 70000}]})
    st, _, data = srv.request("POST", P, big)
    is_error(st, data, 413, "body over --max-body")
    # the same without Content-Length (chunked): drained, then refused
    c = srv.conn()
    c.putrequest("POST", P)
    c.putheader("Authorization", "Bearer " + srv.key)
    c.putheader("Transfer-Encoding", "chunked")
    c.endheaders()
    for _ in range(10):
        c.send(b"2000\r\n" + b"x" * 0x2000 + b"\r\n")
    c.send(b"0\r\n\r\n")
    r = c.getresponse()
    is_error(r.status, r.read(), 413, "chunked body over --max-body")
    c.close()
    st, _, data = srv.request("GET", "/v1/nothing")
    is_error(st, data, 404, "unknown path")
    st, hd, data = srv.request("GET", P)
    is_error(st, data, 405, "GET on a POST path")
    check(hd.get("Allow") == "POST", f"Allow header: {hd}")
    st, _, data = srv.request("POST", "/health", {})
    is_error(st, data, 405, "POST on a GET path")
    check(srv.health()["status"] == "ok", "still serving after bad input")


def raw_socket(srv, timeout=10):
    s = socket.create_connection((srv.host, srv.port), timeout=timeout)
    return s


def test_limits(srv):
    # too many headers: the connection memory limit refuses them
    s = raw_socket(srv)
    req = b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-H%d: %s\r\n" % (i, b"v" * 20) for i in range(3000)) + b"\r\n"
    try:
        s.sendall(req)
        resp = s.recv(4096)
    except OSError:
        resp = b""
    s.close()
    check(resp == b"" or resp.split(b" ")[1] in (b"431", b"413", b"400"), f"too many headers: {resp[:80]!r}")
    # a slow client (headers never finished) is dropped after --timeout
    s = raw_socket(srv)
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
    t0 = time.time()
    try:
        got = s.recv(4096)
    except OSError:
        got = b""
    dt = time.time() - t0
    s.close()
    check(got == b"" and dt < 8, f"slow client dropped after {dt:.1f}s ({got[:60]!r})")
    check(srv.health()["status"] == "ok", "still serving after limits")


def open_stream(srv, max_tokens=3000, messages=None):
    body = json.dumps({"messages": messages or USER, "max_tokens": max_tokens, "temperature": 1.0, "stream": True})
    c = srv.conn(timeout=30)
    c.request("POST", "/v1/chat/completions", body, {"Authorization": "Bearer " + srv.key,
                                                      "Content-Type": "application/json"})
    return c


def test_queue_and_disconnect(srv):
    before = srv.health()
    # two streams take the two slots, two wait in the queue (--queue 2), the next is refused
    # (one at a time, so that conns[0] is sure to be running)
    conns = []
    for i, want in enumerate([(1, 0), (2, 0), (2, 1), (2, 2)]):
        conns.append(open_stream(srv, messages=[{"role": "user", "content": f"story {i}"}]))
        end = time.time() + 10
        h = srv.health()
        while time.time() < end and (h["slots_busy"], h["queued"]) != want:
            time.sleep(0.02)
            h = srv.health()
    check(h["slots_busy"] == 2 and h["queued"] == 2, f"2 running + 2 queued: {h}")
    st, hd, data = srv.request("POST", "/v1/chat/completions", {"messages": USER, "max_tokens": 2})
    is_error(st, data, 503, "queue full", "server_busy")
    check("Retry-After" in hd, f"Retry-After on 503: {hd}")
    # read a little of the first stream, then all four clients hang up
    r = conns[0].getresponse()
    first = r.readline()
    check(first.startswith(b"data: "), f"first SSE line: {first!r}")
    for c in conns:
        c.sock.shutdown(socket.SHUT_RDWR)
        c.close()
    h = srv.wait_idle(3.0)
    check(h["slots_busy"] == 0 and h["queued"] == 0, f"hang-ups free the slots and the queue at once: {h}")
    check(h["cancelled"] >= before["cancelled"] + 4, f"4 jobs cancelled: {before} -> {h}")
    # a non-streaming client that leaves is noticed too
    c = srv.conn()
    c.request("POST", "/v1/chat/completions", json.dumps({"messages": USER, "max_tokens": 3000, "temperature": 1.0}),
              {"Authorization": "Bearer " + srv.key, "Content-Type": "application/json"})
    time.sleep(0.3)
    check(srv.health()["slots_busy"] == 1, "non-streaming job running")
    c.sock.shutdown(socket.SHUT_RDWR)
    c.close()
    h = srv.wait_idle(3.0)
    check(h["slots_busy"] == 0, f"non-streaming hang-up frees the slot: {h}")
    # and the server still answers
    st, _, data = srv.request("POST", "/v1/chat/completions", {"messages": USER, "max_tokens": 2})
    check(st == 200 and json.loads(data)["usage"]["completion_tokens"] == 2, f"serving after hang-ups: {st} {data[:200]!r}")


def test_parallel(base):
    results = []

    def one(i):
        cl = openai.OpenAI(base_url=base + "/v1", api_key=KEY, max_retries=0, timeout=60)
        r = cl.chat.completions.create(model="m", messages=[{"role": "user", "content": f"parallel {i}"}],
                                       max_tokens=16, temperature=0)
        results.append(r.usage.completion_tokens)

    ts = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    check(results == [16] * 4, f"4 concurrent requests on 2 slots: {results}")


def main():
    global KEY
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--key", required=True)
    a = ap.parse_args()
    KEY = a.key
    srv = Server(a.base, a.key)
    client = openai.OpenAI(base_url=a.base + "/v1", api_key=a.key, max_retries=0, timeout=60)
    return run_groups("server", [
        ("basic", lambda: test_basic(srv, client)), ("keep-alive", lambda: test_keep_alive(srv)),
        ("sdk connection", lambda: test_sdk_connection(srv, a.base)),
        ("chat", lambda: test_chat(srv, client)),
        ("completion+stop", lambda: test_stop(srv, client, test_completion(srv, client))),
        ("auth", lambda: test_auth(srv, a.base)), ("bad input", lambda: test_bad_input(srv)),
        ("limits", lambda: test_limits(srv)), ("parallel", lambda: test_parallel(a.base)),
        ("queue+disconnect", lambda: test_queue_and_disconnect(srv))])


if __name__ == "__main__":
    sys.exit(main())
