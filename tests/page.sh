#!/usr/bin/env bash
# page.sh - the chat page (GET /) in headless Chromium, its DOM read back
# with --dump-dom after the reply has streamed (--virtual-time-budget):
#   1. against `r1infer serve` on a tiny synthetic model: the page loads,
#      names the model, sends ?q= and finishes the streamed reply;
#   2. against a scripted stream (a small Python server that serves the
#      same page, taken from r1infer, and answers /v1/chat/completions with
#      fixed reasoning and Markdown): the Markdown renders as HTML (heading,
#      emphasis, lists, inline code, a fenced code block, an http link), the
#      HTML and javascript: links in the answer stay text, and the reasoning
#      block is collapsed once the answer has started.
# Needs chromium (scripts/install-deps.sh). Last line: "page: P passed, F failed".
NAME=page
STOP_GRACE=30
. "$(dirname "$0")/server_common.sh"
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }

CHROME=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[ -n "$CHROME" ] || die "no chromium (scripts/install-deps.sh installs it)"
# dom URL OUT: the page's DOM once its scripts and requests are done
dom() {
    timeout 60 "$CHROME" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$TMP/chrome" \
        --virtual-time-budget=30000 --dump-dom "$1" >"$2" 2>"$TMP/chrome.err"
}

"$BIN" synth --config tiny -o "$TMP/tiny" --seed 5 2>/dev/null || die "synth failed"
start_server 300 -m "$TMP/tiny" --ctx 256
wait_health
check "serve says where the chat page is" grep -q "the chat page is at http://127.0.0.1:$PORT/$" "$TMP/log"

# 1. the real server. Virtual time does not wait for a streamed body once
# its headers have come, so the dump can race the last chunks: dump again
# (a fresh page, a fresh request) until the reply is done, at most 10 times.
tries=0
while [ $tries -lt 10 ]; do
    tries=$((tries + 1))
    dom "http://127.0.0.1:$PORT/?q=Hello&autosend=1&max_tokens=8&temperature=0" "$TMP/real.html"
    grep -q '<body data-state="done"' "$TMP/real.html" && break
    grep -o '<body data-state="[a-z]*"' "$TMP/real.html" | sed "s/^/     try $tries: /"
done
echo "     (the page's DOM dumped $tries time(s))"
check "chromium dumps the page's DOM" test -s "$TMP/real.html"
check "the reply finished (body data-state=done)" grep -q '<body data-state="done"' "$TMP/real.html"
check "the page names the model" grep -q '<span class="model" id="model">tiny</span>' "$TMP/real.html"
check "the user's message is shown" grep -q '<div class="msg user">Hello</div>' "$TMP/real.html"
check "the reply's statistics: 8 tokens, finish length" grep -q 'finish: length · 8 tokens' "$TMP/real.html"
check "no error shown" bash -c "! grep -q 'class=\"error\"' '$TMP/real.html'"

# 2. a scripted stream through the same page
cat >"$TMP/fake.py" <<'PY'
import http.server, json, sys, urllib.request
real = sys.argv[1]
REASONING = ["The user wants ", "a function. ", "I will write <b>one</b>."]
ANSWER = """## Squares

Here is **bold**, *italic* and `x < y` inline.

- first item
- second item

1. one
2. two

```python
def f(x):
    return "<script>alert(1)</script>" if x < 2 else x
```

<img src=x onerror="document.title='pwned'"> and [a link](https://example.com/a?b=1&c=2) \
and [bad](javascript:alert(1)).

> quoted"""

class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        with urllib.request.urlopen(real + self.path) as r:
            body, ctype = r.read(), r.headers.get("Content-Type")
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        def ev(delta, finish=None):
            c = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            self.wfile.write(b"data: " + json.dumps(c).encode() + b"\n\n")
            self.wfile.flush()
        for r in REASONING: ev({"reasoning_content": r})
        for i in range(0, len(ANSWER), 7): ev({"content": ANSWER[i:i + 7]})
        ev({}, "stop")
        self.wfile.write(b"data: [DONE]\n\n")

s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
PY
python3 "$TMP/fake.py" "http://127.0.0.1:$PORT" >"$TMP/fake.port" 2>"$TMP/fake.err" &
FAKE=$!
for _ in $(seq 50); do [ -s "$TMP/fake.port" ] && break; sleep 0.1; done
FPORT=$(head -n 1 "$TMP/fake.port")
[ -n "$FPORT" ] || die "the scripted server did not start: $(cat "$TMP/fake.err")"
dom "http://127.0.0.1:$FPORT/?q=Write+a+function&autosend=1" "$TMP/md.html"
kill "$FAKE" 2>/dev/null
# the assistant's message alone, as one line of HTML
python3 - "$TMP/md.html" >"$TMP/answer.html" 2>"$TMP/think.html" <<'PY'
import re, sys
dom = open(sys.argv[1]).read()
a = re.search(r'<div class="answer">(.*?)</div><div class="stats">', dom, re.S)
t = re.search(r'(<details class="think"[^>]*>.*?</details>)', dom, re.S)
print(a.group(1) if a else "")
print(t.group(1) if t else "", file=sys.stderr)
PY
A=$TMP/answer.html
has() { grep -qF -- "$1" "$A"; }
check "the reply finished" grep -q '<body data-state="done"' "$TMP/md.html"
check "a heading renders as <h3>" has '<h3>Squares</h3>'
check "**bold** and *italic* render" bash -c "grep -qF '<strong>bold</strong>' '$A' && grep -qF '<em>italic</em>' '$A'"
check "inline code renders, its < escaped" has '<code>x &lt; y</code>'
check "a bullet list renders" has '<ul><li>first item</li><li>second item</li></ul>'
check "a numbered list renders" has '<ol><li>one</li><li>two</li></ol>'
check "a fenced block is <pre><code> with its language" has '<pre><code class="language-python">def f(x):'
check "...its HTML escaped, its lines kept" has '    return "&lt;script&gt;alert(1)&lt;/script&gt;" if x &lt; 2 else x</code></pre>'
check "an http link renders as a link" \
    has '<a href="https://example.com/a?b=1&amp;c=2" rel="noopener noreferrer" target="_blank">a link</a>'
check "a javascript: link stays text" bash -c "! grep -q 'href=\"javascript' '$A' && grep -qF '[bad](javascript:alert(1))' '$A'"
check "raw HTML in the answer stays text (no <img>, no <script>)" \
    bash -c "! grep -qiE '<img|<script' '$A' && grep -qF '&lt;img src=x' '$A'"
check "the page title was not changed by the answer" grep -q '<title>r1infer chat</title>' "$TMP/md.html"
check "a quote renders" has '<blockquote>quoted</blockquote>'
check "the reasoning is in a <details> block" grep -qF 'The user wants a function. I will write &lt;b&gt;one&lt;/b&gt;.' "$TMP/think.html"
check "...collapsed once the answer started" grep -q '^<details class="think" data-done="1">' "$TMP/think.html"
check "...with a summary that says how long it is" grep -qF '<summary>Reasoning (51 characters)</summary>' "$TMP/think.html"

echo "page: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
