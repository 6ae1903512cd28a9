"""guard_test.py - slow and many clients against one server (guard.sh
starts it with --max-conns-per-ip 32 --request-deadline 2). Last line:
"guard: P passed, F failed"."""
import argparse
import json
import socket
import sys
import time

from server_common import Server, check, run_groups

ap = argparse.ArgumentParser()
ap.add_argument("--base", required=True)
ap.add_argument("--log")
ap.add_argument("--evict", action="store_true", help="only the full-front test (a server with --max-conns 64)")
args = ap.parse_args()
srv = Server(args.base)
TRICKLERS = 300


def open_from(src):
    s = socket.socket()
    s.settimeout(5)
    s.bind((src, 0))
    s.connect((srv.host, srv.port))
    return s


def closed(s, wait):
    """Whether the server closed s within wait seconds."""
    s.settimeout(wait)
    try:
        return s.recv(4096) == b"" or True
    except socket.timeout:
        return False
    except OSError:
        return True


def test_trickle():
    socks = []
    for _ in range(TRICKLERS):
        try:
            s = open_from("127.0.0.2")
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
            socks.append(s)
        except OSError:
            pass
    time.sleep(0.3)
    for s in socks:  # one more header line each: still trickling
        try:
            s.sendall(b"X-Slow: 1\r\n")
        except OSError:
            pass
    t = time.time()
    st, ans = srv.post("/v1/completions", {"prompt": "hello", "max_tokens": 4})
    dt = time.time() - t
    print(f"  a normal client beside {len(socks)} trickling connections: {st} in {dt:.2f} s", file=sys.stderr)
    check(st == 200 and dt < 2.0, f"normal client during the trickle: {st} in {dt:.2f} s")
    # the per-address limit: the server kept at most 32 of them open, the others got 429
    time.sleep(0.2)
    alive, answers = 0, {}
    for s in socks:
        s.setblocking(False)
        try:
            got = s.recv(64)
            answers[got[:12]] = answers.get(got[:12], 0) + 1
        except BlockingIOError:
            alive += 1
        except OSError:
            pass
    print(f"  open {alive}, answered {answers}", file=sys.stderr)
    check(0 < alive <= 32, f"{alive} connections of one address stayed open; the limit is 32")
    check(answers.get(b"HTTP/1.1 429", 0) == len(socks) - alive, f"the others get 429: {answers}")
    # the deadline: whatever still trickles is cut off within 2 s (+ slack), with a 408
    time.sleep(2.6)
    left, timed_out = 0, 0
    for s in socks:
        try:
            got = s.recv(64)
            timed_out += got.startswith(b"HTTP/1.1 408")
        except BlockingIOError:
            left += 1
        except OSError:
            pass
        s.close()
    check(left == 0 and timed_out == alive, f"{left} trickling connections outlived --request-deadline 2, "
          f"{timed_out} of {alive} got a 408")


def test_per_address_held():
    """Connections the HTTP engine holds (their head is in, the body is coming) count against the limit
    too: the 33rd of one address gets a JSON 429, another address is served meanwhile."""
    held, refused = [], 0
    for _ in range(40):
        s = open_from("127.0.0.3")
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        held.append(s)
        time.sleep(0.01)
    time.sleep(0.3)
    for s in held:
        s.setblocking(False)
        try:
            refused += s.recv(64).startswith(b"HTTP/1.1 429")
        except OSError:
            pass
    check(refused == 8, f"40 held connections of one address: {refused} refused with 429, want 8")
    st, _, _ = srv.request("GET", "/health", auth=False)
    check(st == 200, f"another address is served meanwhile: {st}")
    for s in held:
        s.close()


def test_body_deadline():
    s = open_from("127.0.0.1")
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
    t = time.time()
    cut = False
    for _ in range(10):
        time.sleep(0.5)
        try:
            s.sendall(b" ")
        except OSError:
            cut = True
            break
        s.setblocking(False)
        try:
            if s.recv(4096) == b"":
                cut = True
                break
        except BlockingIOError:
            pass
        except OSError:
            cut = True
            break
        s.setblocking(True)
    dt = time.time() - t
    check(cut and dt < 4, f"a body trickled at 2 bytes/s: cut={cut} after {dt:.1f} s (deadline 2 s)")
    s.close()


def test_access_log():
    srv.post("/v1/completions", {"prompt": "hi", "max_tokens": 3})
    time.sleep(0.2)
    lines = [l for l in open(args.log, errors="replace") if "access:" in l and "/v1/completions 200" in l]
    check(lines and "tokens=3" in lines[-1] and lines[-1].rstrip().endswith("ms"),
          f"access log: {lines[-1:]!r}")
    st, _, _ = srv.request("POST", "/nope", {})
    time.sleep(0.2)
    check(any("POST /nope 404" in l for l in open(args.log, errors="replace")), "access log of a 404")


def raw(data, wait=4.0):
    """(status, JSON body or None, seconds) of the answer to the raw bytes."""
    s = open_from("127.0.0.1")
    s.sendall(data)
    t = time.time()
    got = b""
    s.settimeout(wait)
    try:
        while b"\r\n\r\n" not in got or len(got.split(b"\r\n\r\n", 1)[1]) < 10:
            part = s.recv(4096)
            if not part:
                break
            got += part
            if b"}}" in got:
                break
    except OSError:
        pass
    s.close()
    dt = time.time() - t
    try:
        status = int(got.split(b" ")[1])
        body = json.loads(got.split(b"\r\n\r\n", 1)[1])
    except (IndexError, ValueError):
        return None, None, dt
    return status, body, dt


def test_malformed():
    cases = [
        (b"GARBAGE\r\n\r\n", 400, "request line"),
        (b"GET /health HTTP/9.9\r\n\r\n", 400, "HTTP/1.0"),
        (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", 400, "Content-Length"),
        (b"POST /v1/completions HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400, "Content-Length"),
        (b"POST /v1/completions HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
         "Transfer-Encoding"),
        (b"GET /health HTTP/1.1\r\nBad header line\r\n\r\n", 400, "header"),
        (b"GET /health HTTP/1.1\r\nX-Big: " + b"a" * 200000 + b"\r\n\r\n", 431, "larger"),
        (b"GET /health HTTP/1.1\r\nHost: x\r\n", 408, "deadline"),
    ]
    for data, want, needle in cases:
        st, body, dt = raw(data)
        msg = (body or {}).get("error", {}).get("message", "")
        check(st == want and needle in msg and (want == 408 or dt < 1.0),
              f"{data[:50]!r}: {st} {msg!r} in {dt:.1f} s (want {want} with '{needle}')")


def test_evict():
    """More trickling connections than --max-conns (64), from 3 addresses and no per-address limit: a client
    from a 4th address still gets /health and a short answer within 2 s (the oldest trickler of the busiest
    address makes room, with a 503)."""
    socks = []
    for i in range(150):
        try:
            s = open_from(f"127.0.0.{4 + i % 3}")
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
            socks.append(s)
        except OSError:
            pass
    time.sleep(0.3)
    t = time.time()
    st, _, _ = srv.request("GET", "/health", auth=False)
    st2, ans = srv.post("/v1/completions", {"prompt": "hello", "max_tokens": 4})
    dt = time.time() - t
    print(f"  a client beside {len(socks)} trickling connections (--max-conns 64): {st}, {st2} in {dt:.2f} s",
          file=sys.stderr)
    check(st == 200 and st2 == 200 and dt < 2.0, f"a 4th address beside the tricklers: {st} {st2} in {dt:.2f} s")
    evicted = 0
    for s in socks:
        s.setblocking(False)
        try:
            evicted += s.recv(64).startswith(b"HTTP/1.1 503")
        except OSError:
            pass
        s.close()
    # the front holds --max-conns of them (raised to at least --parallel + the queue + 8: 73 here)
    check(len(socks) - 80 <= evicted < len(socks), f"{evicted} of {len(socks)} tricklers made room with a 503")


if args.evict:
    sys.exit(run_groups("guard", [("evict", test_evict)]))
sys.exit(run_groups("guard", [("trickle", test_trickle), ("held per address", test_per_address_held), ("body deadline", test_body_deadline),
                              ("access log", test_access_log), ("malformed HTTP", test_malformed)]))
