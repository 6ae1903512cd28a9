"""guard_test.py - slow and many clients against one server (guard.sh
starts it with --max-conns-per-ip 32 --request-deadline 2). Last line:
"guard: P passed, F failed"."""
import argparse
import socket
import sys
import time

from server_common import Server, check, run_groups

ap = argparse.ArgumentParser()
ap.add_argument("--base", required=True)
ap.add_argument("--log", required=True)
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
    # the per-address limit: the server kept at most 32 of them open
    time.sleep(0.2)
    alive = 0
    for s in socks:
        s.setblocking(False)
        try:
            alive += s.recv(1) != b""
        except BlockingIOError:
            alive += 1
        except OSError:
            pass
    check(alive <= 32, f"{alive} connections of one address stayed open; the limit is 32")
    # the deadline: whatever still trickles is cut off within 2 s (+ slack)
    time.sleep(2.6)
    left = 0
    for s in socks:
        try:
            s.sendall(b"X-Slow: 2\r\n")
            s.setblocking(False)
            left += s.recv(1) != b""
        except BlockingIOError:
            left += 1
        except OSError:
            pass
        s.close()
    check(left == 0, f"{left} trickling connections outlived --request-deadline 2")


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


sys.exit(run_groups("guard", [("trickle", test_trickle), ("body deadline", test_body_deadline),
                              ("access log", test_access_log)]))
