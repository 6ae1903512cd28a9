"""server_common.py - what the server tests share (tests/*_test.py, driven
by their .sh, which start `r1infer serve` on 127.0.0.1): the check counter,
a small HTTP client of one server, and the runner that times each group of
checks and prints "NAME: P passed, F failed" last. Standard library only.

A test imports the names it uses (from server_common import check, Server);
a test with other defaults subclasses Server and sets its class attributes.
"""
import http.client
import json
import sys
import time
import traceback
import urllib.parse

passed = failed = 0


def check(cond, what):
    """Count one check; a failure prints FAIL and what on stderr. Returns cond."""
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {what}", file=sys.stderr)
    return cond


def finish(name):
    """Print "name: P passed, F failed"; the exit code (1 on any failure)."""
    print(f"{name}: {passed} passed, {failed} failed")
    return 1 if failed else 0


def run_groups(name, groups):
    """Run each (group name, function) in turn, timing it on stderr; a group
    that raises is one failure, not the end of the run. Returns finish(name)."""
    t0 = time.time()
    for gname, fn in groups:
        t = time.time()
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            check(False, f"{gname}: {type(e).__name__}: {e}")
        print(f"  {gname}: {time.time() - t:.1f}s", file=sys.stderr)
    print(f"  total {time.time() - t0:.1f}s", file=sys.stderr)
    return finish(name)


class Server:
    """The server at base (http://127.0.0.1:PORT), with an API key or none.
    timeout: seconds of a request; conn_timeout: of a connection the caller
    drives itself (conn()); poll: seconds between /health polls."""

    timeout = 30
    conn_timeout = 30
    poll = 0.05

    def __init__(self, base, key=None):
        u = urllib.parse.urlparse(base)
        self.base, self.host, self.port, self.key = base, u.hostname, u.port, key

    def conn(self, timeout=None):
        return http.client.HTTPConnection(self.host, self.port,
                                          timeout=self.conn_timeout if timeout is None else timeout)

    def request(self, method, path, body=None, headers=None, auth=True, timeout=None):
        """(status, headers dict, body bytes). A dict or list body is sent as
        JSON, a str as UTF-8; the key as a Bearer token unless auth is False."""
        h = {"Content-Type": "application/json"}
        if auth and self.key:
            h["Authorization"] = "Bearer " + self.key
        h.update(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        c = self.conn(self.timeout if timeout is None else timeout)
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            c.close()

    def post(self, path, body, stream=False):
        """POST a JSON body: (status, the JSON answer); with stream and status
        200, (status, the JSON of each server-sent event but [DONE])."""
        st, _, data = self.request("POST", path, body)
        data = data.decode()
        if not stream or st != 200:
            return st, json.loads(data)
        return st, [json.loads(l[6:]) for l in data.split("\n") if l.startswith("data: ") and l != "data: [DONE]"]

    def health(self):
        return json.loads(self.request("GET", "/health", auth=False)[2])

    def metrics(self):
        st, hd, data = self.request("GET", "/metrics")
        return st, hd, data.decode()

    def wait_idle(self, seconds=5.0):
        """/health once no slot is busy and nothing queued, or after seconds."""
        end = time.time() + seconds
        h = self.health()
        while time.time() < end and (h["slots_busy"] or h["queued"]):
            time.sleep(self.poll)
            h = self.health()
        return h
